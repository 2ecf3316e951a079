// The client against a real `attest dev` (authentication off): collections, uploads, search, ask, the answer
// stream and the API's errors. The package is imported by its name, so what is tested is the built dist/.

import assert from "node:assert/strict";
import { join } from "node:path";
import { after, afterEach, before, describe, test } from "node:test";

import {
  AttestError,
  Client,
  ConflictError,
  InvalidArgumentError,
  liveDocuments,
  NotFoundError,
  type AskEvent,
  type UploadProgress,
} from "attest-client";

import { ANSWERABLE, Dev, rejects, sample, UNANSWERABLE } from "./helpers.js";

let dev: Dev;
let client: Client;

before(async () => {
  dev = await Dev.start("open");
  client = new Client({ baseUrl: dev.url });
});

afterEach((t) => {
  // `passed` is there on Node >= 20.12 (the types of @types/node 20 do not say so yet).
  if ((t as { passed?: boolean }).passed === false && dev) dev.failed = true;
});

after(async () => {
  await dev?.stop();
});


let names = 0;
/** A new empty one-shard collection for one test. */
async function fresh(): Promise<string> {
  const name = `fresh-${names++}`;
  await client.createCollection(name, { shards: 1 });
  return name;
}

describe("collections", () => {
  test("create, get, list, drop", async () => {
    const made = await client.createCollection("coll-crud", { shards: 1, index: { nlist: 16, nprobe: 4 } });
    assert.deepEqual([made.name, made.shards, made.index.nlist, made.index.nprobe, made.dimension], ["coll-crud", 1, 16, 4, 384]);
    assert.deepEqual(await client.getCollection("coll-crud"), made);
    assert.ok((await client.listCollections()).some((c) => c.name === "coll-crud"));
    // The same request again answers the collection (200).
    assert.deepEqual(await client.createCollection("coll-crud", { shards: 1, index: { nlist: 16, nprobe: 4 } }), made);

    const again = await rejects(client.createCollection("coll-crud"), ConflictError);
    assert.deepEqual([again.status, again.code], [409, "ALREADY_EXISTS"]);

    assert.deepEqual(await client.dropCollection("coll-crud"), { dropped: "coll-crud" });
    const gone = await rejects(client.getCollection("coll-crud"), NotFoundError);
    assert.deepEqual([gone.status, gone.code, gone.field], [404, "NOT_FOUND", undefined]);
    assert.ok(gone.requestId?.startsWith("req-"), `request id ${gone.requestId}`);
  });

  test("existOk answers the collection that has the settings asked for, twice", async () => {
    const made = await client.createCollection("coll-exist", { shards: 1, index: { nlist: 16, nprobe: 8 } });
    try {
      // A bare create conflicts on the server (its default is 2 shards, this one has 1): existOk lets it be.
      await rejects(client.createCollection("coll-exist"), ConflictError);
      assert.deepEqual(await client.createCollection("coll-exist", { existOk: true }), made);
      assert.deepEqual(await client.createCollection("coll-exist", { existOk: true }), made);
      assert.deepEqual(await client.createCollection("coll-exist", { shards: 1, index: { nlist: 16 }, existOk: true }), made);

      const other = await rejects(
        client.createCollection("coll-exist", { shards: 2, index: { nlist: 16, nprobe: 4 }, existOk: true }),
        ConflictError,
      );
      assert.deepEqual([other.status, other.code], [409, "ALREADY_EXISTS"]);
      assert.match(other.message, /shards 1 \(asked 2\)/);
      assert.match(other.message, /index\.nprobe 8 \(asked 4\)/);
      assert.doesNotMatch(other.message, /nlist/);
    } finally {
      await client.dropCollection("coll-exist");
    }
  });

  test("existOk creates what is not there", async () => {
    const made = await client.createCollection("coll-exist-new", { shards: 1, existOk: true });
    assert.deepEqual([made.name, made.shards], ["coll-exist-new", 1]);
    await client.dropCollection("coll-exist-new");
  });

  test("stats, maintain, thresholds", async () => {
    const name = await fresh();
    await client.uploadDocuments(name, [{ id: "s1", text: "Sealing moves growing rows into a segment." }]);
    const stats = await client.stats(name);
    assert.deepEqual([stats.collection, stats.shards.length, liveDocuments(stats)], [name, 1, 1]);
    const after = await client.maintain(name, { seal: true });
    assert.equal(liveDocuments(after), 1);
    assert.equal((await client.setThresholds(name, 0.55)).thresholds?.min_confidence, 0.55);
    assert.equal((await client.clearThresholds(name)).thresholds, null);
    const bad = await rejects(client.setThresholds(name, 5), InvalidArgumentError);
    assert.equal(bad.field, "min_confidence");
  });
});

