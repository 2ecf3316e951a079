#!/usr/bin/env bash
# A whole Attest cluster on this machine, on 127.0.0.1: 3 meta nodes (Raft), 3 shard nodes (ATTEST_CLUSTER_SHARDS),
# 1 router and 1 answer tier (ATTEST_CLUSTER_ANSWER=0: none), each its own process.
#
#   scripts/local-cluster.sh up DIR     start it; data, logs and pids under DIR
#   scripts/local-cluster.sh down DIR   stop everything `up` started there
#
# Writes DIR/router.addr (the router's HTTP address), DIR/meta.addr (one meta address; DIR/meta.addrs has all),
# DIR/answer.addr, and DIR/pids/<role>-<id>.pid for each process (meta ids as `attest status` reports them).
# Ports: ATTEST_CLUSTER_PORT (default 17600) + fixed offsets. Binary: $ATTEST_BIN, else the debug build.
# ATTEST_CLUSTER_SHARDS (default 3, at most 89): shard nodes shard-1..N on ports +11..; `up` waits for N alive.
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
if [[ -z "$cmd" || -z "$dir" ]]; then
  echo "usage: $0 up|down DIR" >&2
  exit 2
fi

root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${ATTEST_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}/debug/attest}"
base="${ATTEST_CLUSTER_PORT:-17600}"
shards="${ATTEST_CLUSTER_SHARDS:-3}"
if ! [[ "$shards" =~ ^[0-9]+$ ]] || ((shards < 1 || shards > 89)); then
  echo "local-cluster: ATTEST_CLUSTER_SHARDS must be 1..89 (got $shards)" >&2
  exit 2
fi

meta_port() { echo $((base + $1)); }           # meta 1..3: base+1..3
shard_port() { echo $((base + 10 + $1)); }     # shard 1..N: base+11..base+10+N
router_http=$((base + 100))
router_grpc=$((base + 101))
answer_http=$((base + 150))

stop_all() {
  local pids_dir="$dir/pids"
  [[ -d "$pids_dir" ]] || return 0
  # Front to back, so nothing is left calling a stopped node: answer, router, shards, meta.
  for pattern in 'answer-*' 'router-*' 'shard-*' 'meta-*'; do
    for f in "$pids_dir"/$pattern.pid; do
      [[ -e "$f" ]] || continue
      local pid
      pid="$(cat "$f")"
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$f"
    done
  done
}

wait_http() { # url seconds
  local url="$1" limit="$2"
  for _ in $(seq 1 $((limit * 5))); do
    curl -fsS -o /dev/null "$url" 2>/dev/null && return 0
    sleep 0.2
  done
  echo "local-cluster: $url did not answer within ${limit}s" >&2
  return 1
}

case "$cmd" in
  up)
    [[ -x "$bin" ]] || { echo "local-cluster: no attest binary at $bin (build it, or set ATTEST_BIN)" >&2; exit 1; }
    mkdir -p "$dir/pids" "$dir/logs"
    dir="$(cd "$dir" && pwd)"
    export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
    peers="1=http://127.0.0.1:$(meta_port 1),2=http://127.0.0.1:$(meta_port 2),3=http://127.0.0.1:$(meta_port 3)"
    metas="http://127.0.0.1:$(meta_port 1),http://127.0.0.1:$(meta_port 2),http://127.0.0.1:$(meta_port 3)"
    for i in 1 2 3; do
      "$bin" serve --insecure --role meta --meta-id "$i" --meta-peers "$peers" --grpc "127.0.0.1:$(meta_port "$i")" \
        --data-dir "$dir/meta-$i" --log-level "${ATTEST_LOG:-info,tantivy=warn}" \
        >"$dir/logs/meta-$i.log" 2>&1 &
      echo $! >"$dir/pids/meta-$i.pid"
    done
    for i in $(seq 1 "$shards"); do
      "$bin" serve --insecure --role shard --meta "$metas" --grpc "127.0.0.1:$(shard_port "$i")" --node-name "shard-$i" \
        --data-dir "$dir/shard-$i" --log-level "${ATTEST_LOG:-info,tantivy=warn}" \
        >"$dir/logs/shard-$i.log" 2>&1 &
      echo $! >"$dir/pids/shard-$i.pid"
    done
    "$bin" serve --insecure --role router --meta "$metas" --http "127.0.0.1:$router_http" --grpc "127.0.0.1:$router_grpc" \
      --data-dir "$dir/router" --log-level "${ATTEST_LOG:-info,tantivy=warn}" >"$dir/logs/router-1.log" 2>&1 &
    echo $! >"$dir/pids/router-1.pid"
    if [[ "${ATTEST_CLUSTER_ANSWER:-1}" == 1 ]]; then
      # --meta: the answer tier reads the collections' thresholds and, with ATTEST_ADMIN_KEY, the minted keys there.
      "$bin" serve --insecure --role answer --router "http://127.0.0.1:$router_grpc" --meta "$metas" \
        --http "127.0.0.1:$answer_http" \
        --data-dir "$dir/answer" --log-level "${ATTEST_LOG:-info,tantivy=warn}" >"$dir/logs/answer-1.log" 2>&1 &
      echo $! >"$dir/pids/answer-1.pid"
    fi
    echo "http://127.0.0.1:$router_http" >"$dir/router.addr"
    echo "http://127.0.0.1:$(meta_port 1)" >"$dir/meta.addr"
    echo "$metas" >"$dir/meta.addrs"
    echo "http://127.0.0.1:$answer_http" >"$dir/answer.addr"
    if ! wait_http "http://127.0.0.1:$router_http/readyz" 120; then
      # A process that exited with an error prints it first and a backtrace after: show both ends.
      grep -H -m 3 -E '^Error|panicked at' "$dir"/logs/*.log >&2 || true
      tail -n 20 "$dir"/logs/*.log >&2 || true
      stop_all
      exit 1
    fi
    # Every shard node ($shards) registered and alive before we say the cluster is up.
    for _ in $(seq 1 300); do
      alive="$("$bin" status --meta "$metas" --json 2>/dev/null |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(1 for n in d["nodes"] if n["role"]=="shard" and n["alive"]))' 2>/dev/null || echo 0)"
      [[ "$alive" == "$shards" ]] && break
      sleep 0.2
    done
    if [[ "${ATTEST_CLUSTER_ANSWER:-1}" == 1 ]]; then
      wait_http "http://127.0.0.1:$answer_http/healthz" 60 || true
    fi
    # A process that exited (a port taken, a bad flag) fails `up` rather than leaving a cluster short of a node.
    for pidfile in "$dir"/pids/*.pid; do
      if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        role="$(basename "$pidfile" .pid)"
        echo "local-cluster: $role exited:" >&2
        tail -n 5 "$dir/logs/$role.log" >&2 || true
        stop_all
        exit 1
      fi
    done
    echo "local cluster up: router $(cat "$dir/router.addr"), meta $metas (logs in $dir/logs)"
    ;;
  down)
    stop_all
    echo "local cluster down ($dir)"
    ;;
  *)
    echo "usage: $0 up|down DIR" >&2
    exit 2
    ;;
esac
