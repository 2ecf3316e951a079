//! The model runtimes the answer tier and the embedders run, apart from the pipeline that uses them (issue 72): what is loaded, how
//! it is run, and where its shipped files are found — never what an answer does with the result.
//!
//! - [`batches`]: a model over many inputs on a CPU: length-sorted batches spread over threads.
//! - [`bundled`]: the small models committed in `models/` (reranker, verifier, the reader's calibration).
//! - [`chat`]: the one client of an OpenAI-compatible chat endpoint (generator, rewriter, judge).
//! - [`checksum`]: every shipped or installed model file is read through [`checksum::read_verified`], against
//!   the sha256 committed for it.
//! - [`embed`]: the [`embed::Embedder`] trait, and the embedding models run in process (MiniLM on candle or ONNX
//!   Runtime, bge-small on ONNX Runtime).
//! - [`onnx`]: ONNX Runtime loaded once per process from its checked library, and pools of one-core sessions.
//! - [`reader`]: the reader's cross-encoder (committed under `models/reader*/`), run by ONNX Runtime.
//! - [`gguf`]: the local chat model (SmolLM2-135M, GGUF) run with candle — its tokenizer built from the file,
//!   greedy decoding under citation and sentence rules.
//! - [`logistic`]: the logistic models the reranker and the verifier read from committed JSON (fitted by
//!   `attest-lab train`, where the fitting and its metrics live).
//! - [`remote`]: the headers every call to a remote model service carries.
//! - [`locate_repository_dir`]: where a shipped model directory is found from a checkout or an installed binary.

pub mod batches;
pub mod bundled;
pub mod chat;
pub mod checksum;
pub mod embed;
pub mod gguf;
pub mod logistic;
pub mod onnx;
pub mod reader;
pub mod remote;

use std::path::{Path, PathBuf};

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
fn nearest_in_ancestors(start: &Path, relative: &str) -> Option<PathBuf> {
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
}
