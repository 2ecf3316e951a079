#!/usr/bin/env python3
"""Builds data/squad-sample/ (the bundled demo corpus and test fixture) from a squad-dev BEIR folder.

Usage: scripts/prepare-sample.py [SQUAD_DEV_DIR] [OUT_DIR]
Deterministic: the same input gives the same output.
"""
import json
import random
import sys
from pathlib import Path

ARTICLES = ["Super_Bowl_50", "Nikola_Tesla", "Normans", "Rhine", "Oxygen", "Black_Death"]
QUESTIONS = 100
UNANSWERABLE = 50

src = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "data/squad-dev")
out = Path(sys.argv[2] if len(sys.argv) > 2 else Path(__file__).resolve().parent.parent / "data/squad-sample")
out.mkdir(parents=True, exist_ok=True)

corpus = [json.loads(l) for l in open(src / "corpus.jsonl")]
kept = [d for d in corpus if d["title"] in ARTICLES]
ids = {d["_id"] for d in kept}
with open(out / "corpus.jsonl", "w") as f:
    for d in kept:
        f.write(json.dumps({"id": d["_id"], "title": d["title"].replace("_", " "), "text": d["text"]}, ensure_ascii=False) + "\n")

queries = [json.loads(l) for l in open(src / "queries.jsonl")]
rng = random.Random(7)
answerable = sorted((q for q in queries if q["answerable"] and q["gold_doc"] in ids), key=lambda q: q["_id"])
unanswerable = sorted((q for q in queries if not q["answerable"]), key=lambda q: q["_id"])
picked = rng.sample(answerable, QUESTIONS) + rng.sample(unanswerable, UNANSWERABLE)
with open(out / "queries.jsonl", "w") as f:
    for q in picked:
        f.write(json.dumps({"id": q["_id"], "text": q["text"], "answers": q["answers"], "answerable": q["answerable"],
                            "gold_doc": q["gold_doc"]}, ensure_ascii=False) + "\n")
print(f"{len(kept)} paragraphs, {len(picked)} questions -> {out}")
