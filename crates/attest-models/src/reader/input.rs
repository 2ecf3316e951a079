//! What the reader reads: the token layout of a pair and the text put into each side. Defined once here and once
//! in `scripts/reader/model.py` / `data.py` (where the model is trained); the two must agree token for token.
//!
//! - Answerability: `[CLS] question [SEP] sentence [SEP] context [SEP]`, the context being the passage title and
//!   the sentence before (so "He left a sign" knows who "he" is).
//! - Support: `[CLS] claim [SEP] evidence [SEP]`, the evidence being the title and the (at most three) passage
//!   sentences that share most content words with the claim, in passage order.

use tokenizers::Tokenizer;

use attest_text::text;

/// `[CLS]` and `[SEP]` of the MiniLM vocabulary.
pub const CLS: u32 = 101;
pub const SEP: u32 = 102;
/// Longest pair, in tokens (the model was trained at this length).
pub const MAX_LEN: usize = 128;
/// Longest first part (question or claim), in tokens.
pub const MAX_FIRST: usize = 48;
/// Sentences of a passage the support head reads as evidence for one claim.
pub const EVIDENCE_SENTENCES: usize = 3;

/// Token ids and token types of one pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairIds {
    pub ids: Vec<u32>,
    pub types: Vec<u32>,
}

/// `[CLS] first [SEP] second [SEP] (context [SEP])`: `first` cut to [`MAX_FIRST`] tokens, `second` to what is
/// left of [`MAX_LEN`], the context gets the rest and is left out when no room is left.
pub fn pair_ids(
    tokenizer: &Tokenizer,
    first: &str,
    second: &str,
    context: Option<&str>,
) -> Result<PairIds, tokenizers::Error> {
    let encode = |t: &str| -> Result<Vec<u32>, tokenizers::Error> {
        Ok(tokenizer.encode(t, false)?.get_ids().to_vec())
    };
    let mut a = encode(first)?;
    a.truncate(MAX_FIRST);
    let mut b = encode(second)?;
    let mut room = MAX_LEN - 3 - a.len();
    b.truncate(room);
    room -= b.len();
    let mut c = match context.filter(|c| !c.is_empty()) {
        Some(c) => encode(c)?,
        None => Vec::new(),
    };
    c.truncate(room.saturating_sub(1));
    let mut ids = Vec::with_capacity(MAX_LEN);
    ids.push(CLS);
    ids.extend_from_slice(&a);
    ids.push(SEP);
    ids.extend_from_slice(&b);
    ids.push(SEP);
    if !c.is_empty() {
        ids.extend_from_slice(&c);
        ids.push(SEP);
    }
    let first_len = a.len() + 2;
    let types = (0..ids.len()).map(|i| u32::from(i >= first_len)).collect();
    Ok(PairIds { ids, types })
}

/// `[lo, hi)`: the positions of a pair's second part (the sentence), between its first and second `[SEP]`
/// (empty when the layout is not there).
pub fn sentence_range(ids: &[u32]) -> (usize, usize) {
    let mut seps = ids
        .iter()
        .enumerate()
        .filter(|(_, &t)| t == SEP)
        .map(|(i, _)| i);
    match (seps.next(), seps.next()) {
        (Some(first), Some(second)) => (first + 1, second),
        _ => (0, 0),
    }
}

/// A title as the reader was trained to see it (`Super_Bowl_50` → `Super Bowl 50`).
pub fn title_text(title: &str) -> String {
    title.replace('_', " ")
}

/// The context of sentence `i` of `sentences`: the title and the sentence before it.
pub fn answer_context(title: &str, sentences: &[&str], i: usize) -> String {
    let prev = i
        .checked_sub(1)
        .and_then(|j| sentences.get(j))
        .copied()
        .unwrap_or("");
    format!("{}. {prev}", title_text(title)).trim().to_string()
}

/// The evidence the support head reads for `claim` in a passage: the title, then the sentences sharing most
/// content words with the claim (ties to the earlier one), in passage order.
pub fn evidence_window(title: &str, passage: &str, claim: &str) -> String {
    let sentences = text::sentences(passage);
    let claim_words = text::content_set(claim);
    let mut ranked: Vec<(usize, usize)> = sentences
        .iter()
        .enumerate()
        .map(|(i, s)| (i, text::content_set(s).intersection(&claim_words).count()))
        .collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut chosen: Vec<usize> = ranked
        .iter()
        .take(EVIDENCE_SENTENCES)
        .map(|&(i, _)| i)
        .collect();
    chosen.sort_unstable();
    let body = chosen
        .iter()
        .map(|&i| sentences[i])
        .collect::<Vec<_>>()
        .join(" ");
    let title = title_text(title);
    if title.is_empty() {
        body
    } else {
        format!("{title}: {body}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sentence_lies_between_the_first_two_separators() {
        assert_eq!(sentence_range(&[CLS, 7, SEP, 8, 9, SEP, 10, SEP]), (3, 5));
        assert_eq!(sentence_range(&[CLS, 7, SEP]), (0, 0));
    }

    #[test]
    fn context_is_the_title_and_the_sentence_before() {
        let s = ["Tesla lived in New York.", "He left a sign."];
        assert_eq!(
            answer_context("Nikola_Tesla", &s, 1),
            "Nikola Tesla. Tesla lived in New York."
        );
        assert_eq!(answer_context("Nikola_Tesla", &s, 0), "Nikola Tesla.");
        assert_eq!(answer_context("", &s, 0), ".");
    }

    #[test]
    fn evidence_keeps_the_best_sentences_in_passage_order() {
        let p = "A cat sat. Dogs bark loudly at night. The cat ate fish. Birds fly. The cat slept on fish.";
        assert_eq!(
            evidence_window("Pets", p, "The cat ate the fish."),
            "Pets: A cat sat. The cat ate fish. The cat slept on fish."
        );
        assert_eq!(evidence_window("", "One sentence.", "x"), "One sentence.");
    }
}
