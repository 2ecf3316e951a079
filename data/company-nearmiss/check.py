#!/usr/bin/env python3
"""Checks a company near-miss split (or several): `python3 data/company-nearmiss/check.py DIR...` prints every
broken rule and exits 1 when there is one (`--each DIR...`: each directory alone, without the rules on the mix).

Per directory (corpus.jsonl, queries.jsonl, qrels/test.tsv, facts.json):
- every answerable question's answers are substrings of its gold document (case-insensitive), the gold document
  is its qrels entry, and the fact table holds its (entity, attribute, condition) with that value and document;
- every unanswerable question's (entity, attribute, condition) is absent from its company's fact table, and no
  sentence of the company's corpus (titles included) names the asked entity in full (with its version), holds a
  keyword of the attribute, the asked condition (or none of the attribute's conditions) and a value (a digit
  outside entity names, or a value of the attribute's vocabulary);
- each near-miss kind holds: `attribute_absent` and `sibling_entity` — no fact of the asked attribute for the
  entity at all, and for a sibling its neighbour is a fact of another entity; `other_condition` — the neighbour is
  the same entity and attribute under another condition; `number_never_given` — the corpus talks around the fact
  in `near_doc` without a value; `false_premise` — the asked entity (with its version) appears nowhere;
- `near_answer` is a substring of `near_doc`, which belongs to the same company;
- the textual rule finds the sentence of every written fact (so a miss on an unanswerable one means something).
Across directories (`check_dirs`): no company, document or question in two splits; at least half the questions
unanswerable; at least six kinds of text, each with at least 10% of a split's questions; every near-miss kind
present.
"""

import json
import re
import sys
from pathlib import Path

DOMAINS = ["runbook", "api", "ticket", "policy", "review", "chat"]
KINDS = ["attribute_absent", "sibling_entity", "other_condition", "number_never_given", "false_premise"]
MIN_DOMAIN_SHARE = 0.10
MIN_KIND_SHARE = 0.03
DOC_ID = re.compile(r"^([a-z]+)-([a-z]+)-\d{3}$")


def sentences(text):
    """Lines, then sentences ending in . ! ? before whitespace."""
    out = []
    for line in text.split("\n"):
        out += [s.strip() for s in re.split(r"(?<=[.!?])\s+", line) if s.strip()]
    return out


def states_a_value(sentence, surfaces, vocab):
    """Whether a sentence carries a value: a digit once every entity name is taken out, or a vocabulary value."""
    low = sentence.lower()
    for s in surfaces:
        low = low.replace(s.lower(), " ")
    return bool(re.search(r"\d", low)) or any(v.lower() in low for v in vocab)


def names_entity(sentence, name):
    """The full name as a whole phrase (`Returns API v1` is not in `Returns API v10`)."""
    return re.search(r"(?<![\w])" + re.escape(name.lower()) + r"(?![\w])", sentence.lower()) is not None


def load_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_dir(d):
    d = Path(d)
    corpus = load_jsonl(d / "corpus.jsonl")
    queries = load_jsonl(d / "queries.jsonl")
    qrels = {}
    with open(d / "qrels" / "test.tsv", encoding="utf-8") as f:
        lines = f.read().splitlines()
    for line in lines[1:]:
        qid, did, score = line.split("\t")
        qrels.setdefault(qid, {})[did] = int(score)
    with open(d / "facts.json", encoding="utf-8") as f:
        facts = json.load(f)
    return corpus, queries, qrels, lines[0] if lines else "", facts


def company_surfaces(table):
    out = set()
    for e in table["entities"] + table["fake_entities"]:
        out.add(e["name"])
        for v in e.get("versions", []):
            out.add(f"{e['name']} {v}")
    return sorted(out, key=len, reverse=True)


