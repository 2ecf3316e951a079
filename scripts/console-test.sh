#!/usr/bin/env bash
# Real-browser tests of the web console (tests/browser): Debian's headless Chromium (/usr/bin/chromium, installed by
# scripts/setup.sh) driven by Playwright for Python, against `attest dev` processes on OS-chosen loopback ports.
#
# Usage: scripts/console-test.sh [--screenshots DIR] [pytest arguments...]
# The binary: $ATTEST_BIN, else $CARGO_TARGET_DIR/debug/attest (default ~/.cache/attest-target); it is run, never
# built here. The pinned Python packages (tests/browser/requirements.txt) go into $ATTEST_CONSOLE_VENV (default
# ~/.cache/attest-console-venv), made once and reused; PyPI is reached only when that environment lacks them.
# Playwright's own browser downloads are never used. Screenshots of each page go to a temporary directory, or to
# DIR with --screenshots (`--screenshots docs/console` refreshes the README's). The logs of a failed run are kept
# in ~/.cache/attest-console-logs (override with ATTEST_CONSOLE_LOGS).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ATTEST_CONSOLE_VENV:-$HOME/.cache/attest-console-venv}"
REQUIREMENTS="$REPO_ROOT/tests/browser/requirements.txt"
export ATTEST_BIN="${ATTEST_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}/debug/attest}"
export ATTEST_CHROMIUM="${ATTEST_CHROMIUM:-/usr/bin/chromium}"

log() { printf 'console-test: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

if [[ "${1:-}" == "--screenshots" ]]; then
    [[ -n "${2:-}" ]] || die "--screenshots needs a directory"
    mkdir -p "$2"
    ATTEST_CONSOLE_SHOTS="$(cd "$2" && pwd)"
    export ATTEST_CONSOLE_SHOTS
    shift 2
fi

command -v python3 >/dev/null 2>&1 || die "python3 is required"
[[ -x "$ATTEST_BIN" ]] || die "no attest binary at $ATTEST_BIN (make build, or set ATTEST_BIN)"
[[ -x "$ATTEST_CHROMIUM" ]] || die "no Chromium at $ATTEST_CHROMIUM (scripts/setup.sh installs Debian's chromium)"

# shellcheck source=lib/venv.sh
source "$REPO_ROOT/scripts/lib/venv.sh"
pinned_venv "$VENV" "$REQUIREMENTS"

cd "$REPO_ROOT/tests/browser"
# No __pycache__ in the checkout.
export PYTHONDONTWRITEBYTECODE=1
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
