//! Step 8 of SPEC "answer", the coverage gate (CRAG): a handful of plain comparisons on the reranked scores
//! decide whether the pool as a whole can ground an answer — bail out when the best score is below 0.40;
//! ground when it is at least 0.65, or at least 0.55 with 2+ supporting chunks; in between, refine the query and
//! retrieve again (the pipeline stops after `max_hops` retrievals). With the reader on, its answerability gate
//! ([`decide_read`]) is combined with that lexical one ([`combine`], `answer.reader.gate`).

pub use crate::reader::GateMode;

/// What the coverage gate says about the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Gate {
    Ground,
    Bail,
    Refine,
}

/// The lexical gate's thresholds on reranked scores (`answer.bail_threshold`, `answer.ground_threshold`,
/// `answer.ground_with_support_threshold`, `answer.min_supporting`: `AnswerConfig::gate_thresholds`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateThresholds {
    pub bail: f64,
    pub ground: f64,
    pub ground_with_support: f64,
    pub min_supporting: usize,
}

/// The gate over the pool's scores (any order). An empty pool asks for another try.
pub fn decide(scores: &[f64], thresholds: &GateThresholds) -> Gate {
    decide_bailing_below(scores, thresholds, thresholds.bail)
}

/// The lexical gate the reader's gate is combined with (under `reader`, the one [`combine`] is given with it):
/// [`decide`], except that under `gate: veto` it bails below `reader.veto_threshold` instead of
/// `answer.bail_threshold` (the veto only ever bails), and not at all where the reader's best answerability
/// (`answerability`, one per read passage) reaches `reader.veto_overrule_bar`: the readers are surer than a
/// reranker score is telling.
pub fn lexical_beside_reader(
    scores: &[f64],
    answerability: &[f64],
    thresholds: &GateThresholds,
    reader: &crate::reader::ReaderConfig,
) -> Gate {
    let bail = match reader.gate {
        GateMode::Veto if readers_overrule_veto(answerability, reader) => f64::NEG_INFINITY,
        GateMode::Veto => reader.veto_threshold,
        GateMode::Both | GateMode::Reader => thresholds.bail,
    };
    decide_bailing_below(scores, thresholds, bail)
}

/// Whether the readers' best answerability reaches `reader.veto_overrule_bar` (never where it is unset).
fn readers_overrule_veto(answerability: &[f64], reader: &crate::reader::ReaderConfig) -> bool {
    reader
        .veto_overrule_bar
        .is_some_and(|bar| best(answerability) >= bar)
}

