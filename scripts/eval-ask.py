#!/usr/bin/env python3
"""Answer-tier figures (EVALUATION.md "Answering") against a running `attest dev` (or answer role):

- hallucination rate = unanswerable questions answered / unanswerable questions
- coverage = answerable questions answered / answerable questions
- accuracy = answered answerable questions whose answer contains a gold answer string (normalised)
  / answered answerable questions; also the share citing the gold paragraph
- citation validity = citations that resolve (the [n] marker is in the answer, the chunk's document is in the
  corpus and the quoted span is in that document) / all citations
- abstention reasons; ask latency p50/p95 per stage (the response's `latency_ms`)

    attest dev --data-dir DIR --http 127.0.0.1:7710 --grpc 127.0.0.1:7711 &
    # ingest the corpus into collection `squad` (scripts/train-reranker.sh does both)
    scripts/eval-ask.py --server http://127.0.0.1:7710 --collection squad \\
        --data data/squad-dev [--limit N] [--every K] [--json OUT]

`--every K` keeps every K-th question (a fixed, reproducible sample); `--split heldout` keeps only questions
whose article the reranker did not train on (article number % 5 == 0, see crates/attest-answer/src/rerank).
"""
import argparse
import json
import re
import string
import sys
import time
import unicodedata
import urllib.request
from concurrent.futures import ThreadPoolExecutor


def ask(server, collection, question):
    req = urllib.request.Request(
        f"{server}/v1/collections/{collection}/ask",
        data=json.dumps({"question": question}).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def normalise(text):
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def squash(text):
    return " ".join(unicodedata.normalize("NFKC", text).split())


def article(doc_id):
    m = re.search(r"-a(\d+)-", doc_id or "")
    return int(m.group(1)) if m else None


def pct(values, p):
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(p * len(values)))], 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default="http://127.0.0.1:7710")
    ap.add_argument("--collection", default="squad")
    ap.add_argument("--data", default="data/squad-dev")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--split", choices=["all", "heldout"], default="all")
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()

    corpus = {}
    for line in open(f"{args.data}/corpus.jsonl"):
        if line.strip():
            d = json.loads(line)
            corpus[d.get("_id") or d["id"]] = squash(d["text"])
    queries = [json.loads(l) for l in open(f"{args.data}/queries.jsonl") if l.strip()]
    queries = queries[:: max(args.every, 1)]
    if args.split == "heldout":
        # Unanswerable questions have no gold doc: keep them all (the reranker never saw their articles).
        queries = [q for q in queries if not q.get("gold_doc") or article(q["gold_doc"]) % 5 == 0]
    if args.limit:
        queries = queries[: args.limit]

    started = time.time()
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        answers = list(pool.map(lambda q: ask(args.server, args.collection, q["text"]), queries))
    wall = time.time() - started

    n_answerable = n_unanswerable = answered = accurate = gold_cited = hallucinated = 0
    citations = valid = 0
    reasons, stages = {}, {}
    for q, a in zip(queries, answers):
        for stage, ms in a.get("latency_ms", {}).items():
            stages.setdefault(stage, []).append(ms)
        if a["status"] != "answered":
            reasons[a["reason"]] = reasons.get(a["reason"], 0) + 1
        else:
            for c in a["citations"]:
                citations += 1
                doc = corpus.get(c["doc_id"])
                valid += bool(doc) and squash(c["quote"]) in doc and f"[{c['n']}]" in a["answer"]
        if q.get("answerable", True):
            n_answerable += 1
            if a["status"] == "answered":
                answered += 1
                text = normalise(a["answer"])
                accurate += any(normalise(g) and normalise(g) in text for g in q.get("answers", []))
                gold_cited += any(c["doc_id"] == q.get("gold_doc") for c in a["citations"])
        else:
            n_unanswerable += 1
            hallucinated += a["status"] == "answered"
    report = {
        "data": args.data,
        "questions": len(queries),
        "answerable": n_answerable,
        "unanswerable": n_unanswerable,
        "hallucination_rate": round(hallucinated / max(n_unanswerable, 1), 4),
        "coverage": round(answered / max(n_answerable, 1), 4),
        "accuracy": round(accurate / max(answered, 1), 4),
        "gold_cited_of_answered": round(gold_cited / max(answered, 1), 4),
        "citation_validity": round(valid / max(citations, 1), 4),
        "citations": citations,
        "reasons": reasons,
        "latency_ms": {s: {"p50": pct(v, 0.5), "p95": pct(v, 0.95)} for s, v in sorted(stages.items())},
        "wall_s": round(wall, 1),
        "parallel": args.parallel,
    }
    print(json.dumps(report, indent=1))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
