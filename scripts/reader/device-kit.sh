#!/usr/bin/env bash
# The tuning-slice readers of issue 68 (rounds 14-17 of `ATTEST_READER_SLICE=1 scripts/train-reader.sh`, ~12 hours
# on this CPU) on a lent GPU, in two device calls that fit the device tool's limits: 64 MiB of working tree sent,
# at most 8 files of 16 MiB back, 15 minutes of device time in all (round 7 took 179 s on an H200, round 8 245 s).
# The repository's tracked tree is ~117 MB (the two committed reader graphs alone are 79 MB), so nothing tracked may
# travel: `narrow` empties the index and ignores every top-level path for the call, and `restore` puts both back.
# What does travel is .device/ (ignored, named in `carry`): train.py and its modules, the base weights, the rounds'
# tokenised examples (built here, so no data set travels), and scripts/reader/device-run.sh as run.sh with the
# kit.env that names its two rounds.
#
#   scripts/reader/device-kit.sh build minilm   # rounds 14+15: MiniLM base as f16 (43 MB), examples 14 and 15
#   scripts/reader/device-kit.sh build bge      # rounds 16+17: bge-small int8 base, examples 14 and 17
#   scripts/reader/device-kit.sh narrow         # before the call (refused with staged changes)
#   device run: command "bash .device/run.sh", carry [".device"], timeout_s 560
#   scripts/reader/device-kit.sh restore        # right after the call, whatever it answered
#   scripts/reader/device-kit.sh take minilm|bge FILES_AT
#       joins the returned parts: round 15's weights and ONNX graph into $WORK/r15/{out,onnx} (the first reader),
#       round 17's into $WORK/r17/{out,onnx} (the second; its int8 export reads the bge kit's base and examples, so
#       take bge before building the other kit); copy those onnx folders over crates/attest-models/models/reader
#       and reader-bge to try the pair (rebuild; refit support.json).
#
# The first round of each call stops at KIT_TIME_LIMIT seconds (default 330; round 7 took 179 s on an H200, round 8
# was stopped at 245 s) and says so in its report, so that a slower card still returns both rounds within the call.
# `KIT_DEVICE=cpu KIT_FLAGS="--max-steps 2" OUT=/tmp/kit-out bash .device/run.sh` runs the same chain here (two steps
# a round; 3 and 6 minutes on this CPU with the venv's python first on PATH), which is how it was checked without a
# GPU, `take` included.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${ATTEST_TRAIN_VENV:-$HOME/.cache/attest-train-venv}
WORK=${ATTEST_READER_WORK:-$HOME/.cache/attest-reader}
KIT=.device
MARK="# device-kit.sh narrow"
py() { "$VENV/bin/python" "$@"; }

# Builds (or finds) the examples file of one round: train.py --build-only with the round's flags, in $WORK/rN.
examples() { # examples N BASE ARGS_FILE
  local n=$1 base=$2 args=$3
  # shellcheck disable=SC2046
  py scripts/reader/train.py --build-only --base "$base" --work "$WORK/r$n" $(cat "$args") --tuning-slice >&2
  ls "$WORK/r$n"/examples-*-ts*.json.gz | head -1
}

# kit.env of scripts/reader/device-run.sh (copied in as run.sh): the two rounds, their flags files, the first's extra
# flags, and whether the second comes back without its embeddings.
kit_env() { # kit_env FIRST SECOND FIRST_ARGS SECOND_ARGS FIRST_EXTRA STRIP_EMBEDDINGS
  printf 'FIRST=%s\nSECOND=%s\nFIRST_ARGS=%s\nSECOND_ARGS=%s\nFIRST_EXTRA="%s"\nSTRIP_EMBEDDINGS=%s\n' "$@" >"$KIT/kit.env"
  cp scripts/reader/device-run.sh "$KIT/run.sh"
}

build() {
  local which=$1
  rm -rf "$KIT"
  mkdir -p "$KIT/base"
  grep -qx "/$KIT/" .git/info/exclude 2>/dev/null || echo "/$KIT/" >>.git/info/exclude
  cp scripts/reader/{train,model,data,company,schedule}.py "$KIT/"
  local ex14
  ex14=$(examples 14 models/all-minilm-l6-v2 scripts/reader/round7.args)
  cp "$ex14" "$KIT/ex14.json.gz"
  case $which in
    minilm)
      cp models/all-minilm-l6-v2/{config.json,tokenizer.json} "$KIT/base/"
      # f16: the f32 file (87 MB) does not fit beside the examples; train.py loads either into its f32 model.
      py - models/all-minilm-l6-v2/model.safetensors "$KIT/base/model.safetensors" <<'PY'
