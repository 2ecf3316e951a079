//! Per-collection settings that live in meta beside the shard map, in the JSON shape meta stores opaquely
//! (`thresholds_json`): the router validates and writes them (`PUT /v1/collections/{name}/thresholds`,
//! `attest-lab eval --sweep`), every answer replica reads them from meta. Defined here so that both sides agree
//! on one shape and one validator.

use serde::{Deserialize, Serialize};

/// A collection's answer thresholds: the operating point of its risk–coverage curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CollectionThresholds {
    /// Answer only when the answer's confidence is at least this (0..1).
    pub min_confidence: f64,
    /// What `attest-lab eval --sweep` measured at this threshold (absent when set by hand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hallucination_budget: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hallucination_rate: Option<f64>,
    /// The evaluation data the sweep ran on (its hash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_hash: Option<String>,
}

impl CollectionThresholds {
    /// Thresholds with only `min_confidence` set.
    pub fn min_confidence(min_confidence: f64) -> Self {
        CollectionThresholds {
            min_confidence,
            hallucination_budget: None,
            coverage: None,
            hallucination_rate: None,
            data_hash: None,
        }
    }

    /// The first field that cannot be right, as (field, problem).
    pub fn problem(&self) -> Option<(&'static str, String)> {
        let ratios = [
            ("min_confidence", Some(self.min_confidence)),
            ("hallucination_budget", self.hallucination_budget),
            ("coverage", self.coverage),
            ("hallucination_rate", self.hallucination_rate),
        ];
        ratios.into_iter().find_map(|(field, value)| {
            let v = value?;
            (!crate::config_check::in_unit_interval(v))
                .then(|| (field, format!("must be a number in 0..1 (got {v})")))
        })
    }

    /// Meta's stored form → thresholds (`""`: none set). A stored value that does not parse is an error, so
    /// a reader can log it and fall back to its defaults.
    pub fn from_stored(json: &str) -> Result<Option<Self>, String> {
        if json.trim().is_empty() {
            return Ok(None);
        }
        let t: CollectionThresholds = serde_json::from_str(json).map_err(|e| e.to_string())?;
        match t.problem() {
            Some((field, problem)) => Err(format!("{field}: {problem}")),
            None => Ok(Some(t)),
        }
    }

    /// The form meta stores.
    pub fn to_stored(&self) -> String {
        serde_json::to_string(self).expect("thresholds always serialize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_round_trip_and_out_of_range_values_are_named() {
        let mut t = CollectionThresholds::min_confidence(0.7);
        t.coverage = Some(0.8);
        assert_eq!(
            CollectionThresholds::from_stored(&t.to_stored()),
            Ok(Some(t.clone()))
        );
        assert_eq!(CollectionThresholds::from_stored(""), Ok(None));
        t.min_confidence = 1.5;
        assert_eq!(t.problem().map(|p| p.0), Some("min_confidence"));
        t.min_confidence = 0.5;
        t.hallucination_rate = Some(f64::NAN);
        assert_eq!(t.problem().map(|p| p.0), Some("hallucination_rate"));
        assert!(CollectionThresholds::from_stored(r#"{"min_confidence": 0.5, "x": 1}"#).is_err());
    }
}
