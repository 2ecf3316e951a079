//! The candidate pool of one turn (SPEC "answer" step 6): hits of every rewrite and CRAG hop, deduplicated by
//! chunk id, with a low noise pre-floor only — the reranker decides the rest. Passages forced in by the
//! structural lookup or a curated pin skip the floor and are always handed to the generator.

use std::collections::{HashMap, HashSet};

use attest_proto::v1 as pb;
use serde::Serialize;

/// Why a candidate is in the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Retrieved,
    /// Resolved from an identifier in the question (structural lookup).
    Identifier,
    /// A ref of a curated pinned question.
    Pin,
}

impl Source {
    pub fn is_forced(self) -> bool {
        self != Source::Retrieved
    }
}

#[derive(Debug, Clone)]
pub struct Candidate {
    pub hit: pb::Hit,
    /// The reranker's 0..1 score against the question.
    pub score: f64,
    pub source: Source,
}

impl Candidate {
    /// The `kind` of the hit's metadata (`{"kind": "glossary"}`), if any.
    pub fn kind(&self) -> Option<String> {
        metadata_str(&self.hit.metadata_json, "kind")
    }
}

/// A string field of a hit's metadata JSON.
pub fn metadata_str(metadata_json: &str, field: &str) -> Option<String> {
    let meta: serde_json::Value = serde_json::from_str(metadata_json).ok()?;
    meta.get(field)?.as_str().map(str::to_string)
}

/// Noise: a hit found by the dense lane alone with a cosine below the floor. A BM25 match shares terms with its
/// query and is never noise; neither is a hit without lane scores.
pub fn is_noise(hit: &pb::Hit, floor: f64) -> bool {
    hit.bm25.is_none()
        && hit
            .dense
            .as_ref()
            .is_some_and(|d| f64::from(d.score) < floor)
}

/// Merges the ranked lists of several searches round-robin (each rewrite's best first), leaving out noise,
/// chunks already in `seen` and repeats, until `cap` hits are taken.
pub fn merge_round_robin(
    lists: Vec<Vec<pb::Hit>>,
    cap: usize,
    floor: f64,
    seen: &HashSet<String>,
) -> Vec<pb::Hit> {
    let mut taken: HashSet<String> = HashSet::new();
    let mut out = Vec::new();
    let mut iters: Vec<_> = lists.into_iter().map(Vec::into_iter).collect();
    let mut live = true;
    while live && out.len() < cap {
        live = false;
        for it in iters.iter_mut() {
            if out.len() >= cap {
                break;
            }
            for hit in it.by_ref() {
                live = true;
                if is_noise(&hit, floor)
                    || seen.contains(&hit.chunk_id)
                    || !taken.insert(hit.chunk_id.clone())
                {
                    continue;
                }
                out.push(hit);
                break;
            }
        }
    }
    out
}

/// Candidates by chunk id.
#[derive(Debug, Default)]
pub struct Pool {
    items: HashMap<String, Candidate>,
}

impl Pool {
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn chunk_ids(&self) -> HashSet<String> {
        self.items.keys().cloned().collect()
    }

    pub fn contains(&self, chunk_id: &str) -> bool {
        self.items.contains_key(chunk_id)
    }

    /// Adds a candidate; one already there keeps the higher score and the stronger source (forced wins).
    pub fn insert(&mut self, c: Candidate) {
        match self.items.get_mut(&c.hit.chunk_id) {
            Some(old) => {
                old.score = old.score.max(c.score);
                old.source = old.source.max(c.source);
            }
            None => {
                self.items.insert(c.hit.chunk_id.clone(), c);
            }
        }
    }

    /// Best first: score, then the router's fused score, then chunk id (a total, stable order).
    pub fn ranked(&self) -> Vec<Candidate> {
        let mut v: Vec<Candidate> = self.items.values().cloned().collect();
        v.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(b.hit.score.total_cmp(&a.hit.score))
                .then(a.hit.chunk_id.cmp(&b.hit.chunk_id))
        });
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(id: &str, dense: Option<f32>, bm25: bool) -> pb::Hit {
        pb::Hit {
            chunk_id: id.into(),
            dense: dense.map(|score| pb::LaneRank { rank: 1, score }),
            bm25: bm25.then_some(pb::LaneRank {
                rank: 1,
                score: 3.0,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn noise_is_a_weak_dense_only_hit() {
        assert!(is_noise(&hit("a", Some(0.1), false), 0.18));
        assert!(!is_noise(&hit("a", Some(0.1), true), 0.18));
        assert!(!is_noise(&hit("a", Some(0.3), false), 0.18));
        assert!(!is_noise(&hit("a", None, false), 0.18));
    }

    #[test]
    fn round_robin_interleaves_dedups_floors_and_caps() {
        let lists = vec![
            vec![
                hit("a", Some(0.9), false),
                hit("b", Some(0.8), false),
                hit("c", Some(0.7), false),
            ],
            vec![
                hit("a", None, true),
                hit("noise", Some(0.01), false),
                hit("d", None, true),
            ],
            vec![hit("old", None, true), hit("e", None, true)],
        ];
        let seen: HashSet<String> = ["old".to_string()].into();
        let ids = |v: Vec<pb::Hit>| v.into_iter().map(|h| h.chunk_id).collect::<Vec<_>>();
        assert_eq!(
            ids(merge_round_robin(lists.clone(), 10, 0.18, &seen)),
            vec!["a", "d", "e", "b", "c"]
        );
        assert_eq!(
            ids(merge_round_robin(lists, 2, 0.18, &seen)),
            vec!["a", "d"]
        );
    }

    #[test]
    fn insert_keeps_the_best_score_and_the_forced_source() {
        let mut pool = Pool::default();
        let c = |score, source| Candidate {
            hit: hit("a", None, true),
            score,
            source,
        };
        pool.insert(c(0.7, Source::Retrieved));
        pool.insert(c(0.2, Source::Identifier));
        assert_eq!(pool.len(), 1);
        let r = &pool.ranked()[0];
        assert_eq!((r.score, r.source), (0.7, Source::Identifier));
        assert!(r.source.is_forced());
    }

    #[test]
    fn kind_from_metadata() {
        let mut h = hit("g", None, true);
        h.metadata_json = r#"{"kind":"glossary","term":"BM25"}"#.into();
        let c = Candidate {
            hit: h,
            score: 0.0,
            source: Source::Retrieved,
        };
        assert_eq!(c.kind().as_deref(), Some("glossary"));
        assert_eq!(metadata_str("not json", "kind"), None);
    }
}
