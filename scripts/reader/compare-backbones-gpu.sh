#!/usr/bin/env bash
# Issue 41, the reader's backbone by measurement: trains the reader on bge-small-en-v1.5 (12 layers, from the base,
# no --init) on round 7's examples with round 7's flags (scripts/reader/round7.args) but 2 epochs, on a GPU machine
# (PyTorch, tokenizers, safetensors; no model hub, no internet). Runs in the repository root; needs DIR (default
# .bge-gpu, git-ignored, carried to the machine) holding
#   DIR/base/           scripts/reader/onnx_to_bert.py's output (model.int8.safetensors, config.json, tokenizer.json)
#   DIR/examples.json.gz round 7's examples (scripts/train-reader.sh with ATTEST_READER_BUILD_ONLY=1)
# The fair baseline is the same command with DIR=.minilm-gpu: all-MiniLM-L6-v2's base in the same int8 format
# (onnx_to_bert.py --from-safetensors models/all-minilm-l6-v2 .minilm-gpu/base --name "all-MiniLM-L6-v2 (int8,
# dequantised)") and the same examples.json.gz (both backbones share the uncased WordPiece vocabulary).
# Writes to $OUT only report.json (held-out metrics, train_seconds) and train.log; the weights (~67 MB f16) stay
# in /tmp (scripts/reader/train-bge-gpu.sh runs this, then keeps them). Training stops after 280 s (--time-limit)
# so a slow machine still reports (steps < planned_steps then). EPOCHS and TIME_LIMIT override 2 and 280.
# Usage: OUT=dir [EPOCHS=n TIME_LIMIT=s] scripts/reader/compare-backbones-gpu.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.bge-gpu}
out=${OUT:?set OUT to the output folder}
work=/tmp/attest-reader-bge
rm -rf "$work"
mkdir -p "$out"
started=$(date +%s)
python3 -c "import torch, tokenizers, safetensors; print('torch', torch.__version__, torch.cuda.get_device_name(0))" \
  2>&1 | tee "$out/train.log"
# round7.args says --epochs 3; the later --epochs wins (argparse keeps the last).
# shellcheck disable=SC2046
python3 -u scripts/reader/train.py --examples "$dir/examples.json.gz" --device cuda --base "$dir/base" \
  --out "$work/out" --work "$work" --checkpoint-every 100000 $(cat scripts/reader/round7.args) \
  --epochs "${EPOCHS:-2}" --time-limit "${TIME_LIMIT:-280}" 2>&1 | tee -a "$out/train.log"
cp "$work/out/report.json" "$out/report.json"
echo "wall $(( $(date +%s) - started )) s" | tee -a "$out/train.log"
