#!/usr/bin/env bash
# The local embedder's model under ONNX Runtime (fp32 and int8) against the candle embedder, in one run (issue 18,
# item 4): the candle example first (its default, 4 texts per batch on 2 threads), then benches/embed_onnx.py, which
# prints passages/s, the ratio to candle and each embedding's cosine to PyTorch's fp32 one.
#
# Needs the training environment of scripts/train-reader.sh (PyTorch) plus onnx and onnxruntime from PyPI, which
# this installs into it. Usage: benches/bench-embed-onnx.sh [OUT_DIR (the exported models; default a temp dir)]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}"
VENV=${ATTEST_TRAIN_VENV:-$HOME/.cache/attest-train-venv}
[ -x "$VENV/bin/python" ] || { echo "no $VENV: run scripts/train-reader.sh's set-up first" >&2; exit 1; }
"$VENV/bin/python" -c "import onnx, onnxruntime" 2>/dev/null || "$VENV/bin/pip" install --quiet onnx onnxruntime
scripts/install-model.sh
cargo build --workspace --examples
out="${1:-$(mktemp -d)}"
candle=$("$CARGO_TARGET_DIR/debug/examples/embed_throughput" 64 |
  python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l)
    if r.get("runtime") == "candle" and r.get("batch") == 4 and r.get("threads") == 2: print(r["passages_per_s"])')
echo "candle (batch 4, 2 threads): $candle passages/s"
"$VENV/bin/python" benches/embed_onnx.py "$out" "$candle"
