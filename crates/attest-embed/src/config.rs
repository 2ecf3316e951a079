//! Configuration of the local embedder.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Environment variable naming the model directory; overrides every other default.
pub const MODEL_DIR_ENV: &str = "ATTEST_MODEL_DIR";

/// Model directory relative to the repository root (and to the current directory).
const RELATIVE_MODEL_DIR: &str = "models/all-minilm-l6-v2";

/// Settings of [`crate::MiniLmEmbedder`]. Missing fields deserialise to their defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LocalEmbedderConfig {
    /// Directory holding `model.safetensors`, `tokenizer.json` and `config.json`.
    pub model_dir: PathBuf,
    /// Texts per forward pass. Small: candle pads a batch to its longest text and its batched attention is slower
    /// per text (batch 32 embedded 0.36× the passages per second of 4 × 2 threads, docs/BENCHMARKS.md).
    pub batch_size: usize,
    /// Threads one call spreads its batches over (a forward pass uses one core).
    pub threads: usize,
    /// Longer inputs are truncated to this many tokens (special tokens included).
    pub max_seq_len: usize,
}

impl Default for LocalEmbedderConfig {
    fn default() -> Self {
        Self {
            model_dir: default_model_dir(),
            batch_size: 4,
            threads: 2,
            max_seq_len: 256,
        }
    }
}

/// Where the model is looked for by default: `$ATTEST_MODEL_DIR` if set, else the nearest
/// `models/all-minilm-l6-v2` in the current directory or one of its parents (so the binary finds it from anywhere
/// in a checkout, and tests find it from their crate's directory), else the repository's path fixed at compile time.
pub fn default_model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(MODEL_DIR_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    locate_repository_dir(RELATIVE_MODEL_DIR)
}

/// The nearest `relative` directory in the current directory or its parents; else the one beside this crate's
/// source at compile time. The compile-time path alone is not enough: cargo reuses a build across checkouts that
/// share a target directory, and then that path names a checkout that may be gone.
pub fn locate_repository_dir(relative: &str) -> PathBuf {
    if let Some(found) = std::env::current_dir()
        .ok()
        .and_then(|cwd| nearest_in_ancestors(&cwd, relative))
    {
        return found;
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..")
        .join(relative)
}

/// `start/relative`, or the same under the closest parent of `start` that has it.
fn nearest_in_ancestors(start: &std::path::Path, relative: &str) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|a| a.join(relative))
        .find(|d| d.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_models_directory_above_wins() {
        let root = tempfile::tempdir().unwrap();
        let deep = root.path().join("crates/attest-cli/tests");
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(nearest_in_ancestors(&deep, "models/m"), None);
        std::fs::create_dir_all(root.path().join("models/m")).unwrap();
        assert_eq!(
            nearest_in_ancestors(&deep, "models/m"),
            Some(root.path().join("models/m"))
        );
        std::fs::create_dir_all(root.path().join("crates/models/m")).unwrap();
        assert_eq!(
            nearest_in_ancestors(&deep, "models/m"),
            Some(root.path().join("crates/models/m"))
        );
    }

    #[test]
    fn defaults_and_partial_deserialisation() {
        let cfg = LocalEmbedderConfig::default();
        assert_eq!((cfg.batch_size, cfg.threads), (4, 2));
        assert_eq!(cfg.max_seq_len, 256);
        let parsed: LocalEmbedderConfig =
            serde_json::from_str(r#"{"model_dir": "/x", "batch_size": 8}"#).unwrap();
        assert_eq!(parsed.model_dir, PathBuf::from("/x"));
        assert_eq!(parsed.batch_size, 8);
        assert_eq!(parsed.max_seq_len, 256);
    }

    #[test]
    fn default_dir_ends_with_model_name() {
        assert!(
            default_model_dir().ends_with("all-minilm-l6-v2")
                || std::env::var_os(MODEL_DIR_ENV).is_some()
        );
    }
}
