// The README's TypeScript snippets, run as written against a fresh `attest dev` (with $ATTEST_SERVER pointing at
// it), each twice: a snippet must also work on a server that already has what it made. A snippet that is not
// meant to run has `<!-- not run: why -->` on the line before its fence.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { after, afterEach, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import ts from "typescript";

import { Dev } from "./helpers.js";

const PACKAGE = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const README = join(PACKAGE, "README.md");
// Inside the package, so that `import ... from "attest-client"` resolves to its own dist/ (self-reference).
const OUT = join(PACKAGE, "build", "readme");

/** The ```ts blocks of the README, with the line each starts on, but those marked `not run`. */
function snippets(): { line: number; code: string }[] {
  const lines = readFileSync(README, "utf8").split("\n");
  const found: { line: number; code: string }[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]?.trim() !== "```ts") continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && lines[i]?.trim() !== "```"; i++) body.push(lines[i] as string);
    if (lines[start - 1]?.startsWith("<!-- not run")) continue;
    found.push({ line: start + 1, code: body.join("\n") });
  }
  return found;
}

let dev: Dev;

before(async () => {
  dev = await Dev.start("readme");
  mkdirSync(OUT, { recursive: true });
});

afterEach((t) => {
  if ((t as { passed?: boolean }).passed === false && dev) dev.failed = true;
});

after(async () => {
  await dev?.stop();
});

test("the README has TypeScript snippets", () => {
  assert.ok(snippets().length >= 2);
});

for (const { line, code } of snippets()) {
  test(`README.md:${line} runs, twice`, async () => {
    const js = ts.transpileModule(code, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
      reportDiagnostics: true,
    });
    assert.deepEqual(js.diagnostics ?? [], []);
    const file = join(OUT, `snippet-${line}.mjs`);
    writeFileSync(file, js.outputText);
    const env: NodeJS.ProcessEnv = { ...process.env, ATTEST_SERVER: dev.url };
    delete env["ATTEST_API_KEY"];
    for (const round of [1, 2]) {
      try {
        await promisify(execFile)(process.execPath, [file], { env, timeout: 60_000, cwd: OUT });
      } catch (error) {
        const e = error as { stdout?: string; stderr?: string; message: string };
        assert.fail(`README.md:${line}, round ${round}: ${e.message}\n${e.stdout ?? ""}\n${e.stderr ?? ""}`);
      }
    }
  });
}
