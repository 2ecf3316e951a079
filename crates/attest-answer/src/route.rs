//! Step 1 of SPEC "answer": route the question, deterministically (no model).
//!
//! - [`Route::NoRetrieval`]: greetings, thanks, chit-chat, or nothing to look up (no content words at all) — the
//!   pipeline abstains with `routed_no_retrieval` instead of searching for "hello".
//! - [`Route::MultiHop`]: comparisons ("difference between", "compare", "vs"), "both A and B", or two questions
//!   joined by "and" — the rewrite step adds one sub-question per part so each part is retrieved on its own.
//! - [`Route::SingleHop`]: everything else.

use serde::Serialize;

use attest_text::text;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    NoRetrieval,
    SingleHop,
    MultiHop,
}

impl Route {
    pub fn as_str(self) -> &'static str {
        match self {
            Route::NoRetrieval => "no_retrieval",
            Route::SingleHop => "single_hop",
            Route::MultiHop => "multi_hop",
        }
    }
}

/// Content words (after [`text::content_words`]) that make small talk, not a question about a corpus. A question
/// routes to no retrieval only when every content word it has is one of these.
const CHIT_CHAT: &[&str] = &[
    "hi",
    "hello",
    "hey",
    "hiya",
    "yo",
    "greeting",
    "thank",
    "thanks",
    "thx",
    "ty",
    "cheer",
    "bye",
    "goodbye",
    "morning",
    "afternoon",
    "evening",
    "night",
    "good",
    "great",
    "cool",
    "nice",
    "awesome",
    "ok",
    "okay",
    "yes",
    "yeah",
    "yep",
    "nope",
    "please",
    "doing",
    "going",
    "today",
    "lot",
    "appreciate",
    "welcome",
    "sup",
    "lol",
    "fine",
    "well",
    "there",
];

/// Phrases that make a question a comparison of two things.
const COMPARISON: &[&str] = &[
    "difference between",
    "differences between",
    "different from",
    "compare",
    "compared",
    "comparison",
    "similarities between",
    " vs ",
    " vs. ",
    " versus ",
];

/// Words that open a second question after "and" ("Who founded it and when did it close?").
pub(crate) const QUESTION_OPENERS: &[&str] = &[
    "who", "what", "when", "where", "why", "how", "which", "whom", "whose", "did", "does", "do",
    "is", "was", "were", "are", "can", "could", "has", "have", "had",
];

/// Routes a question (see the module docs).
pub fn route(question: &str) -> Route {
    let content = text::content_words(question);
    if content.iter().all(|w| CHIT_CHAT.contains(&w.as_str())) {
        return Route::NoRetrieval;
    }
    if is_multi_hop(question) {
        Route::MultiHop
    } else {
        Route::SingleHop
    }
}

fn is_multi_hop(question: &str) -> bool {
    let lower = format!(" {} ", question.to_lowercase());
    if COMPARISON.iter().any(|p| lower.contains(p)) {
        return true;
    }
    let words = text::words(question);
    // "both A and B": "both" with an "and" after it.
    if let Some(i) = words.iter().position(|w| w == "both") {
        if words[i + 1..].iter().any(|w| w == "and") {
            return true;
        }
    }
    joined_question_split(&words).is_some()
}

/// Index of the "and" that joins two questions: "and" followed by a question opener, with content words on
/// both sides (so "Who did it and how?" stays one question).
pub(crate) fn joined_question_split(words: &[String]) -> Option<usize> {
    (1..words.len().saturating_sub(1)).find(|&i| {
        words[i] == "and"
            && QUESTION_OPENERS.contains(&words[i + 1].as_str())
            && !text::content_words(&words[..i].join(" ")).is_empty()
            && !text::content_words(&words[i + 1..].join(" ")).is_empty()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_of_questions() {
        let table: &[(&str, Route)] = &[
            ("Hello!", Route::NoRetrieval),
            ("hi there", Route::NoRetrieval),
            ("Thanks a lot!", Route::NoRetrieval),
            ("Thank you, that was great.", Route::NoRetrieval),
            ("Good morning", Route::NoRetrieval),
            ("How are you doing today?", Route::NoRetrieval),
            ("Who are you?", Route::NoRetrieval),
            ("?!", Route::NoRetrieval),
            ("When does the barn owl hunt?", Route::SingleHop),
            ("What is BM25?", Route::SingleHop),
            ("Hello, when was Tesla born?", Route::SingleHop),
            (
                "What is the name of the church that was built in 1925?",
                Route::SingleHop,
            ),
            ("What happened in 1990?", Route::SingleHop),
            (
                "What is the difference between BM25 and TF-IDF?",
                Route::MultiHop,
            ),
            ("Compare RocksDB with LevelDB.", Route::MultiHop),
            ("FAISS vs Annoy for recall?", Route::MultiHop),
            ("Where did both Tesla and Edison work?", Route::MultiHop),
            (
                "Who founded the company and when did it close?",
                Route::MultiHop,
            ),
            // "and" inside one question is not a join.
            ("Who were Tesla and Edison?", Route::SingleHop),
            ("What did Tesla invent and how?", Route::SingleHop),
        ];
        for (q, want) in table {
            assert_eq!(route(q), *want, "{q}");
        }
    }

    #[test]
    fn names_are_snake_case() {
        assert_eq!(Route::NoRetrieval.as_str(), "no_retrieval");
        assert_eq!(
            serde_json::to_string(&Route::MultiHop).unwrap(),
            "\"multi_hop\""
        );
    }
}
