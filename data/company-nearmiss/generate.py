#!/usr/bin/env python3
"""Writes the company near-miss QA set (issue 68) from fact tables: made-up companies, each with runbooks, API
reference, support tickets, internal policies, product reviews and team chat about many look-alike entities, and
questions derived from each company's fact table — answerable ones (the gold answer is the value as the gold
document writes it) and near misses that are unanswerable by construction (the asked entity, attribute and
condition are absent from the table every document was written from).

    python3 data/company-nearmiss/generate.py                 # regenerates train/ dev/ test/ byte for byte
    python3 data/company-nearmiss/generate.py --out DIR        # the same into DIR
    python3 data/company-nearmiss/generate.py --fixture OUT    # the small e2e corpus of tests/fixtures

Python 3.11 standard library only; deterministic (one seed, ordered iteration). check.py verifies the output and
runs at the end of every generation.
"""

import argparse
import json
import os
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.dont_write_bytecode = True  # no __pycache__ next to the data
sys.path.insert(0, str(HERE))

import domains as D  # noqa: E402
import check  # noqa: E402

SEED = 68
# slug, name, product type, currency; the split is by company, never by question.
COMPANIES = [
    ("acme", "Acme Parcel", "e-stroller", "$"),
    ("borealis", "Borealis Post", "smartwatch", "€"),
    ("cobalt", "Cobalt Ship", "e-bike", "£"),
    ("dunmore", "Dunmore Logistics", "earbuds", "$"),
    ("everly", "Everly Labels", "robot-vacuum", "€"),
    ("fernhill", "Fernhill Freightworks", "e-stroller", "£"),
    ("granite", "Granite Courier", "smartwatch", "$"),
    ("halcyon", "Halcyon Mail", "e-bike", "€"),
    ("ironbark", "Ironbark Parcels", "earbuds", "£"),
    ("juniper", "Juniper Dispatch", "robot-vacuum", "$"),
]
SPLITS = {"train": ["acme", "borealis", "cobalt", "dunmore", "everly", "fernhill"],
          "dev": ["granite", "halcyon"], "test": ["ironbark", "juniper"]}
KINDS = ["attribute_absent", "sibling_entity", "other_condition", "number_never_given", "false_premise"]
# Share of each near-miss kind among a domain's unanswerable questions (refilled from the others when short).
KIND_WEIGHTS = {"other_condition": 0.28, "sibling_entity": 0.28, "attribute_absent": 0.18,
                "number_never_given": 0.13, "false_premise": 0.13}
STATE_P = 0.55          # chance that a fact of the table is written into the corpus
HEDGE_P = 0.35          # chance that an unstated numeric fact is talked around (number_never_given)
ANSWERABLE_PER_DOMAIN = 44
UNANSWERABLE_RATIO = 1.12


# ------------------------------------------------------------------------------------------- attributes
def attributes(company, domain):
    """Attribute key → spec for one company's kind of text, with its conditions resolved."""
    if domain == "api":
        return {a["key"]: dict(a, conditions="version") for a in D.API_ATTRS}
    if domain == "review":
        ptype = D.PRODUCT_TYPES[company["product_type"]]
        return {k: dict(D._REVIEW_ATTRS[k], key=k, conditions=conds) for k, conds in ptype["attrs"].items()}
    table = {"runbook": D.RUNBOOK_ATTRS, "policy": D.POLICY_ATTRS, "ticket": D.TICKET_ATTRS,
             "chat": D.CHAT_ATTRS}[domain]
    out = {}
    for a in table:
        conds = a.get("conditions")
        if conds == "regions":
            conds = [D.REGIONS[r][0] for r in company["regions"]]
        out[a["key"]] = dict(a, conditions=conds)
    return out


def conditions_of(company, entity, attr):
    """The conditions an attribute takes for an entity ([None] when it has none)."""
    if attr["conditions"] == "version":
        return list(entity["versions"])
    return list(attr["conditions"]) if attr["conditions"] else [None]


def surface(entity_name, attr, cond):
    """The entity's full name as text writes it (an API's version is part of its name)."""
    return f"{entity_name} {cond}" if attr["conditions"] == "version" and cond else entity_name


def cond_phrase(attr, cond):
    return None if attr["conditions"] == "version" else cond


def fill(template, n, v=None, c=None, **extra):
    """A template with its placeholders; without a condition its condition phrases are dropped."""
    if not c:
        template = template.replace("{C}, ", "").replace(" {c}", "").replace("{c} ", "")
    s = template.format(n=n, v=v, c=c or "", C=(c[0].upper() + c[1:]) if c else "", **extra)
    return s[0].upper() + s[1:]


