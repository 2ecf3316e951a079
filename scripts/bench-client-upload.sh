#!/usr/bin/env bash
# Bulk upload throughput of the Python client (clients/python) against curl posting the same documents as NDJSON,
# alternating in one run against one `attest dev` (clients/python/bench/upload_vs_curl.py; prints the ratio and
# exits non-zero below 0.9x). Uses the client tests' pinned environment (scripts/python-client-test.sh makes it).
#
# Usage: scripts/bench-client-upload.sh [--corpus FILE] [--docs N] [--rounds R] [--batch B]
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ATTEST_PYCLIENT_VENV:-$HOME/.cache/attest-pyclient-venv}"
export ATTEST_BIN="${ATTEST_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}/debug/attest}"
# shellcheck source=lib/venv.sh
source "$REPO_ROOT/scripts/lib/venv.sh"
pinned_venv "$VENV" "$REPO_ROOT/clients/python/requirements-test.txt"
export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$REPO_ROOT/clients/python/src"
exec "$VENV/bin/python" "$REPO_ROOT/clients/python/bench/upload_vs_curl.py" \
    --corpus "$REPO_ROOT/data/squad-sample/corpus.jsonl" "$@"
