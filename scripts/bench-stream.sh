#!/usr/bin/env bash
# Streaming that streams (issue 71): time to a streamed ask's first event (`sources`) against time to its whole
# answer (`done`), both measured in the same asks, on the bundled squad sample. Starts `attest dev` on loopback
# ports over a temporary directory, ingests data/squad-sample, warms the models with 3 asks, then asks N of its
# questions (default 20) with `stream: true` one after another and prints the medians and their ratio
# (the target: first event <= 0.25x the whole answer).
# Usage: scripts/bench-stream.sh [N]   (the binary: $ATTEST_BIN, else $CARGO_TARGET_DIR/debug/attest)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20}
BIN=${ATTEST_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/attest-target}/debug/attest}
[ -x "$BIN" ] || { echo "bench-stream: no attest binary at $BIN (make build)" >&2; exit 1; }
DIR=$(mktemp -d -t attest-bench-stream.XXXXXX)
"$BIN" dev --data-dir "$DIR/data" --http 127.0.0.1:0 --grpc 127.0.0.1:0 >"$DIR/stdout" 2>"$DIR/log" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$DIR"' EXIT
url=""
for _ in $(seq 1 600); do
  url=$(grep -o 'http=[^ ]*' "$DIR/stdout" 2>/dev/null | head -1 | cut -d= -f2 || true)
  [ -n "$url" ] && curl -sf "$url/readyz" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { echo "attest dev exited; log:" >&2; tail -20 "$DIR/log" >&2; exit 1; }
  sleep 0.2
done
export ATTEST_SERVER=$url
"$BIN" collection create squad >/dev/null
"$BIN" ingest --collection squad data/squad-sample/corpus.jsonl >/dev/null
python3 - "$url" "$N" <<'EOF'
import json, statistics, sys, time, urllib.request

url, n = sys.argv[1], int(sys.argv[2])
questions = [json.loads(l)["text"] for l in open("data/squad-sample/queries.jsonl")]

def ask(question):
    """Seconds to the first event, to `done`, and the event names in order."""
    req = urllib.request.Request(f"{url}/v1/collections/squad/ask",
                                 data=json.dumps({"question": question, "stream": True}).encode(),
                                 headers={"content-type": "application/json"})
    t0 = time.perf_counter()
    first = done = None
    names, buf = [], b""
    with urllib.request.urlopen(req, timeout=120) as resp:
        while done is None:
            chunk = resp.read1(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                raw, buf = buf.split(b"\n\n", 1)
                name = next((l[6:].strip().decode() for l in raw.split(b"\n") if l.startswith(b"event:")), "")
                names.append(name)
                now = time.perf_counter() - t0
                first = now if first is None else first
                if name in ("done", "error"):
                    done = now
    return first, done, names

for q in questions[:3]:
    ask(q)
firsts, dones, with_sources = [], [], 0
for q in questions[3:3 + n]:
    first, done, names = ask(q)
    firsts.append(first)
    dones.append(done)
    with_sources += names[:1] == ["sources"]
f, d = statistics.median(firsts), statistics.median(dones)
print(f"bench-stream: {n} streamed asks on data/squad-sample, {with_sources} began with `sources`")
print(f"  median time to first event {f * 1e3:.1f} ms, to the whole answer (`done`) {d * 1e3:.1f} ms")
print(f"  ratio first event / whole answer: {f / d:.3f} (target <= 0.25)")
EOF
