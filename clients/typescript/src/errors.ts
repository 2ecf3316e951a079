// Errors of the API as exceptions.
//
// Every error response of HTTP API v1 has the body `{"error": {"code", "message", "field"?}}` (ErrorBody in
// docs/openapi.json) and the HTTP status of its code; AttestError carries all of it, with the request's
// `x-request-id`. A subclass per common status lets callers test what they can handle
// (`err instanceof NotFoundError`) while `instanceof AttestError` still matches everything.

import type { components } from "./generated/openapi.js";

/** The API's error codes (ErrorDetail.code), plus any a newer server adds. */
export type ErrorCode = components["schemas"]["ErrorDetail"]["code"] | (string & {});

/** The code of a status when the body does not say (a proxy's own error page, an empty body). */
const FALLBACK_CODES: Record<number, string> = {
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
};

export interface AttestErrorOptions {
  code: ErrorCode;
  status?: number | undefined;
  field?: string | undefined;
  requestId?: string | undefined;
  retryAfterMs?: number | undefined;
  cause?: unknown;
}

/** An error answered by Attest (or met on the way to it). */
export class AttestError extends Error {
  /** The API's error code, e.g. `INVALID_ARGUMENT`, `NOT_FOUND`, `UNAUTHENTICATED`. */
  readonly code: ErrorCode;
  /** The HTTP status; undefined when no response came (the server could not be reached, or a timeout). */
  readonly status: number | undefined;
  /** For `INVALID_ARGUMENT`, the path of the offending field (`documents[3].colour`, `k`, `body`). */
  readonly field: string | undefined;
  /** The `x-request-id` of the request, to find it in the server's logs. */
  readonly requestId: string | undefined;
  /** What the server asked to wait before retrying (429/503 `Retry-After`), in milliseconds, if it said. */
  readonly retryAfterMs: number | undefined;

  constructor(message: string, options: AttestErrorOptions) {
    super(message, options.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = new.target.name;
    this.code = options.code;
    this.status = options.status;
    this.field = options.field;
    this.requestId = options.requestId;
    this.retryAfterMs = options.retryAfterMs;
  }

  /** `404 NOT_FOUND: collection `x` does not exist`, with `(field `k`)` when there is one. */
  override toString(): string {
    const status = this.status !== undefined ? `${this.status} ` : "";
    const where = this.field ? ` (field \`${this.field}\`)` : "";
    return `${this.name}: ${status}${this.code}${where}: ${this.message}`;
  }
}

/** 400: the request is wrong; `field` names what. */
export class InvalidArgumentError extends AttestError {}
/** 401: no API key, or one the server does not accept (unknown, revoked, expired). */
export class AuthenticationError extends AttestError {}
/** 403: the key lacks the scope, tenant or collection the request needs. */
export class PermissionDeniedError extends AttestError {}
/** 404: no such collection, document, key or snapshot. */
export class NotFoundError extends AttestError {}
/** 409: it exists already, or a concurrent change won. */
export class ConflictError extends AttestError {}
/** 413: the body is over the server's size limit. */
export class PayloadTooLargeError extends AttestError {}
/** 429: too many requests; retried automatically before it is thrown. */
export class RateLimitedError extends AttestError {}
/** 503, or the server could not be reached; retried automatically before it is thrown. */
export class UnavailableError extends AttestError {}
/** No answer in time: the client's `timeoutMs` ran out, or the server's 504 `DEADLINE_EXCEEDED`. */
export class DeadlineExceededError extends AttestError {}

const BY_STATUS: Record<number, typeof AttestError> = {
  400: InvalidArgumentError,
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  413: PayloadTooLargeError,
  429: RateLimitedError,
  503: UnavailableError,
  504: DeadlineExceededError,
};

/** The class of an error answered with this status. */
export function errorClassOf(status: number): typeof AttestError {
  return BY_STATUS[status] ?? AttestError;
}

/** The AttestError of an error response whose body was read as `text`. */
export function errorFromResponse(
  status: number,
  statusText: string,
  headers: Headers,
  text: string,
  retryAfterMs?: number,
): AttestError {
  let code: string = FALLBACK_CODES[status] ?? (status >= 500 ? "INTERNAL" : "UNKNOWN");
  let message = statusText || `HTTP ${status}`;
  let field: string | undefined;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    if (text.trim()) message = text.trim().slice(0, 500);
  }
  const detail = (body as { error?: unknown } | null | undefined)?.error;
  if (detail && typeof detail === "object") {
    const d = detail as { code?: unknown; message?: unknown; field?: unknown };
    if (typeof d.code === "string" && d.code) code = d.code;
    if (typeof d.message === "string" && d.message) message = d.message;
    if (typeof d.field === "string") field = d.field;
  }
  const Class = errorClassOf(status);
  return new Class(message, {
    code,
    status,
    field,
    requestId: headers.get("x-request-id") ?? undefined,
    retryAfterMs,
  });
}
