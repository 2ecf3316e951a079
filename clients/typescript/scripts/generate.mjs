// Generates src/generated/openapi.ts from the OpenAPI document of HTTP API v1 (../../docs/openapi.json, which
// `make openapi` refreshes from the server's handlers) with the pinned openapi-typescript.
//
//   node scripts/generate.mjs           write src/generated/openapi.ts (npm run generate)
//   node scripts/generate.mjs --check   generate into a temporary file and fail when it differs from the committed
//                                       one (npm run check-generated; scripts/typescript-client-test.sh runs it)
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const spec = resolve(here, "../../docs/openapi.json");
const target = join(here, "src/generated/openapi.ts");
const cli = join(here, "node_modules/openapi-typescript/bin/cli.js");
// `--empty-objects-unknown`: free-form objects (`metadata`, `filter`) are Record<string, unknown>, not
// Record<string, never>.
const flags = ["--empty-objects-unknown"];
const check = process.argv.includes("--check");

const scratch = mkdtempSync(join(tmpdir(), "attest-ts-openapi-"));
try {
  const out = join(scratch, "openapi.ts");
  const run = spawnSync(process.execPath, [cli, spec, ...flags, "--output", out], { encoding: "utf8" });
  if (run.status !== 0) {
    process.stderr.write(run.stdout + run.stderr);
    throw new Error(`openapi-typescript failed (exit ${run.status})`);
  }
  if (!check) {
    copyFileSync(out, target);
    console.log(`wrote ${relative(process.cwd(), target)} from ${relative(process.cwd(), spec)}`);
  } else {
    const fresh = readFileSync(out, "utf8");
    let committed = "";
    try {
      committed = readFileSync(target, "utf8");
    } catch {
      // missing: reported as a difference below
    }
    if (fresh !== committed) {
      const a = committed.split("\n");
      const b = fresh.split("\n");
      let line = 0;
      while (line < a.length && line < b.length && a[line] === b[line]) line++;
      console.error(
        `${relative(process.cwd(), target)} is not what ${relative(process.cwd(), spec)} generates ` +
          `(first difference at line ${line + 1}: committed ${JSON.stringify(a[line] ?? "<end>")}, ` +
          `generated ${JSON.stringify(b[line] ?? "<end>")}); run \`npm run generate\` in clients/typescript`,
      );
      process.exitCode = 1;
    } else {
      console.log(`${relative(process.cwd(), target)} is current with ${relative(process.cwd(), spec)}`);
    }
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
