// Sending one request of the API with `fetch`, with the retry policy and the timeout; errors as AttestError.
//
// A response of a retried status (429, 503) or a connection failure waits (`Retry-After` or backoff, see
// retry.ts) and goes again; any other error response becomes an AttestError. A failure without a response names
// the URL tried: a client made without one goes to `$ATTEST_SERVER` or 127.0.0.1:7700, and "could not reach
// Attest" alone would not say which.

import { baseHeaders, type Settings } from "./config.js";
import { AttestError, DeadlineExceededError, errorFromResponse, UnavailableError } from "./errors.js";
import {
  classifyFailure,
  parseRetryAfter,
  waitForFailure,
  waitForStatus,
  type ConnectionFailure,
  type RetryPolicy,
} from "./retry.js";

/** One HTTP request of the API. */
export interface Call {
  method: "GET" | "POST" | "PUT" | "DELETE";
  /** From `/v1/...`, its segments already encoded. */
  path: string;
  /** Sent as JSON. */
  json?: unknown;
  /** Sent as it is (with `headers` naming its content type). */
  body?: string | Uint8Array;
  query?: Record<string, string | undefined>;
  headers?: Record<string, string>;
  /** The call may be sent again after a connection broke mid-request (GET, PUT, DELETE, search, ask). */
  idempotent?: boolean;
}

/** Per-call options every method takes. */
export interface CallOptions {
  /** Aborts the call (its retries and waits included): an `AbortError` is thrown as it is. */
  signal?: AbortSignal;
  /** This call's timeout, in ms (default: the client's `timeoutMs`). */
  timeoutMs?: number;
}

export type FetchLike = (input: string | URL, init?: RequestInit) => Promise<Response>;

export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

/** Waits `ms`; rejects with the signal's reason when it is aborted first. */
export const sleep: Sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });

/** A signal aborted by either `a` or a timeout of `ms`, and the timeout's own signal (to tell which). */
function withTimeout(a: AbortSignal | undefined, ms: number): { signal: AbortSignal; timeout: AbortSignal } {
  const timeout = AbortSignal.timeout(ms);
  if (!a) return { signal: timeout, timeout };
  const any = (AbortSignal as { any?: (signals: AbortSignal[]) => AbortSignal }).any;
  if (any) return { signal: any([a, timeout]), timeout };
  const controller = new AbortController();
  const forward = (s: AbortSignal) => () => controller.abort(s.reason);
  if (a.aborted) controller.abort(a.reason);
  a.addEventListener("abort", forward(a), { once: true });
  timeout.addEventListener("abort", forward(timeout), { once: true });
  return { signal: controller.signal, timeout };
}

/** A successful response whose body is still to be read, with the timeout that also covers reading it. */
export interface Sent {
  response: Response;
  url: URL;
  /** Aborted when the call's time is up: reading the body then fails. */
  timeout: AbortSignal;
  timeoutMs: number;
}

export class Transport {
  constructor(
    readonly settings: Settings,
    readonly retry: RetryPolicy,
    readonly fetchImpl: FetchLike = (input, init) => fetch(input, init),
    readonly sleepImpl: Sleep = sleep,
  ) {}

  /** The absolute URL of a call. */
  url(call: Pick<Call, "path" | "query">): URL {
    const url = new URL(this.settings.baseUrl + call.path);
    for (const [k, v] of Object.entries(call.query ?? {})) if (v !== undefined) url.searchParams.set(k, v);
    return url;
  }

