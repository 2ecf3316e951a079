// The transport without Attest: retries honouring Retry-After, errors naming the URL, the SSE decoder, the
// settings. The server here is a test double of the HTTP transport only (a loopback `http.createServer` that
// answers what each test scripts); everything about the API itself is tested against `attest dev` in
// api.test.ts and auth.test.ts.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createNetServer, type AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";

import {
  AttestError,
  Client,
  DEFAULT_SERVER,
  InvalidArgumentError,
  parseRetryAfter,
  RateLimitedError,
  resolveSettings,
  SseDecoder,
  sseEvents,
  UnavailableError,
  VERSION,
  type AskEvent,
} from "attest-client";

import { rejects } from "./helpers.js";

/** What the double answers: a status, headers and a body, or a function that writes the response itself. */
type Reply =
  | { status: number; headers?: Record<string, string>; body?: string }
  | ((req: IncomingMessage, res: ServerResponse) => void);

interface Arrival {
  at: number;
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
}

/** A loopback HTTP server answering the scripted replies in order (then 500), recording each request. */
class Double {
  readonly arrivals: Arrival[] = [];
  private replies: Reply[] = [];
  private server: Server;
  url = "";

  constructor() {
    this.server = createServer((req, res) => {
      const parts: Buffer[] = [];
      req.on("data", (c: Buffer) => parts.push(c));
      req.on("end", () => {
        this.arrivals.push({
          at: performance.now(),
          method: req.method ?? "",
          url: req.url ?? "",
          headers: req.headers,
          body: Buffer.concat(parts).toString("utf8"),
        });
        const reply = this.replies.shift() ?? { status: 500, body: '{"error":{"code":"INTERNAL","message":"unscripted"}}' };
        if (typeof reply === "function") return reply(req, res);
        res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers });
        res.end(reply.body ?? "{}");
      });
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  script(...replies: Reply[]): void {
    this.arrivals.length = 0;
    this.replies = replies;
  }

  gaps(): number[] {
    return this.arrivals.slice(1).map((a, i) => a.at - (this.arrivals[i] as Arrival).at);
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

const SEARCH_OK = JSON.stringify({
  hits: [],
  degraded: false,
  missing_shards: [],
  fallback_mode: false,
  request_id: "req-1",
  took_ms: 1,
});
const err = (code: string, message = "injected fault") => JSON.stringify({ error: { code, message } });

describe("retries through a transport double", () => {
  const double = new Double();
  before(() => double.listen());
  after(() => double.close());

  test("a 429 with Retry-After is waited for, then retried", async () => {
    double.script({ status: 429, headers: { "retry-after": "1" }, body: err("RESOURCE_EXHAUSTED") }, { status: 200, body: SEARCH_OK });
    const c = new Client({ baseUrl: double.url });
    const result = await c.search("docs", "q");
    assert.equal(result.request_id, "req-1");
    assert.equal(double.arrivals.length, 2);
    assert.ok((double.gaps()[0] as number) >= 990, `waited ${double.gaps()[0]} ms, asked 1 s`);
  });

  test("a 503 with an HTTP-date Retry-After is honoured", async () => {
    const when = new Date(Date.now() + 2_000).toUTCString(); // whole seconds: waits 1-2 s
    double.script({ status: 503, headers: { "retry-after": when }, body: err("UNAVAILABLE") }, { status: 200, body: SEARCH_OK });
    const c = new Client({ baseUrl: double.url });
    await c.search("docs", "q");
    assert.equal(double.arrivals.length, 2);
    assert.ok((double.gaps()[0] as number) >= 900, `waited ${double.gaps()[0]} ms`);
  });

  test("without Retry-After the waits back off exponentially", async () => {
    double.script({ status: 429, body: err("RESOURCE_EXHAUSTED") }, { status: 503 }, { status: 200, body: SEARCH_OK });
    const c = new Client({ baseUrl: double.url, retry: { backoffMs: 100, jitter: false } });
    await c.search("docs", "q");
    const [first, second] = double.gaps() as [number, number];
    assert.ok(first >= 95 && second >= 195, `gaps ${first}, ${second}`);
  });

  test("Retry-After is capped by maxBackoffMs", async () => {
    double.script({ status: 503, headers: { "retry-after": "60" } }, { status: 200, body: SEARCH_OK });
    const c = new Client({ baseUrl: double.url, retry: { maxBackoffMs: 50 } });
    const started = performance.now();
    await c.search("docs", "q");
    assert.ok(performance.now() - started < 5_000);
    assert.equal(double.arrivals.length, 2);
  });

  test("when the retries run out the last error is thrown, typed, with its Retry-After", async () => {
    double.script(
      { status: 503, headers: { "retry-after": "0" }, body: err("UNAVAILABLE") },
      { status: 503, headers: { "retry-after": "0" }, body: err("UNAVAILABLE") },
      { status: 429, headers: { "retry-after": "0", "x-request-id": "req-last" }, body: err("RESOURCE_EXHAUSTED", "shed") },
    );
    const c = new Client({ baseUrl: double.url, retry: { maxRetries: 2 } });
    const e = await rejects(c.search("docs", "q"), RateLimitedError);
    assert.deepEqual([e.status, e.code, e.message, e.requestId, e.retryAfterMs], [429, "RESOURCE_EXHAUSTED", "shed", "req-last", 0]);
    assert.ok(e instanceof AttestError);
    assert.equal(double.arrivals.length, 3);
  });

  test("other errors are not retried", async () => {
    double.script({ status: 500, headers: { "retry-after": "1" }, body: err("INTERNAL", "boom") });
    const c = new Client({ baseUrl: double.url });
    const e = await rejects(c.search("docs", "q"), AttestError);
    assert.deepEqual([e.status, e.code, e.message], [500, "INTERNAL", "boom"]);
    assert.equal(double.arrivals.length, 1);
  });

  test("a bulk upload retries the refused batch only, with the same body", async () => {
    const ok = (n: number) => JSON.stringify({ accepted: n, rejected: [], duplicates: 0, chunks: n });
    double.script({ status: 200, body: ok(2) }, { status: 503, headers: { "retry-after": "0" } }, { status: 200, body: ok(1) });
    const c = new Client({ baseUrl: double.url });
    const docs = [1, 2, 3].map((i) => ({ id: `d${i}`, text: `document ${i}` }));
    const report = await c.uploadDocuments("docs", docs, { batchSize: 2 });
    assert.deepEqual([report.accepted, report.batches, report.ok], [3, 2, true]); // the transport's retry is not a batch
    assert.equal(double.arrivals.length, 3);
    const [a, b, c2] = double.arrivals as [Arrival, Arrival, Arrival];
    assert.equal(a.headers["content-type"], "application/x-ndjson");
    assert.equal(a.body, '{"id":"d1","text":"document 1"}\n{"id":"d2","text":"document 2"}\n');
    assert.equal(b.body, c2.body);
  });

  test("a body that is not the API's error still gives a typed error", async () => {
    double.script({ status: 400, headers: { "content-type": "text/html" }, body: "<h1>bad gateway page</h1>" });
    const c = new Client({ baseUrl: double.url });
    const e = await rejects(c.getCollection("x"), InvalidArgumentError);
    assert.deepEqual([e.status, e.code, e.field, e.message], [400, "INVALID_ARGUMENT", undefined, "<h1>bad gateway page</h1>"]);
  });

  test("every request carries the key, the user agent, and encodes path segments", async () => {
    double.script({ status: 200, body: '{"deleted":"a/b c"}' });
    const c = new Client({ baseUrl: `${double.url}/`, apiKey: "k-123" });
    assert.deepEqual(await c.deleteDocument("my docs", "a/b c", { tenant: "acme" }), { deleted: "a/b c" });
    const a = double.arrivals[0] as Arrival;
    assert.equal(a.method, "DELETE");
    assert.equal(a.url, "/v1/collections/my%20docs/documents/a%2Fb%20c?tenant=acme");
    assert.equal(a.headers["authorization"], "Bearer k-123");
    assert.equal(a.headers["user-agent"], `attest-client-typescript/${VERSION}`);
  });

  test("a connection the server breaks is retried for an idempotent call only", async () => {
    const drop = (req: IncomingMessage) => req.socket.destroy();
    double.script(drop, { status: 200, body: SEARCH_OK });
    const c = new Client({ baseUrl: double.url, retry: { backoffMs: 10 } });
    await c.search("docs", "q"); // search is read-only: sent again
    assert.equal(double.arrivals.length, 2);

    double.script(drop, { status: 201, body: "{}" });
    const e = await rejects(c.createCollection("x"), UnavailableError);
    assert.equal(double.arrivals.length, 1); // a create is not repeated blindly
    assert.match(e.message, new RegExp(`Attest at ${escape(double.url)} broke \\(POST /v1/collections\\)`));
    assert.equal(e.status, undefined);
  });

  test("a timeout is a DEADLINE_EXCEEDED error naming the URL", async () => {
    double.script(() => undefined); // never answers
    const c = new Client({ baseUrl: double.url, timeoutMs: 200 });
    const e = await rejects(c.listCollections(), AttestError);
    assert.equal(e.code, "DEADLINE_EXCEEDED");
    assert.match(e.message, new RegExp(`no answer from Attest at ${escape(double.url)} in 200 ms`));
  });

  test("askStream reads SSE split anywhere, CRLF included, and stops after done", async () => {
    const answer = { status: "answered", answer: "A [1].", claims: [], citations: [] };
    const stream =
      ': keep-alive\r\n\r\nevent: delta\r\ndata: {"text":"A","citations":[1],"verdict":"supported"}\r\n\r\n' +
      "event: other\ndata: ignored\n\n" +
      `event: delta\ndata: {"text":"B",\ndata: "citations":[],"verdict":"partial"}\n\nevent: done\ndata: ${JSON.stringify(answer)}\n\n` +
      "event: delta\ndata: {}\n\n";
    double.script((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      // One byte a write, so every boundary (a \r\n included) falls between two chunks somewhere.
      let i = 0;
      const next = () => {
        if (i >= stream.length) return res.end();
        res.write(stream[i++], next);
      };
      next();
    });
    const c = new Client({ baseUrl: double.url });
    const events: AskEvent[] = [];
    for await (const e of c.askStream("docs", "q")) events.push(e);
    assert.deepEqual(
      events.map((e) => e.event),
      ["delta", "delta", "done"],
    );
    assert.deepEqual(events[1]?.data, { text: "B", citations: [], verdict: "partial" });
    assert.deepEqual(events[2]?.data, answer);
    const sent = double.arrivals[0] as Arrival;
    assert.equal(sent.headers["accept"], "text/event-stream");
    assert.deepEqual(JSON.parse(sent.body), { question: "q", stream: true });
  });

  test("a stream cut off before done is an error", async () => {
    double.script((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end('event: delta\ndata: {"text":"A","citations":[1],"verdict":"supported"}\n\n');
    });
    const c = new Client({ baseUrl: double.url });
    const seen: string[] = [];
    const e = await rejects(
      (async () => {
        for await (const ev of c.askStream("docs", "q")) seen.push(ev.event);
      })(),
      AttestError,
    );
    assert.deepEqual(seen, ["delta"]);
    assert.equal(e.code, "UNAVAILABLE");
    assert.match(e.message, /ended before its `done` event/);
  });
});

test("a connection refused on loopback fails at once, naming the URL tried", async () => {
  const port = await freePort();
  const c = new Client({ baseUrl: `http://127.0.0.1:${port}` });
  const started = performance.now();
  const e = await rejects(c.listCollections(), UnavailableError);
  assert.ok(performance.now() - started < 2_000, "not retried");
  assert.equal(e.status, undefined);
  assert.equal(e.code, "UNAVAILABLE");
  assert.match(e.message, new RegExp(`could not reach Attest at http://127\\.0\\.0\\.1:${port} \\(GET /v1/collections\\)`));
  assert.match(e.message, /ECONNREFUSED/);
  assert.match(e.message, /\$ATTEST_SERVER/);
});

test("retryRefusedLoopback waits for a server that is starting", async () => {
  const port = await freePort();
  const c = new Client({ baseUrl: `http://127.0.0.1:${port}`, retry: { retryRefusedLoopback: true, backoffMs: 100, jitter: false, maxRetries: 8 } });
  let server: Server | undefined;
  const late = setTimeout(() => {
    server = createServer((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end('{"collections":[]}'));
    server.listen(port, "127.0.0.1");
  }, 300);
  try {
    assert.deepEqual(await c.listCollections(), []);
  } finally {
    clearTimeout(late);
    server?.closeAllConnections();
    await new Promise((r) => (server ? server.close(r) : r(undefined)));
  }
});

test("settings: options, then $ATTEST_SERVER / $ATTEST_API_KEY, then the defaults", () => {
  assert.deepEqual(resolveSettings(undefined, undefined, undefined, {}), {
    baseUrl: DEFAULT_SERVER,
    apiKey: undefined,
    timeoutMs: 120_000,
  });
  const env = { ATTEST_SERVER: "http://10.0.0.1:7800/", ATTEST_API_KEY: "from-env" };
  assert.deepEqual(resolveSettings(undefined, undefined, 5, env), { baseUrl: "http://10.0.0.1:7800", apiKey: "from-env", timeoutMs: 5 });
  assert.deepEqual(resolveSettings("https://a.example:1", "given", undefined, env), {
    baseUrl: "https://a.example:1",
    apiKey: "given",
    timeoutMs: 120_000,
  });
  assert.equal(resolveSettings(undefined, "", undefined, env).apiKey, undefined, '"" means no key');
  assert.throws(() => resolveSettings("127.0.0.1:7700", undefined, undefined, {}), TypeError);
});

test("the client reads the environment when it is made", () => {
  const saved = { server: process.env["ATTEST_SERVER"], key: process.env["ATTEST_API_KEY"] };
  try {
    process.env["ATTEST_SERVER"] = "http://127.0.0.1:7999";
    process.env["ATTEST_API_KEY"] = "env-key";
    const c = new Client();
    assert.equal(c.baseUrl, "http://127.0.0.1:7999");
    assert.equal(c.settings.apiKey, "env-key");
  } finally {
    restore("ATTEST_SERVER", saved.server);
    restore("ATTEST_API_KEY", saved.key);
  }
});

test("Retry-After forms", () => {
  const now = Date.parse("2026-01-01T00:00:00Z");
  assert.equal(parseRetryAfter("3", now), 3000);
  assert.equal(parseRetryAfter(" 1.5 ", now), 1500);
  assert.equal(parseRetryAfter(new Date(now + 7000).toUTCString(), now), 7000);
  assert.equal(parseRetryAfter(new Date(now - 7000).toUTCString(), now), 0);
  assert.equal(parseRetryAfter("soon", now), undefined);
  assert.equal(parseRetryAfter("-1", now), undefined);
  assert.equal(parseRetryAfter(null), undefined);
});

test("the SSE decoder: fields, comments, multi-line data, unnamed events", async () => {
  const d = new SseDecoder();
  assert.equal(d.feed(": comment"), undefined);
  assert.equal(d.feed("data: one"), undefined);
  assert.equal(d.feed("data:two"), undefined);
  assert.equal(d.feed("id: 7"), undefined);
  assert.deepEqual(d.feed(""), { event: "message", data: "one\ntwo", id: "7" });
  assert.equal(d.feed(""), undefined);
  const bytes = new TextEncoder().encode("event: a\rdata: é\r\n\r\nevent: b\ndata: x\n\nevent: cut\ndata: y");
  async function* chunked() {
    for (let i = 0; i < bytes.length; i++) yield bytes.slice(i, i + 1); // splits the UTF-8 of é too
  }
  const events = [];
  for await (const e of sseEvents(chunked())) events.push([e.event, e.data]);
  assert.deepEqual(events, [["a", "é"], ["b", "x"]]);
});

test("VERSION is package.json's", () => {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
  assert.equal(VERSION, pkg.version);
});


function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** A loopback port nothing listens on (bound by the OS, then released). */
async function freePort(): Promise<number> {
  const s = createNetServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

function restore(name: string, value: string | undefined): void {
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}
