//! ONNX Runtime, once per process, for every graph Attest runs (the embedders' and the reader's): the CPU library
//! of the PyPI wheel loaded from disk after its hash is checked (`scripts/install-onnxruntime.sh` installs it;
//! nothing is linked at build time or downloaded at run time), sessions that each run on one core, and a pool of
//! them that concurrent calls share.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use ort::environment::Environment;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use parking_lot::Mutex;

use crate::checksum::{read_verified, ChecksumError};

/// `sha256sum -c` lines for ONNX Runtime's library and the MiniLM graph, shared with
/// `scripts/install-onnxruntime.sh`.
pub const ONNX_CHECKSUMS: &str = include_str!("../onnx.sha256");

/// Environment variable naming ONNX Runtime's shared library (the name `ort` and ONNX Runtime's own tools use);
/// overrides `embedder.local.onnxruntime_library`'s default.
pub const ONNXRUNTIME_ENV: &str = "ORT_DYLIB_PATH";

/// ONNX Runtime's directory relative to the repository root (`scripts/install-onnxruntime.sh` installs it).
const RELATIVE_ONNXRUNTIME_DIR: &str = "models/onnxruntime";

/// The library's file name in that directory.
pub const ONNXRUNTIME_LIBRARY: &str = "libonnxruntime.so";

/// Why ONNX Runtime or a graph could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    #[error(
        "ONNX Runtime not found at {}; install it with `scripts/install-onnxruntime.sh` (or `make models`), \
         point `embedder.local.onnxruntime_library` or ORT_DYLIB_PATH at it, or set `embedder.local.runtime: candle`",
        library.display()
    )]
    RuntimeMissing { library: PathBuf },
    #[error(
        "ONNX Runtime is already loaded from {} in this process; {} cannot be loaded beside it",
        loaded.display(),
        wanted.display()
    )]
    AlreadyLoaded { loaded: PathBuf, wanted: PathBuf },
    #[error(transparent)]
    Checksum(#[from] ChecksumError),
    #[error("ONNX Runtime: {0}")]
    Runtime(String),
}

impl From<ort::Error> for OnnxError {
    fn from(err: ort::Error) -> Self {
        OnnxError::Runtime(err.to_string())
    }
}

/// Where ONNX Runtime's library is looked for by default: `$ORT_DYLIB_PATH` if set, else
/// `models/onnxruntime/libonnxruntime.so` found like a shipped model directory ([`crate::locate_repository_dir`]).
pub fn default_onnxruntime_library() -> PathBuf {
    if let Some(path) = std::env::var_os(ONNXRUNTIME_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(path);
    }
    crate::locate_repository_dir(RELATIVE_ONNXRUNTIME_DIR).join(ONNXRUNTIME_LIBRARY)
}

/// ONNX Runtime allows one environment per process: the first library loaded is the one every graph uses.
/// A failed load is not remembered (a corrected path can be tried next).
static RUNTIME: Mutex<Option<(PathBuf, Environment)>> = Mutex::new(None);

/// Loads (once) and returns the ONNX Runtime environment from `library`, after checking the file's hash.
pub fn runtime(library: &Path) -> Result<Environment, OnnxError> {
    let mut loaded = RUNTIME.lock();
    match &*loaded {
        Some((path, env)) if path == library => Ok(env.clone()),
        Some((path, _)) => Err(OnnxError::AlreadyLoaded {
            loaded: path.clone(),
            wanted: library.to_path_buf(),
        }),
        None => {
            let env = load_runtime(library)?;
            *loaded = Some((library.to_path_buf(), env.clone()));
            Ok(env)
        }
    }
}

fn load_runtime(library: &Path) -> Result<Environment, OnnxError> {
    if !library.is_file() {
        return Err(OnnxError::RuntimeMissing {
            library: library.to_path_buf(),
        });
    }
    // The whole file is hashed before it is mapped into the process: a library is code, and a truncated or
    // foreign one must not run.
    read_verified(ONNX_CHECKSUMS, library)?;
    let env = ort::init_from(library)
        .map_err(|e| OnnxError::Runtime(format!("loading {}: {e}", library.display())))?
        .with_name("attest")
        .build()
        .map_err(|e| OnnxError::Runtime(format!("starting ONNX Runtime: {e}")))?;
    tracing::info!(library = %library.display(), "loaded ONNX Runtime");
    Ok(env)
}

/// One session of a graph on one core. Intra-op threads do not spin: on a small machine a spinning pool takes
/// the core from the searches and the other sessions beside it.
pub fn new_session(env: &Environment, graph: &[u8]) -> Result<Session, OnnxError> {
    let configured = || -> Result<ort::session::builder::SessionBuilder, ort::Error> {
        Ok(Session::builder(env)?
            .with_optimization_level(GraphOptimizationLevel::Level3)?
            .with_intra_threads(1)?
            .with_inter_threads(1)?
            .with_intra_op_spinning(false)?)
    };
    Ok(configured().and_then(|mut builder| builder.commit_from_memory(graph))?)
}

/// One session of a graph per thread; a call takes a free one.
pub struct SessionPool {
    sessions: Vec<Mutex<Session>>,
    /// Where the next call starts looking for a free session (so concurrent calls spread out).
    next_session: AtomicUsize,
}

impl SessionPool {
    /// `threads` sessions of `graph` (at least one), each on one core ([`new_session`]).
    pub fn new(env: &Environment, graph: &[u8], threads: usize) -> Result<Self, OnnxError> {
        let sessions = (0..threads.max(1))
            .map(|_| new_session(env, graph).map(Mutex::new))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SessionPool {
            sessions,
            next_session: AtomicUsize::new(0),
        })
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// A free session if there is one, else the next one in turn (waiting for it).
    pub fn session(&self) -> parking_lot::MutexGuard<'_, Session> {
        let start = self.next_session.fetch_add(1, Ordering::Relaxed);
        let n = self.sessions.len();
        (0..n)
            .find_map(|i| self.sessions[(start + i) % n].try_lock())
            .unwrap_or_else(|| self.sessions[start % n].lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::expected_sha256;

    #[test]
    fn checksums_cover_the_minilm_graph_and_the_library() {
        for file in ["model.onnx", ONNXRUNTIME_LIBRARY] {
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
}
