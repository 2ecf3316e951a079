//! Configuration: a YAML file, overridden by `ATTEST__SECTION__KEY=value` environment variables (value parsed as
//! YAML, so numbers and booleans work), overridden by flags. A config cannot be silently wrong: a key no section
//! knows is an error naming the key and where it came from (the file or the variable), and every section's values
//! are checked at load (each crate states its own rules: `RouterConfig::problems`, ...).

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
    /// Timings of a shard node's cluster agent: heartbeat, reconcile, repair, peer calls (the identity comes from
    /// flags).
    pub agent: attest_shard::ClusterAgentConfig,
    /// Traces over OTLP (off unless `telemetry.otlp.endpoint` is set).
    pub telemetry: attest_telemetry::traces::TelemetryConfig,
    /// The free-space reserve of every role's data directory (shard nodes, meta): below it writes are
    /// refused with `DISK_FULL` (HTTP 507) and reads go on.
    pub disk: attest_core::disk::DiskConfig,
    /// Where directory snapshot destinations are admitted (`allowed_roots`; `--snapshot-root`).
    pub snapshots: attest_snapshot::SnapshotsConfig,
}

impl AttestConfig {
    /// The snapshot destinations a node admits: directories under `snapshots.allowed_roots` (created when
    /// missing), never touching `data_dirs` (the node's data).
    pub fn snapshot_destinations(
        &self,
        data_dirs: &[std::path::PathBuf],
    ) -> anyhow::Result<attest_snapshot::DestinationPolicy> {
        attest_snapshot::DestinationPolicy::new(&self.snapshots.allowed_roots, data_dirs)
            .map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))
    }

    /// Every value that cannot be right, each as `section.key: why (got value)`.
    pub fn problems(&self) -> Vec<String> {
        let mut all = self.router.problems();
        all.extend(self.engine.problems());
        all.extend(self.answer.problems());
        all.extend(self.meta.timing_problems());
        all.extend(self.agent.problems(self.meta.node_timeout_ms));
        all.extend(self.disk.problems());
        let mut all = all.into_vec();
        all.extend(self.telemetry.problems());
        all
    }
}

/// Keys of `input` that the resolved config does not have (serialising the config writes every key it knows,
/// so a key missing there is one no section reads), as dotted paths.
fn unknown_keys(input: &Value, resolved: &Value, prefix: &str, out: &mut Vec<String>) {
    let (Some(input), Some(resolved)) = (input.as_object(), resolved.as_object()) else {
        return;
    };
    for (key, value) in input {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match resolved.get(key) {
            Some(known) => unknown_keys(value, known, &path, out),
            None => out.push(path),
        }
    }
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
    // Where each key path set by the environment came from, to name the variable in an error.
    let mut from_env: Vec<(String, String)> = Vec::new();
    for (k, v) in env {
        if let Some(rest) = k.strip_prefix("ATTEST__") {
            let path: Vec<String> = rest.split("__").map(|s| s.to_ascii_lowercase()).collect();
            let value: Value = serde_yaml::from_str(&v).unwrap_or(Value::String(v));
            from_env.push((path.join("."), k.clone()));
            set_path(&mut root, &path, value);
        }
    }
    let source = |key: &str| {
        from_env
            .iter()
            .find(|(path, _)| path == key || path.starts_with(&format!("{key}.")))
            .map(|(_, var)| format!("environment variable {var}"))
            .or_else(|| file.map(|f| format!("config file {}", f.display())))
            .unwrap_or_else(|| "the configuration".to_string())
    };
    let config: AttestConfig = serde_path_to_error::deserialize(root.clone()).map_err(|e| {
        let key = e.path().to_string();
        anyhow::anyhow!(
            "invalid configuration:\n  {key}: {} (in {})",
            e.inner(),
            source(&key)
        )
    })?;
    let mut unknown = Vec::new();
    unknown_keys(&root, &serde_json::to_value(&config)?, "", &mut unknown);
    let mut errors: Vec<String> = unknown
        .iter()
        .map(|key| format!("{key}: unknown key (in {})", source(key)))
        .collect();
    errors.extend(config.problems());
    anyhow::ensure!(
        errors.is_empty(),
        "invalid configuration:\n  {}",
        errors.join("\n  ")
    );
    Ok(config)
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
        let err = load(None, env.into_iter()).unwrap_err().to_string();
        assert!(
            err.contains("router.max_k: invalid type") && err.contains("ATTEST__ROUTER__MAX_K"),
            "{err}"
        );
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

    #[test]
    fn an_unknown_key_is_an_error_naming_it_and_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.yaml");
        std::fs::write(
            &f,
            "router:\n  max_kk: 50\nanswer:\n  reader:\n    bakend: model\n",
        )
        .unwrap();
        let err = load(Some(&f), std::iter::empty()).unwrap_err().to_string();
        assert!(err.contains("router.max_kk: unknown key"), "{err}");
        assert!(
            err.contains("answer.reader.bakend") || err.contains("bakend"),
            "{err}"
        );
        assert!(err.contains(&f.display().to_string()), "{err}");
        let env = vec![("ATTEST__ROUTER__TOPK".to_string(), "5".to_string())];
        let err = load(None, env.into_iter()).unwrap_err().to_string();
        assert!(
            err.contains("router.topk: unknown key (in environment variable ATTEST__ROUTER__TOPK)"),
            "{err}"
        );
        let err = load(
            None,
            vec![("ATTEST__ROUTERS__MAX_K".to_string(), "5".to_string())].into_iter(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("routers: unknown key (in environment variable ATTEST__ROUTERS__MAX_K)"),
            "{err}"
        );
    }

    #[test]
    fn an_invalid_value_is_an_error_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.yaml");
        std::fs::write(
            &f,
            "engine:\n  ivfpq:\n    nlist: 16\n    nprobe: 64\nanswer:\n  bail_threshold: 1.5\nmeta:\n  write_timeout_ms: 0\n",
        )
        .unwrap();
        let err = load(Some(&f), std::iter::empty()).unwrap_err().to_string();
        for expected in [
            "engine.ivfpq.nprobe: must be at most engine.ivfpq.nlist (16; got 64)",
            "answer.bail_threshold: must be between 0 and 1 (got 1.5)",
            "meta.write_timeout_ms: must be greater than 0 (got 0)",
        ] {
            assert!(err.contains(expected), "{expected} missing from: {err}");
        }
        let env = vec![(
            "ATTEST__AGENT__HEARTBEAT_INTERVAL_MS".to_string(),
            "20000".to_string(),
        )];
        let err = load(None, env.into_iter()).unwrap_err().to_string();
        assert!(
            err.contains("agent.heartbeat_interval_ms: must be less than meta.node_timeout_ms"),
            "{err}"
        );
    }

    #[test]
    fn the_defaults_are_valid_and_every_section_round_trips() {
        let c = load(None, std::iter::empty()).unwrap();
        assert!(c.problems().is_empty(), "{:?}", c.problems());
        let mut unknown = Vec::new();
        let v = serde_json::to_value(&c).unwrap();
        unknown_keys(&v, &v, "", &mut unknown);
        assert!(unknown.is_empty());
    }
}
