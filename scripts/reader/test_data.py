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

import data
from company import company_digest, company_rows
from data import (answer_context, answerability_rows, definition_of, definition_rows, halueval_answerability_rows,
                  holds_answer, perturb_question, perturb_sentence, roman, sentences, stem, words)

SUPER_BOWL = ("Super Bowl 50 was an American football game to determine the champion of the National Football "
              "League (NFL) for the 2015 season. The American Football Conference (AFC) champion Denver Broncos "
              "defeated the National Football Conference (NFC) champion Carolina Panthers 24-10 to earn their "
              "third Super Bowl title. The game was played on February 7, 2016, at Levi's Stadium in the San "
              "Francisco Bay Area at Santa Clara, California.")
FORUM = ("Help with my GPU. I upgraded from a GTX 970 to an RTX 3070 last week. Since then the fans spin up "
         "whenever I open Chrome. My PSU is a Corsair 650W, which should be enough.")


# The cases the answer tier's splitters are tested on too (crates/attest-text/src/text.rs): the reader is
# trained on what these split and serves on what those do.
SHARED_CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "crates", "attest-text",
                            "testdata", "text_cases.json")


class SharedSplitterCases(unittest.TestCase):
    def test_the_shared_cases_split_as_the_answer_tier_does(self):
        with open(SHARED_CASES, encoding="utf-8") as f:
            cases = json.load(f)
        for text, expected in cases["sentences"]:
            self.assertEqual(sentences(text), expected, f"sentences of {text!r}")
        for text, expected in cases["words"]:
            self.assertEqual(words(text), expected, f"words of {text!r}")
        for word, expected in cases["stems"]:
            self.assertEqual(stem(word), expected, f"stem of {word!r}")


def write_set(root, corpus, queries):
    os.makedirs(root, exist_ok=True)
    with open(f"{root}/corpus.jsonl", "w") as f:
        f.writelines(json.dumps(d) + "\n" for d in corpus)
    with open(f"{root}/queries.jsonl", "w") as f:
        f.writelines(json.dumps(q) + "\n" for q in queries)


class TuningSlice(unittest.TestCase):
    """Articles NNNN % 5 == 1 set aside (train.py --tuning-slice): the same rows, drawn the same way, only their
    split changes, so that readers trained without them can have the answer tier's bars chosen on them."""

    QUESTIONS = {0: "Which NFC champion did the Denver Broncos defeat?", 1: "Who did the Broncos beat in Super Bowl 50?",
                 2: "Which team lost Super Bowl 50 to Denver?", 6: "Who sang the anthem at Super Bowl 50?"}

    def rows(self, tuning_slice):
        corpus = [{"_id": f"set-a000{a}-p000", "title": "Super_Bowl_50", "text": SUPER_BOWL} for a in (0, 1, 2)]
        queries = [{"_id": f"q{a}", "text": self.QUESTIONS[a], "answerable": True, "answers": ["Carolina Panthers"],
                    "gold_doc": f"set-a000{a}-p000"} for a in (0, 1, 2)]
        # Unanswerable: split by the article its answer was removed with (6 % 5 == 1: in the slice).
        queries.append({"_id": "q6", "text": self.QUESTIONS[6], "answerable": False, "answers": [],
                        "gold_doc": None, "source_doc_removed": "set-a0006-p000"})
        data.TUNING_SLICE = tuning_slice
        try:
            with tempfile.TemporaryDirectory() as root:
                write_set(f"{root}/set", corpus, queries)
                return answerability_rows(f"{root}/set", random.Random(7), sentence_perturbed=True)
        finally:
            data.TUNING_SLICE = False

    def test_the_slice_is_reserved_and_nothing_else_changes(self):
        off, on = self.rows(False), self.rows(True)
        self.assertEqual([r[1:] for r in off], [r[1:] for r in on], "the same rows and draws either way")
        article = {q: a for a, q in self.QUESTIONS.items()}
        slice_questions = set()
        for before, after in zip(off, on):
            a = article.get(before[1])
            if a is None:
                # A perturbed question, another text: held out stays held out; only held-in rows may be set aside.
                self.assertIn((before[0], after[0]), {("heldout", "heldout"), ("train", "train"),
                                                      ("train", "reserved")})
                continue
            want = {0: "heldout", 1: "reserved", 2: "train"}[a % 5]
            self.assertEqual(before[0], "heldout" if a % 5 == 0 else "train", before)
            self.assertEqual(after[0], want, after)
            if want == "reserved":
                slice_questions.add(before[1])
        self.assertEqual(slice_questions, {self.QUESTIONS[1], self.QUESTIONS[6]})


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