describe("snapshots", () => {
  test("snapshot a collection, list it, restore it under another name", async () => {
    const name = await fresh();
    await client.uploadDocuments(name, [{ id: "k1", text: "Snapshots copy every shard's files." }]);
    // `attest dev` admits destinations under DATA_DIR/snapshots when no --snapshot-root is given.
    const dest = join(dev.dir, "data", "snapshots", "ts");
    const manifest = await client.createSnapshot(dest, { id: "snap-1", collections: [name], waitMs: 60_000 });
    assert.equal(manifest.id, "snap-1");
    assert.deepEqual(manifest.collections.map((c) => c.name), [name]);
    const listed = await client.listSnapshots(dest);
    assert.deepEqual(listed.map((s) => [s.id, s.problem ?? null]), [["snap-1", null]]);
    const progress = await client.snapshotProgress("snap-1", dest);
    assert.ok(progress.replicas.length > 0 && progress.replicas.every((r) => r.complete));

    const restored = await client.restoreSnapshot(dest, "snap-1", { rename: { [name]: `${name}-copy` }, waitMs: 60_000 });
    assert.deepEqual(restored.map((r) => [r.name, r.from, r.live_documents]), [[`${name}-copy`, name, 1]]);
    assert.deepEqual((await client.search(`${name}-copy`, "snapshots copy files")).hits.map((h) => h.doc_id), ["k1"]);
    assert.ok((await client.snapshotJobs()).some((j) => j.snapshot === "snap-1" && j.state === "succeeded"));
    assert.deepEqual(await client.deleteSnapshot("snap-1", dest), { deleted: "snap-1" });
    assert.deepEqual(await client.listSnapshots(dest), []);
    await rejects(client.snapshotJob("job-none"), NotFoundError);
  });
});

