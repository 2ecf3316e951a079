//! The [`Embedder`] trait.

use crate::embed::error::EmbedError;
use crate::embed::identity::EmbedderIdentity;

/// Turns text into dense vectors. Shared across threads (behind an `Arc`), hence `Send + Sync`.
pub trait Embedder: Send + Sync {
    /// Stable identifier stored with a collection, e.g. "all-minilm-l6-v2".
    fn id(&self) -> &str;
    /// Length of every vector [`Embedder::embed`] returns.
    fn dimension(&self) -> usize;
    /// One L2-normalised vector per input text, in order. Synchronous: callers run it on a blocking thread.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// Number of model tokens in `text` (without special tokens), used by the chunker's budget.
    fn count_tokens(&self, text: &str) -> usize;
    /// What a search query is prefixed with before it is embedded: the instruction an asymmetric model was
    /// trained with (bge's "Represent this sentence for searching relevant passages: "); passages never are.
    /// Empty for a symmetric model.
    fn query_prefix(&self) -> &str {
        ""
    }
    /// What a collection records of this embedder. By default what any embedder knows of itself (a remote
    /// service: its model's name); a local model adds its weights' checksum and its pooling.
    fn identity(&self) -> EmbedderIdentity {
        EmbedderIdentity {
            query_prefix: self.query_prefix().to_string(),
            ..EmbedderIdentity::of_model(self.id(), self.dimension() as u32)
        }
    }
}

impl<E: Embedder + ?Sized> Embedder for std::sync::Arc<E> {
    fn id(&self) -> &str {
        (**self).id()
    }
    fn dimension(&self) -> usize {
        (**self).dimension()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        (**self).embed(texts)
    }
    fn count_tokens(&self, text: &str) -> usize {
        (**self).count_tokens(text)
    }
    fn query_prefix(&self) -> &str {
        (**self).query_prefix()
    }
    fn identity(&self) -> EmbedderIdentity {
        (**self).identity()
    }
}

/// Cosine similarity of two vectors of equal length (0 when either is all zeros).
///
/// # Panics
/// If the lengths differ.
pub fn cosine_similarity(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(
        a.len(),
        b.len(),
        "cosine_similarity of vectors of different lengths"
    );
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        dot += f64::from(x) * f64::from(y);
        na += f64::from(x) * f64::from(x);
        nb += f64::from(y) * f64::from(y);
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    (dot / (na.sqrt() * nb.sqrt())) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_basics() {
        assert!((cosine_similarity(&[1.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-6);
        assert!(cosine_similarity(&[1.0, 0.0], &[0.0, 1.0]).abs() < 1e-6);
        assert!((cosine_similarity(&[1.0, 1.0], &[-2.0, -2.0]) + 1.0).abs() < 1e-6);
        assert_eq!(cosine_similarity(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
    }
}
