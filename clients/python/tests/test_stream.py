"""Streamed answers: deltas from the answer tier's Server-Sent Events, then the final response."""

from __future__ import annotations

import pytest

import attest
from attest import AskDelta, AskStream
from conftest import ANSWERABLE, UNANSWERABLE


def test_stream_yields_the_claims_as_deltas(client, squad):
    stream = client.ask(squad, ANSWERABLE, stream=True)
    assert isinstance(stream, AskStream)
    deltas = list(stream)
    final = stream.response

    assert deltas and all(isinstance(d, AskDelta) for d in deltas)
    assert final.status == "answered"
    # One delta per verified claim, with its footnotes and verdict.
    assert [(d.text, d.citations, d.verdict) for d in deltas] == [
        (c.text, c.citations, c.verdict) for c in final.claims]
    # Concatenated, the deltas are the answer: its claims without the [n] markers.
    assert " ".join(d.text for d in deltas) == final.plain_answer()
    # The same answer as without streaming.
    assert final.answer == client.ask(squad, ANSWERABLE).answer
    # The first retrieval's passages came first, and every cited passage is among them.
    assert stream.sources is not None and stream.sources.sources
    assert {c.chunk_id for c in final.citations} <= {s.chunk_id for s in stream.sources.sources}


def test_stream_of_an_abstention_has_no_delta(client, squad):
    with client.ask(squad, UNANSWERABLE, stream=True) as stream:
        assert list(stream) == []
    assert stream.response.status == "abstained" and stream.response.reason


def test_final_reads_the_rest(client, squad):
    stream = client.ask(squad, ANSWERABLE, stream=True)
    assert stream.final().answered and stream.deltas


def test_an_error_is_raised_when_iterating(client):
    stream = client.ask("no-such-collection", ANSWERABLE, stream=True)
    with pytest.raises(attest.NotFoundError) as e:
        next(iter(stream))
    assert (e.value.status, e.value.code) == (404, "NOT_FOUND")
