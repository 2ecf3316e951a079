#!/usr/bin/env bash
# The local embedder on every core (issue 18): `attest ingest` of a corpus into a fresh `attest dev` three times,
# one after the other in the same run — the settings before issue 18 (candle, batches of 32 on one thread), candle
# with small length-sorted batches over two threads, and the defaults now (ONNX Runtime, the same batches and
# threads) — and prints each time and its ratio to the first. With QUALITY_DATA set to a BEIR-layout data set,
# the dense lane's nDCG@10 on it (every 5th answerable question, scripts/eval-retrieval.py) under candle and under
# ONNX Runtime, in fresh instances of the same run, and their difference.
#
# Usage: [QUALITY_DATA=data/squad-dev] benches/bench-embed-ingest.sh [CORPUS (default data/squad-sample/corpus.jsonl)]
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

start_dev() {  # start_dev NAME ENV...: a fresh attest dev with ENV, ready
  local name="$1"
  shift
  env "$@" "$BIN" dev --data-dir "$work/$name" --http "$HTTP" --grpc 127.0.0.1:7741 2>"$work/$name.log" >/dev/null &
  pid=$!
  for _ in $(seq 1 240); do
    curl -sf "$ATTEST_SERVER/readyz" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { tail -20 "$work/$name.log" >&2; exit 1; }
    sleep 0.5
  done
}

ingest_seconds() {  # ingest_seconds NAME ENV...: a fresh attest dev with ENV, the corpus ingested, seconds taken
  start_dev "$@"
  local name="$1" started ended
  started=$(date +%s.%N)
  "$BIN" ingest --create --collection bench "$CORPUS" >/dev/null 2>&1 || { tail -20 "$work/$name.log" >&2; exit 1; }
  ended=$(date +%s.%N)
  stop
  python3 -c "print(f'{$ended - $started:.1f}')"
}

before=$(ingest_seconds before ATTEST__EMBEDDER__LOCAL__RUNTIME=candle ATTEST__EMBEDDER__LOCAL__BATCH_SIZE=32 \
  ATTEST__EMBEDDER__LOCAL__THREADS=1)
candle=$(ingest_seconds candle ATTEST__EMBEDDER__LOCAL__RUNTIME=candle)
now=$(ingest_seconds now)
ratio() { python3 -c "print(f'{$1 / $before:.3f}')"; }
echo "ingest of $(grep -c . "$CORPUS") documents: candle 32 x 1 (before) ${before} s; candle 4 x 2 ${candle} s" \
  "(ratio $(ratio "$candle")); defaults now (onnx 4 x 2) ${now} s (ratio $(ratio "$now"))"

if [ -n "${QUALITY_DATA:-}" ]; then
  dense_ndcg() {  # dense_ndcg NAME ENV...: the dense lane's nDCG@10 on QUALITY_DATA in a fresh attest dev with ENV
    start_dev "$@"
    python3 "$REPO/scripts/eval-retrieval.py" --server "$ATTEST_SERVER" --data "$QUALITY_DATA" --every 5 \
      --lanes dense 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["retrieval"]["dense"]["ndcg_at_10"])'
    stop
  }
  ndcg_candle=$(dense_ndcg quality-candle ATTEST__EMBEDDER__LOCAL__RUNTIME=candle)
  ndcg_onnx=$(dense_ndcg quality-onnx)
  echo "dense nDCG@10 on $QUALITY_DATA (every 5th answerable question): candle $ndcg_candle, onnx $ndcg_onnx" \
    "(difference $(python3 -c "print(f'{$ndcg_onnx - $ndcg_candle:+.4f}')"))"
fi
