//! Step 2 of SPEC "answer": deterministic rewrites of the question, each retrieved on its own so a user's
//! wording and the corpus's wording meet (recall first, the reranker decides later):
//! the question itself (hybrid), its content words alone (BM25: no function words diluting the terms), and for a
//! multi-hop question one sub-question per part. Also the CRAG loop's per-hop refinement ([`refine`]).

use crate::route::{joined_question_split, Route};
use attest_text::text;

/// Lanes of the router's `SearchRequest` (empty: both, fused).
pub const LANE_BM25: &str = "bm25";

/// One query to send to the router.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rewrite {
    pub query: String,
    /// Lanes to run; empty means hybrid.
    pub lanes: Vec<String>,
}

impl Rewrite {
    fn hybrid(query: String) -> Self {
        Rewrite {
            query,
            lanes: Vec::new(),
        }
    }
}

/// The rewrites of a question: the question, its content words (BM25 only), then up to `max_sub_questions`
/// sub-questions when the route is multi-hop. Empty and repeated queries are left out.
pub fn rewrites(question: &str, route: Route, max_sub_questions: usize) -> Vec<Rewrite> {
    let mut out = vec![Rewrite::hybrid(question.trim().to_string())];
    let keywords = text::content_words(question).join(" ");
    out.push(Rewrite {
        query: keywords,
        lanes: vec![LANE_BM25.to_string()],
    });
    if route == Route::MultiHop {
        out.extend(
            sub_questions(question)
                .into_iter()
                .take(max_sub_questions)
                .map(Rewrite::hybrid),
        );
    }
    let mut seen: Vec<(String, Vec<String>)> = Vec::new();
    out.retain(|r| {
        let key = (r.query.to_lowercase(), r.lanes.clone());
        let keep = !r.query.trim().is_empty() && !seen.contains(&key);
        seen.push(key);
        keep
    });
    out
}

/// The parts of a multi-hop question, each a query of its own:
/// - two questions joined by "and" → each question;
/// - "difference between A and B", "compare A and/with/to B", "both A and B" → "A rest", "B rest", where rest is
///   the question's other content words;
/// - "A vs B" → the content words of each side.
pub fn sub_questions(question: &str) -> Vec<String> {
    let words = text::words(question);
    if let Some(i) = joined_question_split(&words) {
        return vec![words[..i].join(" "), words[i + 1..].join(" ")];
    }
    for marker in [&["between"][..], &["compare"], &["compared"], &["both"]] {
        if let Some(pair) = pair_after(&words, marker[0]) {
            return pair;
        }
    }
    for sep in ["vs", "versus"] {
        if let Some(i) = words.iter().position(|w| w == sep) {
            let left = text::content_words(&words[..i].join(" ")).join(" ");
            let right = text::content_words(&words[i + 1..].join(" ")).join(" ");
            if !left.is_empty() && !right.is_empty() {
                return vec![left, right];
            }
        }
    }
    Vec::new()
}

/// "MARKER A (and|with|to|or) B …" → ["A rest", "B rest"]. B runs to the next function word; after "both" (a
/// subject: "both Tesla and Edison worked where") it is also at most as long as A. Rest is the question's content
/// words outside the pair and the marker.
fn pair_after(words: &[String], marker: &str) -> Option<Vec<String>> {
    let start = words.iter().position(|w| w == marker)? + 1;
    let join = (start + 1..words.len())
        .find(|&i| matches!(words[i].as_str(), "and" | "with" | "to" | "or"))?;
    let a = &words[start..join];
    let longest = if marker == "both" {
        a.len()
    } else {
        usize::MAX
    };
    let b_len = words[join + 1..]
        .iter()
        .take(longest)
        .take_while(|w| !text::content_words(w).is_empty())
        .count();
    let b_end = join + 1 + b_len;
    let b = &words[join + 1..b_end];
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let pair_words: Vec<&String> = a.iter().chain(b.iter()).collect();
    let rest: Vec<String> = words[..start - 1]
        .iter()
        .chain(words[b_end..].iter())
        .filter(|w| !pair_words.contains(w))
        .filter(|w| !matches!(w.as_str(), "difference" | "differences" | "similarities"))
        .cloned()
        .collect();
    let rest = text::content_words(&rest.join(" ")).join(" ");
    let with_rest = |part: &[String]| {
        let part = part.join(" ");
        if rest.is_empty() {
            part
        } else {
            format!("{part} {rest}")
        }
    };
    Some(vec![with_rest(a), with_rest(b)])
}

