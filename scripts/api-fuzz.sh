#!/usr/bin/env bash
# The HTTP API fuzzed from its own contract: Schemathesis (pinned, tests/fuzz/requirements.txt) generates requests
# for every operation of the OpenAPI document `attest dev` serves at /v1/openapi.json — valid ones and invalid
# ones — and checks every response: no 5xx, the status code, content type, headers and body as the document says,
# and invalid data refused. Its stateful phase then chains operations along the document's links (create a
# collection → ingest → search → delete; mint a key → revoke it; snapshot → its job → restore). An operation that
# refuses most valid data (the document states less than the API checks) fails the run
# (tests/fuzz/schemathesis.toml).
# Twice: against an open `attest dev`, and against one with --admin-key (requests with the admin key; the
# document's security scheme is then exercised too). Seeded and bounded (--max-examples per operation, a wall
# limit per run); the exit status is non-zero on any finding. Each run's dev log and Schemathesis report are kept
# in a temp directory printed at the end.
#
# Usage: scripts/api-fuzz.sh [--examples N] [--seed S]
# The binary: $ATTEST_BIN, else $CARGO_TARGET_DIR/debug/attest (default ~/.cache/attest-target).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ATTEST_FUZZ_VENV:-$HOME/.cache/attest-fuzz-venv}"
export ATTEST_BIN="${ATTEST_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}/debug/attest}"
EXAMPLES=100
SEED=46
WALL_S=600
ADMIN_KEY="api-fuzz-admin-key-0123456789abcdef"

log() { printf 'api-fuzz: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}
while [[ $# -gt 0 ]]; do
    case "$1" in
        --examples) EXAMPLES="$2"; shift 2 ;;
        --seed) SEED="$2"; shift 2 ;;
        *) die "unknown argument $1" ;;
    esac
done
[[ -x "$ATTEST_BIN" ]] || die "no attest binary at $ATTEST_BIN (make build, or set ATTEST_BIN)"
# shellcheck source=lib/venv.sh
source "$REPO_ROOT/scripts/lib/venv.sh"
pinned_venv "$VENV" "$REPO_ROOT/tests/fuzz/requirements.txt"

WORK="$(mktemp -d -t attest-api-fuzz.XXXXXX)"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

# Starts `attest dev` in $WORK/$1 with the remaining arguments; sets URL.
start_dev() {
    local name="$1"
    shift
    mkdir -p "$WORK/$name"
    # Its own working directory: a snapshot destination the fuzzer makes up as a relative path lands there.
    # At most 4 shards per collection: a fuzzer that asks for the cluster's 4096 fills this machine's disk.
    (cd "$WORK/$name" && ATTEST__ROUTER__MAX_SHARDS=4 exec "$ATTEST_BIN" dev --data-dir "$WORK/$name/data" --http 127.0.0.1:0 \
        --grpc 127.0.0.1:0 "$@" >"$WORK/$name/stdout" 2>"$WORK/$name/dev.log") &
    PIDS+=("$!")
    local deadline=$((SECONDS + 180))
    until grep -q "http=" "$WORK/$name/stdout" 2>/dev/null; do
        ((SECONDS < deadline)) || die "attest dev ($name) did not start: $(tail -5 "$WORK/$name/dev.log")"
        sleep 0.2
    done
    URL="$(grep -o 'http=[^ ]*' "$WORK/$name/stdout" | head -1 | cut -d= -f2)"
    until curl -sf "$URL/readyz" >/dev/null; do
        ((SECONDS < deadline)) || die "attest dev ($name) never became ready"
        sleep 0.2
    done
}

# One Schemathesis run against $URL; extra arguments (a header) passed on.
fuzz() {
    local name="$1"
    shift
    # A collection with documents, so that operations on `docs` reach past the 404.
    curl -sf -X POST "$URL/v1/collections" -H 'content-type: application/json' "$@" \
        -d '{"name": "docs", "shards": 1}' >/dev/null
    head -n 20 "$REPO_ROOT/data/squad-sample/corpus.jsonl" |
        curl -sf -X POST "$URL/v1/collections/docs/documents" -H 'content-type: application/x-ndjson' "$@" \
            --data-binary @- >/dev/null
    local auth=()
    [[ $# -gt 0 ]] && auth=(-H "${2}")
    log "$name: $URL, $EXAMPLES examples per operation, seed $SEED"
    # The snapshot destination this dev admits (DATA_DIR/snapshots, its default root).
    export ATTEST_FUZZ_DESTINATION="$WORK/$name/data/snapshots/fuzz"
    # A document's precomputed vector must have its collection's dimension (tests/fuzz/hooks.py).
    ATTEST_FUZZ_DIMENSION="$(curl -sf "$URL/v1/collections/docs" "$@" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["dimension"])')"
    export ATTEST_FUZZ_DIMENSION SCHEMATHESIS_HOOKS=hooks PYTHONPATH="$REPO_ROOT/tests/fuzz"
    (cd "$WORK/$name" && timeout "$WALL_S" "$VENV/bin/st" --config-file "$REPO_ROOT/tests/fuzz/schemathesis.toml" \
        run "$URL/v1/openapi.json" \
        --checks not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance,negative_data_rejection \
        --max-examples "$EXAMPLES" --seed "$SEED" --workers 1 --no-color \
        --phases examples,coverage,fuzzing,stateful --request-timeout 60 --generation-database none \
        --report junit --report-dir "$WORK/$name/report" "${auth[@]}")
}

status=0
start_dev open
fuzz open || status=1
start_dev auth --admin-key "$ADMIN_KEY"
fuzz auth -H "Authorization: Bearer $ADMIN_KEY" || status=1
log "logs and reports: $WORK"
exit "$status"