def draw_value(rng, company, domain, entity, attr, cond):
    cur = company["currency"]
    key = attr["key"]
    if attr["value"] is not None:
        return attr["value"](rng, entity["name"], cond)
    if domain == "review" and key == "weight":
        lo, hi, unit = D.PRODUCT_TYPES[company["product_type"]]["weight"]
        if isinstance(lo, int):
            base = rng.randint(lo, hi)
            return f"{base + (4 if cond and cond.startswith('with ') else 0)}{unit}"
        return f"{rng.uniform(lo, hi):.1f}{unit}"
    if domain == "review" and key == "price":
        lo, hi = D.PRODUCT_TYPES[company["product_type"]]["price"]
        return D.money(cur, rng.randrange(lo, hi, 10) + 9 if rng.random() < 0.5 else rng.randrange(lo, hi, 10))
    if domain == "policy" and key == "amount":
        region = next(r for r, (phrase, _) in D.REGIONS.items() if phrase == cond)
        rcur = D.REGIONS[region][1]
        how = D.POLICY_ENTITIES[entity["name"]][1]
        if how[0] == "money":
            return D.money(rcur, rng.randrange(how[1], how[2] + 1, how[3])) + how[4]
        if how[0] == "cents":
            return D.money(rcur, rng.choice(how[1])) + how[2]
        return f"{rng.choice(how[1])}{how[2]}"
    if key == "credit":
        return D.money(cur, rng.choice([25, 40, 50, 75, 100, 150, 200, 250, 500]))
    if key == "budget":
        return D.money(cur, rng.choice([15, 20, 25, 40, 60, 80, 120]) * 1000)
    raise ValueError(f"no value rule for {domain}/{key}")


# ------------------------------------------------------------------------------------------- companies
def plan_company(slug, name, ptype, currency, rng):
    """Entities, the fact table, the talked-around facts and the documents of one made-up company."""
    company = dict(slug=slug, name=name, product_type=ptype, currency=currency,
                   regions=sorted(rng.sample(sorted(D.REGIONS), 4)), entities=[], facts=[], hedges=[], docs=[],
                   fakes=[])
    ents = company["entities"]
    # api: five APIs with their versions, one document per version.
    nouns = rng.sample(sorted(D.API_NOUNS), 5)
    for noun in nouns:
        ents.append(dict(name=f"{noun} API", domain="api", family="API", versions=rng.choice(D.API_VERSION_SETS),
                         purpose=D.API_NOUNS[noun]))
    unused = [n for n in sorted(D.API_NOUNS) if n not in nouns]
    company["fakes"] += [dict(name=f"{n} API", domain="api", family="API", versions=["v1", "v2"])
                         for n in rng.sample(unused, 2)]
    for e in ents[:2]:  # a version after the newest one
        company["fakes"].append(dict(name=e["name"], domain="api", family="API", fake_version=True,
                                     versions=[f"v{int(e['versions'][-1][1:]) + 1}"]))
    # review: two families of look-alike products (or one of six).
    fams = rng.sample(D.PRODUCT_FAMILIES, 2)
    tiers = rng.sample(D.PRODUCT_TIERS, 6)
    products = [f"{fams[0]} {t}" for t in tiers[:4]] + [f"{fams[1]} {t}" for t in tiers[:3]]
    for p in products:
        ents.append(dict(name=p, domain="review", family=p.split()[0]))
    company["fakes"] += [dict(name=f"{fams[0]} {tiers[4]}", domain="review", family=fams[0]),
                         dict(name=f"{fams[1]} {tiers[3]}", domain="review", family=fams[1]),
                         dict(name=f"{fams[1]} {tiers[5]}", domain="review", family=fams[1])]
    # runbook: ten alerts.
    alerts = rng.sample(sorted(D.ALERTS), 13)
    for a in alerts[:10]:
        ents.append(dict(name=a, domain="runbook", family="alert"))
    company["fakes"] += [dict(name=a, domain="runbook", family="alert") for a in alerts[10:]]
    # policy: nine allowances in their policy documents.
    pol = rng.sample(sorted(D.POLICY_ENTITIES), 11)
    for p in sorted(pol[:9]):
        ents.append(dict(name=p, domain="policy", family=D.POLICY_ENTITIES[p][0]))
    company["fakes"] += [dict(name=p, domain="policy", family=D.POLICY_ENTITIES[p][0]) for p in pol[9:]]
    # ticket: ten customers in look-alike pairs.
    prefixes = rng.sample(D.CUSTOMER_PREFIXES, 5)
    for pre in prefixes:
        sufs = rng.sample(D.CUSTOMER_SUFFIXES, 3)
        for s in sufs[:2]:
            ents.append(dict(name=f"{pre} {s}", domain="ticket", family=pre, issue=rng.choice(D.ISSUES)))
        if pre in prefixes[:3]:
            company["fakes"].append(dict(name=f"{pre} {sufs[2]}", domain="ticket", family=pre))
    # chat: ten projects.
    projects = rng.sample(D.PROJECTS, 12)
    for p in projects[:10]:
        ents.append(dict(name=p, domain="chat", family="project"))
    company["fakes"] += [dict(name=p, domain="chat", family="project") for p in projects[10:]]

    # The fact table: each (entity, attribute, condition) is written into the corpus with STATE_P; one attribute
    # per kind of text is, for half the companies, never written at all (attribute_absent across the board).
    dropped = {d: (rng.choice(sorted(attributes(company, d))) if rng.random() < 0.5 else None) for d in D.DOMAINS}
    for e in ents:
        d = e["domain"]
        attrs = attributes(company, d)
        stated = []
        # A third of the entities never have one more attribute written (sibling_entity, attribute_absent).
        own_drop = rng.choice(sorted(attrs)) if rng.random() < 0.35 else None
        for key, a in attrs.items():
            if key in (dropped[d], own_drop):
                continue
            for c in conditions_of(company, e, a):
                if key == "sunset" and c == e["versions"][-1]:
                    continue  # the newest version of an API is not being switched off
                if rng.random() < STATE_P:
                    stated.append((key, c))
        keys = sorted(k for k in attrs if k != dropped[d] and k != "sunset")
        for c in (e["versions"] if d == "api" else [None]):
            if not any(c is None or sc == c for _, sc in stated):
                key = rng.choice(keys)
                stated.append((key, c if d == "api" else conditions_of(company, e, attrs[key])[-1]))
        for key, c in stated:
            company["facts"].append(dict(entity=e["name"], domain=d, attribute=key, condition=c,
                                         value=draw_value(rng, company, d, e, attrs[key], c)))
        for key, a in attrs.items():
            if not a["hedge"]:
                continue
            for c in conditions_of(company, e, a):
                if (key, c) not in stated and rng.random() < HEDGE_P:
                    company["hedges"].append(dict(entity=e["name"], domain=d, attribute=key, condition=c))
    assign_docs(company, rng)
    return company


