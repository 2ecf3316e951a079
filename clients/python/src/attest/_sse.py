"""A Server-Sent Events decoder (the WHATWG event-stream format) over lines of text, sync and async."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class SseEvent:
    """One dispatched event: its type (``message`` when unnamed), data lines joined by ``\\n``, and id."""

    event: str
    data: str
    id: str | None = None


class SseDecoder:
    """Feed it lines (without their line break); it returns an event at each blank line that ends one."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, line: str) -> SseEvent | None:
        line = line.rstrip("\r\n")
        if not line:
            if not self._data and not self._event:
                return None
            event = SseEvent(self._event or "message", "\n".join(self._data), self._id)
            self._event, self._data = "", []
            return event
        if line.startswith(":"):
            return None  # a comment (keep-alive)
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            self._id = value
        return None


def iter_events(lines: Iterable[str]) -> Iterator[SseEvent]:
    """The events of a stream of lines; an event cut off by the end of the stream is not dispatched."""
    decoder = SseDecoder()
    for line in lines:
        event = decoder.feed(line)
        if event is not None:
            yield event


async def aiter_events(lines: AsyncIterable[str]) -> AsyncIterator[SseEvent]:
    """:func:`iter_events` over an async stream of lines."""
    decoder = SseDecoder()
    async for line in lines:
        event = decoder.feed(line)
        if event is not None:
            yield event
