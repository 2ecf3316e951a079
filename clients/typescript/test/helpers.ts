// Fixtures of the tests: real `attest dev` processes on OS-chosen loopback ports (no mock of Attest), a slice of
// data/squad-sample, and bounded waits on conditions (never a fixed sleep).
//
// The binary: $ATTEST_BIN, else $CARGO_TARGET_DIR/debug/attest, else ~/.cache/attest-target/debug/attest; it is
// run, never built. Each Dev keeps its data and stderr in a temporary directory, removed when it stops unless a
// test failed (then its path and the end of the log are printed).

import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, createWriteStream, mkdtempSync, readFileSync, rmSync, type WriteStream } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** The repository's root (this file is clients/typescript/build/test/helpers.js once compiled). */
export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");
export const CORPUS = join(REPO, "data/squad-sample/corpus.jsonl");
export const START_TIMEOUT_MS = 120_000;
export const ADMIN_KEY = "tsclient-test-admin-key-0123456789";

// Questions with a known outcome on the first 20 paragraphs of the sample (the article "Super Bowl 50"); the
// Python client's tests use the same.
export const ANSWERABLE = "Where was Super Bowl 50 played?";
export const UNANSWERABLE = "Who was the first emperor of the Inca empire?";

export function attestBin(): string {
  const env = process.env;
  const path =
    env["ATTEST_BIN"] ||
    (env["CARGO_TARGET_DIR"]
      ? join(env["CARGO_TARGET_DIR"], "debug/attest")
      : join(homedir(), ".cache/attest-target/debug/attest"));
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(`no attest binary at ${path}: build it (make build) or set ATTEST_BIN`);
  }
  return path;
}

/** Polls `condition` until it returns something truthy (returned) or `timeoutMs` pass (throws). */
export async function waitUntil<T>(
  condition: () => T | Promise<T>,
  timeoutMs: number,
  what: string,
  intervalMs = 50,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Paragraphs [start, stop) of data/squad-sample/corpus.jsonl (distinct texts: none is a near-duplicate). */
export function sample(start: number, stop: number): { id: string; title: string; text: string }[] {
  return readFileSync(CORPUS, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .slice(start, stop)
    .map((l) => JSON.parse(l) as { id: string; title: string; text: string });
}

/** One `attest dev` on 127.0.0.1 ports the OS chose, over its own data directory. */
export class Dev {
  readonly dir: string;
  readonly logPath: string;
  url = "";
  /** Set by a failed test: the directory and its log are kept. */
  failed = false;
  private proc: ChildProcess | undefined;
  private log: WriteStream | undefined;

  private constructor(readonly name: string) {
    this.dir = mkdtempSync(join(tmpdir(), `attest-tsclient-${name}-`));
    this.logPath = join(this.dir, "stderr.log");
  }

  static async start(name: string, args: string[] = []): Promise<Dev> {
    const dev = new Dev(name);
    try {
      await dev.launch(args);
    } catch (error) {
      dev.failed = true;
      await dev.stop();
      throw error;
    }
    return dev;
  }

  private tail(): string {
    try {
      return readFileSync(this.logPath, "utf8").slice(-3000);
    } catch {
      return "(no log)";
    }
  }

  private async launch(args: string[]): Promise<void> {
    this.log = createWriteStream(this.logPath);
    await new Promise((r) => this.log?.once("open", r));
    const argv = ["dev", "--data-dir", join(this.dir, "data"), "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"];
    const proc = spawn(attestBin(), [...argv, "--log-level", "warn", ...args], {
      cwd: REPO,
      stdio: ["ignore", "pipe", this.log],
    });
    this.proc = proc;
    // Should the test process end without `after` (a crash, the runner's timeout), the server goes with it.
    const orphan = () => proc.kill("SIGKILL");
    process.once("exit", orphan);
    proc.once("exit", () => process.removeListener("exit", orphan));
    // The first stdout line names the ports (`attest dev listening http=http://127.0.0.1:PORT grpc=...`); what
    // comes later is drained so that a full pipe never blocks the server.
    const lines = createInterface({ input: proc.stdout as NodeJS.ReadableStream });
    const first = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`attest dev ${this.name} printed no address in ${START_TIMEOUT_MS} ms`)),
        START_TIMEOUT_MS,
      );
      lines.once("line", (line) => {
        clearTimeout(timer);
        resolve(line);
      });
      proc.once("exit", (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`attest dev ${this.name} exited (${code ?? signal}): ${this.tail()}`));
      });
      proc.once("error", (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
    lines.on("line", () => undefined);
    const match = /\bhttp=(http:\/\/127\.0\.0\.1:\d+)/.exec(first);
    if (!match?.[1]) throw new Error(`attest dev ${this.name} did not name its address: ${first}`);
    this.url = match[1];
    await waitUntil(
      async () => {
        if (proc.exitCode !== null || proc.signalCode !== null) {
          throw new Error(`attest dev ${this.name} exited: ${this.tail()}`);
        }
        try {
          const r = await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(5_000) });
          await r.body?.cancel();
          return r.status === 200;
        } catch {
          return false;
        }
      },
      START_TIMEOUT_MS,
      `attest dev ${this.name} /readyz`,
    );
  }

  /** Stops the process (SIGTERM, SIGKILL after 20 s); removes its directory unless a test failed. */
  async stop(): Promise<void> {
    const proc = this.proc;
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 20_000);
      await exited;
      clearTimeout(timer);
    }
    if (this.log) await new Promise((r) => this.log?.end(r));
    if (this.failed) {
      console.error(`attest dev ${this.name}: kept ${this.dir}; the end of its log:\n${this.tail()}`);
    } else {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}

/** Awaits `promise` and returns what it threw, which must be a `kind`. */
export async function rejects<E extends Error>(promise: Promise<unknown>, kind: new (...args: never[]) => E): Promise<E> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof kind, `expected ${kind.name}, got ${String(error)}`);
    return error;
  }
  assert.fail(`expected ${kind.name}, nothing was thrown`);
}
