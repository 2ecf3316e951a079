#!/usr/bin/env bash
# Round 7 of the reader (scripts/reader/round7.args) on a GPU machine, from the examples file that
# `scripts/train-reader.sh` builds (`--build-only`; the data sets need not travel): PyTorch, tokenizers and
# safetensors must be installed there; no model hub. It starts from INIT.safetensors, sent with it: round 6's weights
# to reproduce round 7 (`git show 4a98087:crates/attest-answer/models/reader/reader.safetensors`), or the committed
# reader's for a further round (`python3 scripts/reader/safetensors_to_onnx.py --back crates/attest-models/models/reader
# INIT.safetensors`, its f16 tensors bit for bit).
# The weights come back split into 12 MB parts (the device tool returns files of at most 16 MiB);
# `cat OUT/reader.safetensors.part* > reader.safetensors` joins them.
# ARGS (default scripts/reader/round7.args) names the round's flags: scripts/reader/round11.args with round 11's
# examples ($WORK/r11/examples-*.json.gz) and round 7's weights as INIT trains round 11 (issue 68).
# Usage: scripts/reader/train-gpu.sh EXAMPLES.json.gz OUT_DIR INIT.safetensors [ARGS]
set -euo pipefail
cd "$(dirname "$0")/../.."
examples=$1 out=$2 init=$3 args=${4:-scripts/reader/round7.args}
python3 -c "import torch, tokenizers, safetensors; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
started=$(date +%s)
# shellcheck disable=SC2046
python3 scripts/reader/train.py --examples "$examples" --device cuda --base crates/attest-models/models/reader \
  --init "$init" --out "$out" --work "/tmp/attest-reader-$(basename "$args" .args)" \
  --checkpoint-every 100000 $(cat "$args")
echo "trained in $(( $(date +%s) - started )) s"
rm -f "$out/config.json" "$out/tokenizer.json"
split -b 12M -d "$out/reader.safetensors" "$out/reader.safetensors.part"
rm "$out/reader.safetensors"
ls -la "$out"
