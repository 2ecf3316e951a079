"""Retries on 429/503 honouring Retry-After, through a fault-injecting stand-in in front of the real server."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

import attest
from attest.retry import RetryPolicy, parse_retry_after
from conftest import sample
from faults import FaultProxy


def test_503_with_retry_after_is_waited_then_retried(dev, squad):
    with FaultProxy(dev.url, [(503, "1")]) as proxy, attest.Client(proxy.url) as c:
        result = c.search(squad, "Levi's Stadium")
    assert result.hits  # the real server's answer, relayed
    assert len(proxy.arrivals) == 2
    assert proxy.gaps()[0] >= 1.0


def test_429_without_retry_after_backs_off_exponentially(dev, squad):
    policy = RetryPolicy(backoff=0.2, jitter=False)
    with FaultProxy(dev.url, [(429, None), (429, None)]) as proxy, attest.Client(proxy.url, retry=policy) as c:
        assert c.search(squad, "Levi's Stadium").hits
    first, second = proxy.gaps()
    assert first >= 0.2 and second >= 0.4


def test_retries_run_out(dev, squad):
    policy = RetryPolicy(max_retries=2, backoff=0.01)
    faults = [(503, "0"), (503, "0"), (429, "0")]
    with FaultProxy(dev.url, faults) as proxy, attest.Client(proxy.url, retry=policy) as c:
        with pytest.raises(attest.RateLimitedError) as e:
            c.search(squad, "q")
    assert (e.value.status, e.value.code, e.value.retry_after) == (429, "RESOURCE_EXHAUSTED", 0.0)
    assert len(proxy.arrivals) == 3


def test_other_errors_are_not_retried(dev, squad):
    with FaultProxy(dev.url, [(500, "1")]) as proxy, attest.Client(proxy.url) as c:
        with pytest.raises(attest.AttestError) as e:
            c.search(squad, "q")
    assert e.value.status == 500 and len(proxy.arrivals) == 1


def test_a_bulk_upload_retries_the_batch_only(dev, client, fresh):
    # The first batch goes through; the second is refused once with 503, waited for and sent again.
    with FaultProxy(dev.url, [None, (503, "0")]) as proxy, attest.Client(proxy.url) as c:
        report = c.upload_documents(fresh, sample(120, 130), batch_size=5, progress=False)
    assert report.accepted == 10 and report.ok and len(proxy.arrivals) == 3
    assert client.stats(fresh).live_documents == 10


def test_async_client_honours_retry_after(dev, squad):
    async def search(url):
        async with attest.AsyncClient(url) as c:
            return await c.search(squad, "Levi's Stadium")

    with FaultProxy(dev.url, [(503, "1")]) as proxy:
        assert asyncio.run(search(proxy.url)).hits
    assert len(proxy.arrivals) == 2 and proxy.gaps()[0] >= 1.0


def test_retry_after_forms():
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert parse_retry_after("3", now) == 3.0
    assert parse_retry_after(format_datetime(now + timedelta(seconds=7), usegmt=True), now) == 7.0
    assert parse_retry_after(format_datetime(now - timedelta(seconds=7), usegmt=True), now) == 0.0
    assert parse_retry_after("soon", now) is None and parse_retry_after(None) is None
    assert RetryPolicy(max_backoff=2).wait_for_response(0, _response(503, "60")) == 2
    assert RetryPolicy().wait_for_response(0, _response(500, "1")) is None


def _response(status: int, retry_after: str):
    import httpx

    return httpx.Response(status, headers={"retry-after": retry_after})
