#!/usr/bin/env bash
# Installs what the local embedder's default runtime (`embedder.local.runtime: onnx`) needs beside the model:
#   - ONNX Runtime's CPU library, from the onnxruntime wheel on PyPI, as models/onnxruntime/libonnxruntime.so;
#   - model.onnx in the model directory: all-MiniLM-L6-v2 written as an ONNX graph from the installed safetensors
#     by scripts/onnx/export_minilm.py (no PyTorch: the onnx and numpy wheels).
# Both are checked against crates/attest-embed/onnx.sha256, the hashes the embedder checks when it loads them.
# The wheels are pinned and installed into a virtual environment in ~/.cache (ATTEST_ONNX_VENV); nothing is fetched
# from a model hub. Idempotent: files already present and matching are kept.
#
# Usage: scripts/install-onnxruntime.sh [MODEL_DIR [RUNTIME_DIR]]
#   MODEL_DIR defaults to $ATTEST_MODEL_DIR, else <repo root>/models/all-minilm-l6-v2 (scripts/install-model.sh
#   installs the weights there first); RUNTIME_DIR to <repo root>/models/onnxruntime.
set -euo pipefail

ONNXRUNTIME_VERSION=1.32.0
PINNED=(onnxruntime==$ONNXRUNTIME_VERSION onnx==1.23.2 numpy==2.4.6 protobuf==7.36.2)

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHECKSUMS="$REPO_ROOT/crates/attest-embed/onnx.sha256"
MODEL_DIR="${1:-${ATTEST_MODEL_DIR:-$REPO_ROOT/models/all-minilm-l6-v2}}"
RUNTIME_DIR="${2:-$REPO_ROOT/models/onnxruntime}"
VENV="${ATTEST_ONNX_VENV:-$HOME/.cache/attest-onnx-venv}"

log() { printf 'install-onnxruntime: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

# file_sha256 FILE
# shellcheck source=lib/sha256.sh
source "$REPO_ROOT/scripts/lib/sha256.sh"

expected_sha256() {
    awk -v name="$1" '$2 == name || $2 == "*" name { print $1; exit }' "$CHECKSUMS"
}

# verified PATH: the file exists and matches its committed hash (looked up by its file name).
verified() {
    local expected
    expected="$(expected_sha256 "$(basename "$1")")"
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

if ! "$VENV/bin/python" -c "import onnx, onnxruntime, numpy" 2>/dev/null ||
    [[ "$("$VENV/bin/python" -c 'import onnxruntime; print(onnxruntime.__version__)')" != "$ONNXRUNTIME_VERSION" ]]; then
    command -v python3 >/dev/null 2>&1 || die "python3 is required (pip fetches the onnxruntime and onnx wheels)"
    log "creating $VENV with ${PINNED[*]}"
    python3 -m venv "$VENV" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "${PINNED[@]}" ||
        die "pip install ${PINNED[*]} failed"
fi

if ! verified "$LIBRARY"; then
    shopt -s nullglob
    found=("$VENV"/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so.$ONNXRUNTIME_VERSION)
    shopt -u nullglob
    [[ ${#found[@]} -eq 1 ]] || die "libonnxruntime.so.$ONNXRUNTIME_VERSION not found in the onnxruntime wheel"
    install_verified "${found[0]}" "$LIBRARY"
    log "installed ONNX Runtime $ONNXRUNTIME_VERSION as $LIBRARY"
fi

if ! verified "$GRAPH"; then
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/attest-onnx.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    "$VENV/bin/python" "$REPO_ROOT/scripts/onnx/export_minilm.py" "$MODEL_DIR" "$tmp/model.onnx" >&2
    install_verified "$tmp/model.onnx" "$GRAPH"
    log "installed $GRAPH"
fi