  /** Sends the call, retrying as the policy says: the successful response, its body unread. */
  async send(call: Call, options: CallOptions = {}): Promise<Sent> {
    const url = this.url(call);
    const timeoutMs = options.timeoutMs ?? this.settings.timeoutMs;
    const headers: Record<string, string> = { ...baseHeaders(this.settings), accept: "application/json" };
    let body: string | Uint8Array | undefined = call.body;
    if (call.json !== undefined) {
      body = JSON.stringify(call.json);
      headers["content-type"] = "application/json";
    }
    Object.assign(headers, call.headers);
    const idempotent = call.idempotent ?? call.method !== "POST";
    for (let attempt = 0; ; attempt++) {
      const { signal, timeout } = withTimeout(options.signal, timeoutMs);
      let wait: number | undefined;
      let response: Response;
      try {
        response = await this.fetchImpl(url, { method: call.method, headers, body: body as BodyInit, signal });
      } catch (error) {
        if (options.signal?.aborted) throw options.signal.reason;
        if (timeout.aborted) throw timedOut(call, url, timeoutMs, error);
        const failure = classifyFailure(error, url);
        wait = waitForFailure(this.retry, attempt, failure, idempotent);
        if (wait === undefined) throw unreachable(call, url, error, failure);
        await this.sleepImpl(wait, options.signal);
        continue;
      }
      if (response.ok) return { response, url, timeout, timeoutMs };
      const retryAfter = response.headers.get("retry-after");
      let text = "";
      try {
        text = await response.text();
      } catch (error) {
        if (options.signal?.aborted) throw options.signal.reason;
        if (timeout.aborted) throw timedOut(call, url, timeoutMs, error);
        // the error's body could not be read: the status alone says what happened
      }
      wait = waitForStatus(this.retry, attempt, response.status, retryAfter);
      if (wait === undefined) {
        throw errorFromResponse(response.status, response.statusText, response.headers, text, parseRetryAfter(retryAfter));
      }
      await this.sleepImpl(wait, options.signal);
    }
  }

  /** Sends the call and reads its JSON answer. */
  async json<T>(call: Call, options: CallOptions = {}): Promise<T> {
    const sent = await this.send(call, options);
    let text: string;
    try {
      text = await sent.response.text();
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      if (sent.timeout.aborted) throw timedOut(call, sent.url, sent.timeoutMs, error);
      throw unreachable(call, sent.url, error, "broken");
    }
    try {
      return JSON.parse(text) as T;
    } catch (error) {
      throw new AttestError(
        `${call.method} ${sent.url.pathname}: the answer is not JSON (${sent.response.headers.get("content-type")})`,
        {
          code: "INTERNAL",
          status: sent.response.status,
          requestId: sent.response.headers.get("x-request-id") ?? undefined,
          cause: error,
        },
      );
    }
  }
}

function server(url: URL): string {
  return `${url.protocol}//${url.host}`;
}

/** The error of a call that got no answer in time. */
export function timedOut(call: Pick<Call, "method">, url: URL, timeoutMs: number, cause: unknown): AttestError {
  return new DeadlineExceededError(
    `no answer from Attest at ${server(url)} in ${timeoutMs} ms (${call.method} ${url.pathname})`,
    { code: "DEADLINE_EXCEEDED", cause },
  );
}

/** The error of a call that could not reach the server, or whose connection broke on the way. */
export function unreachable(
  call: Pick<Call, "method">,
  url: URL,
  cause: unknown,
  failure: ConnectionFailure,
): AttestError {
  const what = `${call.method} ${url.pathname}`;
  const reason = describe(cause);
  switch (failure) {
    case "other":
      return new AttestError(`the request to Attest at ${server(url)} failed (${what}): ${reason}`, {
        code: "UNKNOWN",
        cause,
      });
    case "broken":
      return new UnavailableError(
        `the connection to Attest at ${server(url)} broke (${what}): ${reason}; the server may have acted on ` +
          "the request",
        { code: "UNAVAILABLE", cause },
      );
    default:
      return new UnavailableError(
        `could not reach Attest at ${server(url)} (${what}): ${reason}; is the server running there? ` +
          "Pass its URL (new Client({ baseUrl })) or set $ATTEST_SERVER",
        { code: "UNAVAILABLE", cause },
      );
  }
}

/** `fetch failed` says nothing: the innermost cause's message does (`connect ECONNREFUSED 127.0.0.1:1`). */
function describe(error: unknown): string {
  let e: unknown = error;
  const seen = new Set<unknown>();
  let message = String((error as Error | undefined)?.message ?? error);
  while (e && typeof e === "object" && !seen.has(e)) {
    seen.add(e);
    const m = (e as { message?: unknown }).message;
    const errors = (e as { errors?: unknown }).errors;
    if (typeof m === "string" && m) message = m;
    else if (Array.isArray(errors) && errors.length) {
      message = errors.map((x) => String((x as Error)?.message ?? x)).join("; ");
    }
    e = (e as { cause?: unknown }).cause;
  }
  return message;
}