describe("documents", () => {
  test("NDJSON batches with progress, each rejection returned with its index and id", async () => {
    const name = await fresh();
    const docs: Record<string, unknown>[] = sample(20, 76); // 56 distinct paragraphs
    docs.splice(7, 0, { id: "empty", text: "   " });
    docs.splice(30, 0, { id: "coloured", text: "Has a field no document has.", colour: "red" });
    docs.splice(45, 0, { ...docs[0], id: "copy-of-first" }); // a near-duplicate
    docs.splice(50, 0, "not a document" as unknown as Record<string, unknown>);
    const seen: UploadProgress[] = [];

    const report = await client.uploadDocuments(name, docs, { batchSize: 25, onProgress: (p) => seen.push(p) });

    assert.deepEqual(
      [report.documents, report.accepted, report.duplicates, report.batches, report.ok],
      [60, 56, 1, 3, false],
    );
    assert.deepEqual(
      report.rejected.map((r) => [r.index, r.id]),
      [[7, "empty"], [30, "coloured"], [45, "copy-of-first"], [50, undefined]],
    );
    const reasons = report.rejected.map((r) => r.reason);
    assert.match(reasons[0] as string, /empty/);
    assert.match(reasons[1] as string, /colour/);
    assert.ok(reasons[2]?.includes(docs[0]?.["id"] as string), reasons[2]);
    assert.match(reasons[3] as string, /not a document/);
    assert.equal(liveDocuments(await client.stats(name)), 56);

    // After each batch, then once at the end: counts only grow, and the last is the whole upload.
    assert.ok(seen.length >= 3);
    assert.ok(seen.every((p) => p.total === 60));
    assert.deepEqual(seen.map((p) => p.done), [...seen.map((p) => p.done)].sort((a, b) => a - b));
    assert.deepEqual(seen.at(-1), { done: 60, total: 60, accepted: 56, rejected: 4, batches: 3 });
  });

  test("JSON batches for vectors reject only the bad document", async () => {
    const name = await fresh();
    const unit = [...Array(383).fill(0), 1] as number[];
    const docs = sample(100, 105).map((d, i) => ({ id: `v${i}`, title: d.title, text: d.text, vector: unit }));
    docs[3] = { id: "short", title: "", text: "A vector of the wrong size.", vector: [1, 0] };

    const report = await client.uploadDocuments(name, docs, { batchSize: 10 });

    assert.equal(report.accepted, 4);
    assert.deepEqual(report.rejected.map((r) => [r.index, r.id, r.field]), [[3, "short", "documents[3].vector"]]);
    assert.match(report.rejected[0]?.reason as string, /dimension/);
    assert.equal(liveDocuments(await client.stats(name)), 4);
  });

  test("an async iterable of documents, with a tenant filled in", async () => {
    const name = await fresh();
    async function* docs() {
      for (const d of sample(80, 90)) yield d;
    }
    const seen: UploadProgress[] = [];
    const report = await client.uploadDocuments(name, docs(), { batchSize: 4, tenant: "acme", onProgress: (p) => seen.push(p) });
    assert.deepEqual([report.accepted, report.batches, report.documents], [10, 3, 10]);
    assert.ok(seen.every((p) => p.total === undefined));
    assert.deepEqual((await client.search(name, "the")).hits, []); // not the default tenant's
    assert.ok((await client.search(name, "the", { tenant: "acme" })).hits.length > 0);
  });

  test("delete a document (its id encoded in the path)", async () => {
    const name = await fresh();
    await client.uploadDocuments(name, [
      { id: "keep", text: "Lighthouses guide ships along rocky coasts." },
      { id: "drop/me 1", text: "Glaciers carve valleys over thousands of years." },
    ]);
    assert.deepEqual(await client.deleteDocument(name, "drop/me 1"), { deleted: "drop/me 1" });
    assert.deepEqual((await client.search(name, "glaciers valleys")).hits.map((h) => h.doc_id), ["keep"]);
    await rejects(client.deleteDocument(name, "drop/me 1"), NotFoundError);
  });

  test("errors not about a document are thrown", async () => {
    const e = await rejects(client.uploadDocuments("no-such-collection", [{ id: "1", text: "t" }]), NotFoundError);
    assert.deepEqual([e.status, e.code], [404, "NOT_FOUND"]);
  });
});

