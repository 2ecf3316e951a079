//! Atomic claims (SPEC "answer" step 11): an answer is split into sentences, and sentences joined by `;` into
//! their parts; each claim keeps the footnotes it cites, and its text without the markers, for the verifier.

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
            ended = false;
        }
        match c {
            '.' | '!' | '?' => {
                // A full stop inside a number or an abbreviation-like token (`3.5`, `e.g.x`) does not end it.
                let next = chars.peek().map(|&(_, n)| n);
                text.push(c);
                if next.is_none_or(|n| n.is_whitespace() || n == '[') {
                    ended = true;
                }
            }
            ';' | '\n' => {
                ended = true;
            }
            _ => text.push(c),
        }
    }
    push_claim(&mut claims, &mut text, &mut citations);
    claims
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