def check_dir(d):
    """Every broken rule of one split directory, as lines naming the question or document."""
    errors = []
    err = errors.append
    try:
        corpus, queries, qrels, header, facts = load_dir(d)
    except (OSError, ValueError, KeyError) as e:
        return [f"{d}: cannot read: {e}"]
    if header != "query-id\tcorpus-id\tscore":
        err(f"{d}: qrels header is {header!r}")
    tables = {t["company"]: t for t in facts["companies"]}
    docs = {}
    for doc in corpus:
        for k in ("_id", "title", "text", "domain", "company"):
            if k not in doc:
                err(f"doc {doc.get('_id')}: no {k}")
        m = DOC_ID.match(doc["_id"])
        if not m or m.group(1) != doc["company"] or m.group(2) != doc["domain"]:
            err(f"doc {doc['_id']}: id is not company-domain-NNN")
        if doc["_id"] in docs:
            err(f"doc {doc['_id']}: duplicate id")
        if doc["company"] not in tables:
            err(f"doc {doc['_id']}: company {doc['company']} has no fact table")
        docs[doc["_id"]] = doc
    sents = {}
    for doc in corpus:
        sents.setdefault(doc["company"], []).extend(
            (doc["_id"], s) for s in [doc["title"]] + sentences(doc["text"]))
    # The fact tables: every fact written where the table says, every talked-around fact absent from the table.
    stated, talked, vocab = {}, {}, {}
    surfaces_of = {c: company_surfaces(t) for c, t in tables.items()}
    for c, t in tables.items():
        stated[c] = {(f["entity"], f["attribute"], f["condition"]): f for f in t["facts"]}
        talked[c] = {(h["entity"], h["attribute"], h["condition"]): h for h in t["talked_around"]}
        for f in t["facts"]:
            text = docs.get(f["doc"], {}).get("text", "")
            if f["value"] not in text or f["sentence"] not in text:
                err(f"{c}: fact {f['name']} / {f['attribute']} = {f['value']!r} is not written in {f['doc']}")
            vocab.setdefault(f["attribute"], set()).add(f["value"])
        for key, h in talked[c].items():
            if key in stated[c]:
                err(f"{c}: {key} is both stated and talked around")
            if h["sentence"] not in docs.get(h["doc"], {}).get("text", ""):
                err(f"{c}: talked-around sentence of {key} is not in {h['doc']}")
    seen = set()
    for q in queries:
        qid = q.get("_id")
        for k in ("_id", "text", "answerable", "answers", "gold_doc", "source_doc_removed", "domain", "company",
                  "kind", "entity", "attribute", "condition", "asked_name", "near_doc", "near_answer"):
            if k not in q:
                err(f"{qid}: no {k}")
        if qid in seen:
            err(f"{qid}: duplicate id")
        seen.add(qid)
        c = q["company"]
        if c not in tables or q["domain"] not in DOMAINS:
            err(f"{qid}: company {c} or domain {q['domain']} unknown")
            continue
        t, key = tables[c], (q["entity"], q["attribute"], q["condition"])
        if q["near_doc"] is not None:
            nd = docs.get(q["near_doc"])
            if nd is None or nd["company"] != c:
                err(f"{qid}: near_doc {q['near_doc']} is not a document of {c}")
            elif q["near_answer"] is not None and q["near_answer"].lower() not in nd["text"].lower():
                err(f"{qid}: near_answer {q['near_answer']!r} is not in {q['near_doc']}")
        if q["answerable"]:
            gold = docs.get(q["gold_doc"])
            if q["kind"] != "answerable" or not q["answers"] or gold is None or gold["company"] != c:
                err(f"{qid}: answerable without kind, answers or a gold document of its company")
                continue
            for a in q["answers"]:
                if a.lower() not in gold["text"].lower():
                    err(f"{qid}: answer {a!r} is not in its gold document {gold['_id']}")
            if qrels.get(qid) != {gold["_id"]: 1}:
                err(f"{qid}: qrels {qrels.get(qid)} are not its gold document")
            f = stated[c].get(key)
            if f is None or f["value"] != q["answers"][0] or f["doc"] != gold["_id"]:
                err(f"{qid}: {key} is not a fact of {c} written in {gold['_id']}")
            continue
        if q["kind"] not in KINDS:
            err(f"{qid}: unanswerable kind {q['kind']!r}")
            continue
        if q["answers"] or q["gold_doc"] is not None or qid in qrels:
            err(f"{qid}: unanswerable with answers, a gold document or qrels")
        if key in stated[c]:
            err(f"{qid}: asked {key} is in the fact table of {c}")
        if q["near_doc"] is None or q["near_answer"] is None:
            err(f"{qid}: a near miss without its neighbour")
        attr = t["attributes"][q["domain"]].get(q["attribute"])
        if attr is None:
            err(f"{qid}: attribute {q['attribute']} unknown")
            continue
        of_attr = [f for k2, f in stated[c].items() if k2[1] == q["attribute"]]
        kind = q["kind"]
        real = {e["name"] for e in t["entities"] if e["domain"] == q["domain"]}
        if kind in ("attribute_absent", "sibling_entity"):
            if q["entity"] not in real or any(f["entity"] == q["entity"] for f in of_attr):
                err(f"{qid}: {kind} but {q['entity']} is not an entity or has {q['attribute']} stated")
            if kind == "sibling_entity":
                n = stated[c].get((q["near_entity"], q["attribute"], q["near_condition"]))
                if q["near_entity"] == q["entity"] or n is None or n["value"] != q["near_answer"]:
                    err(f"{qid}: sibling_entity whose neighbour is not a sibling's fact")
        elif kind == "other_condition":
            n = stated[c].get((q["entity"], q["attribute"], q["near_condition"]))
            if q["near_entity"] != q["entity"] or q["near_condition"] == q["condition"] or n is None:
                err(f"{qid}: other_condition whose neighbour is not the same entity under another condition")
        elif kind == "number_never_given":
            h = talked[c].get(key)
            if h is None or h["doc"] != q["near_doc"]:
                err(f"{qid}: number_never_given but {q['near_doc']} does not talk around {key}")
        elif kind == "false_premise":
            if any(names_entity(s, q["asked_name"]) for _, s in sents.get(c, [])):
                err(f"{qid}: false_premise but {q['asked_name']!r} is in the corpus")
        # The text itself: no sentence names the asked entity with the attribute, its condition and a value.
        values = set(attr["vocab"]) | vocab.get(q["attribute"], set())
        for did, s in stating(sents.get(c, []), q["asked_name"], attr, q["condition"], surfaces_of[c], values):
            err(f"{qid}: {did} states what it asks ({q['text']!r}): {s!r}")
    # The textual rule is worth something only if it finds what is written: every fact's own sentence.
    for c, t in tables.items():
        for f in t["facts"]:
            attr = t["attributes"][f["domain"]][f["attribute"]]
            values = set(attr["vocab"]) | vocab.get(f["attribute"], set())
            if f["doc"] in docs and not any(did == f["doc"] for did, _ in stating(
                    sents.get(c, []), f["name"], attr, f["condition"], surfaces_of[c], values)):
                err(f"{c}: the textual rule misses the sentence stating {f['name']} / {f['attribute']}")
    return errors


