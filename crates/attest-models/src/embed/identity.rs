//! What makes two embedders give vectors of one space: the model, its weights, its dimension, its pooling and the
//! instruction put before queries. A collection records the identity of the embedder that filled it, so that it
//! is searched and written by that embedder only (issue 70).

use serde::{Deserialize, Serialize};

/// An embedder's identity as a collection records it. An empty `checksum` or `pooling` is unknown (a remote
/// service says only its model's name); unknown fields are not compared.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct EmbedderIdentity {
    /// The model's id, e.g. "bge-small-en-v1.5".
    pub model: String,
    /// sha256 (hex) of the model's weights as published (MiniLM's safetensors, from which its ONNX graph is
    /// exported; bge's int8 ONNX graph); empty when unknown.
    pub checksum: String,
    pub dimension: u32,
    /// How token vectors become one vector: "mean", "cls"; empty when unknown.
    pub pooling: String,
    /// What a search query is prefixed with before it is embedded.
    pub query_prefix: String,
}

impl EmbedderIdentity {
    /// What a record written before identities holds: the model's id and its dimension.
    pub fn of_model(model: &str, dimension: u32) -> Self {
        EmbedderIdentity {
            model: model.to_string(),
            dimension,
            ..Default::default()
        }
    }

    /// No model recorded: a collection created before embedders were recorded, which any embedder may serve.
    pub fn is_unrecorded(&self) -> bool {
        self.model.is_empty()
    }

    /// Each way `other` would give vectors of another space than `self` ("pooling cls (recorded mean)"), over
    /// the fields both know; empty when they agree. The query prefix is recorded, not compared: it shapes the
    /// queries only, never the stored vectors (and a local model's follows from the model).
    pub fn differences(&self, other: &EmbedderIdentity) -> Vec<String> {
        let mut out = Vec::new();
        if self.model != other.model {
            out.push(format!("model {} (recorded {})", other.model, self.model));
        }
        if self.dimension != 0 && other.dimension != 0 && self.dimension != other.dimension {
            out.push(format!(
                "dimension {} (recorded {})",
                other.dimension, self.dimension
            ));
        }
        let known = |a: &str, b: &str| !a.is_empty() && !b.is_empty() && a != b;
        if known(&self.checksum, &other.checksum) {
            out.push(format!(
                "weights sha256 {} (recorded {})",
                other.checksum, self.checksum
            ));
        }
        if known(&self.pooling, &other.pooling) {
            out.push(format!(
                "pooling {} (recorded {})",
                other.pooling, self.pooling
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::LocalModel;

    #[test]
    fn the_local_models_differ_and_each_matches_itself() {
        let (mini, bge) = (
            LocalModel::MiniLm.identity(),
            LocalModel::BgeSmall.identity(),
        );
        assert!(mini.differences(&mini).is_empty());
        assert_eq!(mini.pooling, "mean");
        assert_eq!(bge.pooling, "cls");
        assert_eq!(mini.checksum.len(), 64);
        let d = mini.differences(&bge).join("; ");
        for what in ["model bge-small-en-v1.5", "weights sha256", "pooling cls"] {
            assert!(d.contains(what), "{d}");
        }
    }

    #[test]
    fn a_record_of_the_model_alone_compares_what_it_knows() {
        let old = EmbedderIdentity::of_model(crate::embed::MINILM_ID, 384);
        assert!(old.differences(&LocalModel::MiniLm.identity()).is_empty());
        assert!(!old.differences(&LocalModel::BgeSmall.identity()).is_empty());
        // A remote service of the same model (checksum and pooling unknown) serves a local model's record.
        let remote = EmbedderIdentity::of_model(crate::embed::MINILM_ID, 384);
        assert!(LocalModel::MiniLm
            .identity()
            .differences(&remote)
            .is_empty());
        let other_weights = EmbedderIdentity {
            checksum: "0".repeat(64),
            ..LocalModel::MiniLm.identity()
        };
        assert_eq!(
            LocalModel::MiniLm
                .identity()
                .differences(&other_weights)
                .len(),
            1
        );
        assert!(EmbedderIdentity::default().is_unrecorded());
    }
}
