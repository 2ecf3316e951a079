//! Atomic claims (SPEC "answer" step 11): an answer is split into sentences, and sentences joined by `;` into
//! their parts; each claim keeps the footnotes it cites, and its text without the markers, for the verifier.
//!
//! A marker at a sentence's end cites the whole sentence (the extractive composer writes `A; B [1].`, and so do
//! most writers), so a `;` part without markers of its own takes those of the part that ends its sentence; a `;`
//! inside brackets (`Nikola Tesla (Serbian Cyrillic: Никола Тесла; 10 July 1856 – …) was …`) splits nothing.

use crate::text;

/// One claim of an answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The claim without its `[n]` markers, trimmed.
    pub text: String,
    /// Footnotes cited by this claim, in order, without repeats.
    pub citations: Vec<u32>,
}

/// Splits filtered answer text (markers already checked by the gauntlet) into claims. A marker that follows
/// a sentence's final punctuation (`... sign. [2]`) belongs to that sentence.
pub fn split_claims(answer: &str) -> Vec<Claim> {
    let mut claims = Vec::new();
    let mut text = String::new();
    let mut citations: Vec<u32> = Vec::new();
    let mut ended = false; // the current claim's sentence has ended; only markers may still attach to it
    let mut sentence_ended = false; // ...and it ended at a full stop or a line break, not at a `;`
    let mut sentence_first = 0; // index in `claims` of the current sentence's first part
    let mut depth = 0usize; // brackets open in the current sentence
    let mut chars = answer.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '[' {
            if let Some(len) = answer[i + 1..].find(']') {
                let inner = &answer[i + 1..i + 1 + len];
                if let Ok(n) = inner.parse::<u32>() {
                    if !citations.contains(&n) {
                        citations.push(n);
                    }
                    for _ in 0..=inner.chars().count() {
                        chars.next();
                    }
                    continue;
                }
            }
        }
        if ended && !c.is_whitespace() {
            push_claim(&mut claims, &mut text, &mut citations);
            if sentence_ended {
                cite_uncited_parts(&mut claims[sentence_first..]);
                sentence_first = claims.len();
                depth = 0;
            }
            ended = false;
            sentence_ended = false;
        }
        match c {
            '.' | '!' | '?' => {
                // A full stop inside a number or an abbreviation-like token (`3.5`, `e.g.x`) does not end it,
                // nor one after an abbreviation that goes on (`John D. Rockefeller`), as in passages.
                let next = chars.peek().map(|&(_, n)| n);
                let continues = c == '.'
                    && text::stop_continues(
                        text::token_before(&text),
                        word_after_markers(&answer[i + 1..]),
                    );
                text.push(c);
                if next.is_none_or(|n| n.is_whitespace() || n == '[') && !continues {
                    ended = true;
                    sentence_ended = true;
                }
            }
            '\n' => {
                ended = true;
                sentence_ended = true;
            }
            ';' if depth == 0 => ended = true,
            '(' => {
                depth += 1;
                text.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                text.push(c);
            }
            _ => text.push(c),
        }
    }
    push_claim(&mut claims, &mut text, &mut citations);
    cite_uncited_parts(&mut claims[sentence_first..]);
    claims
}

/// The first word of `rest` after its whitespace and `[n]` markers.
fn word_after_markers(rest: &str) -> &str {
    let mut rest = rest.trim_start();
    while let Some(inner) = rest.strip_prefix('[') {
        match inner.find(']') {
            Some(end) if inner[..end].parse::<u32>().is_ok() => {
                rest = inner[end + 1..].trim_start()
            }
            _ => break,
        }
    }
    text::next_word(rest)
}

/// The `;` parts of one sentence: when its last part (the sentence's end) has markers, which cite the whole
/// sentence, the parts without markers take them.
fn cite_uncited_parts(parts: &mut [Claim]) {
    let Some(sentence_citations) = parts
        .last()
        .filter(|p| !p.citations.is_empty())
        .map(|p| p.citations.clone())
    else {
        return;
    };
    for part in parts.iter_mut().filter(|p| p.citations.is_empty()) {
        part.citations = sentence_citations.clone();
    }
}

