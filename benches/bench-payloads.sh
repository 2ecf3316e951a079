#!/usr/bin/env bash
# Fetch only what is returned (issue 18): ask latency and bytes the shards send per ask, with the router fetching
# the payloads of the hits it returns (the default) against shards sending every candidate's payload with the
# fan-out (`router.payload_in_fanout`, the behaviour before), over the same data directory, one after the other.
#
# Usage: benches/bench-payloads.sh [DATA (default ../shared/data/squad-dev)] [EVERY (default 5)]
# Prints, per mode, asks, bytes from the shards per ask (router_replica_response_bytes_total, search +
# fetch_chunks) and the ask p50/p95 from scripts/eval-ask.py, then the ratios late / fan-out.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DATA="${1:-$REPO/../shared/data/squad-dev}"
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

start() {  # start ENV...: attest dev over $STORE with these variables, waited for
  env "$@" "$BIN" dev --data-dir "$STORE" --http "$HTTP" --grpc "$GRPC" 2>"$STORE.log" &
  pid=$!
  for _ in $(seq 1 240); do
    curl -sf "$ATTEST_SERVER/readyz" >/dev/null 2>&1 && return
    kill -0 "$pid" 2>/dev/null || { echo "attest dev exited; log:" >&2; tail -20 "$STORE.log" >&2; exit 1; }
    sleep 0.5
  done
  echo "attest dev not ready" >&2
  exit 1
}

bytes() {  # bytes the shards sent so far (search + fetch_chunks)
  curl -sf "$ATTEST_SERVER/metrics" | awk '/^router_replica_response_bytes_total\{/ && /call="(search|fetch_chunks)"/ {s += $NF} END {printf "%.0f\n", s}'
}

start ATTEST__ROUTER__PAYLOAD_IN_FANOUT=false
want=$(grep -c . "$DATA/corpus.jsonl")
have=$(curl -sf "$ATTEST_SERVER/v1/collections/$COLLECTION/stats" 2>/dev/null |
  python3 -c 'import json,sys; print(sum(s["live_documents"] for s in json.load(sys.stdin)["shards"]))' 2>/dev/null || echo 0)
if [ "$have" -lt "$want" ]; then
  curl -sf "$ATTEST_SERVER/v1/collections/$COLLECTION" >/dev/null 2>&1 && "$BIN" collection drop "$COLLECTION"
  "$BIN" collection create "$COLLECTION" --shards 2
  "$BIN" ingest --collection "$COLLECTION" "$DATA/corpus.jsonl"
fi
stop

declare -A RESULT
for mode in late fanout; do
  flag=false
  [ "$mode" = fanout ] && flag=true
  start ATTEST__ROUTER__PAYLOAD_IN_FANOUT=$flag
  before=$(bytes)
  "$REPO/scripts/eval-ask.py" --server "$ATTEST_SERVER" --collection "$COLLECTION" --data "$DATA" \
    --every "$EVERY" --json "$STORE.$mode.json" >"$STORE.$mode.out"
  after=$(bytes)
  stop
  RESULT[$mode]=$(python3 - "$STORE.$mode.json" "$before" "$after" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
asks = report["answers"]["questions"] if "answers" in report else report["questions"]
lat = report.get("latency_ms", {}).get("total", {})
print(asks, (int(sys.argv[3]) - int(sys.argv[2])) / asks, lat.get("p50", 0), lat.get("p95", 0))
EOF
  )
  read -r asks per_ask p50 p95 <<<"${RESULT[$mode]}"
  printf '%-7s asks %s  bytes from the shards per ask %.0f  ask p50 %.0f ms  p95 %.0f ms\n' "$mode" "$asks" "$per_ask" "$p50" "$p95"
done
read -r _ late_bytes late_p50 late_p95 <<<"${RESULT[late]}"
read -r _ fan_bytes fan_p50 fan_p95 <<<"${RESULT[fanout]}"
python3 -c "print(f'late / fan-out: bytes per ask {$late_bytes/$fan_bytes:.3f}, ask p50 {$late_p50/$fan_p50:.3f}, p95 {$late_p95/$fan_p95:.3f}')"
