#!/usr/bin/env bash
# Installs what the local embedder's default runtime (`embedder.local.runtime: onnx`) needs beside the model:
#   - ONNX Runtime's CPU library, from the onnxruntime wheel on PyPI, as models/onnxruntime/libonnxruntime.so;
#   - model.onnx in the model directory: all-MiniLM-L6-v2 written as an ONNX graph from the installed safetensors
#     by scripts/onnx/export_minilm.py (no PyTorch: the onnx and numpy wheels).
# Both are checked against crates/attest-models/onnx.sha256, the hashes the embedder checks when it loads them.
# The wheels are pinned (scripts/onnx/requirements.txt) and installed into a virtual environment in ~/.cache
# (ATTEST_ONNX_VENV); nothing is fetched from a model hub. Idempotent: files already present and matching are kept.
#
# Usage: scripts/install-onnxruntime.sh [MODEL_DIR [RUNTIME_DIR]]
#   MODEL_DIR defaults to $ATTEST_MODEL_DIR, else <repo root>/models/all-minilm-l6-v2 (scripts/install-model.sh
#   installs the weights there first); RUNTIME_DIR to <repo root>/models/onnxruntime.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHECKSUMS="$REPO_ROOT/crates/attest-models/onnx.sha256"
MODEL_DIR="${1:-${ATTEST_MODEL_DIR:-$REPO_ROOT/models/all-minilm-l6-v2}}"
RUNTIME_DIR="${2:-$REPO_ROOT/models/onnxruntime}"
VENV="${ATTEST_ONNX_VENV:-$HOME/.cache/attest-onnx-venv}"
REQUIREMENTS="$REPO_ROOT/scripts/onnx/requirements.txt"

log() { printf 'install-onnxruntime: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

# file_sha256 FILE
# shellcheck source=lib/sha256.sh
source "$REPO_ROOT/scripts/lib/sha256.sh"
# pinned_venv VENV REQUIREMENTS
# shellcheck source=lib/venv.sh
source "$REPO_ROOT/scripts/lib/venv.sh"


# verified PATH: the file exists and matches its committed hash (looked up by its file name).
verified() {
    local expected
    expected="$(committed_sha256 "$CHECKSUMS" "$(basename "$1")")"
    [[ -n "$expected" ]] || die "no checksum for $(basename "$1") in $CHECKSUMS"
    [[ -f "$1" && "$(file_sha256 "$1")" == "$expected" ]]
}

# install_verified SRC DEST: copy then rename (never a half-written file under the final name), then check.
install_verified() {
    mkdir -p "$(dirname "$2")"
    cp "$1" "$2.partial"
    mv -f "$2.partial" "$2"
    verified "$2" || die "$2 does not match $CHECKSUMS (sha256 $(file_sha256 "$2"))"
}

LIBRARY="$RUNTIME_DIR/libonnxruntime.so"
GRAPH="$MODEL_DIR/model.onnx"
if verified "$LIBRARY" && verified "$GRAPH"; then
    log "ONNX Runtime and model.onnx already installed and verified; nothing to do"
    exit 0
fi
[[ -f "$MODEL_DIR/model.safetensors" ]] || die "no model in $MODEL_DIR: run scripts/install-model.sh first"

command -v python3 >/dev/null 2>&1 || die "python3 is required (pip fetches the onnxruntime and onnx wheels)"
pinned_venv "$VENV" "$REQUIREMENTS"

if ! verified "$LIBRARY"; then
    shopt -s nullglob
    found=("$VENV"/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so.*)
    shopt -u nullglob
    [[ ${#found[@]} -eq 1 ]] || die "expected one libonnxruntime.so.* in the onnxruntime wheel, found ${#found[@]}"
    install_verified "${found[0]}" "$LIBRARY"
    log "installed ONNX Runtime as $LIBRARY (from $(basename "${found[0]}"))"
fi

if ! verified "$GRAPH"; then
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/attest-onnx.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    "$VENV/bin/python" "$REPO_ROOT/scripts/onnx/export_minilm.py" "$MODEL_DIR" "$tmp/model.onnx" >&2
    install_verified "$tmp/model.onnx" "$GRAPH"
    log "installed $GRAPH"
fi
