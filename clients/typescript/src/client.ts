// The client: one method per operation of HTTP API v1, mirroring the Python client (clients/python).
//
//   const c = new Client();                       // $ATTEST_SERVER or http://127.0.0.1:7700; apiKey or $ATTEST_API_KEY
//   await c.createCollection("docs", { existOk: true });
//   await c.uploadDocuments("docs", [{ id: "1", text: "Writes are made durable by the ingest log." }]);
//   (await c.search("docs", "how are writes made durable?", { k: 5 })).hits;
//   (await c.ask("docs", "how are writes made durable?")).answer;
//   for await (const e of c.askStream("docs", "how are writes made durable?")) console.log(e.event, e.data);

import { upload } from "./bulk.js";
import { resolveSettings, type Settings } from "./config.js";
import { AttestError, ConflictError } from "./errors.js";
import { retryPolicy, type RetryPolicy } from "./retry.js";
import { askEvents } from "./stream.js";
import { Transport, type Call, type CallOptions, type FetchLike } from "./transport.js";
import type {
  ApiKey,
  AskEvent,
  AskOptions,
  AskResponse,
  ClusterStatus,
  Collection,
  CollectionStats,
  CollectionThresholds,
  CreateCollectionOptions,
  CreatedKey,
  CreateKeyOptions,
  Deleted,
  Document,
  Dropped,
  IngestResult,
  ListedSnapshot,
  RestoredCollection,
  RestoreOptions,
  SearchOptions,
  SearchResponse,
  SnapshotJob,
  SnapshotManifest,
  SnapshotOptions,
  SnapshotProgress,
  Turn,
  UploadOptions,
  UploadReport,
} from "./types.js";

export interface ClientOptions {
  /** e.g. `http://127.0.0.1:7700`; default `$ATTEST_SERVER`, else that address (`attest dev`'s). */
  baseUrl?: string;
  /** Sent as `Authorization: Bearer`; default `$ATTEST_API_KEY` (none: an open server). `""`: no key. */
  apiKey?: string;
  /** Milliseconds for each request, its body included (default 120 000). */
  timeoutMs?: number;
  /** When to retry (default: 429 and 503 up to 4 times, honouring `Retry-After`; see retry.ts). */
  retry?: Partial<RetryPolicy>;
  /** The `fetch` to send with (default: the global one). */
  fetch?: FetchLike;
}

/** Milliseconds between two reads of a snapshot job being waited for. */
export const JOB_POLL_INTERVAL_MS = 200;

/** A path segment, percent-encoded (document ids may hold `/`, `#`, spaces). */
function seg(value: string | number): string {
  return encodeURIComponent(String(value));
}

function collectionPath(name: string): string {
  return `/v1/collections/${seg(name)}`;
}

/** The object without its undefined fields. */
function defined<T extends Record<string, unknown>>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function turns(history: readonly Turn[] | undefined): { role: string; content: string }[] | undefined {
  return history?.map((turn) => {
    if (Array.isArray(turn)) return { role: String(turn[0]), content: String(turn[1]) };
    const { role, content } = turn as { role: string; content: string };
    return { role, content };
  });
}

/** `createCollection(..., {existOk: true})` after the server's 409: the existing collection when it has every
 * setting the request gave; else a ConflictError naming each difference. (The server compares the settings a
 * request leaves out too, as their defaults; here what the caller did not ask for does not matter.) */
function existingCollection(asked: Record<string, unknown>, existing: Collection, conflict: AttestError): Collection {
  const have = existing as unknown as Record<string, unknown>;
  const differences: string[] = [];
  for (const [key, want] of Object.entries(asked)) {
    if (key === "name") continue;
    if (want !== null && typeof want === "object") {
      const got = (have[key] ?? {}) as Record<string, unknown>;
      for (const [sub, value] of Object.entries(want as Record<string, unknown>)) {
        if (value !== undefined && got[sub] !== value) {
          differences.push(`${key}.${sub} ${JSON.stringify(got[sub] ?? null)} (asked ${JSON.stringify(value)})`);
        }
      }
    } else if (have[key] !== want) {
      differences.push(`${key} ${JSON.stringify(have[key] ?? null)} (asked ${JSON.stringify(want)})`);
    }
  }
  if (differences.length === 0) return existing;
  throw new ConflictError(
    `collection \`${existing.name}\` already exists with another configuration: ${differences.join(", ")}`,
    { code: conflict.code, status: conflict.status, requestId: conflict.requestId },
  );
}