def assign_docs(company, rng):
    """Documents of the company and which of them states each fact (exactly one)."""
    slug, docs = company["slug"], company["docs"]
    counters = {d: 0 for d in D.DOMAINS}

    def new_doc(domain, title, entities, **extra):
        counters[domain] += 1
        doc = dict(_id=f"{slug}-{domain}-{counters[domain]:03d}", domain=domain, title=title, entities=entities,
                   **extra)
        docs.append(doc)
        return doc

    home = {}  # (entity, condition-or-None) → doc id
    for e in company["entities"]:
        d, n = e["domain"], e["name"]
        if d == "api":
            for v in e["versions"]:
                title = rng.choice(["{n} reference", "Reference: {n}", "{n}: endpoints and limits"]).format(
                    n=f"{n} {v}")
                home[(n, v)] = [new_doc(d, title, [n], version=v)["_id"]]
        elif d == "review":
            ids = [new_doc(d, rng.choice(["Review: {n} after three months", "{n} review: a parent's view",
                                          "Long-term review of the {n}", "{n}: honest review"]).format(n=n),
                           [n], style="review")["_id"]]
            if rng.random() < 0.5 and sum(f["entity"] == n for f in company["facts"]) >= 3:
                ids.append(new_doc(d, f"{n}: questions and answers", [n], style="qa")["_id"])
            home[(n, None)] = ids
        elif d == "runbook":
            home[(n, None)] = [new_doc(d, f"Runbook: {n}", [n])["_id"]]
        elif d == "ticket":
            title = rng.choice(["Support ticket: {n}", "Ticket from {n}", "{n}: support case"]).format(n=n)
            home[(n, None)] = [new_doc(d, title, [n], issue=e["issue"])["_id"]]
    groups = {}
    for e in company["entities"]:
        if e["domain"] == "policy":
            groups.setdefault(e["family"], []).append(e["name"])
    for g in sorted(groups):
        doc = new_doc("policy", rng.choice(["{g}", "{g} (2025)", "{g}: what you can claim"]).format(g=g),
                      groups[g])
        for n in groups[g]:
            home[(n, None)] = [doc["_id"]]
    projects = [e["name"] for e in company["entities"] if e["domain"] == "chat"]
    i = 0
    while i < len(projects):
        take = projects[i:i + 2]
        i += 2
        title = rng.choice(["Notes: weekly product sync, {d}", "Meeting notes: planning, {d}",
                            "#eng-leads chat, {d}"]).format(d=f"{rng.randint(1, 28)} {rng.choice(D.MONTHS[:6])}")
        doc = new_doc("chat", title, take)
        for n in take:
            home[(n, None)] = [doc["_id"]]
    for f in company["facts"] + company["hedges"]:
        key = (f["entity"], f["condition"]) if f["domain"] == "api" else (f["entity"], None)
        f["doc"] = rng.choice(home[key])
    for key, ids in home.items():  # a document states at least one fact
        for i in ids:
            mine = [f for f in company["facts"] if f["doc"] == i]
            if not mine:
                spare = [f for f in company["facts"] if f["doc"] in ids and
                         sum(g["doc"] == f["doc"] for g in company["facts"]) > 1 and
                         (f["entity"], f["condition"] if f["domain"] == "api" else None) == key]
                assert spare, f"{i} states nothing"
                spare[0]["doc"] = i


