//! Configuration: a YAML file, overridden by `ATTEST__SECTION__KEY=value` environment variables (value parsed as
//! YAML, so numbers and booleans work), overridden by flags.

use std::path::Path;

use anyhow::Context;
use attest_answer::AnswerConfig;
use attest_embed::server::EmbedServerConfig;
use attest_embed::EmbedderConfig;
use attest_index::EngineConfig;
use attest_router::RouterConfig;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AttestConfig {
    pub router: RouterConfig,
    pub engine: EngineConfig,
    /// Which embedder the router uses (local model, or a remote service behind the circuit breaker).
    pub embedder: EmbedderConfig,
    /// Limits of `attest serve --role embedder`.
    pub embed_server: EmbedServerConfig,
    /// Thresholds of the answer tier.
    pub answer: AnswerConfig,
    /// Raft timing, snapshots and liveness of `attest serve --role meta` (ids and peers come from flags).
    pub meta: attest_meta::MetaConfig,
}

fn set_path(root: &mut Value, path: &[String], value: Value) {
    let mut cur = root;
    for (i, key) in path.iter().enumerate() {
        if !cur.is_object() {
            *cur = Value::Object(Default::default());
        }
        let obj = cur.as_object_mut().expect("object");
        if i + 1 == path.len() {
            obj.insert(key.clone(), value);
            return;
        }
        cur = obj
            .entry(key.clone())
            .or_insert(Value::Object(Default::default()));
    }
}

/// Loads `file` (if any) and applies environment overrides from `env`.
pub fn load(
    file: Option<&Path>,
    env: impl Iterator<Item = (String, String)>,
) -> anyhow::Result<AttestConfig> {
    let mut root: Value = match file {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading config {}", p.display()))?;
            serde_yaml::from_str(&text)
                .with_context(|| format!("parsing config {}", p.display()))?
        }
        None => Value::Object(Default::default()),
    };
    if root.is_null() {
        root = Value::Object(Default::default());
    }
    for (k, v) in env {
        if let Some(rest) = k.strip_prefix("ATTEST__") {
            let path: Vec<String> = rest.split("__").map(|s| s.to_ascii_lowercase()).collect();
            let value: Value = serde_yaml::from_str(&v).unwrap_or(Value::String(v));
            set_path(&mut root, &path, value);
        }
    }
    serde_json::from_value(root).context("invalid configuration")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_overrides_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.yaml");
        std::fs::write(&f, "router:\n  rrf_k: 30\n  max_k: 50\n").unwrap();
        let env = vec![
            ("ATTEST__ROUTER__MAX_K".to_string(), "70".to_string()),
            ("OTHER".to_string(), "1".to_string()),
        ];
        let c = load(Some(&f), env.into_iter()).unwrap();
        assert_eq!(c.router.rrf_k, 30.0);
        assert_eq!(c.router.max_k, 70);
        assert_eq!(c.router.default_k, 10);
    }

    #[test]
    fn unknown_types_are_errors() {
        let env = vec![("ATTEST__ROUTER__MAX_K".to_string(), "lots".to_string())];
        assert!(load(None, env.into_iter()).is_err());
    }

    #[test]
    fn meta_timing_comes_from_the_meta_section_and_the_rest_keeps_its_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.yaml");
        std::fs::write(&f, "meta:\n  snapshot_threshold: 50\n").unwrap();
        let env = vec![(
            "ATTEST__META__WRITE_TIMEOUT_MS".to_string(),
            "900".to_string(),
        )];
        let c = load(Some(&f), env.into_iter()).unwrap();
        let defaults = attest_meta::MetaConfig::default();
        assert_eq!(c.meta.snapshot_threshold, 50);
        assert_eq!(c.meta.write_timeout_ms, 900);
        assert_eq!(c.meta.election_tick, defaults.election_tick);
        assert_ne!(defaults.snapshot_threshold, 50);
    }
}
