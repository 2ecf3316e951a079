"""Streamed answers: ``ask(..., stream=True)`` reads the answer tier's Server-Sent Events.

The answer tier sends one ``delta`` event per verified claim of the answer (``{text, citations, verdict}``), then
``done`` with the whole response. Iterating an :class:`AskStream` yields the deltas as :class:`AskDelta`; once
it is exhausted, :attr:`AskStream.response` holds the final :class:`AskResponse`.

Note: a delta is a claim's text, without the ``[n]`` markers that ``response.answer`` carries and without the
space between sentences: ``" ".join(d.text for d in deltas) == response.plain_answer()``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import httpx

from ._sse import SseEvent, aiter_events, iter_events
from .errors import AttestError
from .models import AskDelta, AskResponse, AskSources


def _decode(event: SseEvent) -> AskSources | AskDelta | AskResponse | None:
    """The sources, a delta, the final response, or None for an event of another type (ignored)."""
    if event.event == "sources":
        return AskSources.model_validate(json.loads(event.data))
    if event.event == "delta":
        return AskDelta.model_validate(json.loads(event.data))
    if event.event == "done":
        return AskResponse.model_validate(json.loads(event.data))
    if event.event == "error":
        err: dict[str, Any] = json.loads(event.data or "{}").get("error", {})
        raise AttestError(
            err.get("message", "the answer stream failed"), code=err.get("code", "INTERNAL"), field=err.get("field")
        )
    return None


def _is_sse(response: httpx.Response) -> bool:
    return response.headers.get("content-type", "").startswith("text/event-stream")


def _deltas_of(answer: AskResponse) -> list[AskDelta]:
    """A server that answered JSON to a streamed ask: its claims as the deltas."""
    return [AskDelta(text=c.text, citations=c.citations, verdict=c.verdict) for c in answer.claims]


def _cut_off() -> AttestError:
    return AttestError("the answer stream ended before its `done` event", code="UNAVAILABLE")


class AskStream:
    """The deltas of a streamed answer (iterate once), then :attr:`response`. Use it as a context manager, or
    iterate it to the end, so the connection is released."""

    def __init__(self, open_response: Callable[[], httpx.Response]):
        self._open = open_response
        self._response: httpx.Response | None = None
        self.deltas: list[AskDelta] = []
        #: The first retrieval's passages, set as soon as the server sends them (before the first delta).
        self.sources: AskSources | None = None
        self.response: AskResponse | None = None

    def __iter__(self) -> Iterator[AskDelta]:
        if self._response is not None:
            raise RuntimeError("an AskStream is iterated once; read .deltas and .response afterwards")
        self._response = self._open()
        try:
            if not _is_sse(self._response):
                self.response = AskResponse.model_validate(json.loads(self._response.read()))
                for delta in _deltas_of(self.response):
                    self.deltas.append(delta)
                    yield delta
                return
            for event in iter_events(self._response.iter_lines()):
                item = _decode(event)
                if isinstance(item, AskDelta):
                    self.deltas.append(item)
                    yield item
                elif isinstance(item, AskSources):
                    self.sources = item
                elif isinstance(item, AskResponse):
                    self.response = item
        finally:
            self.close()
        if self.response is None:
            raise _cut_off()

    def final(self) -> AskResponse:
        """Reads whatever is left of the stream and returns the final response."""
        if self._response is None:
            for _ in self:
                pass
        if self.response is None:
            raise _cut_off()
        return self.response

    def close(self) -> None:
        if self._response is not None:
            self._response.close()

    def __enter__(self) -> AskStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncAskStream:
    """:class:`AskStream` for :class:`attest.AsyncClient`: ``async for delta in stream``."""

    def __init__(self, open_response: Callable[[], Awaitable[httpx.Response]]):
        self._open = open_response
        self._response: httpx.Response | None = None
        self.deltas: list[AskDelta] = []
        #: The first retrieval's passages, set as soon as the server sends them (before the first delta).
        self.sources: AskSources | None = None
        self.response: AskResponse | None = None

    async def __aiter__(self) -> AsyncIterator[AskDelta]:
        if self._response is not None:
            raise RuntimeError("an AsyncAskStream is iterated once; read .deltas and .response afterwards")
        self._response = await self._open()
        try:
            if not _is_sse(self._response):
                self.response = AskResponse.model_validate(json.loads(await self._response.aread()))
                for delta in _deltas_of(self.response):
                    self.deltas.append(delta)
                    yield delta
                return
            async for event in aiter_events(self._response.aiter_lines()):
                item = _decode(event)
                if isinstance(item, AskDelta):
                    self.deltas.append(item)
                    yield item
                elif isinstance(item, AskSources):
                    self.sources = item
                elif isinstance(item, AskResponse):
                    self.response = item
        finally:
            await self.aclose()
        if self.response is None:
            raise _cut_off()

    async def final(self) -> AskResponse:
        """Reads whatever is left of the stream and returns the final response."""
        if self._response is None:
            async for _ in self:
                pass
        if self.response is None:
            raise _cut_off()
        return self.response

    async def aclose(self) -> None:
        if self._response is not None:
            await self._response.aclose()

    async def __aenter__(self) -> AsyncAskStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
