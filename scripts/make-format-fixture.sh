#!/usr/bin/env bash
# Writes tests/fixtures/format-N: what one release leaves on disk, for the tests that open it with later builds
# (issue 44 item 5: each release reads the current and the previous on-disk version). Run it with the build of the
# release whose layout the fixture records, before the layout changes:
#
#   scripts/make-format-fixture.sh 1        # tests/fixtures/format-1
#
# It starts `attest dev` (2 shard nodes) on an empty directory, creates the collection `notes`, ingests the first
# 40 passages of data/squad-sample and seals them into one segment per shard, then writes one document that stays
# in the growing segment and deletes one sealed document (so the log holds an upsert, a tombstone and sealed
# rows), takes a cluster snapshot `format-1` into `snapshots/`, and stops. RocksDB's own LOG files are left out.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: scripts/make-format-fixture.sh VERSION}
BIN=${ATTEST_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}/debug/attest}
out="tests/fixtures/format-$version"
work=$(mktemp -d)
http=127.0.0.1:${FIXTURE_PORT:-17790}
grpc=127.0.0.1:$(( ${FIXTURE_PORT:-17790} + 1 ))
api="http://$http"

ATTEST_LOG=warn "$BIN" dev --data-dir "$work/data" --http "$http" --grpc "$grpc" >"$work/dev.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 120); do
  curl -sf "$api/readyz" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { echo "attest dev exited:"; tail -20 "$work/dev.log"; exit 1; }
  sleep 0.5
done
post() { curl -sf -X POST "$api$1" -H 'content-type: application/json' -d "$2" >/dev/null; }
post /v1/collections '{"name": "notes", "shards": 2}'
head -40 data/squad-sample/corpus.jsonl | python3 -c '
import json, sys
print(json.dumps({"documents": [json.loads(l) for l in sys.stdin]}))' >"$work/docs.json"
post /v1/collections/notes/documents "@$work/docs.json"
post /v1/collections/notes/maintain '{"seal": true}'
post /v1/collections/notes/documents '{"documents": [{"id": "growing-1", "title": "Growing note",
  "text": "This note stays in the growing segment: the zephyr lantern sings at dawn."}]}'
deleted=$(head -1 data/squad-sample/corpus.jsonl | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
curl -sf -X DELETE "$api/v1/collections/notes/documents/$deleted" >/dev/null
mkdir -p "$work/snapshots"
post /v1/snapshots "{\"destination\": \"$work/snapshots\", \"id\": \"format-$version\"}"
kill $pid
wait $pid || true

rm -rf "$out"
mkdir -p "$out"
cp -r "$work/data" "$out/data"
cp -r "$work/snapshots" "$out/snapshots"
find "$out" -name 'LOG' -o -name 'LOG.old.*' | xargs rm -f
cat >"$out/WRITTEN_BY" <<EOF
$("$BIN" --version) at $(git rev-parse --short HEAD), $(date -u +%Y-%m-%d)
deleted: $deleted
EOF
du -sh --apparent-size "$out"