# ------------------------------------------------------------------------------------------- rendering
def keywords_in(text, keywords):
    low = text.lower()
    return [k for k in keywords if k.lower() in low]


def company_surfaces(company):
    """Every name the company's text can carry: entities, API versions, look-alikes that do not exist."""
    out = set()
    for e in company["entities"] + company["fakes"]:
        out.add(e["name"])
        for v in e.get("versions", []):
            out.add(f"{e['name']} {v}")
    return sorted(out, key=len, reverse=True)


def render_company(company, rng):
    """Writes every document's text; records the sentence stating each fact and talking around each hedge."""
    slug = company["slug"]
    all_attrs = {d: attributes(company, d) for d in D.DOMAINS}
    ents = {(e["domain"], e["name"]): e for e in company["entities"]}
    surfaces = company_surfaces(company)
    fillers = {"api": D.API_FILLERS, "review": D.REVIEW_FILLERS, "runbook": D.RUNBOOK_FILLERS,
               "policy": D.POLICY_FILLERS, "ticket": D.TICKET_FILLERS, "chat": D.CHAT_FILLERS}
    by_doc = {}
    for f in company["facts"]:
        by_doc.setdefault(f["doc"], []).append(("fact", f))
    for h in company["hedges"]:
        by_doc.setdefault(h["doc"], []).append(("hedge", h))

    def neutral(domain, s):
        hit = keywords_in(s, [k for a in all_attrs[domain].values() for k in a["keywords"]])
        assert not hit, f"{slug}: a sentence that should state nothing holds {hit}: {s!r}"
        return s

    def statement(domain, item, kind):
        a = all_attrs[domain][item["attribute"]]
        n = surface(item["entity"], a, item["condition"])
        c = cond_phrase(a, item["condition"])
        extra = {"m": D.ALERTS[item["entity"]][1]} if domain == "runbook" else {}
        pool = a["say"] if kind == "fact" else a["hedge"]
        s = fill(rng.choice(pool), n=n, v=item.get("value"), c=c, **extra)
        own = keywords_in(s, a["keywords"])
        other = keywords_in(s, [k for key, b in all_attrs[domain].items() if key != a["key"]
                                for k in b["keywords"] if k not in a["keywords"]])
        assert own and not other, f"{slug}: {s!r} holds {own} of its own and {other} of others"
        assert n.lower() in s.lower() and (not c or c.lower() in s.lower()), s
        if kind == "fact":
            assert item["value"] in s, s
        else:
            assert not check.states_a_value(s, surfaces, a.get("vocab", [])), f"hedge gives a value: {s!r}"
        item["name"] = n
        item["sentence"] = s
        return s

    def paragraphs(sents, lo=3, hi=6):
        out, i = [], 0
        while i < len(sents):
            k = rng.randint(lo, hi)
            if len(sents) - (i + k) < lo:
                k = len(sents) - i
            out.append(" ".join(sents[i:i + k]))
            i += k
        return out

    for doc in company["docs"]:
        d = doc["domain"]
        items = by_doc.get(doc["_id"], [])
        pool = list(fillers[d])
        rng.shuffle(pool)
        name0 = doc["entities"][0] + (f" {doc['version']}" if d == "api" else "")

        def filler():
            if not pool:
                pool.extend(rng.sample(fillers[d], len(fillers[d])))
            return neutral(d, fill(pool.pop(), n=name0))

        if d == "review" and doc.get("style") == "qa":
            blocks = [neutral(d, f"Answers from the {company['name']} support team to common questions about "
                                 f"the {name0}.")]
            for kind, it in items:
                a = all_attrs[d][it["attribute"]]
                q = fill(rng.choice(a["ask"]), n=name0, c=cond_phrase(a, it["condition"]))
                blocks.append(f"Q: {q}\nA: {statement(d, it, kind)}")
            blocks.append(f"Q: Is the {name0} worth it?\nA: {filler()}")
            doc["text"] = "\n\n".join(blocks)
            continue
        if d == "chat":
            speakers = rng.sample(D.SPEAKERS, 4)
            lines = [f"Attendees: {', '.join(speakers)}."]
            for n in doc["entities"]:
                mine = [(k, it) for k, it in items if it["entity"] == n]
                rng.shuffle(mine)
                lines.append(f"{speakers[0]}: Next up, {n}.")
                for k, it in mine:
                    lines.append(f"{rng.choice(speakers)}: {statement(d, it, k)}")
                lines.append(f"{rng.choice(speakers)}: {filler()}")
            lines.append(f"{speakers[0]}: {filler()}")
            doc["text"] = "\n".join(lines)
            continue
        intro = {
            "api": lambda: f"The {name0} {ents[('api', doc['entities'][0])]['purpose']}.",
            "review": lambda: f"I have had the {name0}, "
                              f"{D.PRODUCT_TYPES[company['product_type']]['what']}, for a few months now.",
            "runbook": lambda: f"{name0} means that {D.ALERTS[name0][0]}.",
            "policy": lambda: f"This page is the {D.POLICY_ENTITIES[doc['entities'][0]][0].lower()} of "
                              f"{company['name']}: what you can claim and how.",
            "ticket": lambda: f"{name0} opened this ticket because {doc['issue']}.",
        }[d]()
        paras = [" ".join([neutral(d, intro), filler(), filler()])]
        for n in doc["entities"]:
            mine = [statement(d, it, k) for k, it in items if it["entity"] == n]
            mine += [filler() for _ in range(max(0, 3 - len(mine)))]
            rng.shuffle(mine)
            paras += paragraphs(mine)
        doc["text"] = "\n\n".join(paras)


