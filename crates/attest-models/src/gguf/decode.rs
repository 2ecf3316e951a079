//! Greedy decoding (temperature 0: the largest logit at each step, the first on ties, so output is
//! deterministic) with sentence rules ([`DecodeRules`]) applied at each sentence boundary:
//!
//! - **Repetition**: a 135M model often writes the same sentence again and again; a sentence equal to an
//!   earlier one ends the turn and is cut.
//! - **Citation** ([`CitationRule`], optional): SmolLM2-135M answers in fluent sentences but almost never
//!   writes the `[n]` markers the system prompt asks for (measured: no marker in 9 of 9 replies). When a
//!   sentence ends without one, the decoder writes ` [` into the model's context and lets the model choose the
//!   number: the digit tokens `1..=passages` are the only ones allowed at that step and the largest logit among
//!   them wins, then `]` follows. The model picks which passage; nothing is attributed for it. Whether that
//!   passage supports the sentence is left to the verifier, like any generator's citation.
//! - **Sentence limit** (optional): after a forced marker the model tends to go on copying the passage list
//!   (`[1] Title — text …`), so the generator stops after its first sentence.

use candle_core::{Tensor, D};
use candle_transformers::models::quantized_llama::ModelWeights;

use super::{Completion, LocalLlm, LocalLlmError, StopReason};

/// Makes every sentence end with a marker `[n]`, `n` in `1..=passages` chosen by the model.
#[derive(Debug, Clone, PartialEq)]
pub struct CitationRule {
    /// Passages shown to the model (numbers above 9 are never forced: one digit token is chosen).
    pub passages: u32,
    /// A sentence starting with this (the model's abstention phrase) is left without a marker.
    pub exempt_prefix: String,
}

/// What the decoder enforces beyond greedy choice; the default enforces nothing but the repetition stop.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecodeRules {
    pub citation: Option<CitationRule>,
    /// Stop after this many sentences.
    pub max_sentences: Option<usize>,
}

/// Token ids of the forced marker.
struct MarkerIds {
    open: Vec<u32>,
    digits: Vec<u32>,
    close: Vec<u32>,
}

/// The model with its KV cache, and the tokens written so far.
struct Session<'a> {
    llm: &'a LocalLlm,
    model: ModelWeights,
    position: usize,
    generated: Vec<u32>,
    steps: usize,
}

impl Session<'_> {
    /// Appends `token` to the output and returns the logits for the token after it.
    fn feed(&mut self, token: u32) -> Result<Vec<f32>, LocalLlmError> {
        let input = Tensor::new(&[token], &self.llm.device)?.unsqueeze(0)?;
        let logits = self.model.forward(&input, self.position)?;
        self.position += 1;
        self.steps += 1;
        self.generated.push(token);
        Ok(logits.squeeze(0)?.to_vec1::<f32>()?)
    }

    fn text(&self, from: usize) -> Result<String, LocalLlmError> {
        self.llm.tokenizer.decode(&self.generated[from..], true)
    }
}

/// The index of the largest value among `allowed` (all of `logits` when `None`), the first on ties.
fn argmax(logits: &[f32], allowed: Option<&[u32]>) -> Option<u32> {
    let mut best: Option<(u32, f32)> = None;
    let mut consider = |id: u32| {
        if let Some(&v) = logits.get(id as usize) {
            if best.is_none_or(|(_, b)| v > b) {
                best = Some((id, v));
            }
        }
    };
    match allowed {
        Some(ids) => ids.iter().copied().for_each(&mut consider),
        None => (0..logits.len() as u32).for_each(&mut consider),
    }
    best.map(|(id, _)| id)
}

/// A well-formed marker `[digits]` in `text`.
fn has_marker(text: &str) -> bool {
    text.split('[').skip(1).any(|rest| {
        rest.split_once(']').is_some_and(|(inside, _)| {
            !inside.is_empty() && inside.bytes().all(|b| b.is_ascii_digit())
        })
    })
}

