//! Sentence-packing chunker: cuts a document into token-budgeted passages for embedding and
//! retrieval, each a contiguous span of the document text.
//!
//! Units are sentences (UAX #29 bounds, with blank lines as hard breaks); a sentence over the
//! budget is cut at word boundaries, and a word over the budget at grapheme boundaries. Chunks
//! pack whole units greedily and may start with a few units of the previous chunk (overlap).

use serde::{Deserialize, Serialize};
use unicode_segmentation::UnicodeSegmentation;

use crate::document::SourceDocument;

/// Counts tokens the way the embedding model will. Counts must not decrease when text is
/// appended: the chunker binary-searches on that.
pub trait TokenCounter: Send + Sync {
    fn count_tokens(&self, text: &str) -> usize;
}

/// Counts whitespace-separated words; for tests, and as a fallback when no tokenizer is loaded.
#[derive(Debug, Clone, Copy, Default)]
pub struct WhitespaceTokenCounter;

impl TokenCounter for WhitespaceTokenCounter {
    fn count_tokens(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
}

/// Chunking parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ChunkingConfig {
    /// Token budget of a chunk's `text`, title prefix included. Default 256; 0 is treated as 1.
    pub max_tokens: usize,
    /// Budget of the trailing units of a chunk repeated at the start of the next. Default 32.
    pub overlap_tokens: usize,
    /// Prefix each chunk's `text` with `"Title\n"`, so passages out of context still say what
    /// they are about. Default true. The prefix is left out when it alone would take more than
    /// half of `max_tokens`, because it would crowd out the body.
    pub title_prefix: bool,
}

impl Default for ChunkingConfig {
    fn default() -> Self {
        ChunkingConfig {
            max_tokens: 256,
            overlap_tokens: 32,
            title_prefix: true,
        }
    }
}

impl ChunkingConfig {
    /// The first setting that cannot be right, as (key, problem): a chunk needs a budget, and the overlap
    /// must leave room for new text.
    pub fn problem(&self) -> Option<(&'static str, String)> {
        if self.max_tokens == 0 {
            return Some(("max_tokens", "must be greater than 0 (got 0)".into()));
        }
        (self.overlap_tokens >= self.max_tokens).then(|| {
            (
                "overlap_tokens",
                format!(
                    "must be less than max_tokens ({}; got {})",
                    self.max_tokens, self.overlap_tokens
                ),
            )
        })
    }
}

/// One passage of a document.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    /// 0, 1, 2, … in document order.
    pub ordinal: u32,
    /// What gets embedded: `body`, prefixed with `"Title\n"` when the title prefix applies.
    pub text: String,
    /// `doc.text[char_start..char_end]`.
    pub body: String,
    /// Byte offset of `body` in the document text.
    pub char_start: usize,
    /// Byte offset just past `body` in the document text.
    pub char_end: usize,
}

/// Splits `doc` into chunks (none when the text is blank). Chunks are non-empty, start and end
/// on non-whitespace, never exceed `max_tokens` unless a single grapheme does, and with
/// `overlap_tokens == 0` cover every sentence exactly once, in order.
pub fn chunk_document(
    doc: &SourceDocument,
    config: &ChunkingConfig,
    counter: &dyn TokenCounter,
) -> Vec<Chunk> {
    let max_tokens = config.max_tokens.max(1);
    let prefix = title_prefix(doc, config, counter, max_tokens);
    let packer = Packer {
        text: &doc.text,
        prefix: &prefix,
        max_tokens,
        counter,
    };
    let units = packer.units();

    let mut chunks = Vec::new();
    let mut first = 0;
    let mut next = 0;
    while next < units.len() {
        // Overlap is best effort: shed it from the front until the first new unit fits.
        while first < next && !packer.fits(units[first].0, units[next].1) {
            first += 1;
        }
        let last = last_fitting(next + 1, units.len(), |j| {
            packer.fits(units[first].0, units[j].1)
        })
        .unwrap_or(next);
        let (start, end) = (units[first].0, units[last].1);
        let body = &doc.text[start..end];
        chunks.push(Chunk {
            ordinal: u32::try_from(chunks.len()).unwrap_or(u32::MAX),
            text: format!("{prefix}{body}"),
            body: body.to_string(),
            char_start: start,
            char_end: end,
        });
        next = last + 1;
        first = packer.overlap_start(&units, first, last, config.overlap_tokens);
    }
    chunks
}

fn title_prefix(
    doc: &SourceDocument,
    config: &ChunkingConfig,
    counter: &dyn TokenCounter,
    max_tokens: usize,
) -> String {
    let title = doc.title.trim();
    if !config.title_prefix || title.is_empty() {
        return String::new();
    }
    let prefix = format!("{title}\n");
    if counter.count_tokens(&prefix).saturating_mul(2) > max_tokens {
        String::new()
    } else {
        prefix
    }
}

