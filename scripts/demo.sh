#!/usr/bin/env bash
# Starts `attest dev` on the bundled sample (data/squad-sample), ingests it, runs sample searches, stops.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${ATTEST_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}/debug/attest}
DATA=${DEMO_DATA_DIR:-.attest-data/demo}
HTTP=${DEMO_HTTP:-127.0.0.1:7700}
GRPC=${DEMO_GRPC:-127.0.0.1:7701}
export ATTEST_SERVER="http://$HTTP"

rm -rf "$DATA"
mkdir -p "$(dirname "$DATA")"
"$BIN" dev --data-dir "$DATA" --http "$HTTP" --grpc "$GRPC" 2>"$DATA.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  curl -sf "$ATTEST_SERVER/readyz" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { echo "attest dev exited; log:"; tail -20 "$DATA.log"; exit 1; }
  sleep 0.5
done
curl -sf "$ATTEST_SERVER/readyz" >/dev/null

"$BIN" collection create squad
"$BIN" ingest --collection squad data/squad-sample/corpus.jsonl
for q in "Who won Super Bowl 50?" "What did Tesla famously demonstrate?" "How did the Black Death spread?"; do
  echo
  echo "\$ attest search --collection squad \"$q\" --k 3"
  "$BIN" search --collection squad "$q" --k 3
done
# Grounded answers: one the sample can answer (cited, verified), one it cannot (an abstention with its reason).
for q in "Who tackled Ronnie Hillman for a loss of yardage?" "Who was the first emperor of the Inca empire?"; do
  echo
  echo "\$ attest ask --collection squad \"$q\""
  "$BIN" ask --collection squad "$q"
done
echo
echo "demo done. Keep a server running with: $BIN dev --data-dir $DATA"
