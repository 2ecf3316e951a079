//! Small text helpers shared by the verifier and the composer: words, content words, sentences, numbers,
//! names and negation. Deliberately simple and deterministic (lowercase, strip punctuation and a possessive or
//! plural `s`), so features mean the same thing at training and at serving time.

use std::collections::HashSet;

/// Function words that carry no content of their own.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been",
    "before", "being", "between", "both", "but", "by", "can", "could", "did", "do", "does",
    "during", "each", "for", "from", "had", "has", "have", "he", "her", "his", "how", "i", "if",
    "in", "into", "is", "it", "its", "many", "more", "most", "much", "of", "on", "one", "or",
    "other", "our", "she", "so", "some", "such", "than", "that", "the", "their", "them", "then",
    "there", "these", "they", "this", "those", "through", "to", "up", "was", "we", "were", "what",
    "when", "where", "which", "while", "who", "whom", "whose", "why", "will", "with", "would",
    "you", "your",
];

/// Words that flip the meaning of a statement.
const NEGATIONS: &[&str] = &[
    "not", "no", "never", "none", "neither", "nor", "nothing", "without",
];

/// Whether a lowercased word is a function word or a negation (no content of its own).
pub fn is_function_word(word: &str) -> bool {
    STOPWORDS.contains(&word) || NEGATIONS.contains(&word)
}

/// Lowercased word tokens (letters and digits), possessive `'s` removed.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|w| w.trim_matches('\''))
        .filter(|w| !w.is_empty())
        .map(|w| {
            let w = w.to_lowercase();
            w.strip_suffix("'s").map(str::to_string).unwrap_or(w)
        })
        .collect()
}

/// A crude stem so that `mines`/`mine` and `directors`/`director` meet.
pub fn stem(word: &str) -> String {
    if word.len() > 4 && word.ends_with("ies") {
        return format!("{}y", &word[..word.len() - 3]);
    }
    if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") {
        return word[..word.len() - 1].to_string();
    }
    word.to_string()
}

/// Stemmed words that are not function words.
pub fn content_words(text: &str) -> Vec<String> {
    words(text)
        .into_iter()
        .filter(|w| !is_function_word(w))
        .map(|w| stem(&w))
        .collect()
}

pub fn content_set(text: &str) -> HashSet<String> {
    content_words(text).into_iter().collect()
}

/// Tokens with a digit (`1925`, `3.5`, `2nd`), normalised by dropping thousands separators.
pub fn numbers(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | '[' | ']' | '"' | ';' | ':'))
        .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|t| t.chars().any(|c| c.is_ascii_digit()))
        .map(|t| t.replace(',', "").to_lowercase())
        .collect()
}

/// Capitalised words not at the start of a sentence: names of people, places, works.
pub fn names(text: &str) -> Vec<String> {
    capitalised_tokens(text)
        .map(|raw| {
            stem(
                &raw.trim_matches(|c: char| !c.is_alphanumeric())
                    .to_lowercase(),
            )
        })
        .collect()
}

/// The whitespace-separated tokens of `text` whose first letter or digit is a capital, except where a sentence
/// starts (capitalised whatever it is), as they stand (punctuation and all): what [`names`] reads.
pub fn capitalised_tokens(text: &str) -> impl Iterator<Item = &str> {
    let mut sentence_start = true;
    text.split_whitespace().filter(move |raw| {
        let first = raw.chars().find(|c| c.is_alphanumeric());
        let capitalised = !sentence_start && first.is_some_and(char::is_uppercase);
        sentence_start = raw.ends_with(['.', '!', '?', ':']);
        capitalised
    })
}

/// Whether the text states a negation.
pub fn is_negated(text: &str) -> bool {
    text.to_lowercase().contains("n't")
        || words(text).iter().any(|w| NEGATIONS.contains(&w.as_str()))
}

/// Abbreviations after which a full stop never ends a sentence: titles before a name (`St. Augustine`,
/// `Dr. Watson`) and Latin joiners (`e.g.`, `Brown v. Board`). Compared case-sensitively for titles.
const JOINING_ABBREVIATIONS: &[&str] = &[
    "Mr", "Mrs", "Ms", "Dr", "St", "Mt", "Ft", "Prof", "Gen", "Col", "Lt", "Sgt", "Capt", "Gov",
    "Sen", "Rep", "Rev", "Hon", "Pres", "Adm", "Maj", "Messrs", "vs", "v", "cf", "viz", "ca",
];

