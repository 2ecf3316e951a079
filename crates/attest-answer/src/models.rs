//! The models an answer service runs, each loaded once at start-up and handed to every stage that reads with it
//! (issue 72): the reader (the coverage gate, the composer, and the default verifier's support head) and the
//! verifier. One policy for a reader that is missing or fails its checksum: start-up fails and says which file.

use std::sync::Arc;

use crate::config::AnswerConfig;
use crate::error::AnswerError;
use crate::reader::Reader;
use crate::verifier::{verifier_from_config, Verifier};

/// The reader (None: `reader.backend: lexical`) and the verifier an answer service runs.
#[derive(Clone)]
pub struct AnswerModels {
    pub reader: Option<Reader>,
    pub verifier: Arc<dyn Verifier>,
}

impl std::fmt::Debug for AnswerModels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerModels")
            .field("reader", &self.reader.is_some())
            .finish_non_exhaustive()
    }
}

impl AnswerModels {
    /// Loads the reader `config.reader` names (blocking: the weights are read and checked) and builds the
    /// verifier `config.verifier` names over it.
    pub fn load(config: &AnswerConfig) -> Result<Self, AnswerError> {
        let reader = Reader::from_config(&config.reader)
            .map_err(|e| AnswerError::invalid("reader", e.to_string()))?;
        let verifier = verifier_from_config(
            &config.verifier,
            &config.gguf.judge_model(),
            reader.as_ref(),
        );
        Ok(AnswerModels { reader, verifier })
    }

    /// The same reader with another verifier (an evaluation's, or a test's that holds its thresholds fixed).
    pub fn with_verifier(self, verifier: Arc<dyn Verifier>) -> Self {
        AnswerModels { verifier, ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::ReaderBackend;
    use crate::verifier::LearnedVerifier;

    const PASSAGE: &str = "Marie Curie was born in Warsaw in 1867.";

    #[test]
    fn a_missing_reader_fails_start_up_and_names_the_file() {
        let empty = tempfile::tempdir().unwrap();
        let mut config = AnswerConfig::default();
        config.reader.model_dir = Some(empty.path().to_path_buf());
        let err = AnswerModels::load(&config).unwrap_err().to_string();
        assert!(
            err.contains(&empty.path().join("config.json").display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn with_the_reader_off_the_reader_verifier_is_the_learned_one() {
        let mut config = AnswerConfig::default();
        config.reader.backend = ReaderBackend::Lexical;
        let models = AnswerModels::load(&config).unwrap();
        assert!(models.reader.is_none());
        let claim = "Marie Curie was born in Lyon.";
        assert_eq!(
            models.verifier.support("", claim, PASSAGE),
            LearnedVerifier::bundled().support("", claim, PASSAGE)
        );
    }
}
