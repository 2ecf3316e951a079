#!/usr/bin/env bash
# Trains the answer tier's learned reranker reproducibly (`attest-lab train reranker`):
#   1. starts `attest dev` on a data directory that is kept afterwards (default $HOME/data/squad-dev-store),
#   2. ingests the squad-dev corpus into the collection `squad` (2 shards) unless it is already complete there
#      (1,726 paragraphs → 1,863 chunks embedded with the local MiniLM: minutes on the 2-core CPU),
#   3. runs the training with candidates from that router's gRPC API (hybrid search, k = 100),
#   4. stops the server. The data directory stays, so the ingested collection can be reused for evaluation.
#
# Usage: scripts/train-reranker.sh [extra `attest-lab train reranker` flags, e.g. --limit 1500 --json]
# Environment: ATTEST_BIN (default $CARGO_TARGET_DIR/debug/attest; `attest-lab` is taken from beside it), SQUAD_DIR (default data/squad-dev),
#   STORE_DIR, TRAIN_HTTP (127.0.0.1:7710), TRAIN_GRPC (127.0.0.1:7711), OUT (crates/attest-models/models/reranker.json).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${ATTEST_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}/debug/attest}
LAB="$(dirname "$BIN")/attest-lab"
SQUAD=${SQUAD_DIR:-data/squad-dev}
STORE=${STORE_DIR:-$HOME/data/squad-dev-store}
HTTP=${TRAIN_HTTP:-127.0.0.1:7710}
GRPC=${TRAIN_GRPC:-127.0.0.1:7711}
OUT=${OUT:-crates/attest-models/models/reranker.json}
COLLECTION=squad
export ATTEST_SERVER="http://$HTTP"
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

[ -x "$BIN" ] && [ -x "$LAB" ] || { echo "no attest and attest-lab binaries at $BIN and $LAB (cargo build --workspace, or set ATTEST_BIN)" >&2; exit 1; }
[ -f "$SQUAD/corpus.jsonl" ] || { echo "no $SQUAD/corpus.jsonl" >&2; exit 1; }
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

# Documents the collection holds now (0 when it does not exist).
live_documents() {
  curl -sf "$ATTEST_SERVER/v1/collections/$COLLECTION/stats" 2>/dev/null |
    python3 -c 'import json,sys; print(sum(s["live_documents"] for s in json.load(sys.stdin)["shards"]))' 2>/dev/null ||
    echo 0
}
want=$(grep -c . "$SQUAD/corpus.jsonl")
have=$(live_documents)
if [ "$have" -ge "$want" ]; then
  echo "collection $COLLECTION already holds $have of $want documents: not ingesting again"
else
  if [ "$have" -gt 0 ] || curl -sf "$ATTEST_SERVER/v1/collections/$COLLECTION" >/dev/null 2>&1; then
    echo "collection $COLLECTION holds $have of $want documents: dropping it and ingesting again"
    "$BIN" collection drop "$COLLECTION"
  fi
  "$BIN" collection create "$COLLECTION" --shards 2
  start=$(date +%s)
  "$BIN" ingest --collection "$COLLECTION" "$SQUAD/corpus.jsonl"
  echo "ingested in $(( $(date +%s) - start )) s; now $(live_documents) documents"
fi

echo "\$ $LAB train reranker --data $SQUAD --router http://$GRPC --collection $COLLECTION --out $OUT $*"
"$LAB" train reranker --data "$SQUAD" --router "http://$GRPC" --collection "$COLLECTION" --out "$OUT" "$@"
echo "server log: $LOG; data directory kept: $STORE"
