#!/usr/bin/env bash
# The cluster figures of docs/BENCHMARKS.md ("Cluster"), on real local clusters (scripts/local-cluster.sh):
#   1. router overhead with 2 and 4 shard processes (cluster_bench overhead; hybrid and BM25-only);
#   2. QPS and failed queries before and after one shard process is SIGKILLed (replication 2 over 3 shards),
#      then 3 meta leader kills: time to the first metadata write through the router (cluster_bench resilience);
#   3. the leader failover printed by the real-process cluster test (cargo test -p attest-tests --test integration cluster::);
#   4. RRF merge time for 8 shards × 1,000 candidates per lane (criterion: cargo bench --bench fuse).
#
#   benches/bench-cluster.sh            # everything (~10 min on 2 cores once built)
#
# Environment: BENCH_SHARDS ("2 4"), BENCH_THREADS (4), BENCH_SECONDS (10), BENCH_DOCS (3000), BENCH_ROUNDS (2,
# i.e. 300 timed queries per case), BENCH_PORT (17600), BENCH_SKIP_TEST=1 (skip 3), BENCH_SKIP_FUSE=1 (skip 4),
# FUSE_PROFILE (bench: `cargo bench`'s own profile, release settings; `dev`: the test profile),
# BENCH_OUT (JSON lines of 1 and 2; default under the work directory), BENCH_KEEP=1 (keep data and logs),
# BENCH_ATTEMPTS (2): a case that fails (e.g. a shard process stops answering) is reported, its logs kept, and
# run again once on a fresh cluster; the summary lists every failed attempt.
# Always builds with --workspace (another package selection changes feature unification and rebuilds the
# native libraries). Every process a cluster started is stopped at the end, also on failure or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}"
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"

shards_list="${BENCH_SHARDS:-2 4}"
threads="${BENCH_THREADS:-4}"
seconds="${BENCH_SECONDS:-10}"
docs="${BENCH_DOCS:-3000}"
rounds="${BENCH_ROUNDS:-2}"
port="${BENCH_PORT:-17600}"
fuse_profile="${FUSE_PROFILE:-bench}"
attempts="${BENCH_ATTEMPTS:-2}"

work="$(mktemp -d "${TMPDIR:-/tmp}/attest-bench-cluster.XXXXXX")"
out="${BENCH_OUT:-$work/cluster-bench.jsonl}"
clusters=()
failures=()
cleanup() {
  local d
  for d in "${clusters[@]}"; do
    scripts/local-cluster.sh down "$d" >/dev/null 2>&1 || true
  done
  if [[ "${BENCH_KEEP:-0}" == 1 || ${#failures[@]} -gt 0 ]]; then
    echo "bench-cluster: data and logs kept in $work" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== build (dev profile: opt-level 1 for the workspace, 3 for dependencies)" >&2
cargo build --workspace --all-targets
export ATTEST_BIN="$CARGO_TARGET_DIR/debug/attest"
bench="$CARGO_TARGET_DIR/debug/examples/cluster_bench"
: >"$out"

# run_case NAME PORT ARGS...: cluster_bench ARGS on a fresh cluster under $work/NAME-tryN; its JSON lines go to
# $out. A failed attempt is reported (its logs stay) and the case is run once more (BENCH_ATTEMPTS).
run_case() {
  local name="$1" p="$2" attempt d
  shift 2
  for attempt in $(seq 1 "$attempts"); do
    d="$work/$name-try$attempt"
    clusters+=("$d")
    if "$bench" "$@" --port "$p" --dir "$d" >"$d.jsonl"; then
      tee -a "$out" <"$d.jsonl"
      scripts/local-cluster.sh down "$d" >/dev/null
      return 0
    fi
    echo "bench-cluster: $name failed (attempt $attempt); logs in $d/logs" >&2
    failures+=("$name attempt $attempt: $d/logs")
    scripts/local-cluster.sh down "$d" >/dev/null || true
  done
  return 1
}

n_case=0
for n in $shards_list; do
  echo "== router overhead, $n shard processes" >&2
  run_case "overhead-$n" $((port + 200 * n_case)) overhead --shards "$n" --rounds "$rounds" --docs "$docs"
  n_case=$((n_case + 1))
done

echo "== QPS with a shard process killed; meta leader failover" >&2
run_case resilience $((port + 200 * n_case)) resilience --threads "$threads" --seconds "$seconds" --failovers 3 \
  --docs "$docs"

failover_test=""
if [[ "${BENCH_SKIP_TEST:-0}" != 1 ]]; then
  echo "== real-process cluster test (prints the leader failover)" >&2
  failover_test="$(cargo test -p attest-tests --test integration cluster:: -- --nocapture 2>&1 | tee "$work/cluster-test.log" |
    grep -E "meta leader failover|^load:|test result" || true)"
  echo "$failover_test" >&2
fi

fuse_out=""
if [[ "${BENCH_SKIP_FUSE:-0}" != 1 ]]; then
  echo "== RRF merge (criterion, profile $fuse_profile)" >&2
  if [[ "$fuse_profile" == bench ]]; then
    cargo bench --workspace --bench fuse 2>&1 | tee "$work/fuse.log" >&2
  else
    cargo bench --workspace --bench fuse --profile "$fuse_profile" 2>&1 | tee "$work/fuse.log" >&2
  fi
  fuse_out="$(grep -E "^fuse/" "$work/fuse.log" || true)"
fi

echo
echo "== cluster figures (machine: $(nproc) cores; cluster roles: dev profile, $ATTEST_BIN)"
python3 - "$out" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
for r in rows:
    b = r["bench"]
    if b == "router_overhead":
        print(f"router overhead  {r['shard_processes']} shard processes, {r['lanes']:6}: routed p50 {r['routed_p50_ms']:.3f} ms"
              f" − slowest shard p50 {r['slowest_shard_p50_ms']:.3f} ms = {r['overhead_p50_ms']:.3f} ms"
              f" (paired median {r['overhead_median_of_paired_diffs_ms']:.3f} ms; {r['queries_timed']} queries,"
              f" top-10 agreement {r['top10_agreement']})")
    elif b == "replica_down_qps":
        print(f"QPS {r['phase']:25} {r['client_threads']} clients {r['seconds']} s: {r['qps']:.1f} QPS,"
              f" failed {r['failed']}, degraded {r['degraded']}, p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms")
    elif b == "meta_failover":
        print(f"meta failover round {r['round']}: leader {r['killed_leader']} killed → first write after"
              f" {r['first_write_after_kill_ms']:.0f} ms (new leader {r['new_leader']}; write p50 with all up"
              f" {r['baseline_write_p50_ms']:.1f} ms)")
EOF
[[ -n "$failover_test" ]] && echo "cluster test: $(echo "$failover_test" | grep "meta leader failover" || echo "$failover_test")"
[[ -n "$fuse_out" ]] && echo "$fuse_out"
for f in "${failures[@]}"; do
  echo "FAILED ATTEMPT (rerun on a fresh cluster): $f"
done
echo "(JSON lines: $out)"
