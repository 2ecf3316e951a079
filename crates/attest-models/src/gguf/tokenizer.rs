//! The tokenizer of a GGUF model, built from the file's own metadata (`tokenizer.ggml.*`), so the model needs
//! no `tokenizer.json` beside it. SmolLM2 is GPT-2-style byte-level BPE (`tokenizer.ggml.model = "gpt2"`,
//! pre-tokenizer `smollm`): digits are split one by one, then the GPT-2 byte-level regex applies; the control
//! tokens (`<|endoftext|>`, `<|im_start|>`, `<|im_end|>`, …) are special tokens matched whole.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::{Content, Value};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, PreTokenizerWrapper, Tokenizer};

use super::LocalLlmError;

/// `tokenizer.ggml.token_type` of a control token (llama.cpp's `LLAMA_TOKEN_TYPE_CONTROL`).
const TOKEN_TYPE_CONTROL: i32 = 3;
/// ... of a user-defined token: matched whole, but ordinary text.
const TOKEN_TYPE_USER_DEFINED: i32 = 4;

/// A byte-level BPE tokenizer with the model's special token ids.
pub struct GgufTokenizer {
    tokenizer: Tokenizer,
    bos_id: Option<u32>,
    eos_id: u32,
    /// The text of every control token, so that passages cannot smuggle one into a prompt.
    control_tokens: Vec<String>,
    special_ids: HashMap<String, u32>,
}

fn meta<'a>(content: &'a Content, key: &str) -> Result<&'a Value, LocalLlmError> {
    content
        .metadata
        .get(key)
        .ok_or_else(|| LocalLlmError::Format(format!("GGUF metadata lacks {key}")))
}

fn bad(key: &str, e: impl std::fmt::Display) -> LocalLlmError {
    LocalLlmError::Format(format!("GGUF metadata {key}: {e}"))
}

fn strings(content: &Content, key: &str) -> Result<Vec<String>, LocalLlmError> {
    meta(content, key)?
        .to_vec()
        .map_err(|e| bad(key, e))?
        .iter()
        .map(|v| v.to_string().cloned().map_err(|e| bad(key, e)))
        .collect()
}

fn token_id(content: &Content, key: &str) -> Result<u32, LocalLlmError> {
    meta(content, key)?.to_u32().map_err(|e| bad(key, e))
}

impl GgufTokenizer {
    /// Builds the tokenizer from `tokenizer.ggml.{model,tokens,merges,token_type,bos_token_id,eos_token_id}`.
    pub fn from_gguf(content: &Content) -> Result<Self, LocalLlmError> {
        let model = meta(content, "tokenizer.ggml.model")?
            .to_string()
            .map_err(|e| bad("tokenizer.ggml.model", e))?;
        if model != "gpt2" {
            return Err(LocalLlmError::Format(format!(
                "tokenizer.ggml.model is {model:?}; only byte-level BPE (\"gpt2\") is supported"
            )));
        }
        let tokens = strings(content, "tokenizer.ggml.tokens")?;
        let merges = strings(content, "tokenizer.ggml.merges")?
            .into_iter()
            .map(|m| {
                m.split_once(' ')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .ok_or_else(|| {
                        bad("tokenizer.ggml.merges", format!("merge {m:?} has no space"))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let types: Vec<i32> = match content.metadata.get("tokenizer.ggml.token_type") {
            Some(v) => v
                .to_vec()
                .map_err(|e| bad("tokenizer.ggml.token_type", e))?
                .iter()
                .map(|t| t.to_i32().map_err(|e| bad("tokenizer.ggml.token_type", e)))
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        let eos_id = token_id(content, "tokenizer.ggml.eos_token_id")?;
        let bos_id = token_id(content, "tokenizer.ggml.bos_token_id").ok();
        if eos_id as usize >= tokens.len() {
            return Err(bad("tokenizer.ggml.eos_token_id", "out of the vocabulary"));
        }

        let vocab: HashMap<String, u32> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| bad("tokenizer.ggml.tokens/merges", e))?;
        let mut tokenizer = Tokenizer::new(bpe);
        // The `smollm` pre-tokenizer of llama.cpp: one digit per piece, then GPT-2's byte-level regex.
        tokenizer.with_pre_tokenizer(Some(PreTokenizerWrapper::Sequence(Sequence::new(vec![
            PreTokenizerWrapper::Digits(Digits::new(true)),
            PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true)),
        ]))));
        tokenizer.with_decoder(Some(ByteLevelDecoder::default()));

        let mut control_tokens = Vec::new();
        let mut added = Vec::new();
        for (token, kind) in tokens.iter().zip(types.iter().copied()) {
            if kind == TOKEN_TYPE_CONTROL {
                control_tokens.push(token.clone());
                added.push(AddedToken::from(token.clone(), true));
            } else if kind == TOKEN_TYPE_USER_DEFINED {
                added.push(AddedToken::from(token.clone(), false));
            }
        }
        // Without a type list, the eos token is still special.
        if control_tokens.is_empty() {
            control_tokens.push(tokens[eos_id as usize].clone());
            added.push(AddedToken::from(tokens[eos_id as usize].clone(), true));
        }
        tokenizer.add_special_tokens(&added);
        let special_ids = control_tokens
            .iter()
            .filter_map(|t| vocab_id(&tokens, t).map(|id| (t.clone(), id)))
            .collect();
        Ok(GgufTokenizer {
            tokenizer,
            bos_id,
            eos_id,
            control_tokens,
            special_ids,
        })
    }

    /// Token ids of `text`; control-token strings in it become their single ids.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LocalLlmError> {
        Ok(self
            .tokenizer
            .encode(text, false)
            .map_err(|e| LocalLlmError::Tokenizer(e.to_string()))?
            .get_ids()
            .to_vec())
    }

    /// `text` cut to at most `max_tokens` tokens, at a token boundary (a whole prefix of its tokens).
    pub fn truncate(&self, text: &str, max_tokens: usize) -> Result<String, LocalLlmError> {
        let encoding = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| LocalLlmError::Tokenizer(e.to_string()))?;
        if encoding.len() <= max_tokens {
            return Ok(text.to_string());
        }
        if max_tokens == 0 {
            return Ok(String::new());
        }
        let end = encoding.get_offsets()[max_tokens - 1].1;
        match text.get(..end) {
            Some(prefix) => Ok(prefix.to_string()),
            None => self.decode(&encoding.get_ids()[..max_tokens], false),
        }
    }

    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String, LocalLlmError> {
        self.tokenizer
            .decode(ids, skip_special)
            .map_err(|e| LocalLlmError::Tokenizer(e.to_string()))
    }

    pub fn bos_id(&self) -> Option<u32> {
        self.bos_id
    }

    pub fn eos_id(&self) -> u32 {
        self.eos_id
    }

    /// The id of a control token such as `<|im_end|>`.
    pub fn special_id(&self, token: &str) -> Option<u32> {
        self.special_ids.get(token).copied()
    }

    /// `text` with every control-token string removed: what goes into a prompt as content.
    pub fn strip_control_tokens(&self, text: &str) -> String {
        let mut out = text.to_string();
        // Removing one token can join two halves of another (`<|im_<|x|>start|>`): repeat until stable.
        loop {
            let before = out.len();
            for token in &self.control_tokens {
                out = out.replace(token.as_str(), "");
            }
            if out.len() == before {
                return out;
            }
        }
    }

    pub fn vocab_size(&self) -> usize {
        self.tokenizer.get_vocab_size(true)
    }
}

fn vocab_id(tokens: &[String], token: &str) -> Option<u32> {
    tokens.iter().position(|t| t == token).map(|i| i as u32)
}