/** A client of one Attest HTTP endpoint (`attest dev`, a router, or an ingress in front of router and answer
 * tier). Errors are thrown as AttestError (with `status`, `code`, `field`, `requestId`). */
export class Client {
  readonly settings: Settings;
  readonly retry: RetryPolicy;
  private readonly transport: Transport;

  constructor(options: ClientOptions = {}) {
    this.settings = resolveSettings(options.baseUrl, options.apiKey, options.timeoutMs);
    this.retry = retryPolicy(options.retry);
    this.transport = new Transport(this.settings, this.retry, options.fetch);
  }

  get baseUrl(): string {
    return this.settings.baseUrl;
  }

  private run<T>(call: Call, options?: CallOptions): Promise<T> {
    return this.transport.json<T>(call, options);
  }

  /** Any route of the API (`path` from `/v1/...`): its JSON answer, or an AttestError. */
  request<T = unknown>(
    method: Call["method"],
    path: string,
    options: CallOptions & { json?: unknown; query?: Record<string, string> } = {},
  ): Promise<T> {
    const call: Call = { method, path };
    if (options.json !== undefined) call.json = options.json;
    if (options.query !== undefined) call.query = options.query;
    return this.run<T>(call, options);
  }

  /** The server answers `/readyz` with 200 (no retries, never throws). */
  async ready(options: CallOptions = {}): Promise<boolean> {
    try {
      const response = await this.transport.fetchImpl(this.transport.url({ path: "/readyz" }), {
        signal: options.signal ?? AbortSignal.timeout(options.timeoutMs ?? 5_000),
      });
      await response.body?.cancel();
      return response.status === 200;
    } catch {
      return false;
    }
  }

  // --- collections ---------------------------------------------------------------------------------------------

  /** Creates a collection (admin). The same request again answers the collection; one under an existing name
   * with other settings throws ConflictError, unless `existOk`: then the existing collection is answered if it
   * has the settings given here (those left out do not matter), and a ConflictError names each one it has
   * otherwise. */
  async createCollection(
    name: string,
    options: CreateCollectionOptions & CallOptions = {},
  ): Promise<Collection> {
    const body: Record<string, unknown> = defined({
      name,
      shards: options.shards,
      replication: options.replication,
      index: options.index !== undefined ? defined(options.index as Record<string, unknown>) : undefined,
      chunking: options.chunking !== undefined ? defined(options.chunking as Record<string, unknown>) : undefined,
      thresholds: options.thresholds,
    });
    try {
      return await this.run<Collection>({ method: "POST", path: "/v1/collections", json: body }, options);
    } catch (error) {
      if (!options.existOk || !(error instanceof ConflictError) || error.code !== "ALREADY_EXISTS") throw error;
      return existingCollection(body, await this.getCollection(name, options), error);
    }
  }

  /** The collections this key may see. */
  async listCollections(options?: CallOptions): Promise<Collection[]> {
    const list = await this.run<{ collections: Collection[] }>({ method: "GET", path: "/v1/collections" }, options);
    return list.collections;
  }

  /** One collection; NotFoundError if there is none. */
  getCollection(name: string, options?: CallOptions): Promise<Collection> {
    return this.run({ method: "GET", path: collectionPath(name) }, options);
  }

  /** Drops a collection and every document in it (admin). */
  dropCollection(name: string, options?: CallOptions): Promise<Dropped> {
    return this.run({ method: "DELETE", path: collectionPath(name) }, options);
  }

  /** Per-shard statistics. */
  stats(collection: string, options?: CallOptions): Promise<CollectionStats> {
    return this.run({ method: "GET", path: `${collectionPath(collection)}/stats` }, options);
  }