class PerturbSentence(unittest.TestCase):
    WINNER = "The Denver Broncos won Super Bowl 50, their third title."

    def test_the_shared_number_is_changed_everywhere_and_the_answer_kept(self):
        romans = 0
        for seed in range(60):
            s = perturb_sentence("Who won Super Bowl 50?", self.WINNER, ["Denver Broncos"], ["Green Bay Packers"],
                                 random.Random(seed))
            self.assertIsNotNone(s)
            self.assertIsNone(re.search(r"(?<!\w)50(?!\w)", s), s)
            self.assertIn("Denver Broncos", s)
            edition = s.removeprefix("The Denver Broncos won Super Bowl ").split(",")[0]
            self.assertNotEqual(edition, "50")
            romans += edition == edition.upper() and edition.isalpha()
        self.assertGreater(romans, 0, "no edition was written as a Roman numeral")

    def test_a_name_is_changed_only_when_whole_and_not_the_answer(self):
        q, s = "Who did the Denver Broncos defeat?", "The Denver Broncos defeated the Carolina Panthers."
        for seed in range(30):
            out = perturb_sentence(q, s, ["Carolina Panthers"], ["Green Bay Packers"], random.Random(seed))
            self.assertEqual(out, "The Green Bay Packers defeated the Carolina Panthers.")
        # "Super Bowl" is a piece of "Super Bowl MVP" and of "Super Bowl 50": not a name to change.
        self.assertIsNone(perturb_sentence("Who was the Super Bowl MVP of Super Bowl 50?",
                                           "Von Miller was named Super Bowl MVP.", ["Von Miller"], ["Warsaw"],
                                           random.Random(1)))
        # The answer itself is never the changed part.
        self.assertIsNone(perturb_sentence("Was it the Denver Broncos?", s, ["Denver Broncos"], ["Warsaw"],
                                           random.Random(1)))

    def test_roman_numerals(self):
        self.assertEqual([roman(n) for n in (19, 49, 50, 4, 1994)], ["XIX", "XLIX", "L", "IV", "MCMXCIV"])


