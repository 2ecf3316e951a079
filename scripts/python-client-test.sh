#!/usr/bin/env bash
# Tests of the Python client (clients/python, package attest-client) and its LangChain and LlamaIndex adapters:
# builds the wheel (and sdist) with `python -m build` offline from the checkout, installs the wheel with both
# extras into a pinned environment, and runs clients/python/tests with pytest against `attest dev` processes the
# tests start on loopback ports (the installed wheel is what is tested, not the source tree).
#
# Usage: scripts/python-client-test.sh [pytest arguments...]
# The binary: $ATTEST_BIN, else $CARGO_TARGET_DIR/debug/attest (default ~/.cache/attest-target); it is run, never
# built here. The pinned Python packages (clients/python/requirements-test.txt: the client's dependencies, the
# frameworks of its extras, build, hatchling, pytest and LangChain's standard tests) go into
# $ATTEST_PYCLIENT_VENV (default ~/.cache/attest-pyclient-venv), made once and reused; PyPI is reached only when
# that environment lacks them.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLIENT="$REPO_ROOT/clients/python"
VENV="${ATTEST_PYCLIENT_VENV:-$HOME/.cache/attest-pyclient-venv}"
REQUIREMENTS="$CLIENT/requirements-test.txt"
export ATTEST_BIN="${ATTEST_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}/debug/attest}"

log() { printf 'python-client-test: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

command -v python3 >/dev/null 2>&1 || die "python3 is required"
[[ -x "$ATTEST_BIN" ]] || die "no attest binary at $ATTEST_BIN (make build, or set ATTEST_BIN)"

# shellcheck source=lib/venv.sh
source "$REPO_ROOT/scripts/lib/venv.sh"
pinned_venv "$VENV" "$REQUIREMENTS"

DIST="$(mktemp -d -t attest-pyclient-dist.XXXXXX)"
trap 'rm -rf "$DIST"' EXIT
# No __pycache__ in the checkout.
export PYTHONDONTWRITEBYTECODE=1
# --no-isolation: the build back end (hatchling) comes from the pinned environment, so nothing is downloaded.
"$VENV/bin/python" -m build --no-isolation --outdir "$DIST" "$CLIENT" >"$DIST/build.log" 2>&1 ||
    { cat "$DIST/build.log" >&2; die "python -m build failed"; }
WHEEL="$(ls "$DIST"/attest_client-*.whl)"
log "built $(basename "$WHEEL")"
"$VENV/bin/python" -m pip uninstall --quiet --yes attest-client >/dev/null 2>&1 || true
# --no-index: the extras' dependencies must already be in the pinned environment.
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-index "$WHEEL[langchain,llamaindex]" ||
    die "installing $WHEEL with its extras failed"

cd "$CLIENT/tests"
# Not exec: the EXIT trap removes the build directory; pytest's status is the script's (set -e).
ATTEST_PYCLIENT_WHEEL=1 "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
