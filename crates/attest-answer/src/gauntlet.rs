//! The gauntlet (SPEC "answer" step 10): what a generator wrote is filtered before it reaches the user.
//!
//! - A marker `[n]` survives only if `n` was minted this turn and was not already cited in the same sentence.
//! - Malformed markers are dropped: lists and ranges (`[1, 2]`, `[1-3]`), padded or zero-led numbers
//!   (`[ 2 ]`, `[02]`), a `[` followed by digits that never closes.
//! - Leaked internal ids (the chunk and document ids of this turn) are cut out of the text.
//! - Other bracketed text (`[sic]`, `[citation needed]`) is ordinary text.
//!
//! Every drop is counted in `citation_dropped_total{why}`. The streaming form holds back only what could still
//! turn out to be a marker or an id, so text flows as soon as it is safe; fed the same text in any split, it
//! emits exactly what the batch form returns.
//!
//! A drop joins the text on its two sides, and the join may spell what was just filtered (`[[7]7]` would leave
//! `[7]`, `squad-a00[7]03` a chunk id). So the tail of the text that could begin a marker or an id (and, in turn,
//! the text before such a tail that could) is held until what follows it is known; after a drop it is filtered
//! again together with what follows.

use std::collections::HashSet;

use attest_telemetry::metrics::CITATION_DROPPED_TOTAL;

use crate::footnotes::Footnotes;

/// Longest marker considered, brackets included (`[9999]`); a longer bracket is plain text.
const MAX_MARKER_LEN: usize = 12;

/// Why a piece of generated text was dropped (the `why` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    Unminted,
    Malformed,
    Repeated,
    LeakedId,
}

impl DropReason {
    pub fn label(self) -> &'static str {
        match self {
            DropReason::Unminted => "unminted",
            DropReason::Malformed => "malformed",
            DropReason::Repeated => "repeated",
            DropReason::LeakedId => "leaked_id",
        }
    }
}

/// The filtered text, the footnotes it cites (first use order) and what was dropped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GauntletOutput {
    pub text: String,
    pub cited: Vec<u32>,
    pub dropped: Vec<DropReason>,
}

/// The batch form: filters a whole answer at once.
pub struct Gauntlet;

impl Gauntlet {
    pub fn run(text: &str, footnotes: &Footnotes) -> GauntletOutput {
        let mut g = StreamingGauntlet::new(footnotes);
        let mut out = g.push(text);
        out.push_str(&g.finish());
        GauntletOutput {
            text: out,
            cited: g.cited,
            dropped: g.dropped,
        }
    }
}

/// The streaming form: `push` deltas as they arrive, emit what it returns, then `finish`.
pub struct StreamingGauntlet {
    minted: usize,
    ids: Vec<String>,
    pending: String,
    /// Text already judged to be text whose tail could still join what follows a drop into a marker or an id.
    held: String,
    in_sentence: HashSet<u32>,
    cited: Vec<u32>,
    dropped: Vec<DropReason>,
}

/// What the text at the head of `pending` is.
enum Head {
    /// Emit this many bytes as text.
    Text(usize),
    /// A marker for footnote n, this many bytes long.
    Marker(u32, usize),
    /// Drop this many bytes for this reason.
    Drop(DropReason, usize),
    /// Cannot tell yet: wait for more text.
    Wait,
}

impl StreamingGauntlet {
    pub fn new(footnotes: &Footnotes) -> Self {
        StreamingGauntlet {
            minted: footnotes.len(),
            ids: footnotes.internal_ids(),
            pending: String::new(),
            held: String::new(),
            in_sentence: HashSet::new(),
            cited: Vec::new(),
            dropped: Vec::new(),
        }
    }

    /// Feeds generated text; returns the part that is safe to show now.
    pub fn push(&mut self, delta: &str) -> String {
        self.pending.push_str(delta);
        self.drain(false)
    }

    /// Ends the stream; returns the rest.
    pub fn finish(&mut self) -> String {
        self.drain(true)
    }

    pub fn cited(&self) -> &[u32] {
        &self.cited
    }

    pub fn dropped(&self) -> &[DropReason] {
        &self.dropped
    }

