"""Answerability rows from the company near-miss data (issue 68: data/company-nearmiss/{train,dev,test}), the text
companies index, where the topic never disappears: the hard negative is the neighbour's fact — the Drift Mini's
charge time asked of the Drift Max, the Orders API's limit asked of the Returns API.

A split directory is BEIR-like: corpus.jsonl (`_id, title, text, domain, company`) and queries.jsonl (`_id, text,
answerable, answers, gold_doc, domain, company, kind, near_doc, near_answer`); kinds answerable, attribute_absent,
sibling_entity, other_condition, number_never_given, false_premise; `near_doc` is the document stating the
neighbour's fact, `near_answer` that fact. Rows are data.answerability_rows' (split, question, sentence, context =
title + previous sentence, label, kind, answers):

- answerable: the gold document's sentence holding the answer (`answer`, with the answers for the span head), its
  best other sentence and one at random half the time (`answer_removed`), the sentence of `near_doc` (when it has
  one) that does not hold the answer (`nearmiss_answerable`), and the best sentence of the company's best BM25
  document other than the gold one (`other_article`);
- unanswerable (kind K, unanswerable in its corpus by construction): the sentence of `near_doc` stating
  `near_answer` (else its best-overlapping sentence) and the best sentences of the company's top BM25 documents,
  all `nearmiss_K`, so `--kind-weight nearmiss_sibling_entity=3` weights them up.

Retrieval is within the question's company (its corpus is what an index of that company would hold). The split is
the directory's: train.py trains on a `train` directory only (`company_rows` refuses to tag dev or test rows
"train") and reports on the rows of `--company-heldout` directories.
"""

import hashlib
import os
from collections import defaultdict

from data import Bm25, answer_context, content_set, holds_answer, load_jsonl, sentences, title_text

HELD_OUT_SPLITS = ("dev", "test")


def company_digest(train_dirs, heldout_dirs):
    """A short name of the company files a set of examples was built from (the examples cache's key)."""
    h = hashlib.sha256()
    for role, dirs in (("train", train_dirs), ("heldout", heldout_dirs)):
        for d in dirs:
            h.update(role.encode())
            for name in ("corpus.jsonl", "queries.jsonl"):
                with open(f"{d}/{name}", "rb") as f:
                    h.update(f.read())
    return h.hexdigest()[:10]


def company_rows(split_dir, rng, split="train", bm25_k=2):
    """Answerability rows of one company-nearmiss split directory, every row tagged `split`."""
    if split == "train" and os.path.basename(os.path.normpath(split_dir)) in HELD_OUT_SPLITS:
        raise ValueError(f"{split_dir} is a held-out split: report on it (--company-heldout), never train on it")
    corpus = load_jsonl(f"{split_dir}/corpus.jsonl")
    queries = load_jsonl(f"{split_dir}/queries.jsonl")
    by_id = {d["_id"]: d for d in corpus}
    sents = {d["_id"]: sentences(d["text"]) for d in corpus}
    docs_of = defaultdict(list)
    for d in corpus:
        docs_of[d["company"]].append(d["_id"])
    bm25 = {c: Bm25([f"{title_text(by_id[i]['title'])} {by_id[i]['text']}" for i in ids])
            for c, ids in docs_of.items()}
    rows, seen = [], set()

    def add(q, doc_id, i, label, kind, answers=()):
        key = (q, doc_id, i)
        if i is None or key in seen:
            return
        seen.add(key)
        ss = sents[doc_id]
        rows.append((split, q, ss[i], answer_context(title_text(by_id[doc_id]["title"]), ss, i), label, kind,
                     list(answers)))

    def best(doc_id, question, avoid=()):
        """The sentence of the document sharing most content words with the question (not one holding `avoid`)."""
        qset = content_set(question)
        ss = sents[doc_id]
        cand = [j for j in range(len(ss)) if not (avoid and holds_answer(ss[j], avoid))]
        return max(cand, key=lambda j: (len(content_set(ss[j]) & qset), -j)) if cand else None

    def top(q, k, skip):
        ids = docs_of[q["company"]]
        return [ids[i] for i in bm25[q["company"]].top(q["text"], k + len(skip)) if ids[i] not in skip][:k]

    for q in queries:
        text, answers = q["text"], [a for a in q.get("answers") or [] if a.strip()]
        near = q.get("near_doc")
        near = near if near in by_id and sents[near] else None
        if q["answerable"]:
            gold = q.get("gold_doc")
            if gold not in by_id:
                continue
            ss = sents[gold]
            pos = [i for i, s in enumerate(ss) if holds_answer(s, answers)]
            if not pos:
                continue
            add(text, gold, pos[0], 1, "answer", answers)
            others = [j for j in range(len(ss)) if j not in pos]
            if others:
                qset = content_set(text)
                hard = max(others, key=lambda j: (len(content_set(ss[j]) & qset), -j))
                add(text, gold, hard, 0, "answer_removed")
                rest = [j for j in others if j != hard]
                if rest and rng.random() < 0.5:
                    add(text, gold, rng.choice(rest), 0, "answer_removed")
            if near and near != gold:
                j = best(near, text, answers)
                if j is not None:
                    add(text, near, j, 0, "nearmiss_answerable")
            for d in top(q, 1, {gold, near}):
                j = best(d, text, answers)
                if j is not None:
                    add(text, d, j, 0, "other_article")
            continue
        kind = f"nearmiss_{q['kind']}"
        if near:
            fact = [str(q["near_answer"])] if q.get("near_answer") else []
            stating = [j for j, s in enumerate(sents[near]) if fact and holds_answer(s, fact)]
            add(text, near, stating[0] if stating else best(near, text), 0, kind)
        for d in top(q, bm25_k, {near}):
            add(text, d, best(d, text), 0, kind)
    return rows
