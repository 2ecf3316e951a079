#!/usr/bin/env bash
# The cluster at scale of docs/BENCHMARKS.md (the cluster table; docs/bench/history.md "The cluster at scale through the router", issue 43): a local cluster
# (scripts/local-cluster.sh: 3 meta, 3 shard nodes, 1 router) with one collection of 6 shards × replication 2,
# the vectors ingested through the router with their own vectors, then serving, one shard process SIGKILLed,
# writes while it is down, its restart and catch-up; the cost model's prediction first and the single engine's
# sustained ingest of one replica's rows alongside (benches/cluster_scale/main.rs says what each step measures).
#
#   benches/cluster-scale.sh [VECTORS] [extra cluster_scale flags...]     # default 10000000
#
# At 10M: ~45 GB of disk under ~/.cache/attest-cluster-scale (deleted at the end; --dir DIR keeps it), and
# hours on 2 cores. JSON lines go to docs/bench/cluster-scale-<VECTORS>.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}"
# One BLAS thread per process: six cluster processes share two cores (the baseline engine gets both itself).
export OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
export ATTEST_LOG="${ATTEST_LOG:-warn}"
# The log's copies of sealed vectors: the default (`auto`) drops them at replication 2 (a damaged segment is copied
# back from the other replica; crates/attest-index/src/sealed_vectors.rs). Set true to measure them kept.
export ATTEST__ENGINE__KEEP_SEALED_VECTORS_IN_LOG="${ATTEST__ENGINE__KEEP_SEALED_VECTORS_IN_LOG:-auto}"
# Vectors supplied by the caller, texts unique by construction: no near-duplicate check (its keys are another
# 1.5 KB per replica row; crates/attest-router/src/config.rs `check_near_duplicates`). Set true to measure it.
export ATTEST__ROUTER__CHECK_NEAR_DUPLICATES="${ATTEST__ROUTER__CHECK_NEAR_DUPLICATES:-false}"
# The SQ8 copy's scores final (no random read of a full vector per candidate: at 10M the full vectors, 15 GB, do not
# fit in the page cache beside the rest on a 24 GiB machine; docs/decisions/cluster-10m-nprobe16.md).
export ATTEST__ENGINE__EXACT_REFINE="${ATTEST__ENGINE__EXACT_REFINE:-0}"
vectors="${1:-10000000}"
shift || true
cargo build --workspace --all-targets
out="docs/bench/cluster-scale-$vectors.jsonl"
"$CARGO_TARGET_DIR/debug/examples/cluster_scale" --vectors "$vectors" --json "$out" "$@"
echo "wrote $out"
