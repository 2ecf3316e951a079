"""Training and held-out examples for the reader, built reproducibly (seeded) from `data`.

Split (written down, by article, so nothing learned from is judged on):
- squad-dev and shift-reddit: an article (post) `…-aNNNN` is held out when NNNN % 5 == 0 (the reranker's split,
  and `attest-lab eval --heldout`'s); unanswerable questions by the article of `source_doc_removed`. With
  `TUNING_SLICE` on, articles NNNN % 5 == 1 are "reserved": neither trained on nor held out (`article_split`).
- halueval-qa: items hqNNNNN with NNNNN % 5 == 0 are held out (the lexical verifier's split).
- vitaminc-train: lines whose 0-based index % 10 == 9 are held out (never trained on).
- shift-new-wiki is never read here.

Answerability rows: (question, sentence, context = title + previous sentence), label 1 when the sentence holds a
gold answer. Negatives: the other sentences of the gold paragraph (the topic is there, the answer is not: the
"answer sentence removed" case), the best-overlapping sentence of another paragraph of the same article and of
the BM25 top paragraphs of other articles, and the answer sentence against a perturbed question: a name or a
number of the question changed for one the passage does not hold ("Super Bowl 49" against a Super Bowl 50
passage), and the mirror of that: the answer sentence with the name or number it shares with the question changed,
its title and context untouched ("… to win Super Bowl XLIX" in the article on Super Bowl 50, asked "Who won Super
Bowl 50?": a true sentence about another edition, round 8's failure on the console's corpus). The same rows are made from squad-dev, shift-reddit (forum posts) and HaluEval QA's held-in items
(its knowledge passage, the correct answer's items only). Definitional questions (`definition_rows`, round 10):
"Who/What was X?" against the sentence defining X (positive) and against another subject's definition (negative),
from HaluEval's knowledge passages and squad-dev's articles' first sentences.

Support rows: (claim, evidence window). FactCC-style from held-in paragraphs: a sentence verbatim or with a
clause dropped → supported; entity, number, date, pronoun, negation and direction swaps, or a sentence of a
neighbouring paragraph → not supported. Plus HaluEval QA (claim = question + answer) and VitaminC (True).
"""

import json
import math
import random
import re
from collections import Counter, defaultdict

STOPWORDS = set(
    "a about after all also an and any are as at be been before being between both but by can could did do does "
    "during each for from had has have he her his how i if in into is it its many more most much of on one or "
    "other our she so some such than that the their them then there these they this those through to up was we "
    "were what when where which while who whom whose why will with would you your not no never none neither nor "
    "nothing without".split()
)


def words(text):
    out = []
    # Letters, digits and apostrophes, as text.rs `words` (`\w` alone would keep "_" inside a word).
    for w in re.split(r"[^\w']+|_+", text):
        w = w.strip("'").lower()
        if not w:
            continue
        if w.endswith("'s"):
            w = w[:-2]
        out.append(w)
    return out


def stem(w):
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


def content_set(text):
    return {stem(w) for w in words(text) if w not in STOPWORDS}


# The abbreviation rule of crates/attest-text/src/text.rs (`stop_continues`), word for word.
JOINING_ABBREVIATIONS = set(
    "Mr Mrs Ms Dr St Mt Ft Prof Gen Col Lt Sgt Capt Gov Sen Rep Rev Hon Pres Adm Maj Messrs vs v cf viz ca".split())
TRAILING_ABBREVIATIONS = set(
    "Jr Sr Inc Ltd Co Corp Bros Dept Univ Assn Ave Blvd Rd etc No Nos Vol approx est al fig pp Jan Feb Mar Apr Jun "
    "Jul Aug Sep Sept Oct Nov Dec".split())
SENTENCE_OPENERS = set(
    "a after all also although an and another as at because before both but by during each even for from he her here "
    "his how however i if in it its later many most my no not now on one only other our she since so some "
    "such that the their then there these they this those though thus to today we what when where which while who why "
    "with yet you your".split())
OPENING = "(\"'\u201c\u2018["