# ------------------------------------------------------------------------------------------- questions
def question(company, q_kind, domain, entity, attr, cond, text, answer=None, gold=None, near=None,
             near_doc=None):
    a_name = surface(entity, attr, cond)
    q = {"text": text, "answerable": answer is not None, "answers": [answer] if answer is not None else [],
         "gold_doc": gold, "source_doc_removed": None, "domain": domain, "company": company["slug"],
         "tenant": company["slug"], "kind": q_kind, "entity": entity, "attribute": attr["key"], "condition": cond, "asked_name": a_name,
         "near_entity": near["entity"] if near else None, "near_condition": near["condition"] if near else None,
         "near_doc": near_doc or (near["doc"] if near else None), "near_answer": near["value"] if near else None}
    return q


def family_of(company, domain, name):
    for e in company["entities"] + company["fakes"]:
        if e["domain"] == domain and e["name"] == name:
            return e["family"]
    return None


def best_near(company, candidates, domain, entity, cond, doc=None):
    """The neighbour most likely to be retrieved for the question: same document, same family, same condition."""
    fam = family_of(company, domain, entity)

    def rank(f):
        return (f["doc"] != doc, family_of(company, domain, f["entity"]) != fam, f["condition"] != cond,
                f["entity"], str(f["condition"]), f["attribute"])
    return min(candidates, key=rank) if candidates else None


