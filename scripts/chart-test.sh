#!/usr/bin/env bash
# Offline tests of the Helm chart and the image contract (helm/tests): renders helm/attest for several value sets
# with helm-python-sdk (no helm binary, no cluster), validates every object against the Kubernetes schemas with
# kubernetes-validate --strict, checks the rendered commands against the attest binary, and `ldd` of the binary
# against deploy/Dockerfile's runtime packages; test_chart_cluster.py then starts the rendered commands themselves
# as a local cluster on loopback (3 meta, 3 shards, router, answer) and exercises it, and
# test_chart_rolling_upgrade.py rolls every pod of such a cluster onto a new binary under search and ingest load.
#
# Usage: scripts/chart-test.sh [pytest arguments...]
# The binary: $ATTEST_BIN, else $CARGO_TARGET_DIR/debug/attest (default ~/.cache/attest-target); it is run, never
# built here. The pinned Python packages (helm/tests/requirements.txt) go into $ATTEST_CHART_VENV (default
# ~/.cache/attest-chart-venv), made once and reused; PyPI is reached only when that environment lacks them.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ATTEST_CHART_VENV:-$HOME/.cache/attest-chart-venv}"
REQUIREMENTS="$REPO_ROOT/helm/tests/requirements.txt"
export ATTEST_BIN="${ATTEST_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}/debug/attest}"

log() { printf 'chart-test: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

command -v python3 >/dev/null 2>&1 || die "python3 is required"
[[ -x "$ATTEST_BIN" ]] || die "no attest binary at $ATTEST_BIN (make build, or set ATTEST_BIN)"

# shellcheck source=lib/venv.sh
source "$REPO_ROOT/scripts/lib/venv.sh"
pinned_venv "$VENV" "$REQUIREMENTS"

cd "$REPO_ROOT/helm/tests"
# No __pycache__ in the checkout.
export PYTHONDONTWRITEBYTECODE=1
# Helm's Go SDK logs a line per symlink it follows (the dashboard); the tests capture their own output.
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
