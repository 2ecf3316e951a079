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
    for sentence in sentences_with_markers(answer) {
        let first = claims.len();
        for (i, part) in text::semicolon_parts(sentence).into_iter().enumerate() {
            // Markers right after a `;` cite the part before it, as markers after a full stop do.
            let lead = if i == 0 { 0 } else { leading_markers_len(part) };
            push_claim(&mut claims, &part[..lead]);
            push_claim(&mut claims, &part[lead..]);
        }
        cite_uncited_parts(&mut claims[first..]);
    }
    claims
}

/// The answer's sentences, each with the markers that follow its final punctuation: ended by `.`, `!` or `?`
/// before whitespace, a marker or the end (not after an abbreviation that goes on, `John D. Rockefeller`, as in
/// passages: [`text::stop_continues`]; not inside a number, `3.5`), or by a line break.
fn sentences_with_markers(answer: &str) -> Vec<&str> {
    let mut sentences = Vec::new();
    let (mut start, mut ended) = (0, false);
    let mut chars = answer.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if let Some(len) = marker_len(&answer[i..]) {
            for _ in 1..len {
                chars.next();
            }
            continue;
        }
        if ended && !c.is_whitespace() {
            sentences.push(&answer[start..i]);
            (start, ended) = (i, false);
        }
        match c {
            '.' | '!' | '?' => {
                let next = chars.peek().map(|&(_, n)| n);
                ended = next.is_none_or(|n| n.is_whitespace() || n == '[')
                    && !(c == '.'
                        && text::stop_continues(
                            &token_before(&answer[start..i]),
                            word_after_markers(&answer[i + 1..]),
                        ));
            }
            '\n' => ended = true,
            _ => {}
        }
    }
    sentences.push(&answer[start..]);
    sentences
}

/// The token a full stop ends, as its claim reads it: of the sentence's last `;` part, since the last whitespace,
/// without markers.
fn token_before(sentence: &str) -> String {
    if sentence.ends_with(char::is_whitespace) {
        return String::new();
    }
    let part = text::semicolon_parts(sentence).pop().unwrap_or("");
    without_markers(text::token_before(part)).0
}

/// The length (bytes, a marker being ASCII) of the `[n]` marker `text` starts with, if it starts with one.
fn marker_len(text: &str) -> Option<usize> {
    let inner = text.strip_prefix('[')?;
    let len = inner.find(']')?;
    inner[..len]
        .parse::<u32>()
        .ok()
        .map(|_| inner[..len].chars().count() + 2)
}

/// The length of the `[n]` markers (and the whitespace between them) that `part` starts with.
fn leading_markers_len(part: &str) -> usize {
    let mut at = 0;
    while let Some(len) = marker_len(&part[at..]) {
        at += len;
        at += part[at..].len() - part[at..].trim_start().len();
    }
    at
}

/// The first word of `rest` after its whitespace and `[n]` markers.
fn word_after_markers(rest: &str) -> &str {
    let mut rest = rest.trim_start();
    while let Some(len) = marker_len(rest) {
        rest = rest[len..].trim_start();
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

/// `text` without its `[n]` markers, and the footnotes they name (in order, without repeats).
fn without_markers(text: &str) -> (String, Vec<u32>) {
    let mut citations: Vec<u32> = Vec::new();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        match marker_len(rest) {
            Some(len) => {
                let n = rest[1..len - 1].parse::<u32>().expect("a marker");
                if !citations.contains(&n) {
                    citations.push(n);
                }
                rest = &rest[len..];
            }
            None => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    (out, citations)
}

/// Adds one `;` part (markers and all) as a claim: its text without markers, and the markers it holds. A part of
/// markers alone supports the claim before it.
fn push_claim(claims: &mut Vec<Claim>, part: &str) {
    let (text, citations) = without_markers(part);
    let cleaned = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let cleaned = cleaned.replace(" .", ".").replace(" ,", ",");
    if cleaned.chars().any(char::is_alphanumeric) {
        claims.push(Claim {
            text: cleaned,
            citations,
        });
    } else if let Some(last) = claims.last_mut() {
        for n in citations {
            if !last.citations.contains(&n) {
                last.citations.push(n);
            }
        }
    }
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
    fn a_marker_right_after_a_semicolon_cites_the_part_before_it() {
        assert_eq!(
            split_claims("[4] A rose; [3] B fell [1]."),
            vec![claim("A rose", &[4, 3]), claim("B fell.", &[1])]
        );
    }

    #[test]
    fn empty_text_has_no_claims() {
        assert!(split_claims("").is_empty());
        assert!(split_claims("  [1] ").is_empty());
    }
}
