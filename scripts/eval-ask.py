#!/usr/bin/env python3
"""Answer-tier figures against a running router with the answer routes (`attest dev`):
coverage (answerable questions answered), accuracy (answered with the gold paragraph cited),
hallucination rate (unanswerable questions answered) and ask latency p50/p95.

    attest dev --data-dir DIR --http 127.0.0.1:7730 --grpc 127.0.0.1:7731 &
    attest --server http://127.0.0.1:7730 collection create default
    attest --server http://127.0.0.1:7730 ingest data/squad-sample/corpus.jsonl
    scripts/eval-ask.py --server http://127.0.0.1:7730 --queries data/squad-sample/queries.jsonl
"""
import argparse
import json
import urllib.request


def ask(server, collection, question):
    req = urllib.request.Request(
        f"{server}/v1/collections/{collection}/ask",
        data=json.dumps({"question": question}).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default="http://127.0.0.1:7700")
    ap.add_argument("--collection", default="default")
    ap.add_argument("--queries", default="data/squad-sample/queries.jsonl")
    args = ap.parse_args()
    queries = [json.loads(l) for l in open(args.queries) if l.strip()]
    answerable = answered = gold = unanswerable = hallucinated = 0
    reasons, latencies = {}, []
    for q in queries:
        a = ask(args.server, args.collection, q["text"])
        latencies.append(a["latency_ms"]["total"])
        if a["status"] != "answered":
            reasons[a["reason"]] = reasons.get(a["reason"], 0) + 1
        if q.get("answerable", True):
            answerable += 1
            if a["status"] == "answered":
                answered += 1
                gold += any(c["doc_id"] == q.get("gold_doc") for c in a["citations"])
        else:
            unanswerable += 1
            hallucinated += a["status"] == "answered"
    latencies.sort()
    pct = lambda p: latencies[min(len(latencies) - 1, int(p * len(latencies)))]
    print(json.dumps({
        "questions": len(queries),
        "coverage": answered / max(answerable, 1),
        "accuracy_gold_cited": gold / max(answerable, 1),
        "precision_gold_cited": gold / max(answered, 1),
        "hallucination_rate": hallucinated / max(unanswerable, 1),
        "abstention_reasons": reasons,
        "ask_p50_ms": pct(0.5), "ask_p95_ms": pct(0.95),
    }))


if __name__ == "__main__":
    main()
