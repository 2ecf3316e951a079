#!/usr/bin/env python3
"""Re-embedding N documents through `attest dev` while it serves (issue 70, item 3): the figure in
docs/BENCHMARKS.md.

Starts `attest dev` (MiniLM as its embedder) in a fresh data directory, ingests N documents made of squad-dev's
passages (two different passages each, so that no document nearly duplicates another and is refused as one) into a
collection of 2 shards, then re-embeds it with bge-small-en-v1.5 while
one thread searches and another writes new documents and deletes old ones. Prints the job's time and documents per
second, the searches run and failed, and whether every write of the job's time is there afterwards (lost writes:
documents accepted and not deleted that the collection does not hold, by count).

    scripts/bench-reembed.py 100000        # uses $CARGO_TARGET_DIR/debug/attest
    scripts/bench-reembed.py 100000 --existing DIR   # the job alone, over the collection a run left in DIR

On this 2-core VM the ingest and the job take ~85 minutes each at 100k, more than a working session holds beside
anything else: a run whose job was cancelled (`POST /v1/reembed/jobs/{id}/cancel`; the old index keeps serving)
leaves its data directory behind, and `--existing` re-embeds that collection without ingesting it again. Its
writes use new ids and texts, and its deletes take documents from the end, so that no write repeats a document the
first run wrote or deleted.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def call(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def passages():
    path = os.path.join(ROOT, "data", "squad-dev")
    texts = []
    for name in sorted(os.listdir(path)):
        if name.endswith(".jsonl") and "corpus" in name:
            with open(os.path.join(path, name)) as f:
                for line in f:
                    d = json.loads(line)
                    texts.append((d.get("title", ""), d["text"]))
    if not texts:
        sys.exit(f"no corpus*.jsonl under {path}")
    return texts


def document(texts, doc_id, j):
    """Document `j`: passages j and j + 1 + j // len(texts) (mod their count), distinct pairs up to len(texts)²."""
    a = texts[j % len(texts)]
    b = texts[(j + 1 + j // len(texts)) % len(texts)]
    return {"id": doc_id, "title": a[0], "text": a[1] + "\n\n" + b[1]}


def live_documents(url):
    _, stats = call("GET", f"{url}/v1/collections/bench/stats")
    return sum(s["live_documents"] for s in stats["shards"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n", type=int, nargs="?", default=10000, help="documents to ingest (and re-embed)")
    parser.add_argument("--existing", metavar="DIR", help="re-embed the collection a previous run left in DIR")
    args = parser.parse_args()
    n = args.n
    binary = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "debug", "attest")
    texts = passages()
    data = args.existing or tempfile.mkdtemp(prefix="attest-reembed-bench-")
    if args.existing and not os.path.isdir(os.path.join(data, "meta")):
        sys.exit(f"{data} holds no cluster (no meta/): give the data directory of a previous run")
    # Writes of an --existing run: ids and texts no earlier run used (texts from passage pair 10^6 on, ids stamped).
    stamp = int(time.time())
    first_text = 1_000_000 + stamp % 1_000_000 if args.existing else n
    new_id = (lambda i: f"w{stamp}-{i}") if args.existing else (lambda i: f"new{i}")
    deleted_id = (lambda i: f"d{n - 1 - i}") if args.existing else (lambda i: f"d{i}")
    env = dict(os.environ, ATTEST__EMBEDDER__LOCAL__MODEL="all-minilm-l6-v2", RUST_LOG="warn")
    proc = subprocess.Popen(
        [binary, "dev", "--data-dir", data, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=open(os.path.join(data, "dev.log"), "a"), text=True, env=env,
    )
    try:
        url = None
        for line in proc.stdout:
            m = re.search(r"http=(\S+)", line)
            if m:
                url = m.group(1)
                break
        if not url.startswith("http"):
            url = "http://" + url
        if not args.existing:
            status, body = call("POST", f"{url}/v1/collections", {"name": "bench", "shards": 2})
            assert status == 201, body
            started = time.time()
            accepted = 0
            for i in range(0, n, 200):
                docs = [document(texts, f"d{j}", j) for j in range(i, min(n, i + 200))]
                status, body = call("POST", f"{url}/v1/collections/bench/documents", {"documents": docs})
                assert status == 200, body
                accepted += body["accepted"]
            print(f"ingested {accepted} of {n} documents with MiniLM in {time.time() - started:.0f} s", flush=True)

        stop = threading.Event()
        counts = {"searches": 0, "failed": 0, "written": 0, "deleted": 0}
        live = live_documents(url)

        def searcher():
            while not stop.is_set():
                status, body = call("POST", f"{url}/v1/collections/bench/search",
                                    {"query": "When did the war end?", "k": 5})
                counts["searches"] += 1
                if status != 200 or not body.get("hits"):
                    counts["failed"] += 1
                time.sleep(0.05)  # about 20 searches a second, not a search loop that takes a core

        def writer():
            i = 0
            while not stop.is_set():
                status, body = call("POST", f"{url}/v1/collections/bench/documents",
                                    {"documents": [document(texts, new_id(i), first_text + i)]})
                assert status == 200, body
                counts["written"] += body["accepted"]
                status, body = call("DELETE", f"{url}/v1/collections/bench/documents/{deleted_id(i)}")
                assert status in (200, 404), body
                counts["deleted"] += int(status == 200)
                i += 1
                time.sleep(0.05)

        threads = [threading.Thread(target=searcher), threading.Thread(target=writer)]
        for t in threads:
            t.start()
        started = time.time()
        status, job = call("POST", f"{url}/v1/collections/bench/reembed", {"embedder": "bge-small-en-v1.5"})
        assert status == 202, job
        while job["state"] == "running":
            time.sleep(1)
            _, job = call("GET", f"{url}/v1/reembed/jobs/{job['id']}")
        took = time.time() - started
        stop.set()
        for t in threads:
            t.join()
        expected = live + counts["written"] - counts["deleted"]
        held = live_documents(url)
        _, c = call("GET", f"{url}/v1/collections/bench")
        print(json.dumps({
            "documents": live, "state": job["state"], "seconds": round(took, 1),
            "documents_per_s": round(live / took, 1), "passes": job["passes"],
            "repaired": sum(s["repaired"] for s in job["shards"]),
            "searches": counts["searches"], "failed_searches": counts["failed"],
            "written_during": counts["written"], "deleted_during": counts["deleted"],
            "lost_writes": expected - held, "embedder_after": c["embedder"],
        }))
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
