// When and how long to wait before retrying a request.
//
// Retried: the statuses of `RetryPolicy.statuses` (429 and 503 by default: the server did nothing and said so),
// and connection failures: one where the connection was never made (refused, no route, DNS, connect timeout) for
// every call, since the request cannot have reached the server; one after it was made (reset, closed) only for
// idempotent calls (GET, PUT, DELETE, and the read-only POSTs: search, ask). A connection refused by a loopback
// address is not retried by default: nothing listens on that port of this machine, mostly a wrong URL, and
// waiting only delays the error. Each wait is the server's `Retry-After` when it sent one (seconds or an HTTP
// date), else exponential backoff `backoffMs * 2**attempt` with jitter; never more than `maxBackoffMs`.

/** How many times to retry, on what, and how long to wait. Every field is optional in `new Client({retry})`. */
export interface RetryPolicy {
  /** Retries after the first try (0 turns retrying off). Default 4. */
  maxRetries: number;
  /** The first wait without `Retry-After`, in ms; doubled at each retry. Default 500. */
  backoffMs: number;
  /** No wait is longer, `Retry-After` included. Default 30 000. */
  maxBackoffMs: number;
  /** Spread waits without `Retry-After` over [wait/2, wait] so clients do not retry in step. Default true. */
  jitter: boolean;
  /** The HTTP statuses retried. Default 429 and 503. */
  statuses: readonly number[];
  /** Also retry when the server could not be reached. Default true. */
  retryConnectErrors: boolean;
  /** Also retry a connection refused on a loopback address (e.g. to wait for a local server that is starting).
   * Default false. */
  retryRefusedLoopback: boolean;
}

export const DEFAULT_RETRY: Readonly<RetryPolicy> = Object.freeze({
  maxRetries: 4,
  backoffMs: 500,
  maxBackoffMs: 30_000,
  jitter: true,
  statuses: Object.freeze([429, 503]),
  retryConnectErrors: true,
  retryRefusedLoopback: false,
});

/** No retries at all. */
export const NO_RETRIES: Readonly<RetryPolicy> = Object.freeze({ ...DEFAULT_RETRY, maxRetries: 0 });

/** The default policy with the fields given replaced; checks them. */
export function retryPolicy(overrides: Partial<RetryPolicy> = {}): RetryPolicy {
  const policy: RetryPolicy = { ...DEFAULT_RETRY, ...overrides };
  if (!Number.isInteger(policy.maxRetries) || policy.maxRetries < 0) {
    throw new RangeError(`retry.maxRetries must be a whole number >= 0, not ${policy.maxRetries}`);
  }
  if (!(policy.backoffMs >= 0) || !(policy.maxBackoffMs >= 0)) {
    throw new RangeError("retry.backoffMs and retry.maxBackoffMs must be >= 0");
  }
  return policy;
}

/** Milliseconds to wait from a `Retry-After` header (delta-seconds or an HTTP date); undefined if absent or bad. */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (text === "") return undefined;
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  // An HTTP date has a weekday and a zone (`Wed, 21 Oct 2015 07:28:00 GMT`); anything else is not one.
  if (!/[A-Za-z]{3},/.test(text)) return undefined;
  const when = Date.parse(text);
  if (Number.isNaN(when)) return undefined;
  return Math.max(0, when - now);
}

/** Exponential backoff before retry `attempt + 1` (`attempt` counts from 0). */
export function backoffDelay(policy: RetryPolicy, attempt: number, random: () => number = Math.random): number {
  const delay = Math.min(policy.backoffMs * 2 ** attempt, policy.maxBackoffMs);
  return policy.jitter ? delay * (0.5 + random() / 2) : delay;
}

/** The wait before retry `attempt + 1` after a response of this status, or undefined when it is not retried. */
export function waitForStatus(
  policy: RetryPolicy,
  attempt: number,
  status: number,
  retryAfter: string | null,
): number | undefined {
  if (attempt >= policy.maxRetries || !policy.statuses.includes(status)) return undefined;
  const asked = parseRetryAfter(retryAfter);
  if (asked !== undefined) return Math.min(asked, policy.maxBackoffMs);
  return backoffDelay(policy, attempt);
}

/** How a request failed without a response. */
export type ConnectionFailure =
  /** The connection was never made: the request did not reach the server. */
  | "connect"
  /** The connection was refused by this machine (a loopback address): nothing listens on that port. */
  | "refused-loopback"
  /** The connection broke after it was made: the server may have acted on the request. */
  | "broken"
  /** Something else (a bad header value, an aborted request...): not a network failure. */
  | "other";

const CONNECT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EAI_FAIL",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "EADDRNOTAVAIL",
  "ETIMEDOUT",
  "UND_ERR_CONNECT_TIMEOUT",
]);
const BROKEN_CODES = new Set([
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);

/** The error codes (`ECONNREFUSED`, `UND_ERR_SOCKET`...) in an error, its causes and its aggregated errors. */
export function errorCodes(error: unknown): string[] {
  const codes: string[] = [];
  const seen = new Set<unknown>();
  const walk = (e: unknown): void => {
    if (!e || typeof e !== "object" || seen.has(e)) return;
    seen.add(e);
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") codes.push(code);
    walk((e as { cause?: unknown }).cause);
    const errors = (e as { errors?: unknown }).errors;
    if (Array.isArray(errors)) errors.forEach(walk);
  };
  walk(error);
  return codes;
}

export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** What kind of failure a `fetch` error to this URL is. */
export function classifyFailure(error: unknown, url: URL): ConnectionFailure {
  const codes = errorCodes(error);
  if (codes.some((c) => BROKEN_CODES.has(c))) return "broken";
  if (codes.some((c) => CONNECT_CODES.has(c))) {
    if (codes.every((c) => c === "ECONNREFUSED" || !CONNECT_CODES.has(c)) && isLoopbackHost(url.hostname)) {
      return "refused-loopback";
    }
    return "connect";
  }
  return "other";
}

/** The wait before retry `attempt + 1` after a failure without a response, or undefined when it is not
 * retried. */
export function waitForFailure(
  policy: RetryPolicy,
  attempt: number,
  failure: ConnectionFailure,
  idempotent: boolean,
): number | undefined {
  if (attempt >= policy.maxRetries || !policy.retryConnectErrors) return undefined;
  switch (failure) {
    case "connect":
      return backoffDelay(policy, attempt);
    case "refused-loopback":
      return policy.retryRefusedLoopback ? backoffDelay(policy, attempt) : undefined;
    case "broken":
      return idempotent ? backoffDelay(policy, attempt) : undefined;
    default:
      return undefined;
  }
}
