#!/usr/bin/env bash
# Trains the reader (answerability + support cross-encoder, issue 13) reproducibly on this CPU and writes
# crates/attest-answer/models/reader/{reader.safetensors,reader.sha256,report.json,config.json,tokenizer.json}.
#   1. a virtual environment with PyTorch (CPU), tokenizers, safetensors from PyPI (ATTEST_TRAIN_VENV,
#      default ~/.cache/attest-train-venv), 2. the MiniLM base model (scripts/install-model.sh),
#   3. scripts/reader/train.py: builds the examples (seeded, split by article; see scripts/reader/data.py),
#      trains with a checkpoint every 100 steps in ATTEST_READER_WORK (default ~/.cache/attest-reader): rerun
#      the same command to resume, 4. docs/eval/contrastive-heldout.jsonl, the held-out synthetic pairs.
# On the 2-core machine the default run (35,000 pairs, one pass) takes about 90 minutes.
# Usage: scripts/train-reader.sh [train.py flags, e.g. --answerability 18000 --vitaminc 9000]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${ATTEST_TRAIN_VENV:-$HOME/.cache/attest-train-venv}
DATA=${ATTEST_DATA:-../shared/data}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -c "import torch, tokenizers, safetensors, numpy" 2>/dev/null ||
  "$VENV/bin/pip" install --quiet torch numpy safetensors tokenizers
scripts/install-model.sh
"$VENV/bin/python" scripts/reader/train.py --data "$DATA" --base models/all-minilm-l6-v2 \
  --out crates/attest-answer/models/reader --work "${ATTEST_READER_WORK:-$HOME/.cache/attest-reader}" "$@"
"$VENV/bin/python" scripts/reader/export_contrastive.py --data "$DATA" --out docs/eval/contrastive-heldout.jsonl