    fn drain(&mut self, at_end: bool) -> String {
        let mut out = String::new();
        loop {
            if self.pending.is_empty() {
                if at_end {
                    out.push_str(&std::mem::take(&mut self.held));
                }
                return out;
            }
            match self.classify(at_end) {
                Head::Wait => return out,
                Head::Text(n) => {
                    let text: String = self.pending.drain(..n).collect();
                    if text.contains(['.', '!', '?', '\n']) {
                        self.in_sentence.clear();
                    }
                    self.held.push_str(&text);
                    let release = self.held.len() - self.joinable_tail_len();
                    out.extend(self.held.drain(..release));
                }
                Head::Marker(n, len) => {
                    self.pending.drain(..len);
                    if self.in_sentence.contains(&n) {
                        self.dropped_before_rest(DropReason::Repeated);
                        continue;
                    }
                    self.in_sentence.insert(n);
                    if !self.cited.contains(&n) {
                        self.cited.push(n);
                    }
                    out.push_str(&std::mem::take(&mut self.held));
                    out.push_str(&format!("[{n}]"));
                }
                Head::Drop(why, len) => {
                    self.pending.drain(..len);
                    self.dropped_before_rest(why);
                }
            }
        }
    }

    /// After a drop the held tail meets the rest of the text: both are filtered again as one.
    fn dropped_before_rest(&mut self, why: DropReason) {
        self.drop_for(why);
        let held = std::mem::take(&mut self.held);
        self.pending.insert_str(0, &held);
    }

    /// How much of the end of `held` must stay held. A tail that could begin a marker (`[`, `[12`) or is a proper
    /// prefix of an id may be consumed by a later drop; the text before it then meets what follows, so the same
    /// question is asked again of that text (`squad-a00[` holds everything, `words [` only the `[`).
    fn joinable_tail_len(&self) -> usize {
        let held = self.held.as_str();
        let mut end = held.len();
        while let Some(start) = self.longest_joinable_suffix(&held[..end]) {
            end = start;
        }
        held.len() - end
    }

    /// Where the longest non-empty suffix of `text` starts that could begin a marker or an id.
    fn longest_joinable_suffix(&self, text: &str) -> Option<usize> {
        text.char_indices().map(|(i, _)| i).find(|&i| {
            let tail = &text[i..];
            let opens_marker = tail.len() < MAX_MARKER_LEN
                && tail.starts_with('[')
                && tail[1..].bytes().all(|b| b.is_ascii_digit());
            opens_marker
                || self
                    .ids
                    .iter()
                    .any(|id| id.len() > tail.len() && id.starts_with(tail))
        })
    }

    fn drop_for(&mut self, why: DropReason) {
        metrics::counter!(CITATION_DROPPED_TOTAL, "why" => why.label()).increment(1);
        self.dropped.push(why);
    }

    fn classify(&self, at_end: bool) -> Head {
        let p = self.pending.as_str();
        if let Some(id) = self
            .ids
            .iter()
            .filter(|id| p.starts_with(id.as_str()))
            .max_by_key(|id| id.len())
        {
            // A longer id might still be arriving (`doc-1` then `doc-17`).
            let longer_possible = self
                .ids
                .iter()
                .any(|other| other.len() > id.len() && other.starts_with(p) && !at_end);
            return if longer_possible {
                Head::Wait
            } else {
                Head::Drop(DropReason::LeakedId, id.len())
            };
        }
        if !at_end && self.ids.iter().any(|id| id.starts_with(p)) {
            return Head::Wait;
        }
        if p.starts_with('[') {
            return self.classify_bracket(at_end);
        }
        // Plain text up to the next place where a marker or an id could start.
        let first = p.chars().next().map_or(1, char::len_utf8);
        let next = p[first..]
            .char_indices()
            .map(|(i, _)| i + first)
            .find(|&i| {
                let rest = &p[i..];
                rest.starts_with('[')
                    || self
                        .ids
                        .iter()
                        .any(|id| id.starts_with(rest) || rest.starts_with(id.as_str()))
            })
            .unwrap_or(p.len());
        Head::Text(next)
    }