def stop_continues(before, nxt):
    """Whether a full stop right after the token `before` continues its sentence when the word `nxt` follows."""
    before, nxt = before.lstrip(OPENING), nxt.lstrip(OPENING)
    if not before or not nxt:
        return False
    if before in JOINING_ABBREVIATIONS or before.lower() in JOINING_ABBREVIATIONS:
        return True
    initial = len(before) == 1 and before.isalpha()
    acronym = "." in before and all(1 <= len(p) <= 2 and p.isalpha() for p in before.split("."))
    if not (initial or acronym or before in TRAILING_ABBREVIATIONS):
        return False
    first = words(nxt)
    return not (nxt[0].isupper() and bool(first) and first[0] in SENTENCE_OPENERS)


# Rust's whitespace (`char::is_whitespace`, Unicode White_Space): Python's `str.split()`, `strip()` and `\s` also
# take the separators \x1c-\x1f, which Rust keeps as text. A sentence ends before ASCII whitespace only
# (`u8::is_ascii_whitespace`: not \x0b).
RUST_WHITESPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
                   "\u2028\u2029\u202f\u205f\u3000")
RUST_WHITESPACE_RE = re.compile("[" + re.escape(RUST_WHITESPACE) + "]")
ASCII_WHITESPACE = " \t\n\r\x0c"


def sentences(text):
    """The answer tier's splitter (crates/attest-text/src/text.rs `sentences`)."""
    out, start = [], 0
    for i, c in enumerate(text):
        ends = (c in ".!?" and (i + 1 >= len(text) or text[i + 1] in ASCII_WHITESPACE)
                and not (c == "." and stop_continues(RUST_WHITESPACE_RE.split(text[start:i])[-1],
                                                     next((w for w in RUST_WHITESPACE_RE.split(text[i + 1:]) if w),
                                                          "")))) or c == "\n"
        if ends:
            s = text[start : i + 1].strip(RUST_WHITESPACE)
            if s:
                out.append(s)
            start = i + 1
    rest = text[start:].strip(RUST_WHITESPACE)
    if rest:
        out.append(rest)
    return out


def title_text(title):
    return title.replace("_", " ")


def answer_context(title, sents, i):
    """The context of sentence i: the title and the sentence before it."""
    prev = sents[i - 1] if i > 0 else ""
    return f"{title}. {prev}".strip()


def evidence_window(title, passage, claim, max_sentences=3):
    """The sentences of `passage` that share most content words with `claim` (at most `max_sentences`, in
    passage order), after the title: what the support head reads (crates/attest-models/src/reader/input.rs)."""
    sents = sentences(passage)
    c = content_set(claim)
    ranked = sorted(range(len(sents)), key=lambda i: (-len(content_set(sents[i]) & c), i))[:max_sentences]
    body = " ".join(sents[i] for i in sorted(ranked))
    return f"{title}: {body}" if title else body


def article_of(doc_id):
    m = re.search(r"-a(\d+)-p", doc_id or "")
    return int(m.group(1)) if m else None


# Articles (posts) NNNN % 5 == 1 of squad-dev and shift-reddit, set aside when `TUNING_SLICE` is on (train.py
# `--tuning-slice`): neither trained on nor reported, so that the answer tier's rules and bars can be chosen on
# encyclopedic text the readers have not seen (`attest-lab eval --tuning-slice` asks exactly these). Off, every
# row and every random draw is what it was before the option existed.
TUNING_SLICE = False


def article_split(article):
    """"heldout", "reserved" (the tuning slice, when set aside) or "train" for an article number (or None)."""
    if article is not None and article % 5 == 0:
        return "heldout"
    if TUNING_SLICE and article is not None and article % 5 == 1:
        return "reserved"
    return "train"


def squad_split(doc_id):
    return article_split(article_of(doc_id))


def normalise(s):
    return " ".join(re.sub(r"[^\w ]", " ", s.lower()).split())


def holds_answer(sentence, answers):
    ns = normalise(sentence)
    return any(a.strip() and (a in sentence or (normalise(a) and normalise(a) in ns)) for a in answers)