fn push_claim(claims: &mut Vec<Claim>, text: &mut String, citations: &mut Vec<u32>) {
    let cleaned = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let cleaned = cleaned.replace(" .", ".").replace(" ,", ",");
    if cleaned.chars().any(char::is_alphanumeric) {
        claims.push(Claim {
            text: cleaned,
            citations: std::mem::take(citations),
        });
    } else if let Some(last) = claims.last_mut() {
        // Markers with no words of their own support the claim before them.
        for n in citations.drain(..) {
            if !last.citations.contains(&n) {
                last.citations.push(n);
            }
        }
    }
    text.clear();
    citations.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(text: &str, citations: &[u32]) -> Claim {
        Claim {
            text: text.into(),
            citations: citations.to_vec(),
        }
    }

    #[test]
    fn sentences_and_semicolons_make_claims_with_their_markers() {
        let claims = split_claims(
            "Tesla hung a sign [2]. It read \"do not disturb\" [1][2]; he kept it up for years [3].",
        );
        assert_eq!(
            claims,
            vec![
                claim("Tesla hung a sign.", &[2]),
                claim("It read \"do not disturb\"", &[1, 2]),
                claim("he kept it up for years.", &[3]),
            ]
        );
    }

    #[test]
    fn a_sentences_end_marker_cites_its_uncited_parts() {
        let claims = split_claims(
            "Tesla was born in Smiljan; he died in New York [1]. Edison lived; he died [2].",
        );
        assert_eq!(
            claims,
            vec![
                claim("Tesla was born in Smiljan", &[1]),
                claim("he died in New York.", &[1]),
                claim("Edison lived", &[2]),
                claim("he died.", &[2]),
            ]
        );
        // A part with markers of its own keeps them; a sentence whose end has none leaves its uncited parts so.
        let claims = split_claims("A rose [3]; B fell [1]. C stayed; D left. E rose [2]; F fell.");
        assert_eq!(
            claims,
            vec![
                claim("A rose", &[3]),
                claim("B fell.", &[1]),
                claim("C stayed", &[]),
                claim("D left.", &[]),
                claim("E rose", &[2]),
                claim("F fell.", &[]),
            ]
        );
    }

    #[test]
    fn a_semicolon_in_brackets_splits_nothing() {
        let claims = split_claims(
            "Nikola Tesla (Serbian Cyrillic: Никола Тесла; 10 July 1856 – 7 January 1943) was an inventor [1]. \
             He worked (briefly; unpaid) for Edison; he left [2].",
        );
        assert_eq!(
            claims,
            vec![
                claim(
                    "Nikola Tesla (Serbian Cyrillic: Никола Тесла; 10 July 1856 – 7 January 1943) was an inventor.",
                    &[1]
                ),
                claim("He worked (briefly; unpaid) for Edison", &[2]),
                claim("he left.", &[2]),
            ]
        );
    }

    #[test]
    fn an_abbreviation_inside_a_quoted_sentence_ends_no_claim() {
        // The composer quotes whole passage sentences; before, `John D.` ended a claim with no marker, which
        // the verifier could not check and the revision pass removed.
        let claims = split_claims(
            "It was funded by John D. Rockefeller [1]. Ribault charted the St. Johns River [2]. He moved to the U.S. [2] In 1990 he left [2].",
        );
        assert_eq!(
            claims,
            vec![
                claim("It was funded by John D. Rockefeller.", &[1]),
                claim("Ribault charted the St. Johns River.", &[2]),
                claim("He moved to the U.S.", &[2]),
                claim("In 1990 he left.", &[2]),
            ]
        );
    }

    #[test]
    fn markers_after_the_full_stop_and_decimals() {
        let claims = split_claims("The rate was 3.5 percent. [1] Prices rose.\nNo citation here");
        assert_eq!(
            claims,
            vec![
                claim("The rate was 3.5 percent.", &[1]),
                claim("Prices rose.", &[]),
                claim("No citation here", &[]),
            ]
        );
    }

    #[test]
    fn empty_text_has_no_claims() {
        assert!(split_claims("").is_empty());
        assert!(split_claims("  [1] ").is_empty());
    }
}