  /** Seals the growing segments and/or compacts now (admin); answers the statistics after. */
  maintain(
    collection: string,
    what: { seal?: boolean; compact?: boolean } = {},
    options?: CallOptions,
  ): Promise<CollectionStats> {
    const json = { seal: what.seal ?? false, compact: what.compact ?? false };
    return this.run({ method: "POST", path: `${collectionPath(collection)}/maintain`, json }, options);
  }

  /** Sets the collection's answer thresholds (admin): the answer tier abstains below `min_confidence`. */
  setThresholds(
    collection: string,
    minConfidence: number,
    measured: Omit<CollectionThresholds, "min_confidence"> = {},
    options?: CallOptions,
  ): Promise<Collection> {
    const json = { ...measured, min_confidence: minConfidence };
    return this.run({ method: "PUT", path: `${collectionPath(collection)}/thresholds`, json }, options);
  }

  /** Clears the collection's answer thresholds (admin). */
  clearThresholds(collection: string, options?: CallOptions): Promise<Collection> {
    return this.run({ method: "DELETE", path: `${collectionPath(collection)}/thresholds` }, options);
  }

  /** The collection's latest `attest-lab eval --json` report kept by the router; NotFoundError if none. */
  evalReport(collection: string, options?: CallOptions): Promise<Record<string, unknown>> {
    return this.run({ method: "GET", path: `${collectionPath(collection)}/eval` }, options);
  }

  // --- documents -----------------------------------------------------------------------------------------------

  /** Uploads documents in batches (NDJSON; JSON for those with a `vector`), calling `onProgress` after each.
   * `tenant` fills in documents without one. Rejected documents are returned in the report with their index
   * and id, never thrown; errors not about a document (401, 403, 404 ...) are thrown. */
  uploadDocuments(
    collection: string,
    documents: Iterable<Document | Record<string, unknown>> | AsyncIterable<Document | Record<string, unknown>>,
    options: UploadOptions & CallOptions = {},
  ): Promise<UploadReport> {
    const path = `${collectionPath(collection)}/documents`;
    return upload(path, documents, options, (call) => this.run<IngestResult>(call, options));
  }

  /** Deletes every chunk of a document; NotFoundError if it does not exist. */
  deleteDocument(
    collection: string,
    id: string | number,
    options: { tenant?: string } & CallOptions = {},
  ): Promise<Deleted> {
    const call: Call = { method: "DELETE", path: `${collectionPath(collection)}/documents/${seg(id)}` };
    if (options.tenant !== undefined) call.query = { tenant: options.tenant };
    return this.run(call, options);
  }

  // --- search and ask ------------------------------------------------------------------------------------------

  /** Hybrid search: `lanes` (default both), `weights` per lane for RRF, `filter` on metadata, `tenant` among the
   * key's, `nprobe` for the dense index, `vector` the query's own embedding. */
  search(collection: string, query: string, options: SearchOptions & CallOptions = {}): Promise<SearchResponse> {
    let lanes: string[] | undefined;
    if (typeof options.lanes === "string") lanes = options.lanes === "hybrid" ? undefined : [options.lanes];
    else if (options.lanes !== undefined) lanes = [...options.lanes];
    const json = defined({
      query,
      k: options.k,
      lanes,
      rrf_k: options.rrfK,
      weights: options.weights,
      filter: options.filter,
      tenant: options.tenant,
      nprobe: options.nprobe,
      vector: options.vector !== undefined ? [...options.vector] : undefined,
    });
    return this.run({ method: "POST", path: `${collectionPath(collection)}/search`, json, idempotent: true }, options);
  }

  private askCall(collection: string, question: string, options: AskOptions, stream: boolean): Call {
    const json = defined({
      question,
      history: turns(options.history),
      tenant: options.tenant,
      stream: stream || undefined,
    });
    const call: Call = { method: "POST", path: `${collectionPath(collection)}/ask`, json, idempotent: true };
    if (stream) call.headers = { accept: "text/event-stream" };
    return call;
  }

