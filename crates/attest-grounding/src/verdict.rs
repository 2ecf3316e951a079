//! Partial support (the research pipeline's SUPPORTED / PARTIALLY SUPPORTED / NOT FOUND): the verifier's score
//! of a claim becomes one of three verdicts, with the cut-offs in config, and a per-collection policy says what
//! happens to a partial claim.
//!
//! - `supported`: the claim scores at least `answer.claim_support_threshold` against its best cited passage,
//!   and no clause of it scores below `answer.claim_partial_threshold` on its own;
//! - `partial`: the claim scores between the two cut-offs; or it scores as supported but one of its clauses is not
//!   (half of "born in Smiljan and died in Paris" is in the passage); or it does not, but one of its clauses does;
//! - `unsupported`: below `claim_partial_threshold`, and no clause supported.
//!
//! A claim's clauses are its parts joined by ", and", "and", ", but", "but", "whereas", ", while" when each part
//! has two content words or more (so "salt and pepper" stays one). Partial claims are dropped by the revision
//! pass (`partial_claims: drop`, the default) or kept and marked in the answer
//! (`mark`).

use serde::{Deserialize, Serialize};

/// The verifier's verdict on one claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Supported,
    Partial,
    #[default]
    Unsupported,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Supported => "supported",
            Verdict::Partial => "partial",
            Verdict::Unsupported => "unsupported",
        }
    }
}

/// What happens to a partial claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum PartialPolicy {
    /// Dropped by the revision pass, like an unsupported claim.
    #[default]
    Drop,
    /// Kept in the answer, marked [`PARTIAL_MARK`].
    Mark,
}

/// What follows a kept partial claim in the answer text (before its final punctuation).
pub const PARTIAL_MARK: &str = "(partially supported)";

/// The cut-offs of the verdicts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cutoffs {
    pub supported: f64,
    pub partial: f64,
}

impl Cutoffs {
    /// The verdict of a claim scoring `whole`, whose clauses (two or more, else empty) score `clauses`.
    pub fn verdict(&self, whole: f64, clauses: &[f64]) -> Verdict {
        let any_clause_supported = clauses.iter().any(|&s| s >= self.supported);
        let a_clause_unsupported = clauses.iter().any(|&s| s < self.partial);
        if whole >= self.supported {
            if a_clause_unsupported {
                Verdict::Partial
            } else {
                Verdict::Supported
            }
        } else if whole >= self.partial || any_clause_supported {
            Verdict::Partial
        } else {
            Verdict::Unsupported
        }
    }
}

/// Conjunctions that join two statements within one sentence.
const JOINS: &[&str] = &[
    ", and ",
    " and ",
    ", but ",
    " but ",
    ", whereas ",
    " whereas ",
    ", while ",
];

/// The clauses of a claim (two or more), or nothing when it is one statement.
pub fn clauses(claim: &str) -> Vec<String> {
    let mut parts: Vec<String> = vec![claim.trim().to_string()];
    for join in JOINS {
        let mut next = Vec::new();
        for part in parts {
            let pieces: Vec<&str> = part.split(join).collect();
            let substantial = pieces.len() > 1
                && pieces
                    .iter()
                    .all(|p| attest_text::text::content_words(p).len() >= 2);
            if substantial {
                next.extend(pieces.iter().map(|p| p.trim().to_string()));
            } else {
                next.push(part);
            }
        }
        parts = next;
    }
    if parts.len() < 2 {
        return Vec::new();
    }
    parts
}

/// How many claims of an answer got each verdict, with the one-line summary the CLI and the console print.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct VerdictCounts {
    pub supported: usize,
    pub partial: usize,
    pub unsupported: usize,
}

impl VerdictCounts {
    pub fn of<'a>(verdicts: impl IntoIterator<Item = &'a Verdict>) -> Self {
        let mut counts = VerdictCounts::default();
        for v in verdicts {
            match v {
                Verdict::Supported => counts.supported += 1,
                Verdict::Partial => counts.partial += 1,
                Verdict::Unsupported => counts.unsupported += 1,
            }
        }
        counts
    }

    /// "3 claims verified, 1 partial, 0 unsupported".
    pub fn summary(&self) -> String {
        let claims = if self.supported == 1 {
            "claim"
        } else {
            "claims"
        };
        format!(
            "{} {claims} verified, {} partial, {} unsupported",
            self.supported, self.partial, self.unsupported
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CUT: Cutoffs = Cutoffs {
        supported: 0.5,
        partial: 0.25,
    };

    #[test]
    fn verdicts_from_the_whole_claim_and_its_clauses() {
        assert_eq!(CUT.verdict(0.9, &[]), Verdict::Supported);
        assert_eq!(CUT.verdict(0.9, &[0.8, 0.6]), Verdict::Supported);
        assert_eq!(
            CUT.verdict(0.6, &[0.9, 0.1]),
            Verdict::Partial,
            "half of it is not there"
        );
        assert_eq!(
            CUT.verdict(0.3, &[]),
            Verdict::Partial,
            "between the cut-offs"
        );
        assert_eq!(
            CUT.verdict(0.1, &[0.7, 0.05]),
            Verdict::Partial,
            "one clause holds"
        );
        assert_eq!(CUT.verdict(0.1, &[0.2, 0.05]), Verdict::Unsupported);
        assert_eq!(CUT.verdict(0.24, &[]), Verdict::Unsupported);
    }

    #[test]
    fn clauses_split_statements_not_noun_pairs() {
        assert_eq!(
            clauses("Tesla was born in Smiljan and died in New York City"),
            vec!["Tesla was born in Smiljan", "died in New York City"]
        );
        assert_eq!(
            clauses("The owl hunts at night, but the fox hunts by day"),
            vec!["The owl hunts at night", "the fox hunts by day"]
        );
        assert!(clauses("He liked salt and pepper").is_empty());
        assert!(clauses("The barn owl hunts at night").is_empty());
    }

    #[test]
    fn the_summary_line() {
        let v = [
            Verdict::Supported,
            Verdict::Supported,
            Verdict::Partial,
            Verdict::Supported,
        ];
        assert_eq!(
            VerdictCounts::of(&v).summary(),
            "3 claims verified, 1 partial, 0 unsupported"
        );
    }
}
