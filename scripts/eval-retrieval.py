#!/usr/bin/env python3
"""Retrieval quality and ingest throughput against a running `attest dev` (HTTP API v1), standard library only.

Usage: scripts/eval-retrieval.py [--server URL] [--data DIR] [--every N] [--limit N] [--lanes bm25,dense,hybrid]
- ingests DIR/corpus.jsonl into a fresh collection with local embedding (chunks/s), and again with vectors
  supplied (random unit vectors: the ingest path without the embedder);
- runs every answerable query of DIR/queries.jsonl with lanes bm25, dense and hybrid, and reports nDCG@10,
  recall@10, recall@100 and MRR@10 against DIR/qrels/test.tsv (gold_doc when there is no qrels file).
Prints one JSON object.
"""
import argparse
import json
import math
import random
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


def call(server, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(server + path, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raise SystemExit(f"{method} {path}: {e.code} {e.read().decode()[:300]}")


def ingest(server, name, docs, vectors=False, batch=64):
    try:
        call(server, "DELETE", f"/v1/collections/{name}")
    except SystemExit:
        pass
    call(server, "POST", "/v1/collections", {"name": name})
    rng = random.Random(1)
    chunks = 0
    t = time.time()
    for i in range(0, len(docs), batch):
        part = []
        for d in docs[i:i + batch]:
            doc = {"id": d["_id"], "title": d.get("title", ""), "text": d["text"]}
            if vectors:
                v = [rng.gauss(0, 1) for _ in range(384)]
                n = math.sqrt(sum(x * x for x in v))
                doc["vector"] = [x / n for x in v]
            part.append(doc)
        chunks += call(server, "POST", f"/v1/collections/{name}/documents", {"documents": part})["chunks"]
    dt = time.time() - t
    return {"documents": len(docs), "chunks": chunks, "seconds": round(dt, 2), "chunks_per_s": round(chunks / dt, 1)}


def metrics(ranked, gold):
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in gold)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(len(gold), 10)))
    mrr = next((1 / (i + 1) for i, d in enumerate(ranked[:10]) if d in gold), 0.0)
    return {
        "ndcg_at_10": dcg / idcg if idcg else 0.0,
        "recall_at_10": len(gold & set(ranked[:10])) / len(gold),
        "recall_at_100": len(gold & set(ranked[:100])) / len(gold),
        "mrr_at_10": mrr,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default="http://127.0.0.1:7700")
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent.parent / "data/squad-dev"))
    ap.add_argument("--every", type=int, default=1, help="keep every N-th answerable query (a fixed sample)")
    ap.add_argument("--limit", type=int, default=0, help="evaluate only the first N answerable queries (after --every)")
    ap.add_argument("--lanes", default="bm25,dense,hybrid", help="the lanes to evaluate, comma-separated")
    ap.add_argument("--no-ingest", action="store_true", help="reuse the collection `eval` of an earlier run")
    a = ap.parse_args()
    data = Path(a.data)
    docs = [json.loads(l) for l in open(data / "corpus.jsonl")]
    for d in docs:
        d.setdefault("_id", d.get("id"))
    queries = [json.loads(l) for l in open(data / "queries.jsonl")]
    qrels = {}
    if (data / "qrels/test.tsv").exists():
        for line in list(open(data / "qrels/test.tsv"))[1:]:
            q, d, s = line.split("\t")
            if int(s) > 0:
                qrels.setdefault(q, set()).add(d)
    answerable = [q for q in queries if q.get("answerable", True)][:: max(1, a.every)]
    if a.limit:
        answerable = answerable[: a.limit]

    report = {"data": str(data), "ingest": {}}
    if not a.no_ingest:
        report["ingest"]["vectors_supplied"] = ingest(a.server, "eval_vectors", docs, vectors=True)
        print(json.dumps({"ingest_vectors_supplied": report["ingest"]["vectors_supplied"]}), file=sys.stderr, flush=True)
        report["ingest"]["local_embedding"] = ingest(a.server, "eval", docs)
        print(json.dumps({"ingest_local_embedding": report["ingest"]["local_embedding"]}), file=sys.stderr, flush=True)
    report["retrieval"] = {}
    chosen = a.lanes.split(",")
    for lane, lanes in [("bm25", ["bm25"]), ("dense", ["dense"]), ("hybrid", ["dense", "bm25"])]:
        if lane not in chosen:
            continue
        sums, t = {}, time.time()
        for q in answerable:
            gold = qrels.get(q.get("_id", q.get("id")), {q.get("gold_doc")})
            r = call(a.server, "POST", "/v1/collections/eval/search", {"query": q["text"], "k": 100, "lanes": lanes})
            ranked = []
            for h in r["hits"]:
                if h["doc_id"] not in ranked:
                    ranked.append(h["doc_id"])
            for k, v in metrics(ranked, gold).items():
                sums[k] = sums.get(k, 0.0) + v
        out = {k: round(v / len(answerable), 4) for k, v in sums.items()}
        out["queries"] = len(answerable)
        out["mean_ms"] = round((time.time() - t) * 1e3 / len(answerable), 2)
        report["retrieval"][lane] = out
        print(json.dumps({lane: out}), file=sys.stderr, flush=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