describe("search and ask", () => {
  const squad = "squad";
  const tenants = "tenants";

  before(async () => {
    await client.createCollection(squad, { existOk: true });
    const report = await client.uploadDocuments(squad, sample(0, 20));
    assert.ok(report.ok && report.accepted === 20, JSON.stringify(report));

    await client.createCollection(tenants, { shards: 1 });
    const docs = [
      { id: "acme-1", text: "Acme builds rockets for lunar missions.", tenant: "acme", metadata: { lang: "en", year: 2001 } },
      { id: "acme-2", text: "Acme tests rocket engines in the desert.", tenant: "acme", metadata: { lang: "fr", year: 1995 } },
      { id: "globex-1", text: "Globex builds rockets for orbital tourism.", tenant: "globex", metadata: { lang: "de", year: 1999 } },
      { id: "open-1", text: "Rockets of the default tenant are built in Ohio.", metadata: { lang: "en", year: 2010 } },
    ];
    assert.equal((await client.uploadDocuments(tenants, docs)).accepted, 4);
  });

  test("hits carry score, lanes and provenance", async () => {
    const result = await client.search(squad, ANSWERABLE, { k: 5 });
    assert.ok(result.hits.length > 0 && result.hits.length <= 5);
    assert.deepEqual([result.degraded, result.fallback_mode, result.missing_shards], [false, false, []]);
    assert.ok(result.request_id && typeof result.took_ms === "number");
    const scores = result.hits.map((h) => h.score);
    assert.deepEqual(scores, [...scores].sort((a, b) => b - a));
    const top = result.hits[0]!;
    assert.ok(top.doc_id.startsWith("squad-dev-a0000-") && top.chunk_id.startsWith(top.doc_id));
    assert.equal(top.title, "Super Bowl 50");
    assert.ok(top.lanes.dense || top.lanes.bm25);
    assert.match(result.hits.map((h) => h.text).join(" "), /Levi's Stadium/);
  });

  test("one lane, its weight, rrfK, nprobe", async () => {
    const bm25 = await client.search(squad, "Levi's Stadium", { k: 3, lanes: "bm25", weights: { bm25: 2 }, rrfK: 60 });
    assert.ok(bm25.hits.length > 0 && bm25.hits.every((h) => !h.lanes.dense && h.lanes.bm25));
    // Weighted RRF with one lane: the first hit scores weight / (rrf_k + rank 1).
    assert.ok(Math.abs(bm25.hits[0]!.score - 2 / 61) < 1e-9);
    const dense = await client.search(squad, "Levi's Stadium", { k: 3, lanes: ["dense"], nprobe: 1 });
    assert.ok(dense.hits.length > 0 && dense.hits.every((h) => !h.lanes.bm25 && h.lanes.dense));
  });

  test("tenant and filter pass through", async () => {
    assert.deepEqual((await client.search(tenants, "rockets")).hits.map((h) => h.doc_id), ["open-1"]);
    const acme = await client.search(tenants, "rockets", { tenant: "acme" });
    assert.deepEqual(acme.hits.map((h) => h.doc_id).sort(), ["acme-1", "acme-2"]);
    const english = await client.search(tenants, "rockets", { tenant: "acme", filter: { lang: "en" } });
    assert.deepEqual(english.hits.map((h) => h.doc_id), ["acme-1"]);
    assert.deepEqual(english.hits[0]?.metadata, { lang: "en", year: 2001 });
    const old = await client.search(tenants, "rockets", { tenant: "acme", filter: { year: { lt: 2000 } } });
    assert.deepEqual(old.hits.map((h) => h.doc_id), ["acme-2"]);
    const either = await client.search(tenants, "rockets", { tenant: "globex", filter: { lang: { in: ["de", "en"] } } });
    assert.deepEqual(either.hits.map((h) => h.doc_id), ["globex-1"]);
  });

  test("ask answers with citations and verdicts", async () => {
    const answer = await client.ask(squad, ANSWERABLE);
    assert.equal(answer.status, "answered");
    assert.match(answer.answer, /Levi's Stadium/);
    assert.match(answer.answer, /\[1\]/);
    assert.equal(answer.reason ?? null, null);
    assert.ok(answer.claims.length >= 1 && answer.verdicts.supported === answer.claims.length);
    const cited = new Set(answer.citations.map((c) => c.n));
    for (const claim of answer.claims) {
      assert.equal(claim.verdict, "supported");
      assert.ok(claim.supported && claim.support >= 0 && claim.support <= 1);
      assert.ok(claim.citations.every((n) => cited.has(n)));
    }
    const first = answer.citations.find((c) => c.n === 1)!;
    const paragraphs = new Map(sample(0, 20).map((d) => [d.id, d.text]));
    assert.ok(first.quote && paragraphs.get(first.doc_id)?.includes(first.quote));
    assert.ok(answer.confidence > 0 && answer.confidence <= 1 && answer.request_id);
  });

  test("ask abstains when the corpus does not hold it", async () => {
    const answer = await client.ask(squad, UNANSWERABLE);
    assert.equal(answer.status, "abstained");
    assert.deepEqual([answer.answer, answer.citations, answer.claims], ["", [], []]);
    assert.ok(["no_results", "low_confidence", "unsupported_claims"].includes(answer.reason ?? ""), answer.reason ?? "");
  });

  test("ask with history rewrites the follow-up; ask as a tenant", async () => {
    const first = await client.ask(squad, ANSWERABLE);
    const follow = await client.ask(squad, "Which teams played in it?", {
      history: [["user", ANSWERABLE], { role: "assistant", content: first.answer }],
    });
    assert.match(follow.rewritten_question ?? "", /Super Bowl 50/);
    const acme = await client.ask(tenants, "Who builds rockets for lunar missions?", { tenant: "acme" });
    assert.equal(acme.status, "answered");
    assert.deepEqual([...new Set(acme.citations.map((c) => c.doc_id))], ["acme-1"]);
  });

  test("askStream yields the sources, a delta per claim in order, then done", async () => {
    const events: AskEvent[] = [];
    for await (const e of client.askStream(squad, ANSWERABLE)) events.push(e);
    const first = events[0]!;
    assert.ok(first.event === "sources");
    const last = events.at(-1)!;
    assert.equal(last.event, "done");
    assert.ok(events.slice(1, -1).every((e) => e.event === "delta"));
    assert.ok(last.event === "done");
    const final = last.data;
    assert.equal(final.status, "answered");
    const sourced = new Set(first.data.sources.map((s) => s.chunk_id));
    assert.ok(final.citations.every((c) => sourced.has(c.chunk_id)), "every cited passage was among the sources");
    const deltas = events.slice(1, -1).map((e) => e.data);
    assert.ok(deltas.length >= 1);
    assert.deepEqual(deltas, final.claims.map((c) => ({ text: c.text, citations: c.citations, verdict: c.verdict })));
    assert.equal(final.answer, (await client.ask(squad, ANSWERABLE)).answer);
  });

  test("askStream of an abstention has its sources and done, no claim; breaking out early is fine", async () => {
    const events: AskEvent[] = [];
    for await (const e of client.askStream(squad, UNANSWERABLE)) events.push(e);
    assert.deepEqual(events.map((e) => e.event), ["sources", "done"]);
    assert.equal(events[1]?.event === "done" && events[1].data.status, "abstained");
    for await (const e of client.askStream(squad, ANSWERABLE)) {
      assert.equal(e.event, "sources");
      break;
    }
  });

  test("askStream throws the API's error when iterated", async () => {
    const e = await rejects(
      (async () => {
        for await (const _ of client.askStream("no-such-collection", ANSWERABLE)) assert.fail("no event expected");
      })(),
      NotFoundError,
    );
    assert.deepEqual([e.status, e.code], [404, "NOT_FOUND"]);
  });
});

describe("errors", () => {
  test("an unknown field is refused naming it", async () => {
    const e = await rejects(client.request("POST", "/v1/collections/squad/search", { json: { query: "q", colour: "red" } }), InvalidArgumentError);
    assert.deepEqual([e.status, e.code, e.field], [400, "INVALID_ARGUMENT", "colour"]);
    assert.match(e.message, /colour/);
    assert.ok(e instanceof AttestError && e.requestId);
    assert.match(String(e), /^InvalidArgumentError: 400 INVALID_ARGUMENT \(field `colour`\): /);
  });

  test("an unknown field of a history turn", async () => {
    const body = { question: "q", history: [{ role: "user", content: "c", at: 1 }] };
    const e = await rejects(client.request("POST", "/v1/collections/squad/ask", { json: body }), InvalidArgumentError);
    assert.equal(e.field, "history[0].at");
  });

  test("out-of-range arguments name the field", async () => {
    assert.equal((await rejects(client.search("squad", "q", { k: 0 }), InvalidArgumentError)).field, "k");
    assert.equal((await rejects(client.search("squad", "q", { lanes: ["sparse" as "dense"] }), InvalidArgumentError)).field, "lanes");
    assert.equal((await rejects(client.search("squad", "q", { nprobe: 1_000_000 }), InvalidArgumentError)).field, "nprobe");
    const f = await rejects(client.search("squad", "q", { filter: { year: { between: [1, 2] } } }), InvalidArgumentError);
    assert.equal(f.field, "filter.year");
    const zero = await rejects(client.createCollection("coll-zero", { index: { nlist: 0 } }), InvalidArgumentError);
    assert.equal(zero.field, "index.nlist");
  });

  test("a missing collection is a 404", async () => {
    const e = await rejects(client.search("no-such-collection", "q"), NotFoundError);
    assert.deepEqual([e.status, e.code, e.field], [404, "NOT_FOUND", undefined]);
    assert.match(e.message, /no-such-collection/);
    await rejects(client.ask("no-such-collection", "q"), NotFoundError);
  });
});
