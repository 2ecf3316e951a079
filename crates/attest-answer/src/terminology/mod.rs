//! Step 4 of SPEC "answer", terminology first: a definition question ("what is X", "what does X mean",
//! "define X", with X a short term and nothing after it) is looked up in the collection's glossary before anything
//! else, so a definition is never composed from a passage that merely mentions the term.
//!
//! A glossary entry is a document of the collection with metadata `{"kind": "glossary", "term": "…",
//! "aliases": [...], "sense"?: "…"}`. The lookup is one router search filtered to `kind = glossary`, bounded by a
//! timeout. Outcomes ([`Lookup`]): one entry whose normalised term or alias equals X → hit (the answer is the
//! entry's definition, cited); several → ambiguous (each listed and cited); entries but none matching → miss
//! (abstain `terminology_not_found`, never invent); no glossary entries at all → not a terminology question;
//! timeout or router error → carry on with normal retrieval, the response marked unverified terminology.
//! Outcomes other than timeouts and errors are cached ([`cache::LruTtl`], keyed by collection + normalised term).

pub mod cache;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use attest_proto::v1 as pb;
use attest_telemetry::metrics::{
    TERMINOLOGY_CACHE_HIT_TOTAL, TERMINOLOGY_HIT_TOTAL, TERMINOLOGY_LOOKUP_TOTAL,
    TERMINOLOGY_MISS_TOTAL, TERMINOLOGY_TIMEOUT_TOTAL,
};
use serde::{Deserialize, Serialize};

use crate::client::{Caller, RouterClient};
use crate::pool::metadata_str;
use attest_text::text;
use cache::LruTtl;

/// The `kind` metadata value of glossary entries.
pub const GLOSSARY_KIND: &str = "glossary";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TerminologyConfig {
    pub enabled: bool,
    /// Glossary lookup deadline (SPEC: 200–500 ms).
    pub timeout_ms: u64,
    /// Terms cached (SPEC: 1000).
    pub cache_capacity: usize,
    /// How long a cached lookup stays valid (SPEC: 5–30 min).
    pub cache_ttl_secs: u64,
    /// A definition question's term has at most this many words.
    pub max_term_words: usize,
    /// Glossary entries the lookup asks the router for.
    pub lookup_k: u32,
}

impl Default for TerminologyConfig {
    fn default() -> Self {
        TerminologyConfig {
            enabled: true,
            timeout_ms: 300,
            cache_capacity: 1000,
            cache_ttl_secs: 600,
            max_term_words: 4,
            lookup_k: 20,
        }
    }
}

/// Words that never occur in a term: with one of them, "what is X" is an ordinary question
/// ("What is Tesla known for?", "What is it made of?").
const NOT_IN_TERMS: &[&str] = &[
    "is", "are", "was", "were", "be", "been", "being", "did", "does", "do", "has", "have", "had",
    "can", "could", "would", "should", "will", "may", "might", "that", "which", "who", "whom",
    "whose", "when", "where", "why", "how", "what", "the", "a", "an", "in", "on", "at", "by",
    "for", "from", "to", "with", "into", "about", "after", "before", "during", "this", "these",
    "those", "it", "its", "his", "her", "their", "they", "he", "she", "we", "you", "i", "my",
    "our", "your", "there", "than", "some", "called", "known", "used", "made",
];

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    s.get(..prefix.len())
        .filter(|head| head.eq_ignore_ascii_case(prefix))
        .map(|_| &s[prefix.len()..])
}

fn strip_suffix_ci<'a>(s: &'a str, suffix: &str) -> Option<&'a str> {
    let at = s.len().checked_sub(suffix.len())?;
    s.get(at..)
        .filter(|tail| tail.eq_ignore_ascii_case(suffix))
        .map(|_| &s[..at])
}