struct Packer<'a> {
    text: &'a str,
    prefix: &'a str,
    max_tokens: usize,
    counter: &'a dyn TokenCounter,
}

impl Packer<'_> {
    /// Whether `text[start..end]`, with the prefix, is within the budget.
    fn fits(&self, start: usize, end: usize) -> bool {
        let body = &self.text[start..end];
        let tokens = if self.prefix.is_empty() {
            self.counter.count_tokens(body)
        } else {
            self.counter.count_tokens(&format!("{}{body}", self.prefix))
        };
        tokens <= self.max_tokens
    }

    /// Byte ranges of the packing units, in order, each trimmed and within budget (bar a single
    /// oversized grapheme).
    fn units(&self) -> Vec<(usize, usize)> {
        let mut units = Vec::new();
        for (para_start, para_end) in paragraphs(self.text) {
            let para = &self.text[para_start..para_end];
            for (offset, sentence) in para.split_sentence_bound_indices() {
                let Some((start, end)) = trimmed(para_start + offset, sentence) else {
                    continue;
                };
                if self.fits(start, end) {
                    units.push((start, end));
                } else {
                    let words = word_ranges(self.text, start, end);
                    self.split(&words, &mut units, true);
                }
            }
        }
        units
    }

    /// Packs consecutive `pieces` into budget-sized units. A piece that alone is over budget is
    /// cut into graphemes (when `pieces` are words) or emitted as is (when they are graphemes).
    fn split(&self, pieces: &[(usize, usize)], out: &mut Vec<(usize, usize)>, words: bool) {
        let mut i = 0;
        while i < pieces.len() {
            let start = pieces[i].0;
            match last_fitting(i, pieces.len(), |j| self.fits(start, pieces[j].1)) {
                Some(j) => {
                    out.push((start, pieces[j].1));
                    i = j + 1;
                }
                None => {
                    let (s, e) = pieces[i];
                    if words {
                        let graphemes: Vec<(usize, usize)> = self.text[s..e]
                            .grapheme_indices(true)
                            .map(|(o, g)| (s + o, s + o + g.len()))
                            .collect();
                        self.split(&graphemes, out, false);
                    } else {
                        out.push((s, e));
                    }
                    i += 1;
                }
            }
        }
    }

    /// Index of the first unit the next chunk repeats: the longest suffix of
    /// `units[first..=last]` within `overlap_tokens`, never the whole chunk; `last + 1` for none.
    fn overlap_start(
        &self,
        units: &[(usize, usize)],
        first: usize,
        last: usize,
        overlap_tokens: usize,
    ) -> usize {
        let mut k = last + 1;
        if overlap_tokens == 0 {
            return k;
        }
        let end = units[last].1;
        while k - 1 > first
            && self.counter.count_tokens(&self.text[units[k - 1].0..end]) <= overlap_tokens
        {
            k -= 1;
        }
        k
    }
}

/// Largest `j` in `lo..hi` with `fits(j)`, assuming `fits` is true up to some index and false
/// after; `None` when `fits(lo)` is false or the range is empty. Galloping keeps the number of
/// (possibly expensive) token counts logarithmic in the answer.
fn last_fitting(lo: usize, hi: usize, mut fits: impl FnMut(usize) -> bool) -> Option<usize> {
    if lo >= hi || !fits(lo) {
        return None;
    }
    let mut good = lo;
    let mut bad = hi;
    let mut step = 1usize;
    loop {
        let probe = good.saturating_add(step);
        if probe >= bad {
            break;
        }
        if fits(probe) {
            good = probe;
            step = step.saturating_mul(2);
        } else {
            bad = probe;
            break;
        }
    }
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if fits(mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Some(good)
}

/// Byte ranges of the paragraphs of `text`: maximal runs of lines that are not blank.
fn paragraphs(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        if line.trim().is_empty() {
            if let Some(s) = start.take() {
                out.push((s, pos));
            }
        } else if start.is_none() {
            start = Some(pos);
        }
        pos += line.len();
    }
    if let Some(s) = start {
        out.push((s, text.len()));
    }
    out
}

/// `s` (found at byte `offset`) without surrounding whitespace, as a range; `None` if blank.
fn trimmed(offset: usize, s: &str) -> Option<(usize, usize)> {
    let lead = s.len() - s.trim_start().len();
    let len = s.trim().len();
    (len > 0).then_some((offset + lead, offset + lead + len))
}

