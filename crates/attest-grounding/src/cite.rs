//! The verified answer's claims and citations: each claim scored against the passages it cites (the best cited
//! passage counts), the rendering of a claim with its markers, and one citation per cited footnote quoting the
//! passage sentence closest to the claims that cite it.

use attest_telemetry::metrics::{CLAIMS_CHECKED_TOTAL, CLAIMS_UNSUPPORTED_TOTAL};
use serde::Serialize;

use crate::footnotes::Footnotes;
use crate::verdict::{clauses, Cutoffs, Verdict};
use crate::verifier::Verifier;
use attest_text::claims::Claim;
use attest_text::text;

#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct Citation {
    pub n: u32,
    pub chunk_id: String,
    pub doc_id: String,
    pub title: String,
    /// The passage sentence the answer relies on.
    pub quote: String,
    pub score: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct CheckedClaim {
    pub text: String,
    pub citations: Vec<u32>,
    pub support: f64,
    /// `verdict == supported`.
    pub supported: bool,
    pub verdict: Verdict,
}

/// Scores every claim (and each of its clauses, see [`crate::verdict`]) against the passages it cites; the best
/// cited passage counts.
pub fn check_claims(
    verifier: &dyn Verifier,
    cutoffs: Cutoffs,
    question: &str,
    claims: &[Claim],
    footnotes: &Footnotes,
) -> Vec<CheckedClaim> {
    let best_support = |text: &str, citations: &[u32]| {
        citations
            .iter()
            .filter_map(|n| footnotes.get(*n))
            .map(|p| verifier.support_in(question, text, &p.title, &p.text))
            .fold(0.0, f64::max)
    };
    let checked: Vec<CheckedClaim> = claims
        .iter()
        .map(|c| {
            let support = best_support(&c.text, &c.citations);
            let parts: Vec<f64> = clauses(&c.text)
                .iter()
                .map(|part| best_support(part, &c.citations))
                .collect();
            let verdict = cutoffs.verdict(support, &parts);
            CheckedClaim {
                text: c.text.clone(),
                citations: c.citations.clone(),
                support,
                supported: verdict == Verdict::Supported,
                verdict,
            }
        })
        .collect();
    metrics::counter!(CLAIMS_CHECKED_TOTAL).increment(checked.len() as u64);
    metrics::counter!(CLAIMS_UNSUPPORTED_TOTAL)
        .increment(checked.iter().filter(|c| !c.supported).count() as u64);
    checked
}

/// A sentence without its final `.`, `!` or `?`, and that stop (`.` when it had none).
fn split_stop(text: &str) -> (&str, char) {
    let trimmed = text.trim_end();
    match trimmed.char_indices().last() {
        Some((i, c)) if matches!(c, '.' | '!' | '?') => (&trimmed[..i], c),
        _ => (trimmed, '.'),
    }
}

fn markers(citations: &[u32]) -> String {
    citations.iter().map(|n| format!(" [{n}]")).collect()
}

/// A claim with its markers before the final punctuation.
pub fn render(text: &str, citations: &[u32]) -> String {
    let (body, stop) = split_stop(text);
    format!("{body}{}{stop}", markers(citations))
}

/// A checked claim with its markers; a partial one followed by [`crate::verdict::PARTIAL_MARK`].
pub fn render_checked(claim: &CheckedClaim) -> String {
    if claim.verdict != Verdict::Partial {
        return render(&claim.text, &claim.citations);
    }
    let (body, stop) = split_stop(&claim.text);
    format!(
        "{}{} {}{stop}",
        body.trim_end(),
        markers(&claim.citations),
        crate::verdict::PARTIAL_MARK
    )
}

/// One citation per cited footnote, in first-use order, quoting the passage sentence closest to its claims.
pub fn citations(claims: &[CheckedClaim], footnotes: &Footnotes) -> Vec<Citation> {
    let mut out: Vec<Citation> = Vec::new();
    for claim in claims {
        for &n in &claim.citations {
            if out.iter().any(|c| c.n == n) {
                continue;
            }
            let Some(p) = footnotes.get(n) else { continue };
            let claim_words = text::content_set(&claim.text);
            let quote = text::sentences(&p.text)
                .into_iter()
                .max_by_key(|s| text::content_set(s).intersection(&claim_words).count())
                .unwrap_or(&p.text)
                .to_string();
            out.push(Citation {
                n,
                chunk_id: p.chunk_id.clone(),
                doc_id: p.doc_id.clone(),
                title: p.title.clone(),
                quote,
                score: p.score,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_puts_markers_before_punctuation() {
        assert_eq!(render("It rained.", &[1, 3]), "It rained [1] [3].");
        assert_eq!(render("No stop", &[2]), "No stop [2].");
        let partial = CheckedClaim {
            text: "Tesla died in Paris.".into(),
            citations: vec![1],
            support: 0.4,
            supported: false,
            verdict: Verdict::Partial,
        };
        assert_eq!(
            render_checked(&partial),
            "Tesla died in Paris [1] (partially supported)."
        );
    }
}
