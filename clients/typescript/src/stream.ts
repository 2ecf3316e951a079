// Streamed answers: `askStream` reads the answer tier's Server-Sent Events.
//
// The answer tier sends `sources` as soon as its first retrieval is ranked (the passages, before they are read:
// most of a turn is reading and verifying), one `delta` event per verified claim of an answer (`{text, citations,
// verdict}`), then `done` with the whole AskResponse. `askStream` yields them in that order as AskEvent objects
// and ends after `done`; a stream cut off before `done` throws an AttestError `UNAVAILABLE`. A server that answers JSON to a
// streamed ask (a proxy that drops the `stream` flag's effect) is read the same way: its claims as the deltas,
// then the answer as `done`.
//
// Note: a delta is a claim's text, without the `[n]` markers that `answer` carries and without the space
// between sentences.

import { AttestError } from "./errors.js";
import { sseEvents } from "./sse.js";
import { timedOut, unreachable, type Call, type CallOptions, type Sent } from "./transport.js";
import type { AskDelta, AskEvent, AskResponse, AskSources } from "./types.js";

/** The chunks of a fetch body, releasing its reader when iteration stops early. */
async function* chunks(body: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    // Stops the download when the caller breaks out of the loop early.
    await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}

function parse<T>(data: string, what: string): T {
  try {
    return JSON.parse(data) as T;
  } catch (error) {
    throw new AttestError(`the answer stream's ${what} event is not JSON: ${data.slice(0, 200)}`, {
      code: "INTERNAL",
      cause: error,
    });
  }
}

/** The events of a sent streamed ask (see the module's comment). */
export async function* askEvents(call: Call, sent: Sent, options: CallOptions): AsyncGenerator<AskEvent> {
  const { response } = sent;
  const requestId = response.headers.get("x-request-id") ?? undefined;
  const failed = (error: unknown): unknown => {
    if (error instanceof AttestError) return error;
    if (options.signal?.aborted) return options.signal.reason;
    if (sent.timeout.aborted) return timedOut(call, sent.url, sent.timeoutMs, error);
    return unreachable(call, sent.url, error, "broken");
  };
  const type = response.headers.get("content-type") ?? "";
  if (!type.startsWith("text/event-stream")) {
    let answer: AskResponse;
    try {
      answer = parse<AskResponse>(await response.text(), "answer");
    } catch (error) {
      throw failed(error);
    }
    for (const c of answer.claims) {
      const delta: AskDelta = { text: c.text, citations: c.citations, verdict: c.verdict };
      yield { event: "delta", data: delta };
    }
    yield { event: "done", data: answer };
    return;
  }
  if (!response.body) {
    throw new AttestError("the answer stream has no body", { code: "UNAVAILABLE", status: response.status, requestId });
  }
  const events = sseEvents(chunks(response.body));
  try {
    for (;;) {
      let next: IteratorResult<{ event: string; data: string }>;
      try {
        next = await events.next();
      } catch (error) {
        throw failed(error);
      }
      if (next.done) break;
      const { event, data } = next.value;
      if (event === "sources") {
        yield { event: "sources", data: parse<AskSources>(data, "sources") };
      } else if (event === "delta") {
        yield { event: "delta", data: parse<AskDelta>(data, "delta") };
      } else if (event === "done") {
        yield { event: "done", data: parse<AskResponse>(data, "done") };
        return;
      } else if (event === "error") {
        const err = (parse<{ error?: { code?: string; message?: string; field?: string } }>(data || "{}", "error")
          .error ?? {}) as { code?: string; message?: string; field?: string };
        throw new AttestError(err.message ?? "the answer stream failed", {
          code: err.code ?? "INTERNAL",
          status: response.status,
          field: err.field,
          requestId,
        });
      }
      // any other event type is ignored (a newer server's)
    }
  } finally {
    await events.return(undefined);
  }
  throw new AttestError("the answer stream ended before its `done` event", {
    code: "UNAVAILABLE",
    status: response.status,
    requestId,
  });
}