/// The term X of a definition question, as written, or None for any other question. "What is the X" counts
/// only when X is one word ("What is the Kalevala?"), so "What is the name of the church …?" is not one.
pub fn definition_term(question: &str, max_words: usize) -> Option<String> {
    let q = question
        .trim()
        .trim_end_matches(['?', '.', '!', ' '])
        .trim();
    const EXPLICIT: &[&str] = &[
        "what is meant by ",
        "what is the meaning of ",
        "what's the meaning of ",
        "what is the definition of ",
        "what's the definition of ",
        "meaning of ",
        "definition of ",
        "define ",
    ];
    let (x, article_rule) = if let Some(x) = EXPLICIT.iter().find_map(|p| strip_prefix_ci(q, p)) {
        (x, false)
    } else if let Some(x) = strip_prefix_ci(q, "what does ")
        .and_then(|r| strip_suffix_ci(r, " mean").or_else(|| strip_suffix_ci(r, " stand for")))
    {
        (x, false)
    } else {
        let x = ["what is ", "what's ", "what are "]
            .iter()
            .find_map(|p| strip_prefix_ci(q, p))?;
        (x, true)
    };
    let mut x = x
        .trim()
        .trim_matches(['"', '\'', '`', '“', '”', '‘', '’'])
        .trim();
    for article in ["a ", "an "] {
        if let Some(rest) = strip_prefix_ci(x, article) {
            x = rest.trim();
        }
    }
    let mut one_word_only = false;
    if let Some(rest) = strip_prefix_ci(x, "the ") {
        x = rest.trim();
        one_word_only = article_rule;
    }
    let words = text::words(x);
    let limit = if one_word_only { 1 } else { max_words };
    let fits = !words.is_empty()
        && words.len() <= limit
        && !words.iter().any(|w| NOT_IN_TERMS.contains(&w.as_str()))
        && !x.contains(['\'', '’', ',', ';', ':']);
    let fits = fits || (!words.is_empty() && is_quoted_term(question, x, max_words));
    fits.then(|| x.to_string())
}

/// `What is "X"?` with a quoted X of a few words is a definition question whatever X's words are.
fn is_quoted_term(question: &str, x: &str, max_words: usize) -> bool {
    let quoted = question.contains(&format!("\"{x}\"")) || question.contains(&format!("“{x}”"));
    quoted && text::words(x).len() <= max_words
}