    fn classify_bracket(&self, at_end: bool) -> Head {
        let p = self.pending.as_str();
        let window: &str = match p.char_indices().nth(MAX_MARKER_LEN) {
            Some((i, _)) => &p[..i],
            None => p,
        };
        match window.find(']') {
            Some(close) => {
                let inner = &window[1..close];
                let len = close + 1;
                if !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()) {
                    if inner.starts_with('0') {
                        return Head::Drop(DropReason::Malformed, len);
                    }
                    return match inner.parse::<u32>() {
                        Ok(n) if n >= 1 && (n as usize) <= self.minted => Head::Marker(n, len),
                        _ => Head::Drop(DropReason::Unminted, len),
                    };
                }
                if looks_numeric(inner) {
                    return Head::Drop(DropReason::Malformed, len);
                }
                Head::Text(1)
            }
            None if !at_end
                && window.len() == p.len()
                && window.chars().count() < MAX_MARKER_LEN =>
            {
                Head::Wait
            }
            None => {
                // An unclosed `[12` is a broken marker; anything else is text.
                let digits = window[1..].bytes().take_while(u8::is_ascii_digit).count();
                if digits > 0 {
                    Head::Drop(DropReason::Malformed, 1 + digits)
                } else {
                    Head::Text(1)
                }
            }
        }
    }
}

