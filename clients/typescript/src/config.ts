// Where the server is and how to reach it: base URL, API key, timeout; from the options or the environment.
//
// The environment variables are those of the `attest` CLI and the Python client: `ATTEST_SERVER` and
// `ATTEST_API_KEY`. (A private CA is trusted the Node way: `NODE_EXTRA_CA_CERTS=ca.pem`.)

import { VERSION } from "./version.js";

/** `attest dev`'s address: the server when neither the options nor `$ATTEST_SERVER` name one. */
export const DEFAULT_SERVER = "http://127.0.0.1:7700";

/** Milliseconds a request may take, its body included, unless `timeoutMs` says otherwise. */
export const DEFAULT_TIMEOUT_MS = 120_000;

/** The process environment where there is one (Node, Deno, Bun); empty elsewhere. */
export function environment(): Record<string, string | undefined> {
  const proc = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return proc?.env ?? {};
}

/** Connection settings after the options and the environment are resolved. */
export interface Settings {
  /** Without a trailing slash, e.g. `http://127.0.0.1:7700`. */
  readonly baseUrl: string;
  /** Sent as `Authorization: Bearer`; undefined for an open server. */
  readonly apiKey: string | undefined;
  readonly timeoutMs: number;
}

/** Options win; what they leave out comes from the environment, then the defaults. An empty `apiKey` (`""`)
 * means "no key", even when `$ATTEST_API_KEY` is set. */
export function resolveSettings(
  baseUrl: string | undefined,
  apiKey: string | undefined,
  timeoutMs: number | undefined,
  env: Record<string, string | undefined> = environment(),
): Settings {
  const url = baseUrl || env["ATTEST_SERVER"] || DEFAULT_SERVER;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`not a server URL: ${JSON.stringify(url)} (e.g. ${DEFAULT_SERVER})`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new TypeError(`not an http(s) server URL: ${JSON.stringify(url)}`);
  }
  const key = apiKey !== undefined ? apiKey : env["ATTEST_API_KEY"];
  const timeout = timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!(timeout > 0)) throw new RangeError(`timeoutMs must be positive, not ${timeout}`);
  return { baseUrl: url.replace(/\/+$/, ""), apiKey: key || undefined, timeoutMs: timeout };
}

/** Headers of every request: the user agent, and the bearer key when there is one. */
export function baseHeaders(settings: Settings): Record<string, string> {
  const headers: Record<string, string> = { "user-agent": `attest-client-typescript/${VERSION}` };
  if (settings.apiKey) headers["authorization"] = `Bearer ${settings.apiKey}`;
  return headers;
}