/// The matching key of a term: lowercase words (letters and digits), each crudely stemmed, one space apart —
/// so "Vector embeddings", "vector-embedding" and "VECTOR EMBEDDING" meet.
pub fn normalise_term(term: &str) -> String {
    text::words(term)
        .iter()
        .map(|w| text::stem(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One glossary entry found by a lookup.
#[derive(Debug, Clone, PartialEq)]
pub struct GlossaryEntry {
    pub term: String,
    pub sense: Option<String>,
    pub hit: pb::Hit,
}

/// The outcome of a lookup.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// The collection has no glossary entries: not a terminology question.
    NoGlossary,
    /// Entries exist, none is the term; the nearest entries' terms, best first.
    Miss {
        nearest: Vec<String>,
    },
    Hit(GlossaryEntry),
    Ambiguous(Vec<GlossaryEntry>),
    /// The glossary did not answer in time.
    Timeout,
    /// The lookup failed (router error).
    Unavailable(String),
}

impl Lookup {
    pub fn outcome(&self) -> &'static str {
        match self {
            Lookup::NoGlossary => "no_glossary",
            Lookup::Miss { .. } => "miss",
            Lookup::Hit(_) => "hit",
            Lookup::Ambiguous(_) => "ambiguous",
            Lookup::Timeout => "timeout",
            Lookup::Unavailable(_) => "unavailable",
        }
    }

    /// The matching entries of a hit or an ambiguous lookup.
    pub fn matches(&self) -> Vec<GlossaryEntry> {
        match self {
            Lookup::Hit(e) => vec![e.clone()],
            Lookup::Ambiguous(v) => v.clone(),
            _ => Vec::new(),
        }
    }

    /// Whether the response must say the terminology could not be verified.
    pub fn unverified(&self) -> bool {
        matches!(self, Lookup::Timeout | Lookup::Unavailable(_))
    }
}

/// Sorts the hits of a glossary search into an outcome for `term` (pure). One entry per document: the best
/// ranked chunk of each.
pub fn classify(term: &str, hits: Vec<pb::Hit>) -> Lookup {
    let key = normalise_term(term);
    let mut entries: Vec<(GlossaryEntry, bool)> = Vec::new();
    for hit in hits {
        if metadata_str(&hit.metadata_json, "kind").as_deref() != Some(GLOSSARY_KIND)
            || entries.iter().any(|(e, _)| e.hit.doc_id == hit.doc_id)
        {
            continue;
        }
        let meta: serde_json::Value = serde_json::from_str(&hit.metadata_json).unwrap_or_default();
        let entry_term = meta["term"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| hit.title.clone());
        let aliases = meta["aliases"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect::<Vec<_>>())
            .unwrap_or_default();
        let matches = !key.is_empty()
            && std::iter::once(entry_term.as_str())
                .chain(aliases)
                .any(|t| normalise_term(t) == key);
        let sense = meta["sense"].as_str().map(str::to_string);
        entries.push((
            GlossaryEntry {
                term: entry_term,
                sense,
                hit,
            },
            matches,
        ));
    }
    if entries.is_empty() {
        return Lookup::NoGlossary;
    }
    let (matching, others): (Vec<_>, Vec<_>) = entries.into_iter().partition(|(_, m)| *m);
    let mut matching: Vec<GlossaryEntry> = matching.into_iter().map(|(e, _)| e).collect();
    match matching.len() {
        0 => {
            let mut nearest: Vec<String> = Vec::new();
            for (e, _) in others {
                if !nearest.contains(&e.term) {
                    nearest.push(e.term);
                }
            }
            Lookup::Miss { nearest }
        }
        1 => Lookup::Hit(matching.remove(0)),
        _ => Lookup::Ambiguous(matching),
    }
}

/// The glossary lookup with its cache and metrics.
#[derive(Debug)]
pub struct Terminology {
    config: TerminologyConfig,
    cache: Mutex<LruTtl<Lookup>>,
    cache_hits: AtomicU64,
}

/// A lookup's outcome and whether it came from the cache.
#[derive(Debug, Clone, PartialEq)]
pub struct Looked {
    pub lookup: Lookup,
    pub cached: bool,
}

impl Terminology {
    pub fn new(config: TerminologyConfig) -> Self {
        let cache = LruTtl::new(
            config.cache_capacity,
            Duration::from_secs(config.cache_ttl_secs),
        );
        Terminology {
            config,
            cache: Mutex::new(cache),
            cache_hits: AtomicU64::new(0),
        }
    }

    pub fn config(&self) -> &TerminologyConfig {
        &self.config
    }

    /// Lookups answered from the cache so far.
    pub fn cache_hits(&self) -> u64 {
        self.cache_hits.load(Ordering::Relaxed)
    }

    /// Looks `term` up in `collection`'s glossary (cache first, then the router within the timeout).
    pub async fn lookup(
        &self,
        router: &RouterClient,
        collection: &str,
        term: &str,
        request_id: &str,
        caller: &Caller,
    ) -> Looked {
        metrics::counter!(TERMINOLOGY_LOOKUP_TOTAL).increment(1);
        // Keyed by tenant too: one tenant's glossary answer is never served to another.
        let key = format!(
            "{collection}\u{1f}{}\u{1f}{}",
            caller.tenant,
            normalise_term(term)
        );
        let cached = self
            .cache
            .lock()
            .ok()
            .and_then(|mut c| c.get(&key, Instant::now()));
        if let Some(lookup) = cached {
            self.cache_hits.fetch_add(1, Ordering::Relaxed);
            metrics::counter!(TERMINOLOGY_CACHE_HIT_TOTAL).increment(1);
            count_outcome(&lookup);
            return Looked {
                lookup,
                cached: true,
            };
        }
        // The search runs as its own task: the timeout then bounds it even when the router answers without ever
        // yielding (in process), and an abandoned lookup finishes in the background instead of holding the turn.
        let (router, request) = (
            router.clone(),
            pb::SearchRequest {
                collection: collection.to_string(),
                query: term.to_string(),
                k: Some(self.config.lookup_k.max(1)),
                filter: Some(glossary_filter()),
                ..Default::default()
            },
        );
        let (rid, caller) = (request_id.to_string(), caller.clone());
        let search = tokio::spawn(async move { router.search(request, &rid, &caller).await });
        let budget = Duration::from_millis(self.config.timeout_ms);
        let started = Instant::now();
        let lookup = match tokio::time::timeout(budget, search).await {
            // The timer ticks in whole milliseconds: an answer that came in after the budget is late too.
            Err(_) => Lookup::Timeout,
            Ok(_) if started.elapsed() > budget => Lookup::Timeout,
            Ok(Err(join)) => Lookup::Unavailable(format!("glossary lookup failed: {join}")),
            Ok(Ok(Err(status))) => Lookup::Unavailable(status.message().to_string()),
            Ok(Ok(Ok(resp))) => classify(term, resp.hits),
        };
        count_outcome(&lookup);
        if !lookup.unverified() {
            if let Ok(mut c) = self.cache.lock() {
                c.insert(key, lookup.clone(), Instant::now());
            }
        }
        Looked {
            lookup,
            cached: false,
        }
    }
}

fn count_outcome(lookup: &Lookup) {
    match lookup {
        Lookup::Hit(_) | Lookup::Ambiguous(_) => {
            metrics::counter!(TERMINOLOGY_HIT_TOTAL).increment(1)
        }
        Lookup::Miss { .. } => metrics::counter!(TERMINOLOGY_MISS_TOTAL).increment(1),
        Lookup::Timeout => metrics::counter!(TERMINOLOGY_TIMEOUT_TOTAL).increment(1),
        Lookup::NoGlossary | Lookup::Unavailable(_) => {}
    }
}

/// The `terminology` field of a response: the term asked about and what the glossary said.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TerminologyReport {
    pub term: String,
    /// `hit`, `ambiguous`, `miss`, `no_glossary`, `timeout`, `unavailable`.
    pub outcome: &'static str,
    /// The matching entries, each with the footnote that cites it.
    pub matches: Vec<TermMatch>,
    /// Served from the terminology cache.
    pub cached: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TermMatch {
    /// The footnote `[n]` of this entry in the answer.
    pub n: u32,
    pub term: String,
    pub sense: Option<String>,
    pub doc_id: String,
    pub chunk_id: String,
}

impl TerminologyReport {
    pub fn new(term: &str, looked: &Looked) -> Self {
        TerminologyReport {
            term: term.to_string(),
            outcome: looked.lookup.outcome(),
            matches: looked
                .lookup
                .matches()
                .into_iter()
                .enumerate()
                .map(|(i, e)| TermMatch {
                    n: i as u32 + 1,
                    term: e.term,
                    sense: e.sense,
                    doc_id: e.hit.doc_id,
                    chunk_id: e.hit.chunk_id,
                })
                .collect(),
            cached: looked.cached,
        }
    }
}

/// `kind = "glossary"`.
pub fn glossary_filter() -> pb::Filter {
    pb::Filter {
        conditions: vec![pb::Condition {
            field: "kind".into(),
            kind: Some(pb::condition::Kind::EqualsJson(format!(
                "\"{GLOSSARY_KIND}\""
            ))),
        }],
    }
}

/// The definition text of the matching entries, with markers: a hit gives its entry's first `max_sentences`
/// sentences cited `[1]`; an ambiguous lookup lists the first sentence of each entry `n`, cited `[n]`. The
/// entries are the footnotes `1..` in order; the title line the chunker prefixes is skipped.
pub fn definition_text(entries: &[GlossaryEntry], max_sentences: usize) -> String {
    let per_entry = if entries.len() == 1 {
        max_sentences.max(1)
    } else {
        1
    };
    let mut out: Vec<String> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        for s in text::sentences(crate::footnotes::body(&e.hit))
            .into_iter()
            .take(per_entry)
        {
            out.push(crate::cite::render(s, &[i as u32 + 1]));
        }
    }
    out.join(" ")
}

#[cfg(test)]
mod tests;