/// `1, 2`, `1-3`, ` 2 `, `2;3`, `1–2`: numbers with separators, i.e. an attempted marker in the wrong form.
fn looks_numeric(inner: &str) -> bool {
    inner.chars().any(|c| c.is_ascii_digit())
        && inner
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, ' ' | ',' | ';' | '-' | '–'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::footnotes::Passage;
    use proptest::prelude::*;

    /// The numbers of the `[n]` markers in `text`.
    fn markers_in(text: &str) -> Vec<u32> {
        text.split('[')
            .skip(1)
            .filter_map(|rest| rest.split_once(']'))
            .filter(|(inner, _)| !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()))
            .filter_map(|(inner, _)| inner.parse().ok())
            .collect()
    }

    #[test]
    fn a_drop_cannot_join_its_neighbours_into_a_marker_or_an_id() {
        let f = turn();
        let out = Gauntlet::run("a [[7]7] b", &f);
        assert!(!out.text.contains("[7]"), "{:?}", out.text);
        let out = Gauntlet::run("see squad-a00[7]03-p064#0 now", &f);
        assert_eq!(out.text, "see  now");
        // Drops that cascade: each one exposes the text before the last.
        let out = Gauntlet::run("[2][1[1[2]7]7]", &f);
        assert_eq!(markers_in(&out.text), vec![2], "{:?}", out.text);
        let out = Gauntlet::run("squad-a00[[7]7]03-p064 x", &f);
        assert_eq!(out.text, " x");
        // `[1` + a dropped marker + `]` is the marker [1], cited like any other.
        let out = Gauntlet::run("x [1[7]] y", &f);
        assert_eq!(out.text, "x [1] y");
        assert_eq!(out.cited, vec![1]);
        // Text that cannot join anything is not held back.
        let mut g = StreamingGauntlet::new(&f);
        assert_eq!(g.push("plain words "), "plain words ");
        assert_eq!(g.push("squad-a0"), "");
        assert_eq!(g.push("x"), "squad-a0x");
    }

    fn turn() -> Footnotes {
        Footnotes::mint(
            [
                "squad-a0003-p064#0",
                "squad-a0003-p065#0",
                "squad-a0100-p001#2",
            ]
            .iter()
            .map(|id| Passage {
                chunk_id: id.to_string(),
                doc_id: id.split('#').next().unwrap().to_string(),
                title: "T".into(),
                text: "x".into(),
                score: 1.0,
                sentence_reads: None,
            })
            .collect(),
        )
    }

    fn run(text: &str) -> GauntletOutput {
        Gauntlet::run(text, &turn())
    }

    #[test]
    fn minted_markers_survive_and_are_listed_in_first_use_order() {
        let out = run("Tesla hung a sign [2]. It said do not disturb [1][2].");
        assert_eq!(
            out.text,
            "Tesla hung a sign [2]. It said do not disturb [1][2]."
        );
        assert_eq!(out.cited, vec![2, 1]);
        assert!(out.dropped.is_empty());
    }

    #[test]
    fn invented_numbers_are_dropped() {
        let out = run("Claim one [1]. Claim two [4]. Claim three [0]. Claim four [99999999].");
        assert_eq!(
            out.text,
            "Claim one [1]. Claim two . Claim three . Claim four ."
        );
        assert_eq!(out.cited, vec![1]);
        assert_eq!(
            out.dropped,
            vec![
                DropReason::Unminted,
                DropReason::Malformed,
                DropReason::Unminted
            ]
        );
    }

    #[test]
    fn malformed_markers_are_dropped_and_other_brackets_kept() {
        let out = run("A [1, 2] B [1-3] C [ 2 ] D [02] E [sic] F [3");
        assert_eq!(out.text, "A  B  C  D  E [sic] F ");
        assert_eq!(out.dropped, vec![DropReason::Malformed; 5]);
    }

    #[test]
    fn repeats_within_a_sentence_are_dropped_but_allowed_in_the_next() {
        let out = run("One fact [1][1] and again [1]. Next sentence [1].");
        assert_eq!(out.text, "One fact [1] and again . Next sentence [1].");
        assert_eq!(
            out.dropped,
            vec![DropReason::Repeated, DropReason::Repeated]
        );
    }

    #[test]
    fn leaked_ids_are_cut_out() {
        let out = run("See squad-a0003-p064#0 and squad-a0100-p001 for more [3].");
        assert_eq!(out.text, "See  and  for more [3].");
        assert_eq!(
            out.dropped,
            vec![DropReason::LeakedId, DropReason::LeakedId]
        );
    }

    #[test]
    fn streaming_holds_back_only_what_is_undecided() {
        let f = turn();
        let mut g = StreamingGauntlet::new(&f);
        assert_eq!(g.push("The answer is 42 ["), "The answer is 42 ");
        assert_eq!(g.push("2"), "");
        assert_eq!(g.push("]. More"), "[2]. More");
        assert_eq!(g.push(" squad-a0003"), " ");
        assert_eq!(g.push("-p065#0 done"), " done");
        assert_eq!(g.finish(), "");
        assert_eq!(g.cited(), &[2]);
        assert_eq!(g.dropped(), &[DropReason::LeakedId]);
    }

    proptest! {
        /// Any split of the same text gives the batch result.
        #[test]
        fn streaming_equals_batch_for_any_split(
            pieces in proptest::collection::vec(
                prop_oneof![
                    Just("[1]".to_string()), Just("[2]".to_string()), Just("[7]".to_string()),
                    Just("[1, 2]".to_string()), Just("[".to_string()), Just("]".to_string()),
                    Just(". ".to_string()), Just("squad-a0003-p064#0".to_string()),
                    Just("squad-a0003".to_string()), Just("word ".to_string()), Just("[sic]".to_string()),
                    Just("squad-a00".to_string()), Just("03".to_string()), Just("-p064".to_string()),
                    Just("7]".to_string()),
                    Just("[1".to_string()), Just("1".to_string()),
                    "[a-z0-9 ]{0,6}",
                ],
                0..20,
            ),
            cuts in proptest::collection::vec(0usize..200, 0..8),
        ) {
            let text: String = pieces.concat();
            let batch = Gauntlet::run(&text, &turn());
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (text.len() + 1)).collect();
            cuts.sort_unstable();
            let f = turn();
            let mut g = StreamingGauntlet::new(&f);
            let mut streamed = String::new();
            let mut last = 0;
            for c in cuts.into_iter().chain([text.len()]) {
                if text.is_char_boundary(c) && c >= last {
                    streamed.push_str(&g.push(&text[last..c]));
                    last = c;
                }
            }
            streamed.push_str(&g.finish());
            prop_assert_eq!(&streamed, &batch.text);
            prop_assert_eq!(g.cited(), batch.cited.as_slice());
            // Nothing that survives names an internal id or an unminted marker.
            for id in turn().internal_ids() {
                prop_assert!(!batch.text.contains(&id), "{} leaked in {:?}", id, batch.text);
            }
            prop_assert!(!batch.text.contains("[7]"));
            // Every marker left is a minted one that was counted as cited.
            for marker in markers_in(&batch.text) {
                prop_assert!(batch.cited.contains(&marker), "[{}] in {:?} not counted", marker, batch.text);
            }
        }
    }
}
