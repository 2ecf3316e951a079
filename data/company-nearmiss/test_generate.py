"""The company near-miss generator (issue 68): regenerated into a temporary directory, its output passes every rule
of check.py (gold answers in their gold documents; no unanswerable question's fact in its company's fact table or
stated by any sentence of its corpus; neighbours where they are said to be; companies in one split only), it is
deterministic and equal to the committed files, and the checker catches the faults it is there to catch.

    python3 -m unittest discover -s data/company-nearmiss -p 'test_*.py'
"""

import filecmp
import json
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.dont_write_bytecode = True  # no __pycache__ next to the data
sys.path.insert(0, str(HERE))

import check  # noqa: E402
import generate  # noqa: E402

SPLITS = list(generate.SPLITS)
FILES = ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "facts.json"]
FIXTURE = HERE.parent.parent / "tests" / "fixtures" / "company-nearmiss"


def load(d, name):
    return check.load_jsonl(Path(d) / name)


class Generated(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="company-nearmiss-"))
        cls.out = cls.tmp / "a"
        generate.generate(cls.out)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def dirs(self):
        return [self.out / s for s in SPLITS]

    def test_every_rule_of_the_checker_holds(self):
        self.assertEqual(check.check_dirs(self.dirs()), [])

    def test_gold_answers_are_in_their_gold_documents(self):
        n = 0
        for d in self.dirs():
            docs = {x["_id"]: x for x in load(d, "corpus.jsonl")}
            for q in load(d, "queries.jsonl"):
                if q["answerable"]:
                    n += 1
                    for a in q["answers"]:
                        self.assertIn(a.lower(), docs[q["gold_doc"]]["text"].lower(), q["_id"])
        self.assertGreater(n, 2000)

    def test_no_unanswerable_fact_is_in_its_fact_table(self):
        for d in self.dirs():
            with open(d / "facts.json", encoding="utf-8") as f:
                tables = {t["company"]: t for t in json.load(f)["companies"]}
            stated = {(c, x["entity"], x["attribute"], x["condition"]) for c, t in tables.items() for x in t["facts"]}
            for q in load(d, "queries.jsonl"):
                key = (q["company"], q["entity"], q["attribute"], q["condition"])
                self.assertEqual(key in stated, q["answerable"], q["_id"])

    def test_size_mix_and_splits(self):
        total = 0
        companies = {}
        for s in SPLITS:
            qs = load(self.out / s, "queries.jsonl")
            total += len(qs)
            if s != "train":
                self.assertGreaterEqual(len(qs), 800, s)
            self.assertGreaterEqual(sum(not q["answerable"] for q in qs) * 2, len(qs), s)
            self.assertGreaterEqual(len({q["domain"] for q in qs}), 6, s)
            self.assertEqual({q["kind"] for q in qs}, {"answerable", *check.KINDS}, s)
            for q in qs:
                companies.setdefault(q["company"], set()).add(s)
            docs = load(self.out / s, "corpus.jsonl")
            per_company = {}
            for x in docs:
                per_company[x["company"]] = per_company.get(x["company"], 0) + 1
            for c, n in per_company.items():
                self.assertTrue(30 <= n <= 70, f"{c} has {n} documents")
        self.assertGreaterEqual(total, 5000)
        self.assertTrue(all(len(v) == 1 for v in companies.values()), companies)
        self.assertGreaterEqual(len(companies), 9)

    def test_generation_is_deterministic_and_matches_the_committed_files(self):
        again = self.tmp / "b"
        generate.generate(again)
        for s in SPLITS:
            for f in FILES:
                self.assertTrue(filecmp.cmp(self.out / s / f, again / s / f, shallow=False), f"{s}/{f} differs")
                committed = HERE / s / f
                self.assertTrue(committed.exists() and filecmp.cmp(self.out / s / f, committed, shallow=False),
                                f"{committed} is stale: run python3 data/company-nearmiss/generate.py")

    def test_the_fixture_is_the_generators_and_its_near_misses_are_hard(self):
        out = self.tmp / "fixture"
        generate.write_fixture(out)
        for f in FILES + ["questions.json"]:
            self.assertTrue(filecmp.cmp(out / f, FIXTURE / f, shallow=False),
                            f"tests/fixtures/company-nearmiss/{f} is stale: run generate.py --fixture")
        self.assertEqual(check.check_dir(out), [])
        with open(out / "questions.json", encoding="utf-8") as f:
            nms = json.load(f)["near_misses"]
        docs = {x["_id"]: x for x in load(out, "corpus.jsonl")}
        self.assertTrue(8 <= len(docs) <= 12)
        self.assertEqual(sorted(n["kind"] for n in nms), ["attribute_absent", "other_condition", "sibling_entity"])
        for n in nms:
            near = n["expected_neighbour"]
            # The neighbour's document states the neighbour's fact, under the attribute's words, and is the
            # only one naming the attribute for that family of entities: the obvious retrieval hit.
            self.assertIn(near["sentence"], docs[near["doc"]]["text"])
            self.assertIn(near["value"], near["sentence"])
            self.assertIn(n["twin"]["answers"][0], docs[n["twin"]["gold_doc"]]["text"])
            self.assertNotEqual((n["asked_name"], n["attribute"], n["condition"]),
                                (near["name"], near["attribute"], near["condition"]))


class CheckerCatches(unittest.TestCase):
    """The checker fails on the faults it exists for (so a passing run means something)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="company-nearmiss-check-"))
        generate.write_fixture(cls.tmp / "ok")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def broken(self, name, edit):
        d = self.tmp / name
        shutil.copytree(self.tmp / "ok", d)
        corpus, queries = load(d, "corpus.jsonl"), load(d, "queries.jsonl")
        edit(corpus, queries)
        generate.write_jsonl(d / "corpus.jsonl", corpus)
        generate.write_jsonl(d / "queries.jsonl", queries)
        return check.check_dir(d)

    def test_a_gold_answer_missing_from_its_document(self):
        def edit(corpus, queries):
            q = next(q for q in queries if q["answerable"])
            doc = next(x for x in corpus if x["_id"] == q["gold_doc"])
            doc["text"] = doc["text"].replace(q["answers"][0], "a number")
        self.assertTrue(any("is not in its gold document" in e for e in self.broken("gold", edit)))

    def test_a_sentence_stating_an_unanswerable_fact(self):
        def edit(corpus, queries):
            doc = next(x for x in corpus if x["_id"] == "parcelpost-api-001")
            doc["text"] += " The default rate limit of the Returns API v1 is 300 requests per minute."
        self.assertTrue(any("states what it asks" in e for e in self.broken("stated", edit)))

    def test_a_stated_fact_asked_as_unanswerable(self):
        def edit(corpus, queries):
            q = next(q for q in queries if q["answerable"])
            q.update(answerable=False, answers=[], gold_doc=None, kind="attribute_absent")
        self.assertTrue(any("is in the fact table" in e for e in self.broken("table", edit)))

    def test_a_neighbour_that_is_not_in_its_document(self):
        def edit(corpus, queries):
            next(q for q in queries if not q["answerable"])["near_answer"] = "999 requests per minute"
        self.assertTrue(any("near_answer" in e for e in self.broken("near", edit)))

    def test_a_company_in_two_splits(self):
        self.assertTrue(any("is in" in e and "parcelpost" in e
                            for e in check.check_dirs([self.tmp / "ok", self.tmp / "ok"])))


if __name__ == "__main__":
    unittest.main()