class Bm25:
    def __init__(self, docs):
        self.docs = [Counter(stem(w) for w in words(d)) for d in docs]
        self.len = [sum(c.values()) for c in self.docs]
        self.avg = sum(self.len) / max(1, len(self.len))
        df = Counter(w for c in self.docs for w in c)
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}
        self.post = defaultdict(list)
        for i, c in enumerate(self.docs):
            for w in c:
                self.post[w].append(i)

    def top(self, query, k):
        scores = defaultdict(float)
        for w in {stem(w) for w in words(query) if w not in STOPWORDS}:
            idf = self.idf.get(w)
            if idf is None:
                continue
            for i in self.post[w]:
                tf = self.docs[i][w]
                scores[i] += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * self.len[i] / self.avg))
        return [i for i, _ in sorted(scores.items(), key=lambda x: -x[1])[:k]]


NAME = re.compile(r"(?<!^)(?<![.?!] )\b([A-Z][\w'-]+(?: (?:of |de |the )?[A-Z][\w'-]+)*)")
NUMBER = re.compile(r"\b\d[\d,.]*\b")
DIRECTIONS = [
    ("increased", "decreased"), ("more", "less"), ("larger", "smaller"), ("largest", "smallest"),
    ("before", "after"), ("first", "last"), ("higher", "lower"), ("highest", "lowest"), ("won", "lost"),
    ("north", "south"), ("east", "west"), ("early", "late"), ("rise", "fall"), ("gained", "lost"),
    ("older", "younger"), ("maximum", "minimum"), ("majority", "minority"), ("above", "below"),
]
PRONOUNS = [("he", "she"), ("his", "her"), ("him", "her")]
NEGATABLE = re.compile(r"\b(is|was|were|are|has|had|did|does|can|could|will|would)\b")


def names_in(text):
    return [m.group(1) for m in NAME.finditer(text)]


def swap_word(sentence, pairs, rng):
    hits = []
    for a, b in pairs:
        for x, y in ((a, b), (b, a)):
            if re.search(rf"\b{x}\b", sentence):
                hits.append((x, y))
    if not hits:
        return None
    x, y = rng.choice(hits)
    return re.sub(rf"\b{x}\b", y, sentence, count=1)


def nudge_digit(number, rng):
    """`number` with one of its digits, drawn at random, moved on by 1-8 (mod 10)."""
    digits = [i for i, ch in enumerate(number) if ch.isdigit()]
    i = rng.choice(digits)
    return number[:i] + str((int(number[i]) + rng.randint(1, 8)) % 10) + number[i + 1 :]


def perturb(sentence, pool_names, pool_numbers, rng):
    """One meaning-changing edit of the sentence, or None when no edit applies."""
    edits = ["name", "number", "negation", "direction", "pronoun"]
    rng.shuffle(edits)
    for edit in edits:
        if edit == "name":
            here = names_in(sentence)
            others = [n for n in pool_names if n not in sentence]
            if here and others:
                return sentence.replace(rng.choice(here), rng.choice(others), 1)
        elif edit == "number":
            here = NUMBER.findall(sentence)
            if here:
                n = rng.choice(here)
                others = [m for m in pool_numbers if m != n]
                if others and rng.random() < 0.5:
                    new = rng.choice(others)
                else:
                    new = nudge_digit(n, rng)
                if new != n:
                    return re.sub(rf"\b{re.escape(n)}\b", new, sentence, count=1)
        elif edit == "negation":
            if re.search(r"\bnot\b", sentence):
                return re.sub(r"\bnot ", "", sentence, count=1)
            m = NEGATABLE.search(sentence)
            if m:
                return sentence[: m.end()] + " not" + sentence[m.end() :]
        elif edit == "direction":
            s = swap_word(sentence, DIRECTIONS, rng)
            if s:
                return s
        elif edit == "pronoun":
            s = swap_word(sentence, [(a, b) for a, b in PRONOUNS] + [(a.capitalize(), b.capitalize()) for a, b in PRONOUNS], rng)
            if s:
                return s
    return None


