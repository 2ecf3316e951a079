//! Per-collection abstention thresholds, read from meta: `attest-lab eval --sweep` and
//! `PUT /v1/collections/{name}/thresholds` store a collection's operating point of its risk–coverage curve
//! (most coverage under a hallucination budget) in meta's collection record; every answer replica keeps a copy
//! of them, refreshed by polling meta's cluster state (a new state version replaces the whole map), and the
//! pipeline abstains (`low_confidence`) below a collection's `min_confidence`. Without thresholds in meta (or
//! without meta), `answer.min_confidence` holds. The hot path reads only this in-memory copy.

use std::collections::HashMap;
use std::sync::RwLock;

use attest_core::settings::CollectionThresholds;
use attest_proto::v1 as pb;

/// The thresholds of every collection, as of meta's state `version`.
#[derive(Debug, Default)]
pub struct ThresholdsCache {
    inner: RwLock<Snapshot>,
}

#[derive(Debug, Default)]
struct Snapshot {
    version: u64,
    by_collection: HashMap<String, CollectionThresholds>,
}

impl ThresholdsCache {
    /// The minimum confidence for `collection`: meta's thresholds when it holds some, else `default`.
    pub fn min_confidence(&self, collection: &str, default: f64) -> f64 {
        self.get(collection).map_or(default, |t| t.min_confidence)
    }

    pub fn get(&self, collection: &str) -> Option<CollectionThresholds> {
        let snap = self.inner.read().unwrap_or_else(|e| e.into_inner());
        snap.by_collection.get(collection).cloned()
    }

    /// Takes the thresholds of a cluster state newer than the one held (an older one, answered by a lagging
    /// meta follower, is ignored). Thresholds that do not parse are logged and left out: the defaults apply.
    pub fn apply(&self, state: &pb::ClusterState) {
        if state.version <= self.inner.read().unwrap_or_else(|e| e.into_inner()).version {
            return;
        }
        // A re-embedded collection is stored under another name; callers ask by the alias that resolves to it.
        let alias_of: HashMap<&str, &str> = state
            .aliases
            .iter()
            .map(|a| (a.collection.as_str(), a.name.as_str()))
            .collect();
        let mut by_collection = HashMap::new();
        for c in &state.collections {
            match CollectionThresholds::from_stored(&c.thresholds_json) {
                Ok(Some(t)) => {
                    let name = alias_of.get(c.name.as_str()).copied().unwrap_or(&c.name);
                    by_collection.insert(name.to_string(), t);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(collection = %c.name, error = %e, event = "thresholds_ignored",
                    "meta holds thresholds this answer tier cannot read; using answer.min_confidence")
                }
            }
        }
        let mut snap = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if state.version > snap.version {
            *snap = Snapshot {
                version: state.version,
                by_collection,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(version: u64, collections: &[(&str, &str)]) -> pb::ClusterState {
        pb::ClusterState {
            version,
            collections: collections
                .iter()
                .map(|(name, json)| pb::CollectionMeta {
                    name: name.to_string(),
                    thresholds_json: json.to_string(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn meta_thresholds_override_the_default_and_only_newer_states_count() {
        let cache = ThresholdsCache::default();
        assert_eq!(cache.min_confidence("docs", 0.3), 0.3);
        cache.apply(&state(
            5,
            &[
                ("docs", r#"{"min_confidence": 0.72}"#),
                ("bad", r#"{"min_confidence": 7}"#),
                ("none", ""),
            ],
        ));
        assert_eq!(cache.min_confidence("docs", 0.3), 0.72);
        assert_eq!(
            cache.min_confidence("bad", 0.3),
            0.3,
            "out of range: ignored"
        );
        assert_eq!(cache.min_confidence("none", 0.3), 0.3);
        assert_eq!(cache.min_confidence("other", 0.3), 0.3);
        cache.apply(&state(4, &[("docs", r#"{"min_confidence": 0.1}"#)]));
        assert_eq!(
            cache.min_confidence("docs", 0.3),
            0.72,
            "an older state is ignored"
        );
        cache.apply(&state(6, &[]));
        assert_eq!(cache.min_confidence("docs", 0.3), 0.3, "cleared");
    }

    #[test]
    fn a_reembedded_collection_keeps_its_thresholds_under_its_name() {
        let cache = ThresholdsCache::default();
        let mut s = state(7, &[("docs~r1", r#"{"min_confidence": 0.64}"#)]);
        s.aliases.push(pb::CollectionAlias {
            name: "docs".into(),
            collection: "docs~r1".into(),
        });
        cache.apply(&s);
        assert_eq!(cache.min_confidence("docs", 0.3), 0.64);
    }
}