/// The query of CRAG hop `hop` ≥ 1 (hop 0 runs the [`rewrites`]): the question's content words with the
/// `hop`-th distinct title among the ranked candidates — the entity the question is probably about, then the next
/// one if that did not ground it. None when there is no such title (nothing new to ask).
pub fn refine<'a>(
    question: &str,
    hop: usize,
    ranked_titles: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let mut titles: Vec<&str> = Vec::new();
    for t in ranked_titles {
        let t = t.trim();
        if !t.is_empty() && !titles.contains(&t) {
            titles.push(t);
        }
    }
    let title = titles.get(hop.checked_sub(1)?)?;
    let keywords = text::content_words(question).join(" ");
    Some(format!("{keywords} {title}").trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_hop_rewrites_are_the_question_and_its_keywords() {
        let r = rewrites("Where did Tesla live?", Route::SingleHop, 3);
        assert_eq!(
            r,
            vec![
                Rewrite::hybrid("Where did Tesla live?".into()),
                Rewrite {
                    query: "tesla live".into(),
                    lanes: vec!["bm25".into()]
                },
            ]
        );
        // No content words: only the question.
        assert_eq!(rewrites("Who is it?", Route::SingleHop, 3).len(), 1);
    }

    #[test]
    fn sub_questions_of_each_multi_hop_form() {
        assert_eq!(
            sub_questions("Who founded the company and when did it close?"),
            vec!["who founded the company", "when did it close"]
        );
        assert_eq!(
            sub_questions("What is the difference between BM25 and TF-IDF?"),
            vec!["bm25", "tf idf"]
        );
        assert_eq!(
            sub_questions("Where did both Tesla and Edison work?"),
            vec!["tesla work", "edison work"]
        );
        assert_eq!(
            sub_questions("Compare RocksDB with LevelDB for writes"),
            vec!["rocksdb write", "leveldb write"]
        );
        assert_eq!(
            sub_questions("FAISS vs Annoy recall"),
            vec!["faiss", "annoy recall"]
        );
        assert!(sub_questions("Where did Tesla live?").is_empty());
    }

    #[test]
    fn multi_hop_rewrites_add_sub_questions_up_to_the_limit() {
        let q = "Where did both Tesla and Edison work?";
        let r = rewrites(q, Route::MultiHop, 3);
        let queries: Vec<&str> = r.iter().map(|r| r.query.as_str()).collect();
        assert_eq!(
            queries,
            vec![q, "tesla edison work", "tesla work", "edison work"]
        );
        assert_eq!(rewrites(q, Route::MultiHop, 1).len(), 3);
        assert_eq!(rewrites(q, Route::SingleHop, 3).len(), 2);
    }

    #[test]
    fn refinement_adds_the_next_distinct_title_each_hop() {
        let titles = ["Nikola Tesla", "", "Nikola Tesla", "Wardenclyffe"];
        assert_eq!(refine("Where did he live?", 0, titles), None);
        assert_eq!(
            refine("Where did he live?", 1, titles).as_deref(),
            Some("live Nikola Tesla")
        );
        assert_eq!(
            refine("Where did he live?", 2, titles).as_deref(),
            Some("live Wardenclyffe")
        );
        assert_eq!(refine("Where did he live?", 3, titles), None);
    }
}