def compress(sentence):
    """The sentence with a parenthetical or a trailing clause dropped (still supported), or None."""
    s = re.sub(r" \([^)]*\)", "", sentence)
    if s != sentence:
        return s
    parts = sentence.rsplit(", ", 1)
    if len(parts) == 2 and len(parts[0].split()) >= 6:
        return parts[0].rstrip(",;") + "."
    return None


def load_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def perturb_question(question, passage, pool_names, rng):
    """The question with one of its names or numbers changed for one that `passage` (the answer sentence and its
    context) does not hold, so the passage no longer answers it; None when the question has neither that the
    passage holds. ("Who won Super Bowl 50?" → "Who won Super Bowl 49?" against the Super Bowl 50 passage.)"""
    lowered = passage.lower()
    edits = []
    for n in NUMBER.findall(question):
        if n in passage:
            edits.append(("number", n))
    for n in names_in(question):
        if n in passage:
            edits.append(("name", n))
    rng.shuffle(edits)

    def held(text):
        return re.search(rf"(?<![\w]){re.escape(text.lower())}(?![\w])", lowered) is not None

    for kind, old in edits:
        if kind == "number":
            tries = [nudge_digit(old, rng) for _ in range(5)]
        else:
            others = [n for n in pool_names[:5000] if n.lower() not in lowered and n != old]
            tries = [rng.choice(others)] if others else []
        for new in tries:
            if new != old and not held(new):
                return re.sub(rf"(?<![\w]){re.escape(old)}(?![\w])", new, question, count=1)
    return None


ROMAN = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
         (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]


def roman(n):
    out = ""
    for value, letters in ROMAN:
        while n >= value:
            out, n = out + letters, n - value
    return out


def perturb_sentence(question, sentence, answers, pool_names, rng):
    """The answer sentence with a name or number that both it and the question hold changed, everywhere in the
    sentence, for one the question does not hold — so the sentence, still true of something, is about another
    edition, year or person than the question asks about; None when they share neither, or when the change would
    touch the answer. A small number is sometimes written as another edition's Roman numeral ("Super Bowl 50" →
    "Super Bowl XLIX"), the form the console's corpus uses for earlier editions."""

    def has(text, token):
        return re.search(rf"(?<![\w]){re.escape(token)}(?![\w])", text) is not None

    def whole_name(text, name):
        # Not a piece of a longer name or of a name with a number ("Super Bowl" of "Super Bowl 50" or of
        # "Super Bowl MVP"): changing that piece would not change what the text is about.
        for m in re.finditer(rf"(?<![\w]){re.escape(name)}(?![\w])", text):
            before, after = text[: m.start()].rstrip(), text[m.end() :].lstrip()
            if (after[:1].isupper() or after[:1].isdigit()) and text[m.end() : m.end() + 1] == " ":
                return False
            last = before.split()[-1] if before else ""
            if last[:1].isupper() and last.lower() not in STOPWORDS and text[m.start() - 1 : m.start()] == " " \
                    and re.search(r"[.?!]$", before) is None:
                return False
        return True

    shared = [("number", n) for n in NUMBER.findall(question) if has(sentence, n)]
    shared += [("name", n) for n in names_in(question)
               if has(sentence, n) and whole_name(question, n) and whole_name(sentence, n)]
    shared = [(k, t) for k, t in shared if not any(t in a or a in t for a in answers if a.strip())]
    rng.shuffle(shared)
    for kind, old in shared:
        if kind == "number":
            if old.isdigit() and 1 < int(old) <= 100 and rng.random() < 0.3:
                tries = [roman(max(1, int(old) - rng.randint(1, 30)))]
            else:
                tries = [nudge_digit(old, rng) for _ in range(5)]
        else:
            others = [n for n in pool_names[:5000] if n not in question and n not in sentence]
            tries = [rng.choice(others)] if others else []
        for new in tries:
            if new == old or has(question, new):
                continue
            changed = re.sub(rf"(?<![\w]){re.escape(old)}(?![\w])", new, sentence)
            if holds_answer(changed, answers) and not has(changed, old):
                return changed
    return None


