//! The local all-MiniLM-L6-v2 embedder under ONNX Runtime: the same model, tokenizer and vectors as
//! [`crate::MiniLmEmbedder`] (candle), 5.5× its passages per second on this CPU (docs/BENCHMARKS.md).
//!
//! The graph (`model.onnx`, written from the installed safetensors by `scripts/onnx/export_minilm.py`) holds the
//! whole embedder, pooling and normalisation included: this side tokenizes, feeds ids and masks, and reads the
//! finished vectors. ONNX Runtime itself is the CPU library of its PyPI wheel, loaded once per process from
//! `embedder.local.onnxruntime_library` (`scripts/install-onnxruntime.sh` installs both); nothing is linked at
//! build time or downloaded at run time, and both files are checked against `onnx.sha256` when loaded.
//!
//! Each of `threads` sessions runs on one core with its own arena; a call spreads its length-sorted batches over
//! them ([`crate::batches`]), and concurrent calls (a query beside an ingest) take whichever session is free.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use ort::environment::Environment;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::Tensor;
use parking_lot::Mutex;

use crate::checksum::read_verified;
use crate::config::LocalEmbedderConfig;
use crate::embedder::Embedder;
use crate::error::EmbedError;
use crate::minilm::{TextSide, MINILM_ID};

/// The graph's file name in the model directory.
pub const ONNX_MODEL_FILE: &str = "model.onnx";
/// The files this runtime needs in the model directory.
pub const ONNX_MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", ONNX_MODEL_FILE];

/// `sha256sum -c` lines for the graph and the runtime library, shared with `scripts/install-onnxruntime.sh`.
const ONNX_CHECKSUMS: &str = include_str!("../onnx.sha256");

/// The graph's input and output names (`scripts/onnx/export_minilm.py`).
const INPUT_IDS: &str = "input_ids";
const ATTENTION_MASK: &str = "attention_mask";
const EMBEDDING: &str = "embedding";

/// ONNX Runtime allows one environment per process: the first library loaded is the one every embedder uses.
/// A failed load is not remembered (a corrected path can be tried next).
static RUNTIME: Mutex<Option<(PathBuf, Environment)>> = Mutex::new(None);

/// Loads (once) and returns the ONNX Runtime environment from `library`, after checking the file's hash.
pub fn runtime(library: &Path) -> Result<Environment, EmbedError> {
    let mut loaded = RUNTIME.lock();
    match &*loaded {
        Some((path, env)) if path == library => Ok(env.clone()),
        Some((path, _)) => Err(EmbedError::InvalidInput(format!(
            "ONNX Runtime is already loaded from {} in this process; {} cannot be loaded beside it",
            path.display(),
            library.display()
        ))),
        None => {
            let env = load_runtime(library)?;
            *loaded = Some((library.to_path_buf(), env.clone()));
            Ok(env)
        }
    }
}

fn load_runtime(library: &Path) -> Result<Environment, EmbedError> {
    if !library.is_file() {
        return Err(EmbedError::RuntimeMissing {
            library: library.to_path_buf(),
        });
    }
    // The whole file is hashed before it is mapped into the process: a library is code, and a truncated or
    // foreign one must not run.
    read_verified(ONNX_CHECKSUMS, library)?;
    let env = ort::init_from(library)
        .map_err(|e| EmbedError::Model(format!("loading {}: {e}", library.display())))?
        .with_name("attest")
        .build()
        .map_err(|e| EmbedError::Model(format!("starting ONNX Runtime: {e}")))?;
    tracing::info!(library = %library.display(), "loaded ONNX Runtime");
    Ok(env)
}

/// One session of a graph per thread; a call takes a free one.
pub(crate) struct SessionPool {
    sessions: Vec<Mutex<Session>>,
    /// Where the next call starts looking for a free session (so concurrent calls spread out).
    next_session: AtomicUsize,
}

impl SessionPool {
    /// `threads` sessions of `graph`, each on one core ([`new_session`]).
    pub(crate) fn new(env: &Environment, graph: &[u8], threads: usize) -> Result<Self, EmbedError> {
        let sessions = (0..threads)
            .map(|_| new_session(env, graph).map(Mutex::new))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SessionPool {
            sessions,
            next_session: AtomicUsize::new(0),
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.sessions.len()
    }

    /// A free session if there is one, else the next one in turn (waiting for it).
    pub(crate) fn session(&self) -> parking_lot::MutexGuard<'_, Session> {
        let start = self.next_session.fetch_add(1, Ordering::Relaxed);
        let n = self.sessions.len();
        (0..n)
            .find_map(|i| self.sessions[(start + i) % n].try_lock())
            .unwrap_or_else(|| self.sessions[start % n].lock())
    }
}

/// What an ONNX embedder loads: its BERT configuration and tokenizers, and a session of its graph per thread.
pub(crate) struct LoadedGraph {
    pub sessions: SessionPool,
    pub text: TextSide,
}

/// Loads the model in `config`'s directory (`config.json` and `tokenizer.json` checked against `text_table`,
/// `model.onnx` against `graph_table`) and ONNX Runtime, and logs it as model `id`.
pub(crate) fn load_graph(
    config: &LocalEmbedderConfig,
    text_table: &str,
    graph_table: &str,
    id: &str,
) -> Result<LoadedGraph, EmbedError> {
    let started = Instant::now();
    let dir = config.dir();
    let text = TextSide::load(&dir, config, &ONNX_MODEL_FILES, text_table)?;
    let env = runtime(&config.onnxruntime_library)?;
    let graph = read_verified(graph_table, &dir.join(ONNX_MODEL_FILE))?;
    let sessions = SessionPool::new(&env, &graph, config.threads)?;
    tracing::info!(
        model = id,
        runtime = "onnx",
        dir = %dir.display(),
        sessions = sessions.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "loaded embedding model"
    );
    Ok(LoadedGraph { sessions, text })
}