class Definitions(unittest.TestCase):
    PEOPLE = [("hq00001-right", "Nikola Tesla (10 July 1856 – 7 January 1943) was a Serbian-American inventor and "
               "electrical engineer. He is known for the induction motor."),
              ("hq00002-right", "Thomas Edison was an American inventor and businessman. He developed the phonograph."),
              ("hq00003-right", "Pride Divide is a 1997 documentary film directed by Paris Poirier."),
              ("hq00004-right", "It was a cold winter. Nothing here defines anything.")]

    def test_a_defining_sentence_gives_its_question_and_predicate(self):
        self.assertEqual(definition_of("Nikola Tesla was a Serbian-American inventor and electrical engineer."),
                         ("Who was Nikola Tesla?", "a Serbian-American inventor and electrical engineer"))
        self.assertEqual(definition_of("The Rhine is a European river that begins in the Swiss canton of Graubünden."),
                         ("What is the Rhine?", "a European river"))
        # Born in the parenthesis: a person, whatever the predicate's noun.
        self.assertEqual(definition_of("Nabor Vargas García (born 12 July 1976) is a Mexican suspected drug lord.")[0],
                         "Who is Nabor Vargas García?")
        # The head noun decides: an album by a singer is a what.
        self.assertEqual(definition_of("Aspects is the second studio album by Australian singer Marina Prior.")[0],
                         "What is Aspects?")
        for s in ["It was a cold winter.", "He was born on 10 July 1856.", "The game was played on February 7.",
                  "Tesla was born in Smiljan."]:
            self.assertIsNone(definition_of(s), s)

    def rows(self):
        with tempfile.TemporaryDirectory() as root:
            with open(f"{root}/hal.jsonl", "w") as f:
                for _id, knowledge in self.PEOPLE:
                    for label in ("right", "hallu"):  # each passage is there twice, once per answer label
                        f.write(json.dumps({"_id": _id.replace("right", label), "knowledge": knowledge,
                                            "question": "q", "answer": "a", "label": int(label == "right")}) + "\n")
            write_set(f"{root}/squad", [{"_id": "set-a0001-p000", "title": "Super_Bowl_50", "text": SUPER_BOWL}], [])
            return definition_rows(f"{root}/hal.jsonl", f"{root}/squad", random.Random(3))

    def test_each_definition_is_a_positive_once_and_another_subjects_is_its_negative(self):
        rows = self.rows()
        positives = [r for r in rows if r[4] == 1]
        self.assertEqual(sorted(r[1] for r in positives),
                         ["What is Pride Divide?", "What was Super Bowl 50?", "Who was Nikola Tesla?",
                          "Who was Thomas Edison?"])
        for r in positives:
            self.assertEqual(r[5], "definition")
            self.assertTrue(holds_answer(r[2], r[6]), r)
        negatives = [r for r in rows if r[4] == 0]
        self.assertEqual(len(negatives), len(positives))
        answer_of = {r[1]: r[6] for r in positives}
        for r in negatives:
            self.assertEqual(r[5], "other_subject")
            self.assertFalse(holds_answer(r[2], answer_of[r[1]]), r)
            subject = r[1].split(" ", 2)[2].rstrip("?")
            self.assertNotIn(subject.removeprefix("the "), r[2], r)
        # Split as HaluEval's and squad-dev's other rows: hq00001-4 and article 1 are held in.
        self.assertEqual({r[0] for r in rows}, {"train"})


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
            rows = answerability_rows(f"{root}/set", random.Random(7), sentence_perturbed=True)
            rows += halueval_answerability_rows(f"{root}/hal.jsonl", random.Random(7), sentence_perturbed=True)
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

    def test_perturbed_sentences_no_longer_name_what_the_question_asks_about(self):
        rows, answers = self.rows()
        mirrored = [r for r in rows if r[5] == "sentence_perturbed"]
        self.assertGreater(len(mirrored), 0)
        for _, q, sentence, _, label, _, _ in mirrored:
            self.assertEqual(label, 0)
            self.assertIn(q, answers, "the question must be the original")
            # The answer string is still there (a hard negative), but something the question names is not.
            self.assertTrue(holds_answer(sentence, answers[q]), (q, sentence))
            originals = [s for s in sentences(SUPER_BOWL + " " + FORUM) if holds_answer(s, answers[q])]
            self.assertNotIn(sentence, originals)

    def test_without_the_flag_there_are_none(self):
        with tempfile.TemporaryDirectory() as root:
            write_set(f"{root}/set", [{"_id": "set-a0001-p000", "title": "Super_Bowl_50", "text": SUPER_BOWL}],
                      [{"_id": "q1", "text": "Which NFC champion did the Denver Broncos defeat?", "answerable": True,
                        "answers": ["Carolina Panthers"], "gold_doc": "set-a0001-p000"},
                       {"_id": "q2", "text": "Where did the Green Bay Packers watch the game?", "answerable": True,
                        "answers": ["Levi's Stadium"], "gold_doc": "set-a0001-p000"}])
            on = answerability_rows(f"{root}/set", random.Random(7), sentence_perturbed=True)
            off = answerability_rows(f"{root}/set", random.Random(7))
        self.assertIn("sentence_perturbed", {r[5] for r in on})
        self.assertEqual(off, [r for r in on if r[5] != "sentence_perturbed"])

    def test_positives_hold_the_answer(self):
        rows, answers = self.rows()
        positives = [r for r in rows if r[4] == 1]
        self.assertGreater(len(positives), 0)
        for _, q, sentence, _, _, _, gold in positives:
            self.assertTrue(holds_answer(sentence, gold))

    def test_abbreviations_split_as_the_answer_tier_splits(self):
        # The cases of text.rs `abbreviations_and_initials_do_not_end_sentences`: both splitters must agree.
        self.assertEqual(
            sentences("It was funded by John D. Rockefeller. Jean Ribault charted the St. Johns River in 1562. "
                      "Ted Ginn Jr. caught it; the U.S. Army e.g. came at 5 p.m. on Monday."),
            ["It was funded by John D. Rockefeller.", "Jean Ribault charted the St. Johns River in 1562.",
             "Ted Ginn Jr. caught it; the U.S. Army e.g. came at 5 p.m. on Monday."])
        self.assertEqual(
            sentences("He moved to the U.S. In 1990 he left. Pens, pencils, etc. The rest went. Go to Main St."),
            ["He moved to the U.S.", "In 1990 he left.", "Pens, pencils, etc.", "The rest went.", "Go to Main St."])
        self.assertEqual(sentences("We won. No. It lost."), ["We won.", "No.", "It lost."])

    def test_context_is_the_sentence_before(self):
        ss = sentences(SUPER_BOWL)
        self.assertEqual(answer_context("Super Bowl 50", ss, 1), f"Super Bowl 50. {ss[0]}")


