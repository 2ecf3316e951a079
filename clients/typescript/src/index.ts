// TypeScript client of Attest's HTTP API v1: collections, documents (bulk NDJSON with progress), hybrid search,
// grounded answers (and their Server-Sent Events stream), API keys, snapshots. `fetch`-based, no runtime
// dependencies; the API's shapes are generated from docs/openapi.json.

export { Client, JOB_POLL_INTERVAL_MS, liveDocuments, type ClientOptions } from "./client.js";
export { DEFAULT_SERVER, DEFAULT_TIMEOUT_MS, resolveSettings, type Settings } from "./config.js";
export {
  AttestError,
  AuthenticationError,
  ConflictError,
  DeadlineExceededError,
  InvalidArgumentError,
  NotFoundError,
  PayloadTooLargeError,
  PermissionDeniedError,
  RateLimitedError,
  UnavailableError,
  errorFromResponse,
  type AttestErrorOptions,
  type ErrorCode,
} from "./errors.js";
export { DEFAULT_BATCH_SIZE, DEFAULT_MAX_BATCH_BYTES } from "./bulk.js";
export { DEFAULT_RETRY, NO_RETRIES, parseRetryAfter, retryPolicy, type RetryPolicy } from "./retry.js";
export { SseDecoder, sseEvents, type SseEvent } from "./sse.js";
export type { CallOptions, FetchLike } from "./transport.js";
export type * from "./types.js";
export type { components, operations, paths } from "./generated/openapi.js";
export { VERSION } from "./version.js";