import sys
from safetensors.torch import load_file, save_file
save_file({k: v.half() if v.is_floating_point() else v for k, v in load_file(sys.argv[1]).items()}, sys.argv[2])
PY
      cp "$(examples 15 models/all-minilm-l6-v2 scripts/reader/round12.args)" "$KIT/ex15.json.gz"
      cp scripts/reader/round7.args scripts/reader/round12.args "$KIT/"
      kit_env 14 15 round7.args round12.args "" 0
      ;;
    bge)
      [ -f "$WORK/bge-small/base/model.int8.safetensors" ] || scripts/train-reader.sh --bge-base
      cp "$WORK/bge-small/base/"{config.json,tokenizer.json,model.int8.safetensors} "$KIT/base/"
      cp "$(examples 17 "$WORK/bge-small/base" scripts/reader/round13.args)" "$KIT/ex17.json.gz"
      cp scripts/reader/round7.args scripts/reader/round13.args "$KIT/"
      mv "$KIT/ex14.json.gz" "$KIT/ex16.json.gz"  # round 16 trains on round 14's examples
      kit_env 16 17 round7.args round13.args "--epochs 3 --max-steps 6874" 1
      ;;
    *)
      echo "device-kit: build minilm|bge" >&2
      exit 2
      ;;
  esac
  local bytes
  bytes=$(du -sb "$KIT" | cut -f1)
  echo "$KIT: $((bytes / 1048576)) MiB (the device takes 64 MiB)"
  [ "$bytes" -lt $((62 << 20)) ] || { echo "device-kit: $KIT is too big to travel" >&2; exit 1; }
}

narrow() {
  git diff --cached --quiet || { echo "device-kit: staged changes; commit or unstage them first" >&2; exit 1; }
  grep -qxF "$MARK" .git/info/exclude && { echo "device-kit: already narrowed" >&2; exit 1; }
  printf '%s\n/*\n' "$MARK" >>.git/info/exclude
  git rm -r -q --cached .
  echo "narrowed: nothing tracked travels; run 'scripts/reader/device-kit.sh restore' right after the call"
}

restore() {
  if grep -qxF "$MARK" .git/info/exclude; then
    # The marker and the line after it are what narrow appended.
    sed -i "/^$MARK\$/,+1d" .git/info/exclude
  fi
  git reset -q
  git status --short | sed -n '1,5p'
  echo "restored"
}

take() {
  local which=$1 from=$2
  case $which in
    minilm)
      mkdir -p "$WORK/r15/out"
      cat "$from"/reader.safetensors.part* >"$WORK/r15/out/reader.safetensors"
      cp models/all-minilm-l6-v2/{config.json,tokenizer.json} "$WORK/r15/out/"
      cp "$from/r15-report.json" "$WORK/r15/out/report.json"
      py scripts/reader/safetensors_to_onnx.py "$WORK/r15/out/reader.safetensors" "$WORK/r15/out" \
        "$WORK/r15/onnx" --check
      cp "$from/r15-report.json" "$WORK/r15/onnx/report.json"
      echo "the first reader: $WORK/r15/onnx"
      ;;
    bge)
      mkdir -p "$WORK/r17/out"
      cat "$from"/reader-encoder.safetensors.part* >"$WORK/r17/out/reader-encoder.safetensors"
      cp "$from/r17-report.json" "$WORK/r17/out/report.json"
      py scripts/reader/export_onnx.py "$KIT/base" "$WORK/r17/out/reader-encoder.safetensors" \
        "$WORK/r17/onnx" --examples "$KIT/ex17.json.gz"
      cp "$from/r17-report.json" "$WORK/r17/onnx/report.json"
      echo "the second reader: $WORK/r17/onnx"
      ;;
    *)
      echo "device-kit: take minilm|bge FILES_AT" >&2
      exit 2
      ;;
  esac
}

case "${1:-}" in
  build) build "${2:?minilm or bge}" ;;
  narrow) narrow ;;
  restore) restore ;;
  take) take "${2:?minilm or bge}" "${3:?the files_at folder of the device reply}" ;;
  *)
    sed -n '2,/^set -euo pipefail$/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    [ "${1:-}" = -h ] || [ "${1:-}" = --help ]
    ;;
esac