# A company's corpus of look-alikes (issue 68's near misses): two e-bikes of one maker, two APIs of one shop; and a
# second company whose text shares the words, so retrieval must stay within the question's company.
COMPANY_DOCS = [
    {"_id": "acme-drift-mini", "title": "Drift Mini FAQ", "company": "acme", "domain": "reviews",
     "text": "The Drift Mini is our lightest e-bike. The Drift Mini battery charges fully in 3.5 hours. "
             "It weighs 14 kg without the rain cover."},
    {"_id": "acme-drift-max", "title": "Drift Max FAQ", "company": "acme", "domain": "reviews",
     "text": "The Drift Max is built for long commutes. Its range is 120 km on one charge. "
             "The Drift Max comes in three colours."},
    {"_id": "acme-orders-api", "title": "Orders API reference", "company": "acme", "domain": "api",
     "text": "The Orders API lists and creates orders. Its default rate limit is 600 requests per minute. "
             "Version 2 of the Orders API was released in March."},
    {"_id": "acme-returns-api", "title": "Returns API reference", "company": "acme", "domain": "api",
     "text": "The Returns API creates return labels. It accepts JSON bodies only."},
    {"_id": "bolt-drift-guide", "title": "Drift charging guide", "company": "bolt", "domain": "runbook",
     "text": "Drift chargers in the warehouse charge the Drift Max battery overnight. Rate limit alerts page the "
             "on-call engineer."},
]
COMPANY_QUERIES = [
    {"_id": "q1", "text": "How long does the Drift Mini battery take to charge?", "answerable": True,
     "answers": ["3.5 hours"], "gold_doc": "acme-drift-mini", "domain": "reviews", "company": "acme",
     "kind": "answerable", "near_doc": "acme-drift-max", "near_answer": None},
    {"_id": "q2", "text": "How long does the Drift Max battery take to charge?", "answerable": False,
     "answers": [], "gold_doc": None, "domain": "reviews", "company": "acme", "kind": "sibling_entity",
     "near_doc": "acme-drift-mini", "near_answer": "3.5 hours"},
    {"_id": "q3", "text": "What is the default rate limit of the Returns API?", "answerable": False,
     "answers": [], "gold_doc": None, "domain": "api", "company": "acme", "kind": "sibling_entity",
     "near_doc": "acme-orders-api", "near_answer": "600 requests per minute"},
    {"_id": "q4", "text": "How much does the Drift Mini weigh with the rain cover?", "answerable": False,
     "answers": [], "gold_doc": None, "domain": "reviews", "company": "acme", "kind": "other_condition",
     "near_doc": "acme-drift-mini", "near_answer": "14 kg"},
    {"_id": "q5", "text": "Why was version 3 of the Orders API withdrawn?", "answerable": False, "answers": [],
     "gold_doc": None, "domain": "api", "company": "acme", "kind": "false_premise", "near_doc": None,
     "near_answer": None},
]