def answerability_rows(squad_dir, rng, sentence_perturbed=False):
    """(split, question, sentence, context, label, kind, answers) rows from a SQuAD-layout set (squad-dev,
    shift-reddit); `answers` (the gold answer strings, for the span head) only on the answer sentence's row.
    `sentence_perturbed` adds `perturb_sentence`'s rows (round 9 on; off, the rows and draws are round 7's)."""
    corpus = load_jsonl(f"{squad_dir}/corpus.jsonl")
    queries = load_jsonl(f"{squad_dir}/queries.jsonl")
    by_id = {d["_id"]: d for d in corpus}
    sents = {d["_id"]: sentences(d["text"]) for d in corpus}
    by_article = defaultdict(list)
    for d in corpus:
        by_article[article_of(d["_id"])].append(d["_id"])
    bm25 = Bm25([f"{title_text(d['title'])} {d['text']}" for d in corpus])
    all_names = [n for q in queries for n in names_in(q["text"])]
    rows = []

    def top_docs(question, k):
        return [corpus[i]["_id"] for i in bm25.top(question, k)]

    def best_sentence(doc_id, question):
        q = content_set(question)
        ss = sents[doc_id]
        i = max(range(len(ss)), key=lambda j: (len(content_set(ss[j]) & q), -j))
        return i

    def add(split, q, doc_id, i, label, kind, answers=()):
        d = by_id[doc_id]
        t = title_text(d["title"])
        rows.append((split, q, sents[doc_id][i], answer_context(t, sents[doc_id], i), label, kind, list(answers)))

    for q in queries:
        text = q["text"]
        if not q["answerable"]:
            split = squad_split(q["source_doc_removed"])
            for doc_id in top_docs(text, 2):
                add(split, text, doc_id, best_sentence(doc_id, text), 0, "no_article")
            continue
        gold = q["gold_doc"]
        if gold not in by_id:
            continue
        split = squad_split(gold)
        ss = sents[gold]
        pos = [i for i, s in enumerate(ss) if holds_answer(s, q["answers"])]
        if not pos:
            continue
        i = pos[0]
        add(split, text, gold, i, 1, "answer", q["answers"])
        # The gold paragraph without its answer sentence: its best other sentence, and one at random.
        others = [j for j in range(len(ss)) if j not in pos]
        if others:
            qset = content_set(text)
            hard = max(others, key=lambda j: (len(content_set(ss[j]) & qset), -j))
            add(split, text, gold, hard, 0, "answer_removed")
            rest = [j for j in others if j != hard]
            if rest and rng.random() < 0.5:
                add(split, text, gold, rng.choice(rest), 0, "answer_removed")
        art = article_of(gold)
        same = [d for d in by_article[art] if d != gold]
        if same:
            qset = content_set(text)
            d = max(same, key=lambda x: (len(content_set(by_id[x]["text"]) & qset), x))
            j = best_sentence(d, text)
            if not holds_answer(sents[d][j], q["answers"]):
                add(split, text, d, j, 0, "same_article")
        for d in top_docs(text, 4):
            if article_of(d) != art:
                j = best_sentence(d, text)
                if not holds_answer(sents[d][j], q["answers"]):
                    add(split, text, d, j, 0, "other_article")
                break
        passage = f"{answer_context(title_text(by_id[gold]['title']), ss, i)} {ss[i]}"
        perturbed = perturb_question(text, passage, all_names, rng)
        if perturbed:
            add(split, perturbed, gold, i, 0, "question_perturbed")
        elsewhere = sentence_perturbed and perturb_sentence(text, ss[i], q["answers"], all_names, rng)
        if elsewhere:
            d = by_id[gold]
            rows.append((split, text, elsewhere, answer_context(title_text(d["title"]), ss, i), 0,
                         "sentence_perturbed", []))
    return rows


