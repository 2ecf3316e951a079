//! Per-collection settings that live in meta beside the shard map, in the JSON shape meta stores opaquely
//! (`thresholds_json`): the router validates and writes them (`PUT /v1/collections/{name}/thresholds`,
//! `attest-lab eval --sweep`), every answer replica reads them from meta. Defined here so that both sides agree
//! on one shape and one validator.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Longest `data_hash` accepted: a hash's hex with room for an algorithm prefix. The thresholds are stored in
/// meta's Raft log, so nothing unbounded may ride along (issue 69: a 100 KB one was accepted).
pub const MAX_DATA_HASH_LEN: usize = 128;

/// A collection's answer thresholds: the operating point of its risk–coverage curve. Read only from a JSON
/// object: serde's derive would also take an array of the fields in order (`[0.5]`), which is never what a
/// caller meant (see the `Deserialize` impl below).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, remote = "Self")]
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
        if let Some(hash) = self.data_hash.as_ref() {
            if hash.len() > MAX_DATA_HASH_LEN {
                return Some((
                    "data_hash",
                    format!(
                        "must be at most {MAX_DATA_HASH_LEN} characters (got {})",
                        hash.len()
                    ),
                ));
            }
        }
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

impl Serialize for CollectionThresholds {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        CollectionThresholds::serialize(self, s)
    }
}

impl<'de> Deserialize<'de> for CollectionThresholds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjectOnly;
        impl<'de> serde::de::Visitor<'de> for ObjectOnly {
            type Value = CollectionThresholds;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of thresholds, such as {\"min_confidence\": 0.5}")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                CollectionThresholds::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(ObjectOnly)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_object_with_a_bounded_hash_is_taken() {
        let parse = |json: &str| serde_json::from_str::<CollectionThresholds>(json);
        assert!(parse("[0.5]").is_err());
        assert_eq!(
            parse(r#"{"min_confidence": 0.5}"#).unwrap(),
            CollectionThresholds::min_confidence(0.5)
        );
        let mut t = CollectionThresholds::min_confidence(0.5);
        t.data_hash = Some("a".repeat(MAX_DATA_HASH_LEN));
        assert_eq!(t.problem(), None);
        t.data_hash = Some("a".repeat(MAX_DATA_HASH_LEN + 1));
        assert_eq!(t.problem().map(|p| p.0), Some("data_hash"));
        assert!(CollectionThresholds::from_stored(r#"[0.5]"#).is_err());
    }

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
