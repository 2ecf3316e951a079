// Names for the API's request and response shapes. The shapes themselves are generated from docs/openapi.json
// into generated/openapi.ts (`npm run generate`; `npm run check-generated` fails when they are stale): these
// are aliases of them, plus the client's own option and report types.

import type { components } from "./generated/openapi.js";

type Schemas = components["schemas"];

// --- what the server answers ---------------------------------------------------------------------------------

export type Collection = Schemas["CollectionView"];
export type CollectionStats = Schemas["CollectionStats"];
export type IndexSettings = Schemas["IndexSettings"];
export type ChunkingConfig = Schemas["ChunkingConfig"];
export type CollectionThresholds = Schemas["CollectionThresholds"];
export type Dropped = Schemas["Dropped"];
export type Deleted = Schemas["Deleted"];
export type IngestResult = Schemas["IngestResult"];
export type SearchResponse = Schemas["SearchResult"];
export type Hit = Schemas["SearchHit"];
export type HitLanes = Schemas["HitLanes"];
export type LaneScore = Schemas["LaneScore"];
export type AskResponse = Schemas["AskResponse"];
export type AskDelta = Schemas["AskDelta"];
export type Citation = Schemas["Citation"];
export type Claim = Schemas["CheckedClaim"];
export type Verdict = Schemas["Verdict"];
export type VerdictCounts = Schemas["VerdictCounts"];
export type NearMiss = Schemas["NearMiss"];
export type ApiKey = Schemas["KeyView"];
export type CreatedKey = Schemas["CreatedKey"];
export type SnapshotJob = Schemas["SnapshotJob"];
export type SnapshotManifest = Schemas["ClusterManifest"];
export type ListedSnapshot = Schemas["ListedSnapshot"];
export type SnapshotProgress = Schemas["SnapshotProgress"];
export type RestoredCollection = Schemas["RestoredCollection"];
export type ClusterStatus = Schemas["ClusterReport"];
export type ErrorBody = Schemas["ErrorBody"];

/** One event of `askStream`: a `delta` per verified claim of the answer, then the final `done`. */
export type AskSources = Schemas["AskSources"];
export type AskEvent =
  | { event: "sources"; data: AskSources }
  | { event: "delta"; data: AskDelta }
  | { event: "done"; data: AskResponse };

// --- what the client is given --------------------------------------------------------------------------------

/** `createCollection`'s settings; what is left out takes the server's default. */
export interface CreateCollectionOptions {
  shards?: number;
  replication?: number;
  /** IVF-PQ settings: `{nlist, m, nbits, nprobe}` (`m` must divide the embedder's dimension). */
  index?: Schemas["IndexBody"];
  /** Fixed at creation. */
  chunking?: Partial<ChunkingConfig>;
  /** The collection's answer thresholds. */
  thresholds?: CollectionThresholds;
  /** A collection of that name that exists already is answered instead of a 409, when it has every setting
   * given here (those left out do not matter); otherwise a ConflictError names each difference. */
  existOk?: boolean;
}

/** A document to ingest. Fields the server does not know are sent anyway: it refuses the document, naming the
 * field, as a rejection of the upload. */
export interface Document {
  id: string | number;
  text: string;
  title?: string | null;
  /** Scalars or arrays of scalars; filterable in search. */
  metadata?: Record<string, unknown> | null;
  /** Default: the upload's `tenant`, else the key's only tenant, else the server's default tenant. */
  tenant?: string | null;
  /** A precomputed embedding of the collection's dimension (sent in a JSON batch: NDJSON cannot carry it). */
  vector?: number[] | null;
}

/** A document the server (or the client) did not ingest, and why. */
export interface Rejection {
  /** The document's position in what was given to the upload (across every batch). */
  index: number;
  /** Its id, when it could be read. */
  id?: string;
  reason: string;
  /** The field refused, when the server named one (`documents[3].vector`). */
  field?: string;
}

/** What a bulk upload did, over all its batches. Rejections are returned here, never thrown. */
export interface UploadReport {
  accepted: number;
  rejected: Rejection[];
  /** How many of `rejected` are near-duplicates of stored documents. */
  duplicates: number;
  chunks: number;
  /** Requests sent (a batch sent again without a refused document counts again). */
  batches: number;
  /** Documents given to the upload. */
  documents: number;
  /** Every document was accepted. */
  ok: boolean;
}

/** Where a bulk upload stands: given to `onProgress` after each batch. */
export interface UploadProgress {
  /** Documents done so far (accepted or rejected). */
  done: number;
  /** All the documents, when the input has a length (an array); undefined for an iterator. */
  total: number | undefined;
  accepted: number;
  rejected: number;
  batches: number;
}

export interface UploadOptions {
  /** Fills in the tenant of documents without one. */
  tenant?: string;
  /** Documents per request (default 500). */
  batchSize?: number;
  /** Bytes per request at most (default 8 MiB, well under the router's 32 MiB limit). */
  maxBatchBytes?: number;
  /** Called after each batch, and once at the end. */
  onProgress?: (progress: UploadProgress) => void;
}

/** Search lanes: `dense`, `bm25`, or both (`hybrid`, the default). */
export type Lane = "dense" | "bm25";

export interface SearchOptions {
  /** Hits to return (default 10). */
  k?: number;
  /** `"dense"`, `"bm25"`, `"hybrid"` or a list of lanes (default both). */
  lanes?: Lane | "hybrid" | readonly Lane[];
  /** The k of Reciprocal Rank Fusion (default 60). */
  rrfK?: number;
  /** Weight per lane in the fusion; a lane not named keeps the router's default. */
  weights?: Partial<Record<Lane, number>>;
  /** Over metadata: `{lang: "en", year: {gte: 2000, lt: 2010}, tag: {in: ["a", "b"]}}`. */
  filter?: Record<string, unknown>;
  /** The tenant whose documents are searched (among the key's). */
  tenant?: string;
  /** IVF lists probed (default: the collection's). */
  nprobe?: number;
  /** The query's own embedding: the dense lane searches with it (then `query` may be "" with `lanes: "dense"`). */
  vector?: readonly number[];
}

/** One earlier turn of a conversation: `{role, content}` or `[role, content]`. */
export type Turn = { role: "user" | "assistant" | (string & {}); content: string } | readonly [string, string];

export interface AskOptions {
  /** Earlier turns, oldest first. */
  history?: readonly Turn[];
  /** The tenant whose documents answer (among the key's). */
  tenant?: string;
}

export interface CreateKeyOptions {
  /** Collections the key may act on (default: all). */
  collections?: string[];
  /** `30d`, `12h`, `90m`, `3600s` (default: never expires). */
  expiresIn?: string;
}

export interface SnapshotOptions {
  /** Default: `snapshot-<UTC time>`. */
  id?: string;
  /** Default: every collection. */
  collections?: string[];
  /** Then delete the oldest complete snapshots of the destination beyond this many. */
  keep?: number;
}

export interface RestoreOptions {
  /** Default: every collection of the snapshot. */
  collections?: string[];
  /** Restore collection `old` as `new`: `{old: new}`. */
  rename?: Record<string, string>;
  /** Replace collections that exist. */
  force?: boolean;
}
