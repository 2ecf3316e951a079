"""Errors of the API as exceptions.

Every error response of HTTP API v1 has the body ``{"error": {"code", "message", "field"?}}`` and the HTTP status
of its gRPC code; :class:`AttestError` carries all of it. A subclass per common status lets callers catch what
they can handle (``except NotFoundError``) while ``except AttestError`` still catches everything.
"""

from __future__ import annotations

from typing import Any

import httpx

# The code of a status when the body does not say (a proxy's own error page, an empty body).
_FALLBACK_CODES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    413: "PAYLOAD_TOO_LARGE",
    429: "RESOURCE_EXHAUSTED",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


class AttestError(Exception):
    """An error answered by Attest (or on the way to it).

    Attributes:
        status: the HTTP status (``None`` when no response came: the server could not be reached).
        code: the API's error code, e.g. ``INVALID_ARGUMENT``, ``NOT_FOUND``, ``UNAUTHENTICATED``.
        message: the server's explanation, for people.
        field: for ``INVALID_ARGUMENT``, the path of the offending field (``documents[3].colour``, ``k``).
        request_id: the ``x-request-id`` of the request, to find it in the server's logs.
        retry_after: seconds the server asked to wait before retrying (429/503), if it said.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status: int | None = None,
        field: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.field = field
        self.request_id = request_id
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = f" (field `{self.field}`)" if self.field else ""
        status = f"{self.status} " if self.status is not None else ""
        return f"{status}{self.code}{where}: {self.message}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, status={self.status!r}, field={self.field!r}, "
            f"message={self.message!r})"
        )


class InvalidArgumentError(AttestError):
    """400: the request is wrong; :attr:`field` names what."""


class AuthenticationError(AttestError):
    """401: no API key, or one the server does not accept (unknown, revoked, expired)."""


class PermissionDeniedError(AttestError):
    """403: the key lacks the scope, tenant or collection the request needs."""


class NotFoundError(AttestError):
    """404: no such collection, document, key or snapshot."""


class ConflictError(AttestError):
    """409: it exists already, or a concurrent change won."""


class RateLimitedError(AttestError):
    """429: too many requests; retried automatically before it is raised."""


class UnavailableError(AttestError):
    """503 (or the server could not be reached); retried automatically before it is raised."""


_BY_STATUS: dict[int, type[AttestError]] = {
    400: InvalidArgumentError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    429: RateLimitedError,
    503: UnavailableError,
}


def error_from_response(response: httpx.Response, retry_after: float | None = None) -> AttestError:
    """The :class:`AttestError` of an error response (its body must have been read)."""
    code = _FALLBACK_CODES.get(response.status_code, "INTERNAL" if response.status_code >= 500 else "UNKNOWN")
    message = response.reason_phrase or f"HTTP {response.status_code}"
    field = None
    try:
        body: Any = response.json()
    except ValueError:
        body = None
        text = response.text.strip()
        if text:
            message = text[:500]
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        code = str(err.get("code") or code)
        message = str(err.get("message") or message)
        field = err.get("field")
    cls = _BY_STATUS.get(response.status_code, AttestError)
    return cls(
        message,
        code=code,
        status=response.status_code,
        field=field,
        request_id=response.headers.get("x-request-id"),
        retry_after=retry_after,
    )