def derive_questions(company, rng):
    facts = {(f["entity"], f["attribute"], f["condition"]): f for f in company["facts"]}
    hedges = {(h["entity"], h["attribute"], h["condition"]): h for h in company["hedges"]}
    out = []
    for d in D.DOMAINS:
        attrs = attributes(company, d)
        dfacts = [f for f in company["facts"] if f["domain"] == d]
        ents = [e for e in company["entities"] if e["domain"] == d]
        answerable = []
        extra = set(f"{f['entity']}|{f['attribute']}|{f['condition']}" for f in
                    rng.sample(dfacts, min(len(dfacts), max(0, ANSWERABLE_PER_DOMAIN - len(dfacts)))))
        for f in dfacts:
            a = attrs[f["attribute"]]
            asks = rng.sample(a["ask"], len(a["ask"]))
            near = best_near(company, [g for g in dfacts if g["attribute"] == f["attribute"] and g is not f],
                             d, f["entity"], f["condition"])
            times = 2 if f"{f['entity']}|{f['attribute']}|{f['condition']}" in extra else 1
            for t in asks[:times]:
                text = fill(t, n=f["name"], c=cond_phrase(a, f["condition"]))
                answerable.append(question(company, "answerable", d, f["entity"], a, f["condition"], text,
                                           answer=f["value"], gold=f["doc"], near=near))
        cands = {k: [] for k in KINDS}
        for e in ents:
            for key, a in attrs.items():
                for c in conditions_of(company, e, a):
                    t = (e["name"], key, c)
                    if t in facts:
                        continue
                    same_attr = [f for f in dfacts if f["attribute"] == key]
                    if t in hedges:
                        h = hedges[t]
                        in_doc = [f for f in company["facts"] if f["doc"] == h["doc"]]
                        near = best_near(company, [f for f in in_doc if f["attribute"] == key] or
                                         [f for f in in_doc if f["entity"] == e["name"]] or in_doc, d, e["name"],
                                         c, h["doc"])
                        cands["number_never_given"].append((t, near, h["doc"]))
                        continue
                    same_e = [f for f in same_attr if f["entity"] == e["name"]]
                    if same_e:
                        cands["other_condition"].append((t, best_near(company, same_e, d, e["name"], c), None))
                        continue
                    # Near a sibling that has the attribute, or near the entity's own other facts: both kinds
                    # hold; the draw below gives the question to one of them.
                    sib = [f for f in same_attr if f["entity"] != e["name"]]
                    if sib:
                        cands["sibling_entity"].append((t, best_near(company, sib, d, e["name"], c), None))
                    own = [f for f in dfacts if f["entity"] == e["name"]]
                    doc_of = next((f["doc"] for f in own if f["condition"] == c), None)
                    cands["attribute_absent"].append((t, best_near(company, own, d, e["name"], c, doc_of), None))
        for fk in company["fakes"]:
            if fk["domain"] != d:
                continue
            for key, a in attrs.items():
                for c in conditions_of(company, fk, a):
                    near = best_near(company, [f for f in dfacts if f["attribute"] == key], d, fk["name"], c)
                    if near:
                        cands["false_premise"].append(((fk["name"], key, c), near, None))
        n_un = round(len(answerable) * UNANSWERABLE_RATIO)
        chosen, used = [], set()
        for k in KINDS:
            rng.shuffle(cands[k])
        quota = {k: round(n_un * KIND_WEIGHTS[k]) for k in KINDS}
        for capped in (True, False):  # round robin within each kind's share, then refill from what is left
            progress = True
            while progress and len(chosen) < n_un:
                progress = False
                for k in KINDS:
                    if len(chosen) >= n_un or (capped and quota[k] <= 0):
                        continue
                    while cands[k] and cands[k][0][0] in used:
                        cands[k].pop(0)
                    if cands[k]:
                        t, near, near_doc = cands[k].pop(0)
                        used.add(t)
                        quota[k] -= 1
                        chosen.append((k, t, near, near_doc))
                        progress = True
        unanswerable = []
        for k, (ent, key, c), near, near_doc in chosen:
            a = attrs[key]
            text = fill(rng.choice(a["ask"]), n=surface(ent, a, c), c=cond_phrase(a, c))
            unanswerable.append(question(company, k, d, ent, a, c, text, near=near, near_doc=near_doc))
        out += answerable + unanswerable
    for i, q in enumerate(out):
        q["_id"] = f"{company['slug']}-q{i:04d}"
    return out


# ------------------------------------------------------------------------------------------- output
QUERY_FIELDS = ["_id", "text", "answerable", "answers", "gold_doc", "source_doc_removed", "domain", "company",
                "tenant", "kind", "entity", "attribute", "condition", "asked_name", "near_entity", "near_condition",
                "near_doc", "near_answer"]


def facts_json(company):
    attrs = {}
    for d in D.DOMAINS:
        attrs[d] = {k: {"label": a["label"], "keywords": a["keywords"], "numeric": a["numeric"],
                        "conditions": a["conditions"], "vocab": a.get("vocab", [])}
                    for k, a in attributes(company, d).items()}
    strip = ["domain", "family", "name", "versions"]
    return {"company": company["slug"], "name": company["name"], "product_type": company["product_type"],
            "currency": company["currency"], "regions": company["regions"], "attributes": attrs,
            "entities": [{k: e[k] for k in strip if k in e} for e in company["entities"]],
            "fake_entities": [{k: e[k] for k in strip if k in e} for e in company["fakes"]],
            "facts": [{k: f[k] for k in ["entity", "domain", "attribute", "condition", "name", "value", "doc",
                                         "sentence"]} for f in company["facts"]],
            "talked_around": [{k: h[k] for k in ["entity", "domain", "attribute", "condition", "name", "doc",
                                                 "sentence"]} for h in company["hedges"]]}


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def write_split(out_dir, companies, queries, rng):
    os.makedirs(out_dir / "qrels", exist_ok=True)
    corpus = [{"_id": d["_id"], "title": d["title"], "text": d["text"], "domain": d["domain"],
               "company": c["slug"], "tenant": c["slug"]} for c in companies for d in c["docs"]]
    queries = list(queries)
    rng.shuffle(queries)  # companies and kinds interleaved, so every n-th question is a fair sample
    write_jsonl(out_dir / "corpus.jsonl", corpus)
    write_jsonl(out_dir / "queries.jsonl", [{k: q[k] for k in QUERY_FIELDS} for q in queries])
    with open(out_dir / "qrels" / "test.tsv", "w", encoding="utf-8", newline="\n") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for q in queries:
            if q["answerable"]:
                f.write(f"{q['_id']}\t{q['gold_doc']}\t1\n")
    with open(out_dir / "facts.json", "w", encoding="utf-8", newline="\n") as f:
        json.dump({"companies": [facts_json(c) for c in companies]}, f, ensure_ascii=False, indent=1)
        f.write("\n")