def halueval_answerability_rows(path, rng, sentence_perturbed=False):
    """Answerability rows from HaluEval QA's items with the correct answer: the knowledge sentence holding the
    answer (positive), the knowledge's other sentences (answer removed) and the answer sentence against a
    perturbed question. Split as the support rows: hqNNNNN held out when NNNNN % 5 == 0."""
    items = [i for i in load_jsonl(path) if int(i["label"]) == 1]
    all_names = [n for i in items for n in names_in(i["question"])]
    rows = []
    for item in items:
        n = int(re.search(r"hq(\d+)", item["_id"]).group(1))
        split = "heldout" if n % 5 == 0 else "train"
        q, answers = item["question"], [item["answer"]]
        ss = sentences(item["knowledge"])
        pos = [j for j, s in enumerate(ss) if holds_answer(s, answers)]
        if not pos:
            continue
        i = pos[0]
        rows.append((split, q, ss[i], answer_context("", ss, i), 1, "answer", answers))
        others = [j for j in range(len(ss)) if j not in pos]
        if others:
            qset = content_set(q)
            j = max(others, key=lambda k: (len(content_set(ss[k]) & qset), -k))
            rows.append((split, q, ss[j], answer_context("", ss, j), 0, "answer_removed", []))
        perturbed = perturb_question(q, f"{answer_context('', ss, i)} {ss[i]}", all_names, rng)
        if perturbed:
            rows.append((split, perturbed, ss[i], answer_context("", ss, i), 0, "question_perturbed", []))
        elsewhere = sentence_perturbed and perturb_sentence(q, ss[i], answers, all_names, rng)
        if elsewhere:
            rows.append((split, q, elsewhere, answer_context("", ss, i), 0, "sentence_perturbed", []))
    return rows


# "X is a …" / "X (1856–1943) was an …": a sentence defining its subject (round 10). The subject is a name (capitalised
# words, joined by a few lower-case ones: "Victoria and Albert Museum", "Princess Johanna of Hesse"), the predicate
# starts with an article; the answer is the predicate up to its first clause.
DEFINITION = re.compile(
    r"^(?P<subject>(?:The )?[A-Z0-9][\w'’.-]*(?: (?:[A-Z0-9][\w'’.-]*|of|and|de|von|van|der|the|in|on|for|la|le|du)){0,7})"
    r"(?: \([^)]*\))?,?(?: [^,]{0,60},)? (?P<verb>is|was|are|were) (?P<predicate>(?:an?|the|one) [^.;]{3,}?)"
    r"(?:,| which | who | that |;|\.?$)"
)
# Nouns that make a definition's subject a person: "Who was X?" rather than "What was X?".
PERSON_NOUNS = set(
    "actor actress singer songwriter writer author politician player footballer musician director producer composer "
    "poet painter artist journalist businessman businesswoman inventor engineer scientist physicist chemist "
    "philosopher lawyer judge king queen prince princess general officer soldier coach model comedian rapper "
    "drummer guitarist entrepreneur historian economist professor bishop priest explorer architect designer dancer "
    "leader founder diplomat novelist screenwriter playwright cricketer boxer wrestler athlete swimmer cyclist "
    "pitcher quarterback manager executive emperor daughter son wife husband mathematician astronomer biologist "
    "physician surgeon activist presenter host personality socialite monarch pope saint scholar theologian "
    "vocalist bassist pianist violinist conductor cartoonist illustrator photographer filmmaker broadcaster "
    "commentator columnist critic editor publisher statesman senator governor mayor president minister lord".split()
)


def definition_of(sentence):
    """(question, answer) when `sentence` defines its subject ("Nikola Tesla was a Serbian-American inventor …" →
    "Who was Nikola Tesla?", "a Serbian-American inventor …"), else None."""
    m = DEFINITION.match(sentence)
    if not m:
        return None
    subject, verb, predicate = m.group("subject"), m.group("verb"), m.group("predicate").strip()
    if subject.lower() in {"it", "this", "he", "she", "they", "there"} or len(predicate.split()) < 2:
        return None
    # The predicate's head, before its first preposition ("the second album by Australian singer …" is a what).
    head = re.split(r" (?:of|by|in|from|for|at|with|on|to|based|known|who|that|which) ", predicate.lower())[0]
    born = re.search(r"\((?:born |[^)]*\d{4}\s*[–-])", sentence[: m.start("verb")]) is not None
    who = born or any(w in PERSON_NOUNS for w in re.findall(r"[a-z]+", head))
    if subject.startswith("The "):
        subject = "the " + subject[4:]
    return f"{'Who' if who else 'What'} {verb} {subject}?", predicate