/// Abbreviations that usually go on (`Ted Ginn Jr. and`, `Apple Inc. said`) but can end a sentence: a full stop
/// after one ends it only when a sentence opener follows. Initials (`John D. Rockefeller`) and dotted acronyms
/// (`the U.S. Army`, `e.g.`, `a.m.`) are read the same way.
const TRAILING_ABBREVIATIONS: &[&str] = &[
    "Jr", "Sr", "Inc", "Ltd", "Co", "Corp", "Bros", "Dept", "Univ", "Assn", "Ave", "Blvd", "Rd",
    "etc", "No", "Nos", "Vol", "approx", "est", "al", "fig", "pp", "Jan", "Feb", "Mar", "Apr",
    "Jun", "Jul", "Aug", "Sep", "Sept", "Oct", "Nov", "Dec",
];

/// Capitalised words that open sentences (lowercased): after an abbreviation, one of these starts a new sentence.
const SENTENCE_OPENERS: &[&str] = &[
    "a", "after", "all", "also", "although", "an", "and", "another", "as", "at", "because",
    "before", "both", "but", "by", "during", "each", "even", "for", "from", "he", "her", "here",
    "his", "how", "however", "i", "if", "in", "it", "its", "later", "many", "most", "my", "no",
    "not", "now", "on", "one", "only", "other", "our", "she", "since", "so", "some", "such",
    "that", "the", "their", "then", "there", "these", "they", "this", "those", "though", "thus",
    "to", "today", "we", "what", "when", "where", "which", "while", "who", "why", "with", "yet",
    "you", "your",
];

/// Whether a full stop right after the token `before` continues its sentence when the word `next` follows
/// ("" at the end of the text): after a title or a joining abbreviation it always does; after an initial, a
/// dotted acronym or a trailing abbreviation it does unless a capitalised sentence opener follows. Both
/// splitters (passages: [`sentences`]; answers: [`crate::claims`]) ask this, so a quote is never cut at
/// `John D.` on one side and read whole on the other.
pub fn stop_continues(before: &str, next: &str) -> bool {
    const OPENING: &[char] = &['(', '"', '\'', '“', '‘', '['];
    let before = before.trim_start_matches(OPENING);
    let next = next.trim_start_matches(OPENING);
    if before.is_empty() || next.is_empty() {
        return false;
    }
    if JOINING_ABBREVIATIONS.contains(&before)
        || JOINING_ABBREVIATIONS.contains(&before.to_lowercase().as_str())
    {
        return true;
    }
    let initial = before.chars().count() == 1 && before.chars().all(char::is_alphabetic);
    let acronym = before.contains('.')
        && before.split('.').all(|part| {
            (1..=2).contains(&part.chars().count()) && part.chars().all(char::is_alphabetic)
        });
    if !(initial || acronym || TRAILING_ABBREVIATIONS.contains(&before)) {
        return false;
    }
    let opens = next.chars().next().is_some_and(char::is_uppercase)
        && SENTENCE_OPENERS.contains(&words(next).first().map_or("", String::as_str));
    !opens
}

/// The token a full stop ends (the text since the last whitespace; "" right after whitespace).
pub fn token_before(text: &str) -> &str {
    text.rsplit(char::is_whitespace).next().unwrap_or("")
}

/// The first word of `text` after any whitespace.
pub fn next_word(text: &str) -> &str {
    text.split_whitespace().next().unwrap_or("")
}