def build_all():
    rng = random.Random(SEED)
    companies, queries = {}, {}
    for slug, name, ptype, cur in COMPANIES:
        c = plan_company(slug, name, ptype, cur, rng)
        render_company(c, rng)
        companies[slug] = c
        queries[slug] = derive_questions(c, rng)
    return companies, queries


def stats(out):
    """Counts per split × domain × kind (the README's table)."""
    table = {}
    for split in SPLITS:
        rows = [json.loads(l) for l in open(out / split / "queries.jsonl", encoding="utf-8")]
        docs = sum(1 for _ in open(out / split / "corpus.jsonl", encoding="utf-8"))
        per = {}
        for q in rows:
            per.setdefault(q["domain"], {}).setdefault(q["kind"], 0)
            per[q["domain"]][q["kind"]] += 1
        table[split] = {"companies": SPLITS[split], "documents": docs, "questions": len(rows),
                        "unanswerable": sum(1 for q in rows if not q["answerable"]), "by_domain": per}
    return table


def stats_markdown(table):
    kinds = ["answerable"] + KINDS
    lines = ["| split | domain | " + " | ".join(kinds) + " | total |", "|---|---|" + "---:|" * (len(kinds) + 1)]
    for split, t in table.items():
        tot = {k: 0 for k in kinds}
        for d in D.DOMAINS:
            row = t["by_domain"].get(d, {})
            for k in kinds:
                tot[k] += row.get(k, 0)
            lines.append(f"| {split} | {d} | " + " | ".join(str(row.get(k, 0)) for k in kinds) +
                         f" | {sum(row.values())} |")
        lines.append(f"| **{split}** | **all** ({len(t['companies'])} companies, {t['documents']} docs) | " +
                     " | ".join(f"**{tot[k]}**" for k in kinds) + f" | **{t['questions']}** |")
    return "\n".join(lines)


def update_readme(out, table):
    readme = out / "README.md"
    if not readme.exists():
        return
    text = readme.read_text(encoding="utf-8")
    start, end = "<!-- stats:begin -->", "<!-- stats:end -->"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{start}\n{stats_markdown(table)}\n{end}{tail}"
        with open(readme, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)


def generate(out):
    out = Path(out)
    companies, queries = build_all()
    rng = random.Random(SEED + 1)
    for split, slugs in SPLITS.items():
        write_split(out / split, [companies[s] for s in slugs], [q for s in slugs for q in queries[s]], rng)
    errors = check.check_dirs([out / s for s in SPLITS])
    if errors:
        raise SystemExit("generated data fails its checks:\n" + "\n".join(errors[:40]))
    return stats(out)


# ------------------------------------------------------------------------------------------- fixture
FIXTURE = dict(slug="parcelpost", name="Parcelpost", product_type="e-stroller", currency="$", regions=["UK", "US"])
# (domain, entity, attribute, condition, value): the whole fact table of the fixture company.
FIXTURE_FACTS = [
    ("api", "Returns API", "timeout", "v1", "30 seconds"),
    ("api", "Returns API", "page_size", "v1", "100 items"),
    ("api", "Returns API", "sunset", "v1", "31 March 2026"),
    ("api", "Returns API", "rate_limit", "v2", "600 requests per minute"),
    ("api", "Returns API", "timeout", "v2", "20 seconds"),
    ("api", "Returns API", "page_size", "v2", "250 items"),
    ("api", "Orders API", "rate_limit", "v2", "1200 requests per minute"),
    ("api", "Orders API", "payload", "v2", "5 MB"),
    ("review", "Drift Mini", "charge_time", None, "2.5 hours"),
    ("review", "Drift Mini", "weight", "without the rain cover", "6.2 kg"),
    ("review", "Drift Mini", "price", None, "$349"),
    ("review", "Drift Max", "weight", "with the rain cover", "7.4 kg"),
    ("review", "Drift Max", "battery_life", None, "10 hours"),
    ("review", "Drift Max", "price", None, "$499"),
    ("runbook", "CertificateExpiringSoon", "threshold", "in production", "14 days"),
    ("runbook", "CertificateExpiringSoon", "severity", None, "SEV2"),
    ("runbook", "CertificateExpiringSoon", "owner_team", None, "Platform SRE"),
    ("runbook", "DiskSpaceLow", "threshold", "in production", "85%"),
    ("runbook", "DiskSpaceLow", "pending", None, "5 minutes"),
    ("policy", "hotel allowance", "amount", "in the UK", "£180 per night"),
    ("policy", "meal allowance", "amount", "in the UK", "£45 per day"),
    ("ticket", "Northwind Foods", "plan", None, "Growth"),
    ("ticket", "Northwind Foods", "resolution", None, "re-issuing the API key"),
    ("chat", "Project Falcon", "owner", None, "Ana Costa"),
    ("chat", "Project Falcon", "launch", "beta launch", "12 May 2025"),
]
# (kind, domain, entity, attribute, asked condition, the neighbour's (entity, attribute, condition)): each near miss
# is hard — the neighbour's document is the obvious retrieval hit — and its twin asks the neighbour's fact.
FIXTURE_NEAR_MISSES = [
    ("other_condition", "api", "Returns API", "rate_limit", "v1", ("Returns API", "rate_limit", "v2")),
    ("sibling_entity", "review", "Drift Max", "charge_time", None, ("Drift Mini", "charge_time", None)),
    ("attribute_absent", "runbook", "CertificateExpiringSoon", "escalation", "out of hours",
     ("CertificateExpiringSoon", "threshold", "in production")),
]


