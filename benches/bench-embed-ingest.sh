#!/usr/bin/env bash
# The local embedder on every core (issue 18): `attest ingest` of a corpus into a fresh `attest dev`, with the
# embedder's defaults (small length-sorted batches over two threads) against the settings before (batches of 32
# on one thread), one after the other in the same run; prints each time and the ratio.
#
# Usage: benches/bench-embed-ingest.sh [CORPUS (default data/squad-sample/corpus.jsonl)]
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CORPUS="${1:-$REPO/data/squad-sample/corpus.jsonl}"
BIN="${ATTEST_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}/debug/attest}"
HTTP=127.0.0.1:7740
export ATTEST_SERVER="http://$HTTP" OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
work="$(mktemp -d)"
pid=
stop() { [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }; pid=; }
trap 'stop; rm -rf "$work"' EXIT

ingest_seconds() {  # ingest_seconds NAME ENV...: a fresh attest dev with ENV, the corpus ingested, seconds taken
  local name="$1"
  shift
  env "$@" "$BIN" dev --data-dir "$work/$name" --http "$HTTP" --grpc 127.0.0.1:7741 2>"$work/$name.log" >/dev/null &
  pid=$!
  for _ in $(seq 1 240); do
    curl -sf "$ATTEST_SERVER/readyz" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { tail -20 "$work/$name.log" >&2; exit 1; }
    sleep 0.5
  done
  local started ended
  started=$(date +%s.%N)
  "$BIN" ingest --create --collection bench "$CORPUS" >/dev/null 2>&1 || { tail -20 "$work/$name.log" >&2; exit 1; }
  ended=$(date +%s.%N)
  stop
  python3 -c "print(f'{$ended - $started:.1f}')"
}

before=$(ingest_seconds before ATTEST__EMBEDDER__LOCAL__BATCH_SIZE=32 ATTEST__EMBEDDER__LOCAL__THREADS=1)
now=$(ingest_seconds now)
echo "ingest of $(grep -c . "$CORPUS") documents: batches of 32 on one thread ${before} s; defaults (batch 4, 2 threads) ${now} s; ratio $(python3 -c "print(f'{$now / $before:.3f}')")"
