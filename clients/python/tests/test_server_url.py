"""Where the clients and the adapters send their requests — ``url=`` (``Client(url)``), else $ATTEST_SERVER, else
http://127.0.0.1:7700 — and what a server that cannot be reached looks like: an UnavailableError that names the URL
tried, at once when this machine refuses the connection (no retries with backoff first)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

import attest
from attest.langchain import AttestAnswerTool
from attest.langchain import AttestRetriever as LangChainRetriever
from attest.llamaindex import AttestQueryEngine
from attest.llamaindex import AttestRetriever as LlamaIndexRetriever
from attest.retry import RetryPolicy

# The default policy's four backoffs add up to 3.75 s at the least: an error before this came without them.
AT_ONCE_S = 2.0


@pytest.fixture
def refused_url() -> Iterator[str]:
    """A loopback URL whose connections are refused: the port is bound but not listening, and held until the test
    ends, so no other process can take it meanwhile."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def no_server_env(monkeypatch) -> None:
    monkeypatch.delenv("ATTEST_SERVER", raising=False)


def test_clients_take_the_url_given_else_attest_server_else_the_default(dev, monkeypatch, no_server_env):
    assert attest.Client().base_url == attest.AsyncClient().base_url == "http://127.0.0.1:7700"
    monkeypatch.setenv("ATTEST_SERVER", dev.url + "/")
    with attest.Client() as c:
        assert c.base_url == dev.url and c.ready()
    assert attest.AsyncClient().base_url == dev.url
    assert attest.Client("http://10.1.2.3:7700").base_url == "http://10.1.2.3:7700"


def test_adapters_take_url_or_attest_server(dev, squad, monkeypatch, no_server_env):
    question = "Where was Super Bowl 50 played?"
    assert len(LangChainRetriever(collection=squad, url=dev.url, k=1).invoke(question)) == 1
    assert len(LlamaIndexRetriever(squad, url=dev.url, k=1).retrieve(question)) == 1
    assert AttestAnswerTool(collection=squad, url=dev.url).client.base_url == dev.url
    assert AttestQueryEngine(collection=squad, url=dev.url).client.base_url == dev.url

    monkeypatch.setenv("ATTEST_SERVER", dev.url)
    assert len(LangChainRetriever(collection=squad, k=1).invoke(question)) == 1
    assert len(LlamaIndexRetriever(squad, k=1).retrieve(question)) == 1
    assert AttestAnswerTool(collection=squad).client.base_url == dev.url
    assert AttestQueryEngine(collection=squad).client.base_url == dev.url


def test_adapters_refuse_both_url_and_client(dev):
    with attest.Client(dev.url) as c:
        for make in (
            lambda: LangChainRetriever(collection="docs", url=dev.url, client=c),
            lambda: AttestAnswerTool(collection="docs", url=dev.url, client=c),
            lambda: LlamaIndexRetriever("docs", c, url=dev.url),
            lambda: AttestQueryEngine(collection="docs", url=dev.url, client=c),
        ):
            with pytest.raises(ValueError, match="url= or client="):
                make()


def _unreachable(refused_url: str, call) -> attest.UnavailableError:
    started = time.monotonic()
    with pytest.raises(attest.UnavailableError) as e:
        call()
    assert time.monotonic() - started < AT_ONCE_S
    assert e.value.status is None and e.value.code == "UNAVAILABLE"
    assert f"could not reach Attest at {refused_url} " in e.value.message
    return e.value


def test_an_unreachable_server_is_named_at_once(refused_url, monkeypatch):
    error = _unreachable(refused_url, lambda: attest.Client(refused_url).search("docs", "q"))
    assert "POST /v1/collections/docs/search" in error.message and "$ATTEST_SERVER" in error.message

    async def search():
        async with attest.AsyncClient(refused_url) as c:
            await c.search("docs", "q")

    _unreachable(refused_url, lambda: asyncio.run(search()))
    _unreachable(refused_url, lambda: LangChainRetriever(collection="docs", url=refused_url).invoke("q"))
    _unreachable(refused_url, lambda: LlamaIndexRetriever("docs", url=refused_url).retrieve("q"))
    # The quick starts' case: an adapter built with no URL at all, the server in $ATTEST_SERVER.
    monkeypatch.setenv("ATTEST_SERVER", refused_url)
    _unreachable(refused_url, lambda: LangChainRetriever(collection="docs").invoke("q"))
    _unreachable(refused_url, lambda: AttestQueryEngine(collection="docs").query("q"))


def _refused(url: str) -> httpx.ConnectError:
    """The error httpx raises for a refused connection: its ConnectError caused by the socket's."""
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as refused:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=httpx.Request("GET", url)) from refused
    except httpx.ConnectError as e:
        return e


def test_only_a_refusal_by_this_machine_goes_unretried():
    policy = RetryPolicy(jitter=False)
    assert policy.wait_for_error(0, _refused("http://10.1.2.3:7700/v1/collections")) == 0.5
    assert policy.wait_for_error(0, _refused("http://attest.example.com/v1/collections")) == 0.5
    loopbacks = ("http://127.0.0.1:7700/", "http://127.8.9.10:7700/", "http://localhost:7700/", "http://[::1]:7700/")
    for loopback in loopbacks:
        assert policy.wait_for_error(0, _refused(loopback)) is None, loopback
        assert RetryPolicy(jitter=False, retry_refused_loopback=True).wait_for_error(0, _refused(loopback)) == 0.5
    # Not a refusal (nothing answered in time): retried on loopback too.
    timeout = httpx.ConnectTimeout("timed out", request=httpx.Request("GET", "http://127.0.0.1:7700/"))
    assert policy.wait_for_error(0, timeout) == 0.5