class CompanyNearMisses(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.train = f"{self.dir.name}/company-nearmiss/train"
        write_set(self.train, COMPANY_DOCS, COMPANY_QUERIES)
        self.rows = company_rows(self.train, random.Random(1))
        self.doc_of = {s: d["_id"] for d in COMPANY_DOCS for s in sentences(d["text"])}

    def of(self, qid):
        text = next(q["text"] for q in COMPANY_QUERIES if q["_id"] == qid)
        return [r for r in self.rows if r[1] == text]

    def test_the_answerable_question_is_answered_by_its_gold_sentence_with_its_span(self):
        pos = [r for r in self.of("q1") if r[4] == 1]
        self.assertEqual(len(pos), 1)
        _, _, sentence, context, _, kind, answers = pos[0]
        self.assertEqual((sentence, kind, answers),
                         ("The Drift Mini battery charges fully in 3.5 hours.", "answer", ["3.5 hours"]))
        self.assertEqual(context, "Drift Mini FAQ. The Drift Mini is our lightest e-bike.")
        negatives = [r for r in self.of("q1") if r[4] == 0]
        self.assertIn("answer_removed", {r[5] for r in negatives})
        self.assertIn(("acme-drift-max", "nearmiss_answerable"), {(self.doc_of[r[2]], r[5]) for r in negatives})
        for r in negatives:
            self.assertFalse(holds_answer(r[2], ["3.5 hours"]), r)

    def test_a_near_miss_is_paired_with_the_sentence_stating_the_neighbours_fact(self):
        for qid, fact, kind in [("q2", "3.5 hours", "nearmiss_sibling_entity"),
                                ("q3", "600 requests per minute", "nearmiss_sibling_entity"),
                                ("q4", "14 kg", "nearmiss_other_condition")]:
            rows = self.of(qid)
            self.assertTrue(rows, qid)
            self.assertTrue(all(r[4] == 0 and r[5] == kind and r[6] == [] for r in rows), rows)
            self.assertIn(fact, rows[0][2], f"{qid}: the first negative is not the neighbour's fact")

    def test_retrieved_negatives_come_from_the_questions_company_only(self):
        for r in self.rows:
            self.assertTrue(self.doc_of[r[2]].startswith("acme-"), r)
        # Without a near_doc, the question still gets its company's best passages as negatives.
        q5 = self.of("q5")
        self.assertTrue(q5)
        self.assertTrue(all(r[5] == "nearmiss_false_premise" and r[4] == 0 for r in q5))
        self.assertIn("acme-orders-api", {self.doc_of[r[2]] for r in q5})

    def test_rows_are_tagged_with_the_split_and_seeded(self):
        self.assertEqual({r[0] for r in self.rows}, {"train"})
        self.assertEqual(company_rows(self.train, random.Random(1)), self.rows)
        self.assertEqual(len(set((r[1], r[2]) for r in self.rows)), len(self.rows), "a pair twice")

    def test_dev_and_test_splits_are_never_training_rows(self):
        for split in ("dev", "test"):
            held = f"{self.dir.name}/company-nearmiss/{split}"
            write_set(held, COMPANY_DOCS, COMPANY_QUERIES)
            with self.assertRaises(ValueError):
                company_rows(held, random.Random(1))
            self.assertEqual({r[0] for r in company_rows(held + "/", random.Random(1), "heldout")}, {"heldout"})

    def test_the_digest_follows_the_files(self):
        before = company_digest([self.train], [])
        write_set(self.train, COMPANY_DOCS, COMPANY_QUERIES[:-1])
        self.assertNotEqual(company_digest([self.train], []), before)
        self.assertNotEqual(company_digest([], [self.train]), company_digest([self.train], []))


if __name__ == "__main__":
    unittest.main()