def fixture_company():
    rng = random.Random(SEED)
    c = dict(FIXTURE, entities=[], facts=[], hedges=[], docs=[], fakes=[])
    seen = []
    for d, e, key, cond, value in FIXTURE_FACTS:
        if (d, e) not in seen:
            seen.append((d, e))
        c["facts"].append(dict(entity=e, domain=d, attribute=key, condition=cond, value=value))
    for d, e in seen:
        ent = dict(name=e, domain=d, family={"api": "API", "review": e.split()[0], "runbook": "alert",
                                             "policy": "Travel policy", "ticket": e.split()[0],
                                             "chat": "project"}[d])
        if d == "api":
            ent["versions"] = sorted({f[3] for f in FIXTURE_FACTS if f[1] == e})
            ent["purpose"] = D.API_NOUNS[e.split()[0]]
        if d == "ticket":
            ent["issue"] = D.ISSUES[0]
        c["entities"].append(ent)
    assign_docs(c, rng)
    render_company(c, rng)
    return c, rng


def write_fixture(out):
    out = Path(out)
    c, rng = fixture_company()
    facts = {(f["entity"], f["attribute"], f["condition"]): f for f in c["facts"]}
    near_misses, queries = [], []
    for kind, d, e, key, cond, nkey in FIXTURE_NEAR_MISSES:
        attrs = attributes(c, d)
        a, near = attrs[key], facts[nkey]
        na = attrs[nkey[1]]
        ask = fill(a["ask"][0], n=surface(e, a, cond), c=cond_phrase(a, cond))
        twin = fill(na["ask"][0], n=near["name"], c=cond_phrase(na, near["condition"]))
        q = question(c, kind, d, e, a, cond, ask, near=near)
        t = question(c, "answerable", d, nkey[0], na, nkey[2], twin, answer=near["value"], gold=near["doc"])
        queries += [q, t]
        near_misses.append({
            "kind": kind, "domain": d, "question": ask, "entity": e, "attribute": key, "attribute_label": a["label"],
            "condition": cond, "asked_name": q["asked_name"],
            "expected_neighbour": {"entity": near["entity"], "name": near["name"], "attribute": near["attribute"],
                                   "attribute_label": na["label"], "condition": near["condition"],
                                   "value": near["value"], "doc": near["doc"], "sentence": near["sentence"]},
            "twin": {"question": twin, "answers": [near["value"]], "gold_doc": near["doc"]}})
    for i, q in enumerate(queries):
        q["_id"] = f"{c['slug']}-q{i:04d}"
    os.makedirs(out / "qrels", exist_ok=True)
    write_jsonl(out / "corpus.jsonl", [{"_id": d["_id"], "title": d["title"], "text": d["text"],
                                        "domain": d["domain"], "company": c["slug"],
                                        "tenant": c["slug"]} for d in c["docs"]])
    write_jsonl(out / "queries.jsonl", [{k: q[k] for k in QUERY_FIELDS} for q in queries])
    with open(out / "qrels" / "test.tsv", "w", encoding="utf-8", newline="\n") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for q in queries:
            if q["answerable"]:
                f.write(f"{q['_id']}\t{q['gold_doc']}\t1\n")
    with open(out / "facts.json", "w", encoding="utf-8", newline="\n") as f:
        json.dump({"companies": [facts_json(c)]}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(out / "questions.json", "w", encoding="utf-8", newline="\n") as f:
        json.dump({"company": c["slug"], "generated_by": "data/company-nearmiss/generate.py --fixture",
                   "near_misses": near_misses}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = check.check_dir(out)
    if errors:
        raise SystemExit("fixture fails its checks:\n" + "\n".join(errors))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(HERE), help="where train/ dev/ test/ go (default: next to this file)")
    ap.add_argument("--fixture", metavar="OUT", help="write only the small e2e corpus into OUT")
    args = ap.parse_args(argv)
    if args.fixture:
        write_fixture(args.fixture)
        print(f"fixture written to {args.fixture}")
        return
    table = generate(args.out)
    update_readme(Path(args.out), table)
    print(stats_markdown(table))


if __name__ == "__main__":
    main()
