"""When and how long to wait before retrying a request.

Retried: the statuses of :attr:`RetryPolicy.statuses` (429 and 503 by default: the server did nothing and said
so) and connection failures (the request never reached the server), except a connection refused by this machine
(a loopback address: nothing listens on that port, so the error comes at once instead of after the backoff).
Each wait is the server's ``Retry-After`` when it sent one (seconds or an HTTP date), else exponential backoff
``backoff * 2**attempt`` with jitter, never more than :attr:`RetryPolicy.max_backoff`.
"""

from __future__ import annotations

import ipaddress
import random
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

import httpx


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date); ``None`` if absent or bad."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


@dataclass(frozen=True)
class RetryPolicy:
    """How many times to retry, on what, and how long to wait.

    Attributes:
        max_retries: retries after the first try (0 turns retrying off).
        backoff: the first wait without ``Retry-After``, in seconds; doubled at each retry.
        max_backoff: no wait is longer, ``Retry-After`` included.
        jitter: spread waits without ``Retry-After`` over [wait/2, wait] so clients do not retry in step.
        statuses: the HTTP statuses retried.
        retry_connect_errors: also retry when the server could not be reached.
        retry_refused_loopback: also retry a connection refused on a loopback address (``127.0.0.1``,
            ``localhost``), e.g. to wait for a local server that is starting; off by default, since on this
            machine a refusal means nothing listens on that port, mostly a wrong URL, and retrying it only
            delays the error by several seconds.
    """

    max_retries: int = 4
    backoff: float = 0.5
    max_backoff: float = 30.0
    jitter: bool = True
    statuses: frozenset[int] = field(default_factory=lambda: frozenset({429, 503}))
    retry_connect_errors: bool = True
    retry_refused_loopback: bool = False

    def wait_for_response(self, attempt: int, response: httpx.Response) -> float | None:
        """The wait before retry ``attempt + 1`` after this response, or ``None`` when it is not retried."""
        if attempt >= self.max_retries or response.status_code not in self.statuses:
            return None
        asked = parse_retry_after(response.headers.get("retry-after"))
        if asked is not None:
            return min(asked, self.max_backoff)
        return self.backoff_delay(attempt)

    def wait_for_error(self, attempt: int, error: httpx.TransportError) -> float | None:
        """The wait before retry ``attempt + 1`` after a transport error, or ``None`` when it is not retried."""
        if attempt >= self.max_retries or not self.retry_connect_errors:
            return None
        # Only failures where the request surely did not reach the server: a retried write is never doubled.
        if not isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout)):
            return None
        if not self.retry_refused_loopback and refused_on_loopback(error):
            return None
        return self.backoff_delay(attempt)

    def backoff_delay(self, attempt: int) -> float:
        """Exponential backoff for retry ``attempt + 1``."""
        delay = min(self.backoff * (2**attempt), self.max_backoff)
        return delay * random.uniform(0.5, 1.0) if self.jitter else delay


def refused_on_loopback(error: httpx.TransportError) -> bool:
    """The connection was refused (``ECONNREFUSED``) by a loopback address of this machine."""
    try:
        host = error.request.url.host
    except RuntimeError:  # an error raised outside a request has none
        return False
    if host != "localhost":
        try:
            if not ipaddress.ip_address(host).is_loopback:
                return False
        except ValueError:  # a name other than localhost: it may resolve anywhere
            return False
    # httpx wraps the socket's error (twice; the async transport once more, as "All connection attempts failed").
    cause: BaseException | None = error
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, ConnectionRefusedError):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


NO_RETRIES = RetryPolicy(max_retries=0)