/// The best of `scores`; minus infinity when there are none.
pub fn best(scores: &[f64]) -> f64 {
    scores.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

fn decide_bailing_below(scores: &[f64], thresholds: &GateThresholds, bail_threshold: f64) -> Gate {
    let best = best(scores);
    if scores.is_empty() {
        return Gate::Refine;
    }
    let supporting = scores
        .iter()
        .filter(|&&s| s >= thresholds.ground_with_support)
        .count();
    if best >= thresholds.ground
        || (best >= thresholds.ground_with_support && supporting >= thresholds.min_supporting)
    {
        Gate::Ground
    } else if best < bail_threshold {
        Gate::Bail
    } else {
        Gate::Refine
    }
}

/// The gate over the reader's answerability (best sentence per read passage): ground when the best is at least
/// `reader.ground_threshold`, bail below `reader.bail_threshold`, refine in between. Its thresholds are the
/// reader's own, chosen on squad-dev held-out articles (the model's scale, not the reranker's).
pub fn decide_read(scores: &[f64], reader: &crate::reader::ReaderConfig) -> Gate {
    let best = best(scores);
    if scores.is_empty() {
        Gate::Refine
    } else if best >= reader.ground_threshold {
        Gate::Ground
    } else if best < reader.bail_threshold {
        Gate::Bail
    } else {
        Gate::Refine
    }
}

/// The combined decision of the reader's gate (`read`) and the lexical gate (`lexical`) under `mode`.
pub fn combine(read: Gate, lexical: Gate, mode: GateMode) -> Gate {
    match mode {
        GateMode::Reader => read,
        GateMode::Veto if lexical == Gate::Bail => Gate::Bail,
        GateMode::Veto => read,
        GateMode::Both => match (read, lexical) {
            (Gate::Ground, Gate::Ground) => Gate::Ground,
            (Gate::Bail, _) | (_, Gate::Bail) => Gate::Bail,
            _ => Gate::Refine,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AnswerConfig;

    #[test]
    fn both_grounds_only_when_each_gate_does() {
        use Gate::*;
        // The reader passes, the lexical gate fails: no answer under `both`, an answer under `reader`.
        assert_eq!(combine(Ground, Bail, GateMode::Both), Bail);
        assert_eq!(combine(Ground, Refine, GateMode::Both), Refine);
        assert_eq!(combine(Ground, Bail, GateMode::Reader), Ground);
        assert_eq!(combine(Ground, Bail, GateMode::Veto), Bail);
        assert_eq!(combine(Ground, Refine, GateMode::Veto), Ground);
        // The lexical gate passes, the reader fails: no answer under either mode.
        assert_eq!(combine(Bail, Ground, GateMode::Both), Bail);
        assert_eq!(combine(Refine, Ground, GateMode::Both), Refine);
        assert_eq!(combine(Bail, Ground, GateMode::Reader), Bail);
        assert_eq!(combine(Refine, Ground, GateMode::Veto), Refine);
        assert_eq!(combine(Ground, Ground, GateMode::Both), Ground);
        assert_eq!(combine(Refine, Refine, GateMode::Both), Refine);
    }

    /// The lexical gate beside the reader for one reranked score and the read sentences' answerability.
    fn beside(c: &AnswerConfig, reranked: f64, answerability: &[f64]) -> Gate {
        lexical_beside_reader(&[reranked], answerability, &c.gate_thresholds(), &c.reader)
    }

    #[test]
    fn the_veto_bails_at_its_own_threshold() {
        let mut c = AnswerConfig::default();
        c.reader.veto_threshold = 0.25;
        assert_eq!(
            decide(&[0.3], &c.gate_thresholds()),
            Gate::Bail,
            "the lexical gate alone"
        );
        c.reader.veto_overrule_bar = None;
        assert_eq!(beside(&c, 0.3, &[0.5]), Gate::Refine);
        assert_eq!(beside(&c, 0.2, &[1.0]), Gate::Bail);
        c.reader.gate = GateMode::Both;
        assert_eq!(beside(&c, 0.3, &[0.5]), Gate::Bail);
    }

    #[test]
    fn readers_sure_of_a_sentence_overrule_the_veto() {
        let mut c = AnswerConfig::default();
        c.reader.veto_threshold = 0.40;
        c.reader.veto_overrule_bar = Some(0.99);
        // A low reranked score bails unless a read sentence reaches the bar.
        assert_eq!(beside(&c, 0.1, &[0.2, 0.98]), Gate::Bail);
        assert_eq!(beside(&c, 0.1, &[0.2, 0.99]), Gate::Refine);
        assert_eq!(beside(&c, 0.1, &[]), Gate::Bail);
        // Only the veto is overruled: under `both` the lexical gate still bails at its own threshold.
        c.reader.gate = GateMode::Both;
        assert_eq!(beside(&c, 0.1, &[1.0]), Gate::Bail);
    }

    #[test]
    fn veto_is_the_default_and_modes_read_from_config() {
        assert_eq!(GateMode::default(), GateMode::Veto);
        let mode: GateMode = serde_json::from_str("\"reader\"").unwrap();
        assert_eq!(mode, GateMode::Reader);
        assert!(serde_json::from_str::<GateMode>("\"either\"").is_err());
    }

    #[test]
    fn the_reader_gate_holds_its_own_thresholds() {
        let r = crate::reader::ReaderConfig {
            bail_threshold: 0.1,
            ground_threshold: 0.4,
            ..Default::default()
        };
        assert_eq!(decide_read(&[], &r), Gate::Refine);
        assert_eq!(decide_read(&[0.05, 0.09], &r), Gate::Bail);
        assert_eq!(decide_read(&[0.05, 0.3], &r), Gate::Refine);
        assert_eq!(decide_read(&[0.4], &r), Gate::Ground);
    }

    #[test]
    fn thresholds_of_the_seed() {
        let c = AnswerConfig::default();
        assert_eq!(decide(&[], &c.gate_thresholds()), Gate::Refine);
        assert_eq!(decide(&[0.39, 0.1], &c.gate_thresholds()), Gate::Bail);
        assert_eq!(decide(&[0.40], &c.gate_thresholds()), Gate::Refine);
        assert_eq!(decide(&[0.6, 0.3], &c.gate_thresholds()), Gate::Refine);
        assert_eq!(
            decide(&[0.3, 0.6, 0.55], &c.gate_thresholds()),
            Gate::Ground
        );
        assert_eq!(decide(&[0.65], &c.gate_thresholds()), Gate::Ground);
        assert_eq!(decide(&[0.64, 0.54], &c.gate_thresholds()), Gate::Refine);
    }
}
