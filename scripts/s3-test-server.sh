#!/usr/bin/env bash
# An S3-compatible server on loopback for the snapshot store's tests (crates/attest-snapshot/tests/s3.rs): the
# `moto` server from PyPI, pinned, in its own virtual environment.
#
# Usage: scripts/s3-test-server.sh PORT     exec moto_server on 127.0.0.1:PORT (never another interface)
#        scripts/s3-test-server.sh --setup  only make the environment (e.g. before running tests offline)
# The environment is $ATTEST_S3_VENV (default ~/.cache/attest-s3-venv), made once and reused: PyPI is reached only
# when it is missing or was made from other pins. Concurrent callers wait on a lock while one of them makes it.
set -euo pipefail

VENV="${ATTEST_S3_VENV:-$HOME/.cache/attest-s3-venv}"
# Pinned: moto's server and the web stack it runs on. Change a pin and the environment is made again.
PINS=(
    "moto[server]==5.2.1"
    "Flask==3.1.3"
    "Werkzeug==3.1.8"
    "flask-cors==6.0.2"
    "boto3==1.43.11"
    "botocore==1.43.11"
)

log() { printf 's3-test-server: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

usage() { die "usage: $0 PORT | --setup"; }
[[ $# -eq 1 ]] || usage

command -v python3 >/dev/null 2>&1 || die "python3 is required"

make_venv() {
    local stamp="$VENV/.attest-pins"
    local want
    want="$(printf '%s\n' "${PINS[@]}")"
    if [[ -x "$VENV/bin/moto_server" ]] && [[ -f "$stamp" ]] && [[ "$(cat "$stamp")" == "$want" ]]; then
        return 0
    fi
    log "making $VENV (${PINS[*]})"
    rm -rf "$VENV"
    python3 -m venv "$VENV" || die "python3 -m venv $VENV failed (Debian: apt-get install python3-venv)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PINS[@]}" ||
        die "pip install into $VENV failed"
    printf '%s\n' "$want" >"$stamp"
}

mkdir -p "$(dirname "$VENV")"
lock="$VENV.lock"
exec 9>"$lock"
flock 9
make_venv
flock -u 9
exec 9>&-

case "$1" in
--setup) exit 0 ;;
'' | *[!0-9]*) usage ;;
esac

exec "$VENV/bin/moto_server" -H 127.0.0.1 -p "$1"