/// Byte ranges of the whitespace-separated words of `text[start..end]`.
fn word_ranges(text: &str, start: usize, end: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut word_start = None;
    for (i, c) in text[start..end].char_indices() {
        match (c.is_whitespace(), word_start) {
            (true, Some(s)) => {
                out.push((start + s, start + i));
                word_start = None;
            }
            (false, None) => word_start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = word_start {
        out.push((start + s, end));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normalize::normalize_text;
    use proptest::prelude::*;

    fn doc(title: &str, text: &str) -> SourceDocument {
        SourceDocument {
            id: "d".into(),
            title: title.into(),
            text: text.into(),
            metadata: serde_json::Map::new(),
            tenant: None,
        }
    }

    fn cfg(max_tokens: usize, overlap_tokens: usize, title_prefix: bool) -> ChunkingConfig {
        ChunkingConfig {
            max_tokens,
            overlap_tokens,
            title_prefix,
        }
    }

    fn bodies(chunks: &[Chunk]) -> Vec<&str> {
        chunks.iter().map(|c| c.body.as_str()).collect()
    }

    /// One token per character, to exercise word and grapheme splitting.
    struct CharCounter;
    impl TokenCounter for CharCounter {
        fn count_tokens(&self, text: &str) -> usize {
            text.chars().filter(|c| !c.is_whitespace()).count()
        }
    }

    #[test]
    fn empty_text_gives_no_chunks() {
        let c = ChunkingConfig::default();
        assert!(chunk_document(&doc("T", ""), &c, &WhitespaceTokenCounter).is_empty());
        assert!(chunk_document(&doc("T", " \n\n "), &c, &WhitespaceTokenCounter).is_empty());
    }

    #[test]
    fn packs_sentences_with_overlap() {
        let d = doc("", "A a. B b. C c. D d.");
        let chunks = chunk_document(&d, &cfg(4, 2, true), &WhitespaceTokenCounter);
        assert_eq!(bodies(&chunks), ["A a. B b.", "B b. C c.", "C c. D d."]);
        assert_eq!((chunks[1].char_start, chunks[1].char_end), (5, 14));
        assert_eq!(
            chunks.iter().map(|c| c.ordinal).collect::<Vec<_>>(),
            [0, 1, 2]
        );

        let chunks = chunk_document(&d, &cfg(4, 0, true), &WhitespaceTokenCounter);
        assert_eq!(bodies(&chunks), ["A a. B b.", "C c. D d."]);
    }

    #[test]
    fn title_prefix_counts_against_budget() {
        let d = doc("My Title", "A a. B b. C c.");
        let chunks = chunk_document(&d, &cfg(5, 0, true), &WhitespaceTokenCounter);
        assert_eq!(bodies(&chunks), ["A a.", "B b.", "C c."]);
        assert_eq!(chunks[0].text, "My Title\nA a.");

        let chunks = chunk_document(&d, &cfg(5, 0, false), &WhitespaceTokenCounter);
        assert_eq!(bodies(&chunks), ["A a. B b.", "C c."]);
        assert_eq!(chunks[0].text, chunks[0].body);

        // A title taking over half the budget is dropped rather than starving the body.
        let chunks = chunk_document(&d, &cfg(3, 0, true), &WhitespaceTokenCounter);
        assert_eq!(chunks[0].text, "A a.");
    }

    #[test]
    fn blank_line_is_a_hard_boundary() {
        let d = doc("", "no full stop here\n\nsecond paragraph");
        let chunks = chunk_document(&d, &cfg(5, 0, false), &WhitespaceTokenCounter);
        assert_eq!(bodies(&chunks), ["no full stop here", "second paragraph"]);
        let chunks = chunk_document(&d, &cfg(50, 0, false), &WhitespaceTokenCounter);
        assert_eq!(bodies(&chunks), ["no full stop here\n\nsecond paragraph"]);
    }

    #[test]
    fn long_sentence_is_split_on_words() {
        let text = (1..=10)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let chunks = chunk_document(&doc("", &text), &cfg(4, 0, false), &WhitespaceTokenCounter);
        assert_eq!(bodies(&chunks), ["w1 w2 w3 w4", "w5 w6 w7 w8", "w9 w10"]);
    }

    #[test]
    fn long_word_is_split_on_graphemes() {
        // With one token per char, "e\u{301}" is two tokens: it is never cut inside.
        let d = doc("", "ab cdefgh e\u{301}e\u{301}x");
        let chunks = chunk_document(&d, &cfg(3, 0, false), &CharCounter);
        assert_eq!(
            bodies(&chunks),
            ["ab", "cde", "fgh", "e\u{301}", "e\u{301}x"]
        );
        // A grapheme over the budget on its own is emitted whole rather than dropped.
        let chunks = chunk_document(&doc("", "e\u{301}"), &cfg(1, 0, false), &CharCounter);
        assert_eq!(bodies(&chunks), ["e\u{301}"]);
    }

    #[test]
    fn zero_budget_is_one() {
        let chunks = chunk_document(&doc("", "a b"), &cfg(0, 0, true), &WhitespaceTokenCounter);
        assert_eq!(bodies(&chunks), ["a", "b"]);
    }

    #[test]
    fn galloping_search() {
        for hi in 0..40 {
            for limit in 0..45 {
                let expect = (0..hi).filter(|&j| j <= limit).max();
                assert_eq!(
                    last_fitting(0, hi, |j| j <= limit),
                    expect,
                    "hi {hi} limit {limit}"
                );
            }
        }
        assert_eq!(last_fitting(5, 3, |_| true), None);
    }

    const WORDS: &[&str] = &[
        "alpha",
        "Beta",
        "gamma",
        "U.S.",
        "e.g.",
        "3.14",
        "naïve",
        "ﬁsh",
        "日本語",
        "x",
        "end.",
        "(paren)",
        "\"quote\"",
        "Dr.",
    ];

    fn arb_text() -> impl Strategy<Value = String> {
        prop::collection::vec((prop::sample::select(WORDS), 0..7u8), 0..150).prop_map(|parts| {
            let mut s = String::new();
            for (word, sep) in parts {
                s.push_str(word);
                s.push_str(match sep {
                    0..=2 => " ",
                    3 => ". ",
                    4 => "? ",
                    5 => " \t\n",
                    _ => "\n\n",
                });
            }
            s
        })
    }

    fn arb_config() -> impl Strategy<Value = ChunkingConfig> {
        (1usize..40, 0usize..12, any::<bool>()).prop_map(|(m, o, t)| cfg(m, o, t))
    }

    fn arb_doc() -> impl Strategy<Value = SourceDocument> {
        (
            prop::sample::select(&["", "Title", "A longer title here"][..]),
            arb_text(),
        )
            .prop_map(|(title, text)| doc(title, &normalize_text(&text)))
    }

    fn squash(s: &str) -> String {
        s.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    proptest! {
        #[test]
        fn chunks_are_within_budget_and_well_formed(d in arb_doc(), c in arb_config()) {
            let chunks = chunk_document(&d, &c, &WhitespaceTokenCounter);
            prop_assert_eq!(chunks.is_empty(), d.text.trim().is_empty());
            for (i, ch) in chunks.iter().enumerate() {
                prop_assert_eq!(ch.ordinal as usize, i);
                prop_assert!(WhitespaceTokenCounter.count_tokens(&ch.text) <= c.max_tokens);
                prop_assert!(!ch.body.trim().is_empty());
                prop_assert_eq!(ch.body.trim(), ch.body.as_str());
                prop_assert_eq!(&d.text[ch.char_start..ch.char_end], ch.body.as_str());
                prop_assert!(ch.text.ends_with(&ch.body));
            }
            for pair in chunks.windows(2) {
                prop_assert!(pair[0].char_start <= pair[1].char_start);
                prop_assert!(pair[0].char_end < pair[1].char_end);
                // Every byte of content is in some chunk even with overlap.
                prop_assert!(d.text[pair[0].char_end..pair[1].char_start.max(pair[0].char_end)]
                    .trim().is_empty());
            }
        }

        #[test]
        fn without_overlap_chunks_tile_the_text(d in arb_doc(), c in arb_config()) {
            let c = ChunkingConfig { overlap_tokens: 0, ..c };
            let chunks = chunk_document(&d, &c, &WhitespaceTokenCounter);
            let joined: Vec<&str> = chunks.iter().map(|ch| ch.body.as_str()).collect();
            prop_assert_eq!(squash(&joined.join(" ")), squash(&d.text));
            let mut pos = 0;
            for ch in &chunks {
                prop_assert!(d.text[pos..ch.char_start].trim().is_empty());
                pos = ch.char_end;
            }
            prop_assert!(d.text[pos..].trim().is_empty());
        }

        #[test]
        fn deterministic(d in arb_doc(), c in arb_config()) {
            let a = chunk_document(&d, &c, &WhitespaceTokenCounter);
            let b = chunk_document(&d, &c, &WhitespaceTokenCounter);
            prop_assert_eq!(a, b);
        }

        #[test]
        fn arbitrary_input_never_panics(
            title in any::<String>(),
            text in any::<String>(),
            max in 0usize..20,
            overlap in 0usize..20,
            prefix in any::<bool>(),
            chars in any::<bool>(),
        ) {
            let d = doc(&title, &text);
            let counter: &dyn TokenCounter = if chars { &CharCounter } else { &WhitespaceTokenCounter };
            let chunks = chunk_document(&d, &cfg(max, overlap, prefix), counter);
            for ch in &chunks {
                prop_assert!(!ch.body.is_empty());
                prop_assert_eq!(&text[ch.char_start..ch.char_end], ch.body.as_str());
            }
        }
    }
}
