#!/usr/bin/env bash
# The scale runs of docs/BENCHMARKS.md (the dense index table; docs/bench/history.md "Dense index at scale"): `attest-lab bench` on 100k … 10M synthetic 384-d
# vectors and on Fashion-MNIST, then the cost model fitted to them with its plots. Writes docs/bench/.
#
#   benches/bench-scale.sh [SIZES...]      # default: 100000 300000 1000000 3000000 10000000
#
# A release build (`cargo build --release -p attest-lab`); the 10M run needs ~17 GB of free disk under
# BENCH_DIR (default ~/.cache/attest-bench) and ~20 min on 2 cores. OpenBLAS gets both cores for k-means
# (the binary defaults to one thread, which the test suite needs).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}"
cargo build --release -p attest-lab
LAB="$CARGO_TARGET_DIR/release/attest-lab"
BENCH_DIR="${BENCH_DIR:-$HOME/.cache/attest-bench}"
OUT=docs/bench
mkdir -p "$OUT" "$BENCH_DIR"
export OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE

sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100000 300000 1000000 3000000 10000000)
runs=()
for n in "${sizes[@]}"; do
  name="mixture-$(numfmt --to=si "$n" | tr 'A-Z' 'a-z')"
  "$LAB" bench --vectors "$n" --queries 1000 --exact-queries 10 --sweep 8,16,32 --sweep-overfetch 8,16 \
    --sweep-compact 32,64 \
    --dir "$BENCH_DIR/$name" --json "$OUT/$name.json" --log-level warn
  rm -rf "${BENCH_DIR:?}/$name"
  runs+=("$OUT/$name.json")
done
"$LAB" bench --fashion-mnist --queries 1000 --sweep-overfetch 4,16 --dir "$BENCH_DIR/fashion" \
  --json "$OUT/fashion-mnist.json" --log-level warn
rm -rf "${BENCH_DIR:?}/fashion"
"$LAB" bench --fit "${runs[@]}" "$OUT/fashion-mnist.json" --plots "$OUT" --json "$OUT/cost-model.json"
