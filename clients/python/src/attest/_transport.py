"""Sending a :class:`~attest._ops.Call` with retries: the blocking and the async sender.

A response of a retried status (429, 503) or a connection failure waits (``Retry-After`` or backoff, see
:mod:`attest.retry`) and goes again; any other error response becomes an :class:`~attest.errors.AttestError`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx

from ._ops import Call
from .errors import AttestError, UnavailableError, error_from_response
from .retry import RetryPolicy, parse_retry_after

T = TypeVar("T")


def _request(http: httpx.Client | httpx.AsyncClient, call: Call[Any]) -> httpx.Request:
    return http.build_request(
        call.method, call.path, json=call.json, content=call.content, params=call.params, headers=call.headers
    )


def _transport_error(exc: httpx.TransportError, request: httpx.Request) -> AttestError:
    # The URL is in the message: a client built without one (the adapters' default) goes to $ATTEST_SERVER or
    # 127.0.0.1:7700, and "could not reach Attest" alone does not say which.
    server = f"{request.url.scheme}://{request.url.netloc.decode('ascii')}"
    what = f"{request.method} {request.url.raw_path.decode('ascii')}"
    if isinstance(exc, httpx.TimeoutException):
        return AttestError(f"no answer from Attest at {server} in time ({what}): {exc!r}", code="DEADLINE_EXCEEDED")
    return UnavailableError(
        f"could not reach Attest at {server} ({what}): {exc}; is the server running there? "
        "Pass its URL (Client(url), the adapters' url=) or set $ATTEST_SERVER",
        code="UNAVAILABLE",
    )


def _error(response: httpx.Response) -> AttestError:
    return error_from_response(response, parse_retry_after(response.headers.get("retry-after")))


def parse_json(call: Call[T], response: httpx.Response) -> T:
    """The call's result from a successful response."""
    try:
        data = response.json()
    except ValueError as e:
        raise AttestError(
            f"{call.method} {call.path}: the answer is not JSON ({response.headers.get('content-type')})",
            code="INTERNAL",
            status=response.status_code,
            request_id=response.headers.get("x-request-id"),
        ) from e
    return call.parse(data)


class SyncSender:
    """Sends calls over an ``httpx.Client``, blocking, with the retry policy."""

    def __init__(self, http: httpx.Client, retry: RetryPolicy, sleep: Callable[[float], None] = time.sleep):
        self.http = http
        self.retry = retry
        self.sleep = sleep

    def send(self, call: Call[Any], *, stream: bool = False) -> httpx.Response:
        """The successful response (with ``stream``, its body not read yet: close it); raises AttestError."""
        attempt = 0
        while True:
            request = _request(self.http, call)
            try:
                response = self.http.send(request, stream=stream)
            except httpx.TransportError as e:
                wait = self.retry.wait_for_error(attempt, e)
                if wait is None:
                    raise _transport_error(e, request) from e
            else:
                if response.is_success:
                    return response
                if stream:
                    response.read()
                    response.close()
                wait = self.retry.wait_for_response(attempt, response)
                if wait is None:
                    raise _error(response)
            self.sleep(wait)
            attempt += 1

    def run(self, call: Call[T]) -> T:
        return parse_json(call, self.send(call))


class AsyncSender:
    """Sends calls over an ``httpx.AsyncClient``, awaiting, with the retry policy."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        retry: RetryPolicy,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        self.http = http
        self.retry = retry
        self.sleep = sleep

    async def send(self, call: Call[Any], *, stream: bool = False) -> httpx.Response:
        """As :meth:`SyncSender.send`."""
        attempt = 0
        while True:
            request = _request(self.http, call)
            try:
                response = await self.http.send(request, stream=stream)
            except httpx.TransportError as e:
                wait = self.retry.wait_for_error(attempt, e)
                if wait is None:
                    raise _transport_error(e, request) from e
            else:
                if response.is_success:
                    return response
                if stream:
                    await response.aread()
                    await response.aclose()
                wait = self.retry.wait_for_response(attempt, response)
                if wait is None:
                    raise _error(response)
            await self.sleep(wait)
            attempt += 1

    async def run(self, call: Call[T]) -> T:
        return parse_json(call, await self.send(call))
