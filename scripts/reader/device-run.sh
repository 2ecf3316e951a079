#!/usr/bin/env bash
# Two reader rounds in a row on the device, from a kit of scripts/reader/device-kit.sh (which copies this file into
# .device/ as run.sh, beside kit.env naming the rounds): the first round from the base weights, the second from the
# first's, each from its examples file and flags file, with the tuning slice set aside. The first round stops at
# KIT_TIME_LIMIT seconds (default 330) so that both return within a device call. The second round's weights come back
# f16 in 12 MB parts under $OUT (the device returns files of at most 16 MiB), without the embeddings when the kit says
# so (the rounds' flags never train them; export_onnx.py puts the base's back), with both rounds' reports.
# KIT_DEVICE (default cuda) and KIT_FLAGS (added to both rounds: "--max-steps 2" for a check) are for a dry run here.
set -euo pipefail
cd "$(dirname "$0")"
# shellcheck source=/dev/null
. ./kit.env  # FIRST SECOND FIRST_ARGS SECOND_ARGS FIRST_EXTRA STRIP_EMBEDDINGS
out=${OUT:?} dev=${KIT_DEVICE:-cuda}
started=$(date +%s)
train() { # train N EXAMPLES ARGS_FILE [flags]
  local n=$1 examples=$2 args=$3
  shift 3
  # shellcheck disable=SC2046,SC2086
  python3 train.py --examples "$examples" --base base --out "/tmp/kit-r$n" --work "/tmp/kit-w$n" --device "$dev" \
    --checkpoint-every 100000 $(cat "$args") --tuning-slice "$@" ${KIT_FLAGS:-}
}
# shellcheck disable=SC2086
train "$FIRST" "ex$FIRST.json.gz" "$FIRST_ARGS" --time-limit "${KIT_TIME_LIMIT:-330}" $FIRST_EXTRA
train "$SECOND" "ex$SECOND.json.gz" "$SECOND_ARGS" --init "/tmp/kit-r$FIRST/reader.safetensors"
weights=/tmp/kit-r$SECOND/reader.safetensors
if [ "$STRIP_EMBEDDINGS" = 1 ]; then
  python3 - "$weights" "/tmp/kit-r$SECOND/reader-encoder.safetensors" <<'PY'
import sys
from safetensors import safe_open
from safetensors.torch import save_file
with safe_open(sys.argv[1], "pt") as f:
    kept = {k: f.get_tensor(k) for k in f.keys() if not k.startswith("embeddings.")}
    save_file(kept, sys.argv[2], metadata=f.metadata())
PY
  weights=/tmp/kit-r$SECOND/reader-encoder.safetensors
fi
cp "/tmp/kit-r$FIRST/report.json" "$out/r$FIRST-report.json"
cp "/tmp/kit-r$SECOND/report.json" "$out/r$SECOND-report.json"
split -b 12M -d "$weights" "$out/$(basename "$weights").part"
echo "rounds $FIRST and $SECOND in $(( $(date +%s) - started )) s"
ls -la "$out"