def stating(sents, name, attr, cond, surfaces, values):
    """The (doc, sentence) pairs that state (name, attribute, condition): the full name, a keyword of the
    attribute, the condition (or no condition of the attribute at all) and a value."""
    conds = attr["conditions"] if isinstance(attr["conditions"], list) else []
    phrase = cond if conds else None
    for did, s in sents:
        low = s.lower()
        if not names_entity(s, name) or not any(k.lower() in low for k in attr["keywords"]):
            continue
        if phrase and phrase.lower() not in low and any(p.lower() in low for p in conds):
            continue  # about another condition
        if states_a_value(s, surfaces, values):
            yield did, s


def check_dirs(dirs):
    """check_dir of each split plus the rules across splits and on the mix of questions."""
    errors, owners, doc_owner, q_owner = [], {}, {}, {}
    for d in dirs:
        errors += check_dir(d)
        try:
            corpus, queries, _, _, facts = load_dir(d)
        except (OSError, ValueError, KeyError):
            continue
        for t in facts["companies"]:
            if t["company"] in owners:
                errors.append(f"company {t['company']} is in {owners[t['company']]} and {d}")
            owners[t["company"]] = d
        for doc in corpus:
            if doc_owner.setdefault(doc["_id"], d) != d:
                errors.append(f"doc {doc['_id']} is in two splits")
        for q in queries:
            if q_owner.setdefault(q["_id"], d) != d:
                errors.append(f"question {q['_id']} is in two splits")
        n = len(queries)
        if n == 0:
            errors.append(f"{d}: no questions")
            continue
        un = [q for q in queries if not q["answerable"]]
        if 2 * len(un) < n:
            errors.append(f"{d}: only {len(un)} of {n} questions are unanswerable")
        for dom in DOMAINS:
            share = sum(1 for q in queries if q["domain"] == dom) / n
            if share < MIN_DOMAIN_SHARE:
                errors.append(f"{d}: domain {dom} has {share:.1%} of the questions")
        for k in KINDS:
            share = sum(1 for q in un if q["kind"] == k) / n
            if share < MIN_KIND_SHARE:
                errors.append(f"{d}: kind {k} has {share:.1%} of the questions")
    return errors


def main(argv):
    """`check.py DIR...` (splits of one data set), `check.py --each DIR...` (each on its own, no rules on the mix:
    the fixture of tests/fixtures/company-nearmiss)."""
    each = argv[:1] == ["--each"]
    argv = argv[1:] if each else argv
    if not argv:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    errors = [e for d in argv for e in check_dir(d)] if each else check_dirs(argv)
    for e in errors:
        print(e)
    print(f"{len(errors)} problem(s) in {', '.join(argv)}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
