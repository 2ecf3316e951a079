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
    /// Texts per forward pass.
    pub batch_size: usize,
    /// Longer inputs are truncated to this many tokens (special tokens included).
    pub max_seq_len: usize,
}

impl Default for LocalEmbedderConfig {
    fn default() -> Self {
        Self {
            model_dir: default_model_dir(),
            batch_size: 32,
            max_seq_len: 256,
        }
    }
}

/// Where the model is looked for by default: `$ATTEST_MODEL_DIR` if set, else
/// `models/all-minilm-l6-v2` under the current directory if that exists, else the repository's
/// `models/all-minilm-l6-v2` (a path fixed at compile time, so tests and dev binaries find it).
pub fn default_model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(MODEL_DIR_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let relative = PathBuf::from(RELATIVE_MODEL_DIR);
    if relative.is_dir() {
        return relative;
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..")
        .join(RELATIVE_MODEL_DIR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_partial_deserialisation() {
        let cfg = LocalEmbedderConfig::default();
        assert_eq!(cfg.batch_size, 32);
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
