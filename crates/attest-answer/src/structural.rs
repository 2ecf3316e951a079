//! Step 3 of SPEC "answer": structural lookup. An identifier in the question (`BG 2.13`, `ADR-0012`, `RFC 9110`,
//! `ISO 8601`: forms given by the configured regex patterns) is an address, not a phrase — similarity search
//! cannot be trusted to find it. It is resolved exactly: a BM25 search for the identifier, keeping only the hits
//! whose title or text really contains it (case and the separator between letters and number normalised), and
//! those are forced into the candidate pool past the noise floor and into the passages the generator sees.

use std::sync::LazyLock;

use attest_proto::v1 as pb;
use regex::Regex;

use crate::rewrite::LANE_BM25;

/// Letters, then separators (or none), then a digit: the spot where `ADR-0012`, `adr 0012` and `ADR0012` differ.
static LETTER_DIGIT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(\p{L})[\s\-_]*(\d)").expect("a valid literal pattern"));
static SPACES: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\s+").expect("a valid literal pattern"));

/// The compiled identifier patterns.
#[derive(Debug, Clone)]
pub struct IdentifierPatterns {
    patterns: Vec<Regex>,
}

impl IdentifierPatterns {
    /// Compiles the patterns; an invalid one is an error naming it.
    pub fn new(patterns: &[String]) -> Result<Self, String> {
        patterns
            .iter()
            .map(|p| Regex::new(p).map_err(|e| format!("identifier pattern `{p}`: {e}")))
            .collect::<Result<Vec<_>, _>>()
            .map(|patterns| IdentifierPatterns { patterns })
    }

    /// Identifiers in the question, in order of appearance, one per normalised form.
    pub fn find(&self, question: &str) -> Vec<String> {
        let mut found: Vec<(usize, String)> = Vec::new();
        for p in &self.patterns {
            for m in p.find_iter(question) {
                found.push((m.start(), m.as_str().trim().to_string()));
            }
        }
        found.sort();
        let mut seen: Vec<String> = Vec::new();
        found
            .into_iter()
            .filter(|(_, id)| {
                let key = normalise(id);
                let new = !key.is_empty() && !seen.contains(&key);
                seen.push(key);
                new
            })
            .map(|(_, id)| id)
            .collect()
    }
}

/// Lowercase, one space between a run of letters and the number after it, whitespace collapsed.
pub fn normalise(text: &str) -> String {
    let lower = text.to_lowercase();
    let spaced = LETTER_DIGIT.replace_all(&lower, "$1 $2");
    SPACES.replace_all(spaced.trim(), " ").into_owned()
}

/// Whether `text` contains the identifier as a whole token sequence (normalised on both sides): `ADR-0012`
/// is in "see adr 0012." but not in "ADR-00123" nor in "BG 2.13.5" for `BG 2.13`.
pub fn contains_identifier(text: &str, identifier: &str) -> bool {
    let id = normalise(identifier);
    if id.is_empty() {
        return false;
    }
    let hay = normalise(text);
    let mut from = 0;
    while let Some(pos) = hay[from..].find(&id) {
        let start = from + pos;
        let end = start + id.len();
        let before_ok = hay[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric());
        let mut after = hay[end..].chars();
        let after_ok = match after.next() {
            None => true,
            Some(c) if c.is_alphanumeric() => false,
            // "2.13" followed by ".5" is another, longer address.
            Some('.' | ':' | '-') => !after.next().is_some_and(|c| c.is_ascii_digit()),
            Some(_) => true,
        };
        if before_ok && after_ok {
            return true;
        }
        from = start + hay[start..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// The BM25 query for an identifier: its spaced form and its joined form, so both `ADR 0012` (two tokens) and
/// `ADR0012` (one token) in a document match.
pub fn bm25_query(identifier: &str) -> String {
    let spaced = normalise(identifier);
    let joined: String = spaced.split(' ').collect();
    if joined == spaced {
        spaced
    } else {
        format!("{spaced} {joined}")
    }
}

/// The search that resolves one identifier: BM25 alone, at most `k` hits; keep the ones [`matching`] it.
pub fn search_for(collection: &str, identifier: &str, k: u32) -> pb::SearchRequest {
    pb::SearchRequest {
        collection: collection.to_string(),
        query: bm25_query(identifier),
        k: Some(k),
        lanes: vec![LANE_BM25.to_string()],
        ..Default::default()
    }
}

/// The hits of an identifier's search whose title or text really contains it.
pub fn matching(identifier: &str, hits: Vec<pb::Hit>) -> Vec<pb::Hit> {
    hits.into_iter()
        .filter(|h| {
            contains_identifier(&h.title, identifier) || contains_identifier(&h.text, identifier)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AnswerConfig;

    fn defaults() -> IdentifierPatterns {
        IdentifierPatterns::new(&AnswerConfig::default().identifier_patterns).unwrap()
    }

    #[test]
    fn default_patterns_find_the_usual_forms() {
        let p = defaults();
        assert_eq!(p.find("What does BG 2.13 say?"), vec!["BG 2.13"]);
        assert_eq!(
            p.find("Does ADR-0012 supersede RFC 9110 and ISO 8601?"),
            vec!["ADR-0012", "RFC 9110", "ISO 8601"]
        );
        assert_eq!(p.find("adr-0012 and ADR 0012 are one"), vec!["ADR 0012"]);
        assert_eq!(p.find("ADR-0012 or ADR0012?"), vec!["ADR-0012"]);
        // Ordinary questions have none.
        for q in [
            "What happened in 1990?",
            "When did the NFL start?",
            "Who won Super Bowl 50?",
            "What is the name of the church built in 1925?",
        ] {
            assert!(p.find(q).is_empty(), "{q}: {:?}", p.find(q));
        }
    }

    #[test]
    fn bad_patterns_are_named() {
        let e = IdentifierPatterns::new(&["(".to_string()]).unwrap_err();
        assert!(e.contains("`(`"), "{e}");
    }

    #[test]
    fn normalisation_of_case_and_separator() {
        assert_eq!(normalise("ADR-0012"), "adr 0012");
        assert_eq!(normalise("adr_0012"), "adr 0012");
        assert_eq!(normalise("ADR0012"), "adr 0012");
        assert_eq!(normalise("  BG   2.13 "), "bg 2.13");
        assert_eq!(bm25_query("ADR-0012"), "adr 0012 adr0012");
    }

    #[test]
    fn containment_respects_token_boundaries() {
        assert!(contains_identifier("See adr 0012.", "ADR-0012"));
        assert!(contains_identifier("ADR0012: use RocksDB", "ADR-0012"));
        assert!(contains_identifier("Bhagavad-gita BG 2.13 says", "bg 2.13"));
        assert!(!contains_identifier("ADR-00123 is another", "ADR-0012"));
        assert!(!contains_identifier("XADR-0012", "ADR-0012"));
        assert!(!contains_identifier("BG 2.13.5", "BG 2.13"));
        assert!(contains_identifier("BG 2.13. Next", "BG 2.13"));
        assert!(contains_identifier(
            "first ADR-00123, then ADR-0012",
            "ADR-0012"
        ));
        assert!(!contains_identifier("anything", ""));
    }
}