  /** A grounded answer with citations and verdicts (`status: "answered"`), or an abstention (`status`,
   * `reason`, `suggestions`). `history`: earlier turns, oldest first. */
  ask(collection: string, question: string, options: AskOptions & CallOptions = {}): Promise<AskResponse> {
    return this.run(this.askCall(collection, question, options, false), options);
  }

  /** The answer as Server-Sent Events: one `{event: "delta", data: AskDelta}` per verified claim, then
   * `{event: "done", data: AskResponse}`. Nothing is sent until it is iterated; breaking out of the loop closes
   * the connection. */
  async *askStream(
    collection: string,
    question: string,
    options: AskOptions & CallOptions = {},
  ): AsyncGenerator<AskEvent, void, undefined> {
    const call = this.askCall(collection, question, options, true);
    const sent = await this.transport.send(call, options);
    yield* askEvents(call, sent, options);
  }

  // --- keys ----------------------------------------------------------------------------------------------------

  /** Mints an API key (admin); its secret is `.key`, shown this once. `scopes`: `read`, `write`, `admin`;
   * `tenants`: those it may act for, or `*`. */
  createKey(
    scopes: readonly string[],
    tenants: readonly string[],
    options: CreateKeyOptions & CallOptions = {},
  ): Promise<CreatedKey> {
    const json = defined({
      scopes: [...scopes],
      tenants: [...tenants],
      collections: options.collections,
      expires_in: options.expiresIn,
    });
    return this.run({ method: "POST", path: "/v1/keys", json }, options);
  }

  /** The keys within this key's grant (admin). */
  async listKeys(options?: CallOptions): Promise<ApiKey[]> {
    return (await this.run<{ keys: ApiKey[] }>({ method: "GET", path: "/v1/keys" }, options)).keys;
  }

  /** Revokes a key (admin): every router refuses it within seconds. */
  revokeKey(id: string, options?: CallOptions): Promise<ApiKey> {
    return this.run({ method: "DELETE", path: `/v1/keys/${seg(id)}` }, options);
  }

  // --- snapshots and cluster -----------------------------------------------------------------------------------

  /** Starts a snapshot of collections (default all) to a directory every node reaches or `s3://bucket/prefix`:
   * the job, running (follow it with `snapshotJob` or `waitSnapshotJob`). */
  startSnapshot(destination: string, options: SnapshotOptions & CallOptions = {}): Promise<SnapshotJob> {
    const json = defined({ destination, id: options.id, collections: options.collections, keep: options.keep });
    return this.run({ method: "POST", path: "/v1/snapshots", json }, options);
  }

  /** Snapshots as `startSnapshot` and waits for the job to end: its manifest, or an AttestError `ABORTED` (the
   * job failed) or `CANCELLED`. `waitMs`: how long to wait at most (`DEADLINE_EXCEEDED`; the job goes on). */
  async createSnapshot(
    destination: string,
    options: SnapshotOptions & CallOptions & { waitMs?: number } = {},
  ): Promise<SnapshotManifest> {
    const job = await this.startSnapshot(destination, options);
    const ended = succeeded(await this.waitSnapshotJob(job.id, options));
    if (!ended.manifest) {
      throw new AttestError(`snapshot job ${ended.id} succeeded without a manifest`, { code: "INTERNAL" });
    }
    return ended.manifest;
  }

  /** The snapshots in a destination (a damaged one has `problem` instead of `manifest`). */
  async listSnapshots(source: string, options?: CallOptions): Promise<ListedSnapshot[]> {
    const call: Call = { method: "GET", path: "/v1/snapshots", query: { from: source } };
    return (await this.run<{ snapshots: ListedSnapshot[] }>(call, options)).snapshots;
  }

  /** What each replica of a snapshot has uploaded. */
  snapshotProgress(id: string, source: string, options?: CallOptions): Promise<SnapshotProgress> {
    return this.run({ method: "GET", path: `/v1/snapshots/${seg(id)}/progress`, query: { from: source } }, options);
  }

  /** Deletes a snapshot from its destination. */
  deleteSnapshot(id: string, source: string, options?: CallOptions): Promise<Deleted> {
    return this.run({ method: "DELETE", path: `/v1/snapshots/${seg(id)}`, query: { from: source } }, options);
  }