/// `text` with its letters' diacritics dropped ("Tugh Temür" → "Tugh Temur", "Bolesław" → "Boleslaw"), so that
/// a name written with and without them is one name to the reader's rules (questions are often typed without
/// them). Canonical decomposition only: "½" and "²" stay as they are. Borrowed when `text` is ASCII.
pub fn fold_diacritics(text: &str) -> std::borrow::Cow<'_, str> {
    use unicode_normalization::{char::is_combining_mark, UnicodeNormalization};
    if text.is_ascii() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for c in text.nfd().filter(|c| !is_combining_mark(*c)) {
        // Letters with a stroke or a ligature have no decomposition.
        match c {
            'ł' => out.push('l'),
            'Ł' => out.push('L'),
            'ø' => out.push('o'),
            'Ø' => out.push('O'),
            'đ' => out.push('d'),
            'Đ' => out.push('D'),
            'ı' => out.push('i'),
            'ß' => out.push_str("ss"),
            'æ' => out.push_str("ae"),
            'Æ' => out.push_str("Ae"),
            'œ' => out.push_str("oe"),
            'Œ' => out.push_str("Oe"),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Sentences, split after `.`, `!`, `?` followed by whitespace (and at line breaks), except after an
/// abbreviation that goes on ([`stop_continues`]).
pub fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, c) in text.char_indices() {
        let ends = matches!(c, '.' | '!' | '?')
            && bytes.get(i + 1).is_none_or(|b| b.is_ascii_whitespace())
            && !(c == '.'
                && stop_continues(token_before(&text[start..i]), next_word(&text[i + 1..])))
            || c == '\n';
        if ends {
            let s = text[start..=i].trim();
            if !s.is_empty() {
                out.push(s);
            }
            start = i + 1;
        }
    }
    let rest = text[start..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// A sentence's `;` parts, each trimmed and without its `;`; a `;` inside brackets splits nothing (`Nikola Tesla
/// (Serbian Cyrillic: Никола Тесла; 10 July 1856 – …) was …` is one part), as in the claim splitter.
pub fn semicolon_parts(sentence: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in sentence.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ';' if depth == 0 => {
                parts.push(sentence[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(sentence[start..].trim());
    parts
}

#[cfg(test)]
mod tests {
    /// The cases scripts/reader/data.py's splitters are tested on too (`test_data.py`): the reader is trained on
    /// what one splits and serves on what the other does.
    #[test]
    fn the_shared_cases_split_as_the_python_splitters_do() {
        let cases: serde_json::Value =
            serde_json::from_str(include_str!("../testdata/text_cases.json")).unwrap();
        let strings = |v: &serde_json::Value| -> Vec<String> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect()
        };
        for case in cases["sentences"].as_array().unwrap() {
            let text = case[0].as_str().unwrap();
            assert_eq!(sentences(text), strings(&case[1]), "sentences of {text:?}");
        }
        for case in cases["words"].as_array().unwrap() {
            let text = case[0].as_str().unwrap();
            assert_eq!(words(text), strings(&case[1]), "words of {text:?}");
        }
        for case in cases["stems"].as_array().unwrap() {
            let word = case[0].as_str().unwrap();
            assert_eq!(stem(word), case[1].as_str().unwrap(), "stem of {word:?}");
        }
    }

    use super::*;

    #[test]
    fn diacritics_fold_and_other_characters_stay() {
        assert!(matches!(
            fold_diacritics("Drift Max"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            fold_diacritics("Tugh Temür and Möngke"),
            "Tugh Temur and Mongke"
        );
        assert_eq!(
            fold_diacritics("Bolesław II of Masovia, Płock"),
            "Boleslaw II of Masovia, Plock"
        );
        assert_eq!(
            fold_diacritics("Fécamp, Øresund, Straße"),
            "Fecamp, Oresund, Strasse"
        );
        assert_eq!(fold_diacritics("½ cup, 5 m², €120"), "½ cup, 5 m², €120");
    }

    #[test]
    fn words_and_content_words() {
        assert_eq!(
            words("Tesla's room, the DOOR!"),
            vec!["tesla", "room", "the", "door"]
        );
        assert_eq!(
            content_words("The mines of the directors"),
            vec!["mine", "director"]
        );
        assert_eq!(stem("cities"), "city");
        assert_eq!(stem("glass"), "glass");
    }

    #[test]
    fn numbers_names_negation_sentences() {
        assert_eq!(
            numbers("In 1925, about 1,200 (3.5%) joined."),
            vec!["1925", "1200", "3.5"]
        );
        assert_eq!(
            names("Ruth St. Denis met Ted Shawn. Then they left."),
            vec!["st", "ted", "shawn"]
        );
        assert!(is_negated("He did not go") && is_negated("It isn't") && !is_negated("Notable"));
        assert_eq!(
            sentences("One. Two 3.5 three! Four"),
            vec!["One.", "Two 3.5 three!", "Four"]
        );
    }

    #[test]
    fn semicolon_parts_outside_brackets() {
        assert_eq!(
            semicolon_parts("Tesla (born 1856; died 1943) was an inventor; he worked for Edison."),
            vec![
                "Tesla (born 1856; died 1943) was an inventor",
                "he worked for Edison."
            ]
        );
        assert_eq!(semicolon_parts("No parts here."), vec!["No parts here."]);
    }

    #[test]
    fn abbreviations_and_initials_do_not_end_sentences() {
        assert_eq!(
            sentences(
                "It was funded by John D. Rockefeller. Jean Ribault charted the St. Johns River in 1562. \
                 Ted Ginn Jr. caught it; the U.S. Army e.g. came at 5 p.m. on Monday."
            ),
            vec![
                "It was funded by John D. Rockefeller.",
                "Jean Ribault charted the St. Johns River in 1562.",
                "Ted Ginn Jr. caught it; the U.S. Army e.g. came at 5 p.m. on Monday."
            ]
        );
        // Where a sentence opener follows, the abbreviation was the sentence's end.
        assert_eq!(
            sentences("He moved to the U.S. In 1990 he left. Pens, pencils, etc. The rest went. Go to Main St."),
            vec![
                "He moved to the U.S.",
                "In 1990 he left.",
                "Pens, pencils, etc.",
                "The rest went.",
                "Go to Main St."
            ]
        );
        // A word that merely looks short still ends its sentence.
        assert_eq!(
            sentences("We won. No. It lost."),
            vec!["We won.", "No.", "It lost."]
        );
    }
}
