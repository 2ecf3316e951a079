"""Errors arrive as AttestError with the API's code, field and status."""

from __future__ import annotations

import socket

import pytest

import attest
from attest.retry import RetryPolicy


def test_unknown_field_is_refused_naming_it(client, squad):
    with pytest.raises(attest.InvalidArgumentError) as e:
        client.request("POST", f"/v1/collections/{squad}/search", json={"query": "q", "colour": "red"})
    err = e.value
    assert (err.status, err.code, err.field) == (400, "INVALID_ARGUMENT", "colour")
    assert "colour" in err.message and isinstance(err, attest.AttestError)


def test_unknown_field_of_a_history_turn(client, squad):
    body = {"question": "q", "history": [{"role": "user", "content": "c", "at": 1}]}
    with pytest.raises(attest.AttestError) as e:
        client.request("POST", f"/v1/collections/{squad}/ask", json=body)
    assert (e.value.status, e.value.code, e.value.field) == (400, "INVALID_ARGUMENT", "history[0].at")


def test_out_of_range_arguments_name_the_field(client, squad):
    with pytest.raises(attest.InvalidArgumentError) as k:
        client.search(squad, "q", k=0)
    assert k.value.field == "k"
    with pytest.raises(attest.InvalidArgumentError) as lanes:
        client.search(squad, "q", lanes=["sparse"])
    assert lanes.value.field == "lanes"
    with pytest.raises(attest.InvalidArgumentError) as nprobe:
        client.search(squad, "q", nprobe=1_000_000)
    assert nprobe.value.field == "nprobe"
    with pytest.raises(attest.InvalidArgumentError) as f:
        client.search(squad, "q", filter={"year": {"between": [1, 2]}})
    assert f.value.field == "filter.year"


def test_unknown_collection(client):
    with pytest.raises(attest.NotFoundError) as e:
        client.search("no-such-collection", "q")
    assert (e.value.status, e.value.code, e.value.field) == (404, "NOT_FOUND", None)
    assert "no-such-collection" in str(e.value)


def test_unreachable_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with attest.Client(f"http://127.0.0.1:{port}", retry=RetryPolicy(max_retries=1, backoff=0.01)) as c:
        with pytest.raises(attest.UnavailableError) as e:
            c.list_collections()
    assert e.value.status is None and e.value.code == "UNAVAILABLE"