  /** Starts a restore of a snapshot's collections: the job, running. */
  startRestore(source: string, id: string, options: RestoreOptions & CallOptions = {}): Promise<SnapshotJob> {
    const json = defined({
      source,
      id,
      collections: options.collections,
      rename: options.rename,
      force: options.force || undefined,
    });
    return this.run({ method: "POST", path: "/v1/snapshots/restore", json }, options);
  }

  /** Restores as `startRestore` and waits for the job to end: the restored collections, or an AttestError as
   * `createSnapshot`. */
  async restoreSnapshot(
    source: string,
    id: string,
    options: RestoreOptions & CallOptions & { waitMs?: number } = {},
  ): Promise<RestoredCollection[]> {
    const job = await this.startRestore(source, id, options);
    const ended = succeeded(await this.waitSnapshotJob(job.id, options));
    if (!ended.restored) {
      throw new AttestError(`snapshot job ${ended.id} succeeded without its restored collections`, {
        code: "INTERNAL",
      });
    }
    return ended.restored;
  }

  /** A snapshot or restore job: its state, each replica's bytes, its result or error (admin). */
  snapshotJob(id: string, options?: CallOptions): Promise<SnapshotJob> {
    return this.run({ method: "GET", path: `/v1/snapshots/jobs/${seg(id)}` }, options);
  }

  /** The snapshot and restore jobs meta keeps (running ones and the last ended ones), oldest first. */
  async snapshotJobs(options?: CallOptions): Promise<SnapshotJob[]> {
    return (await this.run<{ jobs: SnapshotJob[] }>({ method: "GET", path: "/v1/snapshots/jobs" }, options)).jobs;
  }

  /** Asks a running job to stop; answers the job. An ended job is left as it is. */
  cancelSnapshotJob(id: string, options?: CallOptions): Promise<SnapshotJob> {
    return this.run({ method: "POST", path: `/v1/snapshots/jobs/${seg(id)}/cancel` }, options);
  }

  /** Reads the job every 200 ms until it ends and answers it as it ended (check `state`). `waitMs`: how long to
   * wait at most, then an AttestError `DEADLINE_EXCEEDED` (the job goes on). */
  async waitSnapshotJob(id: string, options: CallOptions & { waitMs?: number } = {}): Promise<SnapshotJob> {
    const deadline = options.waitMs !== undefined ? Date.now() + options.waitMs : undefined;
    for (;;) {
      const job = await this.snapshotJob(id, options);
      if (job.state !== "running") return job;
      let pause = JOB_POLL_INTERVAL_MS;
      if (deadline !== undefined) {
        const left = deadline - Date.now();
        if (left <= 0) {
          throw new AttestError(
            `snapshot job ${id} is still running after ${options.waitMs} ms (it goes on: cancelSnapshotJob stops it)`,
            { code: "DEADLINE_EXCEEDED" },
          );
        }
        pause = Math.min(pause, left);
      }
      await this.transport.sleepImpl(pause, options.signal);
    }
  }

  /** Meta voters, nodes, replica sets and their health (admin). */
  cluster(options?: CallOptions): Promise<ClusterStatus> {
    return this.run({ method: "GET", path: "/v1/cluster" }, options);
  }
}

/** The live documents of a collection: the sum over its shards of `stats()`. */
export function liveDocuments(stats: CollectionStats): number {
  return stats.shards.reduce((sum, shard) => sum + shard.live_documents, 0);
}

/** The job if it succeeded; an AttestError `CANCELLED` or `ABORTED` (with the job's error) if not. */
function succeeded(job: SnapshotJob): SnapshotJob {
  if (job.state === "succeeded") return job;
  if (job.state === "cancelled") {
    throw new AttestError(`snapshot job ${job.id} (${job.kind} of ${job.snapshot}) was cancelled`, {
      code: "CANCELLED",
    });
  }
  throw new AttestError(
    `snapshot job ${job.id} (${job.kind} of ${job.snapshot}) ${job.state}: ${job.error ?? "no error given"}`,
    { code: "ABORTED" },
  );
}
