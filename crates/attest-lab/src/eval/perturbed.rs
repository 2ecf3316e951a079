//! The question-perturbation half of `attest-lab eval --adversarial N` (issue 41): answerable questions with one
//! number or name changed to one that no document of the corpus holds ("Who won Super Bowl 49?" against a
//! corpus about Super Bowl 50), asked against the whole collection. The gold paragraph is still there and
//! names the subject, but nothing answers the changed question: any answer is a hallucination (quoting the
//! original question's answer is exactly the failure, so no quote excuses it). Deterministic: no random draws,
//! the replacement is the first candidate no document holds.

use std::collections::{HashMap, HashSet};

use super::data::{CorpusDoc, EvalSet, Query};

/// The lower-cased words of `text` (letters, digits and the characters numbers carry).
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_alphanumeric() || c == ',' || c == '.'))
        .map(|w| w.trim_matches(|c| c == ',' || c == '.').to_lowercase())
        .filter(|w| !w.is_empty())
}

/// Words of the question that are numbers (digits, maybe with separators), in order.
fn numbers(question: &str) -> Vec<String> {
    words(question)
        .filter(|w| {
            w.chars().any(|c| c.is_ascii_digit())
                && w.chars()
                    .all(|c| c.is_ascii_digit() || c == ',' || c == '.')
        })
        .collect()
}

/// Capitalised words of the question after its first word (names, mostly), in order.
fn names(question: &str) -> Vec<String> {
    question
        .split(|c: char| !c.is_alphanumeric())
        .skip(1)
        .filter(|w| w.len() > 2 && w.chars().next().is_some_and(char::is_uppercase))
        .map(str::to_string)
        .collect()
}

/// `number` with its last digit moved on until `taken` does not hold the result; None when every digit is taken.
fn other_number(number: &str, taken: &HashSet<String>) -> Option<String> {
    let at = number.rfind(|c: char| c.is_ascii_digit())?;
    let digit = number[at..].chars().next()?.to_digit(10)?;
    (1..10).find_map(|step| {
        let d = char::from_digit((digit + step) % 10, 10)?;
        let candidate = format!("{}{d}{}", &number[..at], &number[at + 1..]);
        (!taken.contains(&candidate)).then_some(candidate)
    })
}

/// `word` replaced by `by` in `text`, on word boundaries, once.
fn replace_word(text: &str, word: &str, by: &str) -> Option<String> {
    let mut start = 0;
    while let Some(found) = text[start..].find(word) {
        let at = start + found;
        let end = at + word.len();
        let bounded = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
        if bounded(text[..at].chars().next_back()) && bounded(text[end..].chars().next()) {
            return Some(format!("{}{by}{}", &text[..at], &text[end..]));
        }
        start = end;
    }
    None
}

