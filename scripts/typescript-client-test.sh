#!/usr/bin/env bash
# Tests of the TypeScript client (clients/typescript, npm package attest-client): installs its pinned dev
# dependencies with `npm ci` (package-lock.json), checks that src/generated/openapi.ts is what docs/openapi.json
# generates, builds dist/ with tsc, runs its tests with Node's test runner against `attest dev` processes the
# tests start on loopback ports (the built package is what is tested, imported by its name), then packs it with
# `npm pack`, installs the tarball into an empty project offline and imports it from an .mjs file and a
# type-checked .ts file.
#
# Usage: scripts/typescript-client-test.sh [node --test arguments, e.g. --test-name-pattern=askStream]
# The binary: $ATTEST_BIN, else $CARGO_TARGET_DIR/debug/attest (default ~/.cache/attest-target); it is run, never
# built here. npm's cache is $ATTEST_NPM_CACHE (default ~/.cache/attest-npm): the registry is reached only when
# the cache lacks a package of the lock file. Needs Node >= 20 and npm.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLIENT="$REPO_ROOT/clients/typescript"
export ATTEST_BIN="${ATTEST_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}/debug/attest}"
export npm_config_cache="${ATTEST_NPM_CACHE:-$HOME/.cache/attest-npm}"
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

log() { printf 'typescript-client-test: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

command -v node >/dev/null 2>&1 || die "node (>= 20) is required"
command -v npm >/dev/null 2>&1 || die "npm is required"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
((node_major >= 20)) || die "Node >= 20 is required, this is $(node --version)"
[[ -x "$ATTEST_BIN" ]] || die "no attest binary at $ATTEST_BIN (make build, or set ATTEST_BIN)"
mkdir -p "$npm_config_cache"

cd "$CLIENT"
log "npm ci (node $(node --version), npm $(npm --version), cache $npm_config_cache)"
npm ci --prefer-offline --no-progress --loglevel=error
npm run --silent check-generated
npm run --silent build
# Not exec: the pack check follows; the tests' status is the script's (set -e).
npm test --silent -- "$@"

# The package as a user gets it: the tarball npm pack makes, installed into an empty project without the
# registry (it has no runtime dependency), imported by its name.
SCRATCH="$(mktemp -d -t attest-tsclient-pack.XXXXXX)"
trap 'rm -rf "$SCRATCH"' EXIT
TARBALL="$(npm pack --silent --pack-destination "$SCRATCH" | tail -n 1)"
[[ -f "$SCRATCH/$TARBALL" ]] || die "npm pack made no tarball (said: $TARBALL)"
listing="$(tar -tzf "$SCRATCH/$TARBALL")"
for f in package/package.json package/README.md package/dist/index.js package/dist/index.d.ts; do
    grep -qx "$f" <<<"$listing" || die "$TARBALL lacks $f"
done
if grep -E '^package/(src|test|build|node_modules)/' <<<"$listing" >/dev/null; then
    die "$TARBALL holds files that are not the package's: $(grep -E '^package/(src|test|build|node_modules)/' <<<"$listing" | head -5)"
fi
log "packed $TARBALL ($(wc -l <<<"$listing") files)"

mkdir "$SCRATCH/consumer"
cd "$SCRATCH/consumer"
cat >package.json <<'EOF'
{ "name": "attest-client-consumer", "version": "0.0.0", "private": true, "type": "module" }
EOF
npm install --offline --no-progress --loglevel=error "$SCRATCH/$TARBALL"
cat >check.mjs <<'EOF'
import * as attest from "attest-client";
import pkg from "attest-client/package.json" with { type: "json" };

const expected = ["Client", "AttestError", "InvalidArgumentError", "AuthenticationError", "PermissionDeniedError",
  "NotFoundError", "ConflictError", "RateLimitedError", "UnavailableError", "DeadlineExceededError",
  "parseRetryAfter", "retryPolicy", "sseEvents", "liveDocuments", "DEFAULT_SERVER", "VERSION"];
const missing = expected.filter((name) => !(name in attest));
if (missing.length) throw new Error(`attest-client lacks ${missing.join(", ")}`);
if (attest.VERSION !== pkg.version) throw new Error(`VERSION ${attest.VERSION} is not package.json's ${pkg.version}`);
const c = new attest.Client({ baseUrl: "http://127.0.0.1:7700" });
if (!(new attest.NotFoundError("x", { code: "NOT_FOUND", status: 404 }) instanceof attest.AttestError)) {
  throw new Error("NotFoundError is not an AttestError");
}
console.log(`attest-client ${attest.VERSION} imports from the tarball: ${Object.keys(attest).length} exports, ${c.baseUrl}`);
EOF
node check.mjs
# The types a TypeScript user gets (dist/*.d.ts through `exports`), checked with the client's own tsc.
cat >check.ts <<'EOF'
import { Client, NotFoundError, type AskEvent, type Hit, type UploadReport } from "attest-client";

async function use(c: Client): Promise<[Hit[], UploadReport, AskEvent[]]> {
  const hits = (await c.search("docs", "q", { k: 3, lanes: "bm25", filter: { lang: "en" }, tenant: "acme" })).hits;
  const report = await c.uploadDocuments("docs", [{ id: 1, text: "t" }], { onProgress: (p) => p.done });
  const events: AskEvent[] = [];
  for await (const e of c.askStream("docs", "q")) events.push(e);
  return [hits, report, events];
}
export const checked: [typeof use, typeof NotFoundError] = [use, NotFoundError];
EOF
# No @types/node: the declarations must stand on the standard and DOM libraries alone.
cat >tsconfig.json <<'EOF'
{
  "compilerOptions": {
    "strict": true, "noEmit": true, "module": "nodenext", "moduleResolution": "nodenext", "target": "es2022",
    "lib": ["es2023", "dom"], "types": [], "skipLibCheck": false
  },
  "files": ["check.ts"]
}
EOF
"$CLIENT/node_modules/.bin/tsc" -p tsconfig.json || die "the packed types do not type-check for a user"
log "the packed package installs, imports and type-checks"
