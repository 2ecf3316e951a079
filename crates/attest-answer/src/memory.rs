//! Step 5 of SPEC "answer", curated memory: a human hand on retrieval, loaded from a YAML or JSON file
//! (`memory_file`), per collection:
//!
//! ```yaml
//! docs:
//!   pins:  [{question: "How are writes made durable?", refs: ["adr-0007", "wal-notes"]}]
//!   notes: [{text: "Durability questions are about the ingest log, not replication.", when: "is my write safe?"}]
//! ```
//!
//! A pin's refs are real documents: when the asked question matches the pinned one (cosine of embeddings ≥ 0.85,
//! or 0.70–0.85 and re-judged by the reranker ≥ 0.50; no judge → rejected: a curated citation is never conjured
//! from a fuzzy match) they are forced into the pool as citable passages. A note is advisory framing (cosine
//! ≥ 0.60 against its trigger or its own text): returned in the response, never minted as a footnote, never cited.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use attest_embed::{cosine_similarity, Embedder, EmbedderBackend, EmbedderConfig, LocalModel};
use attest_proto::v1 as pb;
use serde::{Deserialize, Serialize};

use crate::rerank::Reranker;

/// The model whose cosines the thresholds are (SPEC: 0.85, 0.70 and 0.60 were set with all-MiniLM-L6-v2). A model
/// whose cosines run higher forces curated citations onto questions they were not pinned for: under
/// bge-small-en-v1.5, "How does the system ensure durability of writes?" passed the pin threshold of "How do
/// writes become durable?" (tests/answer_steps.rs; 0.755 with MiniLM).
pub const MEMORY_MODEL: LocalModel = LocalModel::MiniLm;

