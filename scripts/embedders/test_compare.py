"""Tests of compare.py's metrics, held-out rule and query sampling: standard library only, no model or data set.

    python3 -m unittest discover -s scripts/embedders -p 'test_*.py'
"""
import json
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compare import (article_number, held_out, load_set, mean_metrics, mrr_at_k, ndcg_at_k, paired_bootstrap,  # noqa: E402
                     passage_text, query_metrics, read_qrels, recall_at_k, sample_queries)


class Metrics(unittest.TestCase):
    # Ten ranked passages; the gold ones are at ranks 2 and 5 (1-based).
    RANKED = ["d1", "g1", "d2", "d3", "g2", "d4", "d5", "d6", "d7", "d8", "g3"]

    def test_ndcg_by_hand(self):
        gold = {"g1", "g2"}
        dcg = 1 / math.log2(3) + 1 / math.log2(6)
        idcg = 1 / math.log2(2) + 1 / math.log2(3)
        self.assertAlmostEqual(ndcg_at_k(self.RANKED, gold), dcg / idcg)
        self.assertAlmostEqual(ndcg_at_k(self.RANKED, gold), 0.6241, places=4)  # (0.6309 + 0.3869) / (1 + 0.6309)

    def test_ndcg_single_gold(self):
        self.assertEqual(ndcg_at_k(["g", "x"], {"g"}), 1.0)
        self.assertAlmostEqual(ndcg_at_k(["x", "g"], {"g"}), 1 / math.log2(3))
        self.assertEqual(ndcg_at_k(["x"] * 10 + ["g"], {"g"}), 0.0)  # rank 11 is past the cut

    def test_ndcg_ideal_is_capped_at_k(self):
        gold = {f"g{i}" for i in range(12)}
        self.assertAlmostEqual(ndcg_at_k(sorted(gold), gold), 1.0)

    def test_recall(self):
        gold = {"g1", "g2", "g3"}
        self.assertAlmostEqual(recall_at_k(self.RANKED, gold), 2 / 3)  # g3 is at rank 11
        self.assertAlmostEqual(recall_at_k(self.RANKED, gold, 100), 1.0)
        self.assertEqual(recall_at_k(["x"], {"g"}), 0.0)

    def test_mrr(self):
        self.assertAlmostEqual(mrr_at_k(self.RANKED, {"g1", "g2"}), 0.5)
        self.assertAlmostEqual(mrr_at_k(self.RANKED, {"g2"}), 0.2)
        self.assertEqual(mrr_at_k(self.RANKED, {"g3"}), 0.0)  # rank 11

    def test_mean_and_query_metrics(self):
        per_query = [query_metrics(["g", "x"], {"g"}), query_metrics(["x", "g"], {"g"})]
        mean = mean_metrics(per_query)
        self.assertEqual(mean["mrr_at_10"], 0.75)
        self.assertEqual(mean["recall_at_10"], 1.0)
        self.assertEqual(mean["ndcg_at_10"], round((1 + 1 / math.log2(3)) / 2, 4))

    def test_paired_bootstrap(self):
        same = paired_bootstrap([0.5, 1.0, 0.0], [0.5, 1.0, 0.0])
        self.assertEqual(same, {"mean": 0.0, "ci95": [0.0, 0.0]})
        better = paired_bootstrap([0.0] * 50, [1.0] * 50)
        self.assertEqual(better["mean"], 1.0)
        self.assertEqual(better["ci95"], [1.0, 1.0])


class HeldOut(unittest.TestCase):
    def test_article_number(self):
        self.assertEqual(article_number("shift-reddit-a0015-p000"), 15)
        self.assertEqual(article_number("squad-dev-a0043-p033"), 43)
        # Split at the LAST "-p" and the last "-a": earlier look-alikes in the prefix do not count.
        self.assertEqual(article_number("x-a0007-pa-a0010-p002"), 10)
        self.assertEqual(article_number("shift-new_wiki-a0020-p015"), 20)
        for bad in ("no-article", "doc-p001", "doc-aXY-p001", "", None):
            self.assertIsNone(article_number(bad), bad)

    def test_held_out_is_article_multiple_of_five(self):
        self.assertTrue(held_out("shift-reddit-a0000-p000"))
        self.assertTrue(held_out("shift-reddit-a1955-p000"))
        self.assertFalse(held_out("shift-reddit-a1952-p000"))
        self.assertFalse(held_out("shift-reddit-a0001-p005"))  # the passage number does not matter
        self.assertFalse(held_out("not-a-passage-id"))


class Sampling(unittest.TestCase):
    QUERIES = [
        {"_id": "q0", "text": "a", "answerable": True},
        {"_id": "q1", "text": "b", "answerable": False},
        {"_id": "q2", "text": "c", "answerable": True},
        {"_id": "q3", "text": "d", "answerable": True},
        {"_id": "q4", "text": "e", "answerable": True},  # no qrels row
        {"_id": "q5", "text": "f", "answerable": True},
    ]
    QRELS = {"q0": {"s-a0000-p000"}, "q1": {"s-a0003-p000"}, "q2": {"s-a0001-p002"}, "q3": {"s-a0010-p001"},
             "q5": {"s-a0002-p000"}}

    def ids(self, rule):
        return [q["_id"] for q, _ in sample_queries(self.QUERIES, self.QRELS, rule)]

    def test_rules(self):
        self.assertEqual(self.ids("all"), ["q0", "q2", "q3", "q5"])  # answerable with qrels, in file order
        self.assertEqual(self.ids("every=2"), ["q0", "q3"])
        self.assertEqual(self.ids("heldout"), ["q0", "q3"])
        with self.assertRaises(ValueError):
            self.ids("some")

    def test_passage_text(self):
        self.assertEqual(passage_text({"title": "Super_Bowl_50", "text": "T"}), "Super_Bowl_50\n\nT")
        self.assertEqual(passage_text({"title": " ", "text": "T"}), "T")
        self.assertEqual(passage_text({"text": "T"}), "T")

    def test_load_set(self):
        with tempfile.TemporaryDirectory() as d:
            os.mkdir(os.path.join(d, "qrels"))
            with open(os.path.join(d, "corpus.jsonl"), "w") as f:
                for i in ("s-a0000-p000", "s-a0001-p002", "s-a0010-p001", "s-a0002-p000"):
                    f.write(json.dumps({"_id": i, "title": "T", "text": i}) + "\n")
            with open(os.path.join(d, "queries.jsonl"), "w") as f:
                for q in self.QUERIES:
                    f.write(json.dumps(q) + "\n")
            with open(os.path.join(d, "qrels", "test.tsv"), "w") as f:
                f.write("query-id\tcorpus-id\tscore\n")
                for q, docs in self.QRELS.items():
                    for doc in docs:
                        f.write(f"{q}\t{doc}\t1\n")
                f.write("q4\ts-a0000-p000\t0\n")  # score 0: not relevant
            self.assertNotIn("q4", read_qrels(os.path.join(d, "qrels", "test.tsv")))
            s = load_set(d + "@heldout")
            self.assertEqual(s.rule, "heldout")
            self.assertEqual([q["_id"] for q, _ in s.queries], ["q0", "q3"])
            self.assertEqual(s.checks["answerable_with_qrels"], 4)
            self.assertEqual(s.checks["gold_missing_from_corpus"], 0)
            self.assertEqual(s.key, os.path.basename(d) + "@heldout")
            self.assertEqual(load_set(d).key, os.path.basename(d))


if __name__ == "__main__":
    unittest.main()