def definition_rows(halueval_path, squad_dir, rng):
    """Definitional questions (round 10: bge-small rounds 8-9 refused "Who was Nikola Tesla?" against "Nikola Tesla
    was a Serbian-American inventor …" — SQuAD asks few of them): the question a sentence defining its subject
    answers, against that sentence (positive, kind `definition`, the predicate as the answer span) and against another subject's
    definition (negative, `other_subject`: "Who was Nikola Tesla?" against "Thomas Edison was an American
    inventor …", its own title). From HaluEval QA's knowledge passages and squad-dev's articles' first sentences,
    split as their other rows. Rows as `answerability_rows`'."""
    found = []
    for item in load_jsonl(halueval_path):
        if not item["_id"].endswith("-right"):
            continue  # each knowledge passage appears once with each label
        n = int(re.search(r"hq(\d+)", item["_id"]).group(1))
        ss = sentences(item["knowledge"])
        for i, s in enumerate(ss):
            d = definition_of(s)
            if d:
                found.append(("heldout" if n % 5 == 0 else "train", d, s, answer_context("", ss, i)))
                break
    for doc in load_jsonl(f"{squad_dir}/corpus.jsonl"):
        if not doc["_id"].endswith("-p000"):
            continue
        ss = sentences(doc["text"])
        d = definition_of(ss[0]) if ss else None
        if d:
            split = squad_split(doc["_id"])
            found.append((split, d, ss[0], answer_context(title_text(doc["title"]), ss, 0)))
    rows = []
    for split, (question, answer), sentence, context in found:
        rows.append((split, question, sentence, context, 1, "definition", [answer]))
        others = [f for f in found if f[0] == split and f[1][0] != question and not holds_answer(f[2], [answer])]
        if others:
            _, _, other, other_context = rng.choice(others)
            rows.append((split, question, other, other_context, 0, "other_subject", []))
    return rows


def support_rows(squad_dir, halueval_path, vitaminc_path, rng):
    """(split, claim, evidence, label, source) rows."""
    rows = []
    corpus = load_jsonl(f"{squad_dir}/corpus.jsonl")
    by_article = defaultdict(list)
    for d in corpus:
        by_article[article_of(d["_id"])].append(d)
    all_names = [n for d in corpus for n in names_in(d["text"])]
    for art, docs in sorted(by_article.items()):
        split = article_split(art)
        art_names = [n for d in docs for n in names_in(d["text"])] or all_names
        art_numbers = [n for d in docs for n in NUMBER.findall(d["text"])]
        for d in docs:
            t = title_text(d["title"])
            ss = [s for s in sentences(d["text"]) if len(s.split()) >= 6]
            for s in rng.sample(ss, min(3, len(ss))):
                r = rng.random()
                claim = s if r < 0.5 else (compress(s) or s)
                rows.append((split, claim, evidence_window(t, d["text"], claim), 1, "synthetic"))
                neg = perturb(s, art_names, art_numbers, rng)
                kind = "synthetic"
                if neg is None or rng.random() < 0.15:
                    other = [x for x in docs if x is not d]
                    if not other:
                        continue
                    cand = [x for x in sentences(rng.choice(other)["text"]) if len(x.split()) >= 6]
                    if not cand:
                        continue
                    neg = rng.choice(cand)
                rows.append((split, neg, evidence_window(t, d["text"], neg), 0, kind))
    for item in load_jsonl(halueval_path):
        n = int(re.search(r"hq(\d+)", item["_id"]).group(1))
        split = "heldout" if n % 5 == 0 else "train"
        claim = f"{item['question']} {item['answer']}"
        rows.append((split, claim, evidence_window("", item["knowledge"], claim), int(item["label"]), "halueval"))
    for idx, item in enumerate(load_jsonl(vitaminc_path)):
        split = "heldout" if idx % 10 == 9 else "train"
        rows.append((split, item["claim"], item["evidence"], int(item["label"] == "True"), "vitaminc"))
    return rows
