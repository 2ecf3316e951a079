"""Tests of the reader's data builder (data.py): its negatives must really be negatives.

Run by `make test` (python3 -m unittest discover -s scripts/reader); standard library only, on small fixtures
written here, so no data set or PyTorch is needed.
"""

import json
import os
import random
import re
import tempfile
import unittest

from data import (answer_context, answerability_rows, halueval_answerability_rows, holds_answer, perturb_question,
                  sentences)

SUPER_BOWL = ("Super Bowl 50 was an American football game to determine the champion of the National Football "
              "League (NFL) for the 2015 season. The American Football Conference (AFC) champion Denver Broncos "
              "defeated the National Football Conference (NFC) champion Carolina Panthers 24-10 to earn their "
              "third Super Bowl title. The game was played on February 7, 2016, at Levi's Stadium in the San "
              "Francisco Bay Area at Santa Clara, California.")
FORUM = ("Help with my GPU. I upgraded from a GTX 970 to an RTX 3070 last week. Since then the fans spin up "
         "whenever I open Chrome. My PSU is a Corsair 650W, which should be enough.")


def write_set(root, corpus, queries):
    os.makedirs(root, exist_ok=True)
    with open(f"{root}/corpus.jsonl", "w") as f:
        f.writelines(json.dumps(d) + "\n" for d in corpus)
    with open(f"{root}/queries.jsonl", "w") as f:
        f.writelines(json.dumps(q) + "\n" for q in queries)


class PerturbQuestion(unittest.TestCase):
    def test_a_number_the_passage_holds_is_changed_to_one_it_does_not(self):
        for seed in range(50):
            q = perturb_question("Who won Super Bowl 50?", SUPER_BOWL, ["Carolina Panthers"], random.Random(seed))
            self.assertIsNotNone(q)
            self.assertNotEqual(q, "Who won Super Bowl 50?")
            new = q.removeprefix("Who won Super Bowl ").rstrip("?")
            self.assertIsNone(re.search(rf"(?<!\d){new}(?!\d)", SUPER_BOWL), q)

    def test_a_name_is_swapped_for_one_the_passage_lacks(self):
        names = ["Carolina Panthers", "Green Bay Packers", "New England Patriots"]
        for seed in range(50):
            q = perturb_question("Which team did the Denver Broncos defeat?", SUPER_BOWL, names,
                                 random.Random(seed))
            self.assertIsNotNone(q)
            self.assertNotIn("Denver Broncos", q)
            swapped = [n for n in names if n in q]
            self.assertEqual(len(swapped), 1, q)
            self.assertNotIn(swapped[0], SUPER_BOWL)

    def test_nothing_to_change_gives_none(self):
        self.assertIsNone(perturb_question("what is the weather like?", SUPER_BOWL, ["Mars"], random.Random(1)))


class Negatives(unittest.TestCase):
    def rows(self):
        with tempfile.TemporaryDirectory() as root:
            corpus = [
                {"_id": "set-a0001-p000", "title": "Super_Bowl_50", "text": SUPER_BOWL},
                {"_id": "set-a0001-p001", "title": "Super_Bowl_50", "text": "The game was broadcast by CBS. "
                 "Beyonce and Coldplay performed at halftime, which drew 115 million viewers."},
                {"_id": "set-a0002-p000", "title": "Filtered_Reddit_Comments", "text": FORUM},
            ]
            queries = [
                {"_id": "q1", "text": "Who won Super Bowl 50?", "answerable": True,
                 "answers": ["Denver Broncos", "the Denver Broncos"], "gold_doc": "set-a0001-p000"},
                {"_id": "q2", "text": "Where was Super Bowl 50 played?", "answerable": True,
                 "answers": ["Levi's Stadium", "Santa Clara, California"], "gold_doc": "set-a0001-p000"},
                {"_id": "q3", "text": "What card did the writer have before the RTX 3070?", "answerable": True,
                 "answers": ["GTX 970", "a GTX 970"], "gold_doc": "set-a0002-p000"},
                {"_id": "q4", "text": "Which PSU does the writer own?", "answerable": True,
                 "answers": ["Corsair 650W"], "gold_doc": "set-a0002-p000"},
            ]
            write_set(f"{root}/set", corpus, queries)
            hal = [{"_id": "hq00001-right", "knowledge": SUPER_BOWL, "question": "Who won Super Bowl 50?",
                    "answer": "Denver Broncos", "label": 1},
                   {"_id": "hq00001-hallu", "knowledge": SUPER_BOWL, "question": "Who won Super Bowl 50?",
                    "answer": "Carolina Panthers", "label": 0}]
            with open(f"{root}/hal.jsonl", "w") as f:
                f.writelines(json.dumps(i) + "\n" for i in hal)
            answers = {q["text"]: q["answers"] for q in queries}
            rows = answerability_rows(f"{root}/set", random.Random(7))
            rows += halueval_answerability_rows(f"{root}/hal.jsonl", random.Random(7))
            return rows, answers

    def test_answer_removed_negatives_never_hold_the_answer(self):
        rows, answers = self.rows()
        removed = [r for r in rows if r[5] == "answer_removed"]
        self.assertGreater(len(removed), 0)
        for _, q, sentence, _, label, _, _ in removed:
            self.assertEqual(label, 0)
            self.assertFalse(holds_answer(sentence, answers[q]), (q, sentence))

    def test_perturbed_questions_ask_what_the_passage_does_not_hold(self):
        rows, answers = self.rows()
        perturbed = [r for r in rows if r[5] == "question_perturbed"]
        self.assertGreater(len(perturbed), 0)
        for _, q, sentence, context, label, _, _ in perturbed:
            self.assertEqual(label, 0)
            self.assertNotIn(q, answers, "the question was not changed")
            # The changed question names something neither the sentence nor its context holds.
            passage = f"{context} {sentence}".lower()
            original = min(answers, key=lambda a: len(set(a.split()) ^ set(q.split())))
            new_words = [w.strip("?,.") for w in q.split() if w not in original.split()]
            self.assertTrue(new_words, q)
            held = [w for w in new_words if re.search(rf"(?<!\w){re.escape(w.lower())}(?!\w)", passage)]
            self.assertNotEqual(held, new_words, (q, passage))

    def test_positives_hold_the_answer(self):
        rows, answers = self.rows()
        positives = [r for r in rows if r[4] == 1]
        self.assertGreater(len(positives), 0)
        for _, q, sentence, _, _, _, gold in positives:
            self.assertTrue(holds_answer(sentence, gold))

    def test_context_is_the_sentence_before(self):
        ss = sentences(SUPER_BOWL)
        self.assertEqual(answer_context("Super Bowl 50", ss, 1), f"Super Bowl 50. {ss[0]}")


if __name__ == "__main__":
    unittest.main()