/// Token ids and masks of a batch as the `[texts, tokens]` int64 tensors a BERT graph takes.
pub(crate) fn id_tensors(
    text: &TextSide,
    texts: &[&str],
) -> Result<(Tensor<i64>, Tensor<i64>, usize), EmbedError> {
    let (len, ids, mask) = text.encode_batch(texts)?;
    let shape = [texts.len() as i64, len as i64];
    let as_i64 = |v: Vec<u32>| v.into_iter().map(i64::from).collect::<Vec<i64>>();
    let ids = Tensor::from_array((shape, as_i64(ids))).map_err(model_error)?;
    let mask = Tensor::from_array((shape, as_i64(mask))).map_err(model_error)?;
    Ok((ids, mask, len))
}

/// all-MiniLM-L6-v2 (384-d, L2-normalised, mean pooled) run by ONNX Runtime.
pub struct OnnxMiniLmEmbedder {
    sessions: SessionPool,
    text: TextSide,
    config: LocalEmbedderConfig,
    dimension: usize,
}

impl std::fmt::Debug for OnnxMiniLmEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxMiniLmEmbedder")
            .field("id", &MINILM_ID)
            .field("dimension", &self.dimension)
            .field("sessions", &self.sessions.len())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OnnxMiniLmEmbedder {
    /// Loads the graph from `config.model_dir` and ONNX Runtime from `config.onnxruntime_library`.
    ///
    /// Fails with [`EmbedError::ModelMissing`] / [`EmbedError::RuntimeMissing`] when a file is absent,
    /// [`EmbedError::Checksum`] when one does not match its committed hash, [`EmbedError::InvalidInput`] for an
    /// unusable configuration.
    pub fn from_config(config: &LocalEmbedderConfig) -> Result<Self, EmbedError> {
        let loaded = load_graph(config, crate::minilm::CHECKSUMS, ONNX_CHECKSUMS, MINILM_ID)?;
        Ok(Self {
            sessions: loaded.sessions,
            dimension: loaded.text.bert.hidden_size,
            text: loaded.text,
            config: config.clone(),
        })
    }

    /// The settings this embedder runs with.
    pub fn config(&self) -> &LocalEmbedderConfig {
        &self.config
    }

    /// Embeds one batch (all texts padded to the longest; the graph masks the padding).
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let n = texts.len();
        let (ids, mask, _) = id_tensors(&self.text, texts)?;
        let mut session = self.sessions.session();
        let outputs = session
            .run(ort::inputs![INPUT_IDS => ids, ATTENTION_MASK => mask])
            .map_err(model_error)?;
        let (out_shape, values) = outputs[EMBEDDING]
            .try_extract_tensor::<f32>()
            .map_err(model_error)?;
        if out_shape.len() != 2 || out_shape[0] != n as i64 || out_shape[1] != self.dimension as i64
        {
            return Err(EmbedError::Model(format!(
                "the graph returned shape {out_shape:?} for {n} texts of dimension {}",
                self.dimension
            )));
        }
        Ok(values.chunks(self.dimension).map(<[f32]>::to_vec).collect())
    }
}

/// One session of the graph on one core. Intra-op threads do not spin: on a small machine a spinning pool takes
/// the core from the searches and the other sessions beside it.
pub fn new_session(env: &Environment, graph: &[u8]) -> Result<Session, EmbedError> {
    let configured = || -> Result<ort::session::builder::SessionBuilder, ort::Error> {
        Ok(Session::builder(env)?
            .with_optimization_level(GraphOptimizationLevel::Level3)?
            .with_intra_threads(1)?
            .with_inter_threads(1)?
            .with_intra_op_spinning(false)?)
    };
    configured()
        .and_then(|mut builder| builder.commit_from_memory(graph))
        .map_err(model_error)
}

pub(crate) fn model_error(err: ort::Error) -> EmbedError {
    EmbedError::Model(format!("ONNX Runtime: {err}"))
}

impl Embedder for OnnxMiniLmEmbedder {
    fn id(&self) -> &str {
        MINILM_ID
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        crate::minilm::embed_by_length(texts, &self.config, |batch| self.embed_batch(batch))
    }

    fn count_tokens(&self, text: &str) -> usize {
        self.text.count_tokens(text)
    }

    fn identity(&self) -> crate::EmbedderIdentity {
        crate::LocalModel::MiniLm.identity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::expected_sha256;

    #[test]
    fn checksums_cover_the_graph_and_the_library() {
        for file in [ONNX_MODEL_FILE, crate::config::ONNXRUNTIME_LIBRARY] {
            let hash = expected_sha256(ONNX_CHECKSUMS, file).expect(file);
            assert_eq!(hash.len(), 64, "{file}");
        }
    }

    #[test]
    fn a_missing_library_is_named_with_the_install_command() {
        let err = load_runtime(Path::new("/nonexistent/libonnxruntime.so")).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("/nonexistent/libonnxruntime.so")
                && text.contains("install-onnxruntime.sh"),
            "{text}"
        );
    }

    #[test]
    fn a_missing_graph_is_named() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["config.json", "tokenizer.json"] {
            std::fs::write(dir.path().join(f), "{}").unwrap();
        }
        let config = LocalEmbedderConfig {
            model_dir: Some(dir.path().to_path_buf()),
            ..LocalEmbedderConfig::default()
        };
        let err = OnnxMiniLmEmbedder::from_config(&config).unwrap_err();
        assert!(err.to_string().contains(ONNX_MODEL_FILE), "{err}");
    }
}