/// The embedder curated memory embeds with, from the configured one: a local embedder runs [`MEMORY_MODEL`]
/// whatever model fills the collections; a remote service is used as configured.
pub fn memory_embedder_config(config: &EmbedderConfig) -> EmbedderConfig {
    let mut config = config.clone();
    if config.backend == EmbedderBackend::Local && config.local.model != MEMORY_MODEL {
        config.local.model = MEMORY_MODEL;
        // A configured directory holds the configured model.
        config.local.model_dir = None;
    }
    config
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemoryConfig {
    /// A pinned question at or above this cosine is accepted (SPEC: 0.85).
    pub pin_threshold: f64,
    /// From here up to `pin_threshold` it is re-judged (SPEC: 0.70).
    pub border_threshold: f64,
    /// The judge's score a border pin needs (SPEC: 0.50).
    pub judge_threshold: f64,
    /// Whether border pins are re-judged by the reranker; false: border pins are rejected.
    pub judge_border: bool,
    /// A note at or above this cosine frames the answer (SPEC: 0.60).
    pub note_threshold: f64,
    /// Accepted pins at most, best first.
    pub max_pins: usize,
    /// Notes returned at most, best first.
    pub max_notes: usize,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            pin_threshold: 0.85,
            border_threshold: 0.70,
            judge_threshold: 0.50,
            judge_border: true,
            note_threshold: 0.60,
            max_pins: 3,
            max_notes: 3,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pin {
    pub question: String,
    /// Document ids.
    pub refs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Note {
    pub text: String,
    /// The trigger question.
    pub when: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CollectionMemory {
    pub pins: Vec<Pin>,
    pub notes: Vec<Note>,
}

/// Whether a pin is accepted at this cosine, given the judge's score when one judged it (pure).
pub fn pin_accepted(cosine: f64, judge: Option<f64>, config: &MemoryConfig) -> bool {
    if cosine >= config.pin_threshold {
        true
    } else if cosine >= config.border_threshold {
        judge.is_some_and(|s| s >= config.judge_threshold)
    } else {
        false
    }
}

/// Whether a pin at this cosine needs the judge.
pub fn needs_judge(cosine: f64, config: &MemoryConfig) -> bool {
    cosine >= config.border_threshold && cosine < config.pin_threshold
}

/// What the memory says about one question.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recall {
    /// Accepted pins, best first.
    pub pins: Vec<Pin>,
    /// Framing notes, best first.
    pub notes: Vec<String>,
}

/// Embeddings of one collection's pinned questions and note triggers/texts, made on first use.
#[derive(Debug, Default)]
struct Vectors {
    pins: Vec<Vec<f32>>,
    notes: Vec<(Vec<f32>, Vec<f32>)>,
}

#[derive(Debug)]
struct Entry {
    memory: CollectionMemory,
    vectors: Mutex<Option<Arc<Vectors>>>,
}

/// The curated memory of every collection.
#[derive(Debug, Default)]
pub struct CuratedMemory {
    collections: HashMap<String, Entry>,
    config: MemoryConfig,
}

impl CuratedMemory {
    pub fn new(collections: HashMap<String, CollectionMemory>, config: MemoryConfig) -> Self {
        CuratedMemory {
            collections: collections
                .into_iter()
                .map(|(name, memory)| {
                    let entry = Entry {
                        memory,
                        vectors: Mutex::new(None),
                    };
                    (name, entry)
                })
                .collect(),
            config,
        }
    }

    /// Reads a YAML (or JSON) file: a map from collection name to `{pins, notes}`.
    pub fn load(path: &Path, config: MemoryConfig) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let collections: HashMap<String, CollectionMemory> =
            serde_yaml::from_str(&text).map_err(|e| format!("parsing {}: {e}", path.display()))?;
        Ok(Self::new(collections, config))
    }

    /// Whether `collection` has any pin or note (no embedding is needed otherwise).
    pub fn has(&self, collection: &str) -> bool {
        self.collections
            .get(collection)
            .is_some_and(|e| !e.memory.pins.is_empty() || !e.memory.notes.is_empty())
    }

    fn vectors(&self, entry: &Entry, embedder: &dyn Embedder) -> Result<Arc<Vectors>, String> {
        let mut slot = entry.vectors.lock().map_err(|_| "memory lock poisoned")?;
        if let Some(v) = slot.as_ref() {
            return Ok(Arc::clone(v));
        }
        let m = &entry.memory;
        let mut texts: Vec<&str> = m.pins.iter().map(|p| p.question.as_str()).collect();
        for n in &m.notes {
            texts.push(&n.when);
            texts.push(&n.text);
        }
        let mut vs = embedder
            .embed(&texts)
            .map_err(|e| e.to_string())?
            .into_iter();
        let mut next = || vs.next().ok_or("the embedder returned too few vectors");
        let pins = m
            .pins
            .iter()
            .map(|_| next())
            .collect::<Result<Vec<_>, _>>()?;
        let notes = m
            .notes
            .iter()
            .map(|_| Ok((next()?, next()?)))
            .collect::<Result<Vec<_>, &str>>()?;
        let v = Arc::new(Vectors { pins, notes });
        *slot = Some(Arc::clone(&v));
        Ok(v)
    }

    /// The pins and notes that match `question` in `collection`. Blocking (embeds, and the judge may run a
    /// model): call it on a blocking thread. `judge` is None when no judge may re-judge border pins.
    pub fn recall(
        &self,
        collection: &str,
        question: &str,
        embedder: &dyn Embedder,
        judge: Option<&dyn Reranker>,
    ) -> Result<Recall, String> {
        let Some(entry) = self.collections.get(collection) else {
            return Ok(Recall::default());
        };
        let vectors = self.vectors(entry, embedder)?;
        let q = embedder
            .embed(&[question])
            .map_err(|e| e.to_string())?
            .pop()
            .ok_or("the embedder returned no vector")?;
        // A vector of another length (a misbehaving remote embedder) matches nothing instead of panicking.
        let cos = |v: &[f32]| {
            if v.len() == q.len() {
                f64::from(cosine_similarity(&q, v))
            } else {
                0.0
            }
        };
        let judge = if self.config.judge_border {
            judge
        } else {
            None
        };
        let mut pins: Vec<(f64, &Pin)> = Vec::new();
        for (pin, v) in entry.memory.pins.iter().zip(&vectors.pins) {
            let c = cos(v);
            let score = if needs_judge(c, &self.config) {
                judge.and_then(|j| judge_score(j, question, &pin.question))
            } else {
                None
            };
            if pin_accepted(c, score, &self.config) {
                pins.push((c, pin));
            }
        }
        pins.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut notes: Vec<(f64, &Note)> = entry
            .memory
            .notes
            .iter()
            .zip(&vectors.notes)
            .map(|(n, (when, text))| (cos(when).max(cos(text)), n))
            .filter(|(c, _)| *c >= self.config.note_threshold)
            .collect();
        notes.sort_by(|a, b| b.0.total_cmp(&a.0));
        Ok(Recall {
            pins: pins
                .into_iter()
                .take(self.config.max_pins)
                .map(|(_, p)| p.clone())
                .collect(),
            notes: notes
                .into_iter()
                .take(self.config.max_notes)
                .map(|(_, n)| n.text.clone())
                .collect(),
        })
    }
}

/// The reranker's score for (asked question × the curator's phrasing); None when it fails (= no judge).
fn judge_score(judge: &dyn Reranker, question: &str, pinned: &str) -> Option<f64> {
    let hit = pb::Hit {
        text: pinned.to_string(),
        ..Default::default()
    };
    match judge.score(question, &[hit]) {
        Ok(scores) => scores.first().copied(),
        Err(e) => {
            tracing::warn!(error = %e, event = "memory_judge_failed", "border pin not judged");
            None
        }
    }
}

/// The hits of a search that belong to a pin's refs.
pub fn ref_hits(pin: &Pin, hits: Vec<pb::Hit>) -> Vec<pb::Hit> {
    hits.into_iter()
        .filter(|h| pin.refs.contains(&h.doc_id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_embeds_with_the_model_its_thresholds_were_set_with() {
        let mut config = EmbedderConfig::default();
        config.local.model_dir = Some("/models/bge".into());
        let memory = memory_embedder_config(&config);
        assert_eq!(
            (memory.local.model, memory.local.model_dir),
            (MEMORY_MODEL, None)
        );
        config.local.model = MEMORY_MODEL;
        assert_eq!(memory_embedder_config(&config), config);
        config.backend = EmbedderBackend::Remote;
        config.local.model = LocalModel::BgeSmall;
        assert_eq!(memory_embedder_config(&config), config);
    }

    #[test]
    fn pin_thresholds_of_the_seed() {
        let c = MemoryConfig::default();
        assert!(pin_accepted(0.85, None, &c));
        assert!(pin_accepted(0.99, Some(0.0), &c));
        // Border: the judge decides; no judge rejects.
        assert!(pin_accepted(0.80, Some(0.50), &c));
        assert!(!pin_accepted(0.80, Some(0.49), &c));
        assert!(!pin_accepted(0.80, None, &c));
        assert!(pin_accepted(0.70, Some(0.9), &c));
        assert!(needs_judge(0.70, &c) && needs_judge(0.849, &c) && !needs_judge(0.85, &c));
        // Below the border nothing helps.
        assert!(!pin_accepted(0.69, Some(1.0), &c) && !needs_judge(0.69, &c));
    }

    #[test]
    fn files_in_yaml_and_json() {
        let dir = std::env::temp_dir().join(format!("attest-memory-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let yaml = dir.join("m.yaml");
        std::fs::write(
            &yaml,
            "docs:\n  pins:\n    - question: How are writes made durable?\n      refs: [adr-7]\n  notes:\n    - text: Framing.\n      when: is my write safe?\n",
        )
        .unwrap();
        let m = CuratedMemory::load(&yaml, MemoryConfig::default()).unwrap();
        assert!(m.has("docs") && !m.has("other"));
        assert_eq!(m.collections["docs"].memory.pins[0].refs, vec!["adr-7"]);
        let json = dir.join("m.json");
        std::fs::write(
            &json,
            r#"{"docs": {"notes": [{"text": "t", "when": "w"}]}}"#,
        )
        .unwrap();
        let m = CuratedMemory::load(&json, MemoryConfig::default()).unwrap();
        assert_eq!(m.collections["docs"].memory.notes.len(), 1);
        std::fs::write(&json, r#"{"docs": {"pinz": []}}"#).unwrap();
        let e = CuratedMemory::load(&json, MemoryConfig::default()).unwrap_err();
        assert!(e.contains("pinz"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn ref_hits_keep_only_the_pinned_documents() {
        let pin = Pin {
            question: "q".into(),
            refs: vec!["a".into()],
        };
        let h = |d: &str| pb::Hit {
            doc_id: d.into(),
            ..Default::default()
        };
        let kept = ref_hits(&pin, vec![h("b"), h("a"), h("c")]);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].doc_id, "a");
    }
}
