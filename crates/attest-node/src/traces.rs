//! Which traces a process exports: its role's `telemetry.otlp` settings, under the name `attest-ROLE` and an
//! instance id that tells it apart from its peers (a shard's node name, an advertised address, else its data
//! directory). Read before logging starts (see `attest`'s `main`).

use attest_telemetry::traces::{layer, OtelLayer};

use crate::dev::DevConfig;
use crate::node_config::NodeConfig;

/// The trace layer of `attest serve --role ROLE` (`None`: traces off).
pub fn for_node(cfg: &NodeConfig) -> anyhow::Result<Option<OtelLayer>> {
    let instance = cfg
        .node_name
        .clone()
        .or_else(|| cfg.advertise.clone())
        .unwrap_or_else(|| cfg.data_dir.display().to_string());
    let service = format!("attest-{}", cfg.role.name());
    Ok(layer(&cfg.config.telemetry.otlp, &service, &instance)?)
}

/// The trace layer of `attest dev` (every role in one process, one service).
pub fn for_dev(cfg: &DevConfig) -> anyhow::Result<Option<OtelLayer>> {
    let instance = cfg.data_dir.display().to_string();
    Ok(layer(&cfg.config.telemetry.otlp, "attest-dev", &instance)?)
}
