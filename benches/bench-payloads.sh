#!/usr/bin/env bash
# What an ask costs on the wire between router and shards (issue 18): every EVERY-th question of DATA through ask
# against `attest dev`, the router fetching the payloads of the hits it returns and each hop's searches sent as one
# `SearchBatch`. (The baselines docs/BENCHMARKS.md compares against, payloads in the fan-out and one `Search` per
# query, went with `router.payload_in_fanout` and `answer.batch_searches`; the commit named there has them.)
#
# Usage: benches/bench-payloads.sh [DATA (default data/squad-dev)] [EVERY (default 5)]
# Prints asks, bytes from the shards per ask (router_replica_response_bytes_total), calls to shard replicas per ask
# (router_replica_call_seconds_count; search, search_batch, fetch_chunks) and the ask p50/p95 from
# scripts/eval-ask.py.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DATA="${1:-$REPO/data/squad-dev}"
EVERY="${2:-5}"
BIN="${ATTEST_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}/debug/attest}"
STORE="${BENCH_STORE:-$HOME/.cache/attest-bench-payloads}"
HTTP=127.0.0.1:7720
GRPC=127.0.0.1:7721
COLLECTION=squad
export ATTEST_SERVER="http://$HTTP" OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

[ -x "$BIN" ] || { echo "no attest binary at $BIN (make build, or set ATTEST_BIN)" >&2; exit 1; }
[ -f "$DATA/corpus.jsonl" ] || { echo "no $DATA/corpus.jsonl" >&2; exit 1; }
mkdir -p "$STORE"
pid=
stop() { [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }; pid=; }
trap stop EXIT

start() {  # attest dev over $STORE, waited for
  "$BIN" dev --data-dir "$STORE" --http "$HTTP" --grpc "$GRPC" 2>"$STORE.log" &
  pid=$!
  for _ in $(seq 1 240); do
    curl -sf "$ATTEST_SERVER/readyz" >/dev/null 2>&1 && return
    kill -0 "$pid" 2>/dev/null || { echo "attest dev exited; log:" >&2; tail -20 "$STORE.log" >&2; exit 1; }
    sleep 0.5
  done
  echo "attest dev not ready" >&2
  exit 1
}

wire() {  # bytes the shards sent so far and calls made to them (search, search_batch, fetch_chunks)
  curl -sf "$ATTEST_SERVER/metrics" | awk '/call="(search|search_batch|fetch_chunks)"/ {
    if ($0 ~ /^router_replica_response_bytes_total\{/) b += $NF; if ($0 ~ /^router_replica_call_seconds_count\{/) c += $NF }
    END {printf "%.0f %.0f\n", b, c}'
}

start
want=$(grep -c . "$DATA/corpus.jsonl")
have=$(curl -sf "$ATTEST_SERVER/v1/collections/$COLLECTION/stats" 2>/dev/null |
  python3 -c 'import json,sys; print(sum(s["live_documents"] for s in json.load(sys.stdin)["shards"]))' 2>/dev/null || echo 0)
if [ "$have" -lt "$want" ]; then
  curl -sf "$ATTEST_SERVER/v1/collections/$COLLECTION" >/dev/null 2>&1 && "$BIN" collection drop "$COLLECTION"
  "$BIN" collection create "$COLLECTION" --shards 2
  "$BIN" ingest --collection "$COLLECTION" "$DATA/corpus.jsonl"
fi
stop

start
before=$(wire)
"$REPO/scripts/eval-ask.py" --server "$ATTEST_SERVER" --collection "$COLLECTION" --data "$DATA" \
  --every "$EVERY" --json "$STORE.json" >"$STORE.out"
after=$(wire)
stop
result=$(python3 - "$STORE.json" $before $after <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
asks = report["answers"]["questions"] if "answers" in report else report["questions"]
lat = report.get("latency_ms", {}).get("total", {})
b0, c0, b1, c1 = map(int, sys.argv[2:6])
print(asks, (b1 - b0) / asks, (c1 - c0) / asks, lat.get("p50", 0), lat.get("p95", 0))
EOF
)
read -r asks per_ask calls p50 p95 <<<"$result"
printf 'asks %s  bytes from the shards per ask %.0f  shard calls per ask %.1f  ask p50 %.0f ms  p95 %.0f ms\n' \
  "$asks" "$per_ask" "$calls" "$p50" "$p95"