/// The sentence's words without markers, spacing, punctuation or case: what "the same sentence again" compares.
fn sentence_key(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('[') {
        out.push_str(&rest[..i]);
        rest = match rest[i..].split_once(']') {
            Some((_, after)) => after,
            None => "",
        };
    }
    out.push_str(rest);
    out.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

impl LocalLlm {
    fn marker_ids(&self, passages: u32) -> Result<MarkerIds, LocalLlmError> {
        let single = |text: &str| -> Result<u32, LocalLlmError> {
            match self.tokenizer.encode(text)?.as_slice() {
                [id] => Ok(*id),
                ids => Err(LocalLlmError::Tokenizer(format!(
                    "{text:?} is {} tokens, not one",
                    ids.len()
                ))),
            }
        };
        Ok(MarkerIds {
            open: self.tokenizer.encode(" [")?,
            digits: (1..=passages.min(9))
                .map(|d| single(&d.to_string()))
                .collect::<Result<_, _>>()?,
            close: self.tokenizer.encode("]")?,
        })
    }

    /// Greedy decoding from `prompt`, at most `max_tokens` new tokens (forced marker tokens included).
    pub fn complete(
        &self,
        prompt: &[u32],
        max_tokens: usize,
        rules: &DecodeRules,
    ) -> Result<Completion, LocalLlmError> {
        if prompt.is_empty() {
            return Err(LocalLlmError::Inference("empty prompt".into()));
        }
        if prompt.len() + max_tokens > self.context_length {
            return Err(LocalLlmError::Inference(format!(
                "{} prompt tokens + {max_tokens} new ones exceed the context of {}",
                prompt.len(),
                self.context_length
            )));
        }
        let markers = match &rules.citation {
            Some(rule) if rule.passages > 0 => Some((rule, self.marker_ids(rule.passages)?)),
            _ => None,
        };
        let started = std::time::Instant::now();
        // A fresh clone owns a fresh KV cache (see the module header).
        let mut session = Session {
            llm: self,
            model: self.weights.clone(),
            position: prompt.len(),
            generated: Vec::with_capacity(max_tokens),
            steps: 0,
        };
        let input = Tensor::new(prompt, &self.device)?.unsqueeze(0)?;
        let logits = session.model.forward(&input, 0)?;
        let mut next = logits.squeeze(0)?.argmax(D::Minus1)?.to_scalar::<u32>()?;
        let prompt_time = started.elapsed();

        let started = std::time::Instant::now();
        let mut sentence_start = 0;
        let mut written: Vec<String> = Vec::new();
        let mut forced_markers = 0;
        let sentence_limit = rules.max_sentences.unwrap_or(usize::MAX);
        let stop = loop {
            if session.generated.len() >= max_tokens {
                break StopReason::MaxTokens;
            }
            let end_of_turn = self.stop_ids.contains(&next);
            let sentence = session.text(sentence_start)?;
            let following = self.tokenizer.decode(&[next], true)?;
            // A boundary: the turn ends, or a sentence-final mark is followed by a space (not a digit, as in
            // `3.5`) that does not open the model's own marker.
            let boundary = end_of_turn
                || (sentence.trim_end().ends_with(['.', '!', '?'])
                    && following.starts_with(char::is_whitespace)
                    && !following.trim_start().starts_with('['));
            if boundary && sentence.chars().any(char::is_alphanumeric) {
                let key = sentence_key(&sentence);
                if written.contains(&key) {
                    session.generated.truncate(sentence_start);
                    break StopReason::Repetition;
                }
                written.push(key);
                if let Some((rule, ids)) = &markers {
                    let needed = ids.open.len() + 1 + ids.close.len();
                    let exempt = !rule.exempt_prefix.is_empty()
                        && sentence
                            .trim_start()
                            .to_lowercase()
                            .starts_with(&rule.exempt_prefix.to_lowercase());
                    if !has_marker(&sentence)
                        && !exempt
                        && session.generated.len() + needed <= max_tokens
                    {
                        let mut logits = Vec::new();
                        for &id in &ids.open {
                            logits = session.feed(id)?;
                        }
                        let digit = argmax(&logits, Some(&ids.digits)).ok_or_else(|| {
                            LocalLlmError::Inference("no digit token to cite with".into())
                        })?;
                        session.feed(digit)?;
                        for &id in &ids.close {
                            logits = session.feed(id)?;
                        }
                        forced_markers += 1;
                        sentence_start = session.generated.len();
                        if written.len() >= sentence_limit {
                            break StopReason::SentenceLimit;
                        }
                        next = argmax(&logits, None)
                            .ok_or_else(|| LocalLlmError::Inference("empty logits".into()))?;
                        continue;
                    }
                }
                sentence_start = session.generated.len();
                if written.len() >= sentence_limit && !end_of_turn {
                    break StopReason::SentenceLimit;
                }
            }
            if end_of_turn {
                break StopReason::EndOfTurn;
            }
            let logits = session.feed(next)?;
            next = argmax(&logits, None)
                .ok_or_else(|| LocalLlmError::Inference("empty logits".into()))?;
        };
        Ok(Completion {
            text: session.text(0)?,
            prompt_tokens: prompt.len(),
            generated_tokens: session.generated.len(),
            prompt_time,
            generate_time: started.elapsed(),
            decode_steps: session.steps,
            forced_markers,
            stop,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_the_first_of_the_largest_among_the_allowed() {
        let logits = [0.1, 3.0, 3.0, -1.0, 2.5];
        assert_eq!(argmax(&logits, None), Some(1));
        assert_eq!(argmax(&logits, Some(&[3, 4, 0])), Some(4));
        assert_eq!(argmax(&logits, Some(&[9])), None);
        assert_eq!(argmax(&[], None), None);
    }

    #[test]
    fn markers_and_sentence_keys() {
        assert!(has_marker("The owl hunts at night [1]."));
        assert!(!has_marker("The owl hunts [a] at night [] [1"));
        assert_eq!(
            sentence_key(" The owl  hunts at night [2]. "),
            sentence_key("the owl hunts at night.")
        );
        assert_ne!(
            sentence_key("The owl hunts."),
            sentence_key("The fox hunts.")
        );
    }
}
