// Bulk document upload in batches, with a progress callback and per-document rejections (as the Python
// client's upload_documents).
//
// Documents are sent as NDJSON (one line each: the server refuses a bad line by its number and ingests the
// others), at most `batchSize` documents or `maxBatchBytes` bytes a request. A batch holding a precomputed
// `vector` goes as a JSON body instead (NDJSON lines cannot carry vectors); there one bad document fails the
// whole request with a 400 naming it (`documents[3].vector`), so it is recorded as that document's rejection and
// the batch is sent again without it. A batch refused as too large (413) is split in two. Rejections are
// returned in the UploadReport, each with the document's index in the input and its id; errors that are not
// about a document (401, 403, 404 ...) are thrown.

import { AttestError } from "./errors.js";
import type { Call } from "./transport.js";
import type { Document, IngestResult, Rejection, UploadOptions, UploadProgress, UploadReport } from "./types.js";

export const DEFAULT_BATCH_SIZE = 500;
/** Well under the router's 32 MiB body limit. */
export const DEFAULT_MAX_BATCH_BYTES = 8 * 1024 * 1024;

const DOC_FIELD = /^documents\[(\d+)\]/;
const encoder = new TextEncoder();

/** One document ready to send: its index in the input, its id and its JSON line. */
interface Item {
  index: number;
  id: string | undefined;
  line: string;
  bytes: number;
  hasVector: boolean;
}

type Batch = readonly Item[];

function encode(index: number, doc: unknown, tenant: string | undefined): Item | Rejection {
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) {
    const what = doc === null ? "null" : Array.isArray(doc) ? "an array" : typeof doc;
    return { index, reason: `not a document: ${what} (an object {id, text, ...})` };
  }
  const payload: Record<string, unknown> = { ...(doc as Record<string, unknown>) };
  if (tenant !== undefined && (payload["tenant"] === undefined || payload["tenant"] === null)) {
    payload["tenant"] = tenant;
  }
  const rawId = payload["id"] ?? payload["_id"];
  const id = rawId === undefined || rawId === null ? undefined : String(rawId);
  let line: string;
  try {
    line = JSON.stringify(payload, (_key, value: unknown) => {
      if (typeof value === "number" && !Number.isFinite(value)) throw new TypeError(`${value} is not a JSON number`);
      return value;
    });
  } catch (error) {
    return { index, ...(id !== undefined ? { id } : {}), reason: `not JSON: ${(error as Error).message}` };
  }
  const vector = payload["vector"];
  return { index, id, line, bytes: encoder.encode(line).length + 1, hasVector: vector !== undefined && vector !== null };
}

function isRejection(x: Item | Rejection): x is Rejection {
  return (x as Item).line === undefined;
}

/** The batch's request: NDJSON, or JSON `{documents: [...]}` when a document has a vector. */
export function batchCall(path: string, batch: Batch): Call {
  if (batch.some((i) => i.hasVector)) {
    return {
      method: "POST",
      path,
      body: `{"documents":[${batch.map((i) => i.line).join(",")}]}`,
      headers: { "content-type": "application/json" },
    };
  }
  return {
    method: "POST",
    path,
    body: batch.map((i) => i.line).join("\n") + "\n",
    headers: { "content-type": "application/x-ndjson" },
  };
}

async function* batches(
  documents: Iterable<unknown> | AsyncIterable<unknown>,
  tenant: string | undefined,
  batchSize: number,
  maxBytes: number,
  rejected: Rejection[],
): AsyncGenerator<Batch> {
  let items: Item[] = [];
  let size = 0;
  let index = 0;
  for await (const doc of documents) {
    const item = encode(index++, doc, tenant);
    if (isRejection(item)) {
      rejected.push(item);
      continue;
    }
    if (items.length > 0 && (items.length >= batchSize || size + item.bytes > maxBytes)) {
      yield items;
      items = [];
      size = 0;
    }
    items.push(item);
    size += item.bytes;
  }
  if (items.length > 0) yield items;
}

/** The position in a JSON batch of the document a 400 is about, if it names one. */
function badDocument(error: AttestError, batch: Batch): number | undefined {
  if (!batch.some((i) => i.hasVector) || error.status !== 400 || !error.field) return undefined;
  const m = DOC_FIELD.exec(error.field);
  const position = m ? Number(m[1]) : undefined;
  return position !== undefined && position < batch.length ? position : undefined;
}

/**
 * Uploads `documents` to the collection whose documents path is `path`, sending each batch with `send`.
 * Rejections are returned in the report; other errors are thrown.
 */
export async function upload(
  path: string,
  documents: Iterable<Document | Record<string, unknown>> | AsyncIterable<Document | Record<string, unknown>>,
  options: UploadOptions,
  send: (call: Call) => Promise<IngestResult>,
): Promise<UploadReport> {
  const batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
  const maxBytes = options.maxBatchBytes ?? DEFAULT_MAX_BATCH_BYTES;
  if (!(Number.isInteger(batchSize) && batchSize >= 1) || !(Number.isInteger(maxBytes) && maxBytes >= 1)) {
    throw new RangeError("batchSize and maxBatchBytes must be whole numbers >= 1");
  }
  const total = Array.isArray(documents) ? documents.length : undefined;
  const report: UploadReport = {
    accepted: 0,
    rejected: [],
    duplicates: 0,
    chunks: 0,
    batches: 0,
    documents: 0,
    ok: true,
  };
  const clientRejected: Rejection[] = [];
  const progress = (): void => {
    // Documents the client refused itself count as done as soon as they are met.
    const p: UploadProgress = {
      done: report.documents + clientRejected.length,
      total,
      accepted: report.accepted,
      rejected: report.rejected.length + clientRejected.length,
      batches: report.batches,
    };
    options.onProgress?.(p);
  };

  for await (const batch of batches(documents, options.tenant, batchSize, maxBytes, clientRejected)) {
    const pending: Batch[] = [batch];
    while (pending.length > 0) {
      const part = pending.shift() as Batch;
      let answer: IngestResult;
      try {
        report.batches += 1;
        answer = await send(batchCall(path, part));
      } catch (error) {
        if (!(error instanceof AttestError)) throw error;
        if (error.status === 413 && part.length > 1) {
          const mid = Math.floor(part.length / 2);
          pending.unshift(part.slice(0, mid), part.slice(mid));
          continue;
        }
        const bad = badDocument(error, part);
        if (bad === undefined) throw error;
        const item = part[bad] as Item;
        // The server counts from the start of this request; the report from the start of the input.
        const here = `documents[${bad}]`;
        const there = `documents[${item.index}]`;
        report.rejected.push({
          index: item.index,
          ...(item.id !== undefined ? { id: item.id } : {}),
          reason: error.message.split(here).join(there),
          ...(error.field ? { field: error.field.replace(here, there) } : {}),
        });
        if (part.length > 1) pending.unshift([...part.slice(0, bad), ...part.slice(bad + 1)]);
        continue;
      }
      report.accepted += answer.accepted;
      report.duplicates += answer.duplicates;
      report.chunks += answer.chunks;
      for (const r of answer.rejected) {
        const item = part[r.index];
        report.rejected.push({
          index: item ? item.index : r.index,
          ...(item?.id !== undefined ? { id: item.id } : {}),
          reason: r.reason,
        });
      }
    }
    report.documents += batch.length;
    progress();
  }
  progress();
  report.rejected.push(...clientRejected);
  report.documents += clientRejected.length;
  report.rejected.sort((a, b) => a.index - b.index);
  report.ok = report.rejected.length === 0;
  return report;
}