/// Up to `limit` perturbed questions (one per gold paragraph, in the sample's order), unanswerable and without
/// gold answers. A number is changed when the question has one its gold paragraph holds; else a name of the
/// question its gold paragraph holds is swapped for a capitalised word of another question that no document
/// holds (the articles of the set's unanswerable questions are removed, so their names are the usual source).
pub fn build(set: &EvalSet, limit: usize) -> Vec<Query> {
    let corpus_words: HashSet<String> = set
        .corpus
        .iter()
        .flat_map(|d| words(&d.text).chain(words(&d.title)))
        .collect();
    let by_id: HashMap<&str, &CorpusDoc> = set.corpus.iter().map(|d| (d.id.as_str(), d)).collect();
    let mut foreign_names: Vec<String> = Vec::new();
    for q in &set.queries {
        for n in names(&q.text) {
            if !corpus_words.contains(&n.to_lowercase()) && !foreign_names.contains(&n) {
                foreign_names.push(n);
            }
        }
    }
    let mut used: HashSet<&str> = HashSet::new();
    let mut out = Vec::new();
    for (i, q) in set.queries.iter().enumerate().filter(|(_, q)| q.answerable) {
        if out.len() >= limit {
            break;
        }
        let Some(gold) = q.gold_doc.as_deref().and_then(|g| by_id.get(g)) else {
            continue;
        };
        if used.contains(gold.id.as_str()) {
            continue;
        }
        let gold_words: HashSet<String> = words(&gold.text).collect();
        let by_number = numbers(&q.text)
            .into_iter()
            .filter(|n| gold_words.contains(n))
            .find_map(|n| {
                let new = other_number(&n, &corpus_words)?;
                replace_word(&q.text, &n, &new)
            });
        let by_name = || {
            let name = names(&q.text)
                .into_iter()
                .find(|n| gold_words.contains(&n.to_lowercase()))?;
            let new = foreign_names.get(i % foreign_names.len().max(1))?;
            replace_word(&q.text, &name, new)
        };
        if let Some(text) = by_number.or_else(by_name) {
            used.insert(gold.id.as_str());
            out.push(Query {
                id: format!("{}-perturbed", q.id),
                text,
                answerable: false,
                answers: Vec::new(),
                ..q.clone()
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> EvalSet {
        let doc = |id: &str, text: &str| CorpusDoc {
            id: id.into(),
            title: "Super Bowl 50".into(),
            text: text.into(),
            tenant: None,
        };
        let query = |id: &str, text: &str, answerable: bool, gold: Option<&str>| Query {
            id: id.into(),
            text: text.into(),
            answerable,
            answers: vec!["Denver Broncos".into()],
            gold_doc: gold.map(Into::into),
            source_doc_removed: None,
            tenant: None,
            domain: None,
            kind: None,
            near_doc: None,
            near_answer: None,
        };
        EvalSet {
            dir: ".".into(),
            corpus: vec![
                doc(
                    "x-a0001-p000",
                    "The Denver Broncos won Super Bowl 50, 24-10, in 2016 at Santa Clara.",
                ),
                doc("x-a0001-p001", "Super Bowl 51 was played in Houston."),
                doc("x-a0002-p000", "Kubiak coached the Broncos in Denver."),
            ],
            queries: vec![
                query("q1", "Who won Super Bowl 50?", true, Some("x-a0001-p000")),
                query("q2", "Where did Kubiak coach?", true, Some("x-a0002-p000")),
                query("q3", "Who founded Zanzibar Airways?", false, None),
                query("q4", "What did the weather do?", true, Some("x-a0001-p001")),
            ],
            qrels: HashMap::new(),
            hash: String::new(),
        }
    }

    #[test]
    fn a_number_moves_to_one_no_document_holds() {
        let out = build(&set(), 10);
        // 51 is held by another paragraph, so 50 becomes 52; the gold answer no longer counts as one.
        assert_eq!(out[0].text, "Who won Super Bowl 52?");
        assert!(!out[0].answerable && out[0].answers.is_empty());
        assert_eq!(out[0].id, "q1-perturbed");
    }

    #[test]
    fn without_a_number_a_name_is_swapped_for_one_the_corpus_lacks() {
        let out = build(&set(), 10);
        assert_eq!(out.len(), 2, "{out:?}");
        // The swapped-in name comes from the unanswerable question's, which no document holds.
        let new = out[1]
            .text
            .strip_prefix("Where did ")
            .and_then(|t| t.strip_suffix(" coach?"));
        assert!(matches!(new, Some("Zanzibar" | "Airways")), "{out:?}");
        assert_eq!(build(&set(), 1).len(), 1);
    }

    #[test]
    fn words_are_replaced_on_their_boundaries() {
        assert_eq!(
            replace_word("Super Bowl 150 or 50?", "50", "49").as_deref(),
            Some("Super Bowl 150 or 49?")
        );
        assert_eq!(replace_word("1950", "50", "49"), None);
        assert_eq!(
            other_number("1,999", &HashSet::new()).as_deref(),
            Some("1,990")
        );
    }
}
