#!/usr/bin/env bash
# Trains the answer tier's learned reranker reproducibly (`attest-lab train reranker`):
#   1. starts `attest dev` on a data directory that is kept afterwards (default $HOME/data/squad-dev-store),
#   2. ingests each training set's corpus into its own collection (2 shards) unless it is already complete there
#      (squad-dev: 1,726 paragraphs → `squad`; with SETS naming it, shift-reddit: 1,730 posts → `reddit`;
#      embedded with the default local embedder: minutes each on the 2-core CPU),
#   3. runs the training with candidates from that router's gRPC API (hybrid search, k = 100) on the held-in
#      articles of every set together (article number % 5 != 0), reporting each set's held-out articles,
#   4. stops the server. The data directory stays, so the ingested collections can be reused for evaluation.
#
# Usage: scripts/train-reranker.sh [extra `attest-lab train reranker` flags, e.g. --limit 1500 --json]
# Environment: ATTEST_BIN (default $CARGO_TARGET_DIR/debug/attest; `attest-lab` is taken from beside it),
#   SETS (default "data/squad-dev:squad", what the committed model was trained on; directory:collection pairs,
#   e.g. "data/squad-dev:squad data/shift-reddit:reddit", the first the model file's `heldout` report), STORE_DIR, TRAIN_HTTP (127.0.0.1:7710), TRAIN_GRPC (127.0.0.1:7711),
#   OUT (crates/attest-models/models/reranker.json).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${ATTEST_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}/debug/attest}
LAB="$(dirname "$BIN")/attest-lab"
SETS=${SETS:-data/squad-dev:squad}
STORE=${STORE_DIR:-$HOME/data/squad-dev-store}
HTTP=${TRAIN_HTTP:-127.0.0.1:7710}
GRPC=${TRAIN_GRPC:-127.0.0.1:7711}
OUT=${OUT:-crates/attest-models/models/reranker.json}
export ATTEST_SERVER="http://$HTTP"
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

[ -x "$BIN" ] && [ -x "$LAB" ] || { echo "no attest and attest-lab binaries at $BIN and $LAB (cargo build --workspace, or set ATTEST_BIN)" >&2; exit 1; }
for set in $SETS; do
  [ -f "${set%%:*}/corpus.jsonl" ] || { echo "no ${set%%:*}/corpus.jsonl" >&2; exit 1; }
done
if curl -sf "$ATTEST_SERVER/readyz" >/dev/null 2>&1; then
  echo "something already answers on $HTTP: stop it or set TRAIN_HTTP / TRAIN_GRPC" >&2
  exit 1
fi

mkdir -p "$STORE"
LOG="$STORE.log"
"$BIN" dev --data-dir "$STORE" --http "$HTTP" --grpc "$GRPC" 2>"$LOG" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 240); do
  curl -sf "$ATTEST_SERVER/readyz" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { echo "attest dev exited; log:" >&2; tail -20 "$LOG" >&2; exit 1; }
  sleep 0.5
done
curl -sf "$ATTEST_SERVER/readyz" >/dev/null

# Documents a collection holds now (0 when it does not exist).
live_documents() {
  curl -sf "$ATTEST_SERVER/v1/collections/$1/stats" 2>/dev/null |
    python3 -c 'import json,sys; print(sum(s["live_documents"] for s in json.load(sys.stdin)["shards"]))' 2>/dev/null ||
    echo 0
}
flags=()
for set in $SETS; do
  dir=${set%%:*} collection=${set##*:}
  flags+=(--data "$dir" --collection "$collection")
  want=$(grep -c . "$dir/corpus.jsonl")
  have=$(live_documents "$collection")
  # A finished ingest records what it left (near-duplicates skipped are not missing documents).
  marker="$STORE/$collection.ingested"
  [ -f "$marker" ] && [ "$have" -gt 0 ] && [ "$have" -eq "$(cat "$marker")" ] && want=$have
  if [ "$have" -ge "$want" ]; then
    echo "collection $collection already holds $have of $want documents: not ingesting again"
    continue
  fi
  if [ "$have" -gt 0 ] || curl -sf "$ATTEST_SERVER/v1/collections/$collection" >/dev/null 2>&1; then
    echo "collection $collection holds $have of $want documents: dropping it and ingesting again"
    "$BIN" collection drop "$collection"
  fi
  "$BIN" collection create "$collection" --shards 2
  start=$(date +%s)
  "$BIN" ingest --collection "$collection" "$dir/corpus.jsonl"
  live_documents "$collection" >"$marker"
  echo "ingested $dir in $(( $(date +%s) - start )) s; now $(cat "$marker") documents"
done

echo "\$ $LAB train reranker ${flags[*]} --router http://$GRPC --out $OUT $*"
"$LAB" train reranker "${flags[@]}" --router "http://$GRPC" --out "$OUT" "$@"
echo "server log: $LOG; data directory kept: $STORE"
