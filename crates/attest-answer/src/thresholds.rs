//! Per-collection abstention thresholds: `attest eval --sweep` writes `<thresholds_dir>/<collection>.json` with
//! the confidence at the chosen operating point of the risk–coverage curve (most coverage under a hallucination
//! budget); the pipeline abstains (`low_confidence`) below it. Without a file, `answer.min_confidence` holds.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::AnswerConfig;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdsFile {
    pub collection: String,
    /// Answer only when the answer's confidence is at least this.
    pub min_confidence: f64,
    pub hallucination_budget: f64,
    /// What the sweep measured at this threshold.
    pub coverage: f64,
    pub hallucination_rate: f64,
    pub data_hash: String,
}

/// Where a collection's file lives (None when no directory is configured).
pub fn path_for(config: &AnswerConfig, collection: &str) -> Option<PathBuf> {
    (!config.thresholds_dir.is_empty())
        .then(|| Path::new(&config.thresholds_dir).join(format!("{collection}.json")))
}

/// The minimum confidence for `collection`: its thresholds file when there is a readable one, else the config's.
/// A file that exists but does not parse is logged and ignored, so a bad file never takes answering down.
pub fn min_confidence(config: &AnswerConfig, collection: &str) -> f64 {
    let Some(path) = path_for(config, collection) else {
        return config.min_confidence;
    };
    let Ok(text) = std::fs::read_to_string(&path) else {
        return config.min_confidence;
    };
    match serde_json::from_str::<ThresholdsFile>(&text) {
        Ok(file) if (0.0..=1.0).contains(&file.min_confidence) => file.min_confidence,
        Ok(file) => {
            tracing::warn!(path = %path.display(), value = file.min_confidence, event = "thresholds_ignored", "min_confidence outside 0..1");
            config.min_confidence
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, event = "thresholds_ignored", "unreadable thresholds file");
            config.min_confidence
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collections_file_overrides_the_config_and_a_bad_one_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = AnswerConfig {
            min_confidence: 0.3,
            ..Default::default()
        };
        assert_eq!(min_confidence(&config, "docs"), 0.3);
        config.thresholds_dir = dir.path().display().to_string();
        assert_eq!(min_confidence(&config, "docs"), 0.3, "no file yet");
        let file = ThresholdsFile {
            collection: "docs".into(),
            min_confidence: 0.72,
            hallucination_budget: 0.02,
            coverage: 0.8,
            hallucination_rate: 0.02,
            data_hash: "x".into(),
        };
        std::fs::write(
            dir.path().join("docs.json"),
            serde_json::to_string(&file).unwrap(),
        )
        .unwrap();
        assert_eq!(min_confidence(&config, "docs"), 0.72);
        assert_eq!(min_confidence(&config, "other"), 0.3);
        std::fs::write(dir.path().join("docs.json"), "{not json").unwrap();
        assert_eq!(min_confidence(&config, "docs"), 0.3);
    }
}
