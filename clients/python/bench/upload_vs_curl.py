"""Bulk upload throughput of the Python client against the same documents sent by curl as NDJSON, in one run.

Starts one `attest dev` (loopback, OS-chosen ports), then alternates rounds: curl posts the documents as one NDJSON
body per batch to collection `curl-N`, and `Client.upload_documents` sends them to `client-N` (same batch size).
Each arm gets the same distinct documents (the first N paragraphs of a corpus), fresh collections, and alternates
going first, so neither is favoured by a warm cache. Prints docs/s per arm and the client / curl ratio (the
client must not be the bottleneck: the issue asks for >= 0.9x).

Usage (from scripts/bench-client-upload.sh, which sets up the pinned environment):
    upload_vs_curl.py --corpus data/squad-sample/corpus.jsonl --docs 300 --rounds 3 [--batch 100]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import attest
import httpx


def start_dev(binary: str, data: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [binary, "dev", "--data-dir", str(data), "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
         "--log-level", "warn"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    line = proc.stdout.readline().decode()
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    url = next(w for w in line.split() if w.startswith("http="))[len("http="):]
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("attest dev did not become ready")


def documents(corpus: Path, n: int) -> list[dict]:
    with open(corpus, encoding="utf-8") as f:
        rows = [json.loads(line) for line in itertools.islice(f, n)]
    return [{"id": r.get("id") or r["_id"], "title": r.get("title", ""), "text": r["text"]} for r in rows]


def curl_upload(url: str, collection: str, docs: list[dict], batch: int, scratch: Path) -> int:
    accepted = 0
    for i in range(0, len(docs), batch):
        body = scratch / f"{collection}-{i}.ndjson"
        body.write_text("".join(json.dumps(d) + "\n" for d in docs[i:i + batch]), encoding="utf-8")
        out = subprocess.run(
            ["curl", "-sS", "--fail-with-body", "-H", "content-type: application/x-ndjson",
             "--data-binary", f"@{body}", f"{url}/v1/collections/{collection}/documents"],
            check=True, capture_output=True,
        )
        accepted += json.loads(out.stdout)["accepted"]
    return accepted


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=100)
    args = ap.parse_args()
    binary = os.environ["ATTEST_BIN"]
    docs = documents(args.corpus, args.docs)
    with tempfile.TemporaryDirectory(prefix="attest-upload-bench-") as tmp:
        proc, url = start_dev(binary, Path(tmp) / "data")
        try:
            rates: dict[str, list[float]] = {"curl": [], "client": []}
            with attest.Client(url, timeout=600) as client:
                for r in range(args.rounds):
                    arms = ["curl", "client"] if r % 2 == 0 else ["client", "curl"]
                    for arm in arms:
                        name = f"{arm}-{r}"
                        client.create_collection(name)
                        started = time.perf_counter()
                        if arm == "curl":
                            accepted = curl_upload(url, name, docs, args.batch, Path(tmp))
                        else:
                            accepted = client.upload_documents(
                                name, docs, batch_size=args.batch, progress=False).accepted
                        took = time.perf_counter() - started
                        rates[arm].append(accepted / took)
                        print(f"round {r} {arm:6}: {accepted} docs in {took:.2f} s = {accepted / took:.1f} docs/s",
                              flush=True)
        finally:
            proc.terminate()
            proc.wait(30)
    curl, client = statistics.median(rates["curl"]), statistics.median(rates["client"])
    print(f"median docs/s: curl NDJSON {curl:.1f}, client {client:.1f}; client / curl = {client / curl:.3f}")
    sys.exit(0 if client / curl >= 0.9 else 1)


if __name__ == "__main__":
    main()
