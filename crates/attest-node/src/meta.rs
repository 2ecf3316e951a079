//! The meta role: cluster metadata under Raft. Ready once this node knows a leader (a group that has lost its
//! quorum answers 503 saying so, while its gRPC port stays reachable for the repair).

use std::sync::{Arc, OnceLock};

use anyhow::Context;
use attest_proto::meta_client::with_scheme;
use attest_telemetry::ops::ReadinessCheck;

use crate::node_config::{MetaId, NodeConfig};
use crate::plumbing::security::Security;
use crate::plumbing::{finish, listening_suffix, HttpTask, Listeners, Shutdown};

/// `1=http://127.0.0.1:7601,...` → [(1, "http://127.0.0.1:7601"), ...]
pub fn parse_meta_peers(peers: &[String]) -> anyhow::Result<Vec<(u64, String)>> {
    peers
        .iter()
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (id, addr) = p
                .split_once('=')
                .with_context(|| format!("--meta-peers entry `{p}` is not ID=ADDRESS"))?;
            let id: u64 = id
                .trim()
                .parse()
                .with_context(|| format!("--meta-peers entry `{p}`: the id is not a number"))?;
            anyhow::ensure!(id > 0, "--meta-peers entry `{p}`: ids start at 1");
            Ok((id, with_scheme(addr.trim())))
        })
        .collect()
}

/// `host-name-3` → 4: a StatefulSet pod's ordinal plus one (Raft ids start at 1).
pub fn meta_id_of_hostname(hostname: &str) -> anyhow::Result<u64> {
    let hostname = hostname.trim();
    let ordinal = hostname
        .rsplit_once('-')
        .map(|(_, n)| n)
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .with_context(|| {
            format!("--meta-id-from-hostname: host name `{hostname}` does not end in -ORDINAL")
        })?;
    let ordinal: u64 = ordinal
        .parse()
        .with_context(|| format!("--meta-id-from-hostname: ordinal of `{hostname}`"))?;
    Ok(ordinal + 1)
}

/// This meta node's Raft id.
fn meta_id(cfg: &NodeConfig) -> anyhow::Result<u64> {
    match cfg.meta_id {
        MetaId::Given(id) => Ok(id),
        MetaId::FromHostname => {
            let hostname = match std::env::var("HOSTNAME") {
                Ok(h) if !h.trim().is_empty() => h,
                _ => std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .context("--meta-id-from-hostname: reading the host name")?,
            };
            meta_id_of_hostname(&hostname)
        }
        MetaId::Missing => anyhow::bail!(
            "the meta role needs --meta-id (or ATTEST_META_ID, or --meta-id-from-hostname)"
        ),
    }
}

/// Serves a meta node on `listeners.grpc` (and `/healthz`, `/readyz`, `/metrics` on `listeners.http`) until
/// `shutdown`.
pub async fn serve(
    cfg: &NodeConfig,
    listeners: Listeners,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let security = Security::for_node(cfg)?;
    let id = meta_id(cfg)?;
    let listener = listeners
        .grpc
        .context("the meta role needs a gRPC listener")?;
    let advertise = cfg.advertise.clone().unwrap_or_else(|| {
        with_scheme(
            &listener
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default(),
        )
    });
    let mut peers = parse_meta_peers(&cfg.meta_peers)?;
    if peers.is_empty() && cfg.join.is_none() {
        // A single-node group.
        peers.push((id, advertise.clone()));
    }
    let config = attest_meta::MetaConfig {
        id,
        advertise_address: advertise.clone(),
        peers,
        join: cfg.join.as_deref().map(with_scheme),
        bootstrap_if_empty: cfg.bootstrap_if_empty,
        data_dir: cfg.data_dir.clone(),
        cluster_credential: security.credential().clone(),
        disk: cfg.config.disk.clone(),
        ..cfg.config.meta.clone()
    };
    let listener = security.internal(listener);
    let ops = listeners.http.map(|l| security.public(l));
    crate::plumbing::say(format_args!(
        "attest meta listening grpc={}{} id={id} data_dir={}",
        listener.local_addr()?,
        listening_suffix("http", ops.as_ref())?,
        cfg.data_dir.display()
    ));
    // The ops routes install the metrics recorder, so they are made before the node records anything; they
    // answer (503, "opening the Raft log") while the node opens its storage or waits for its peers, then
    // follow the node's own readiness (a leader known).
    let node_readiness: Arc<OnceLock<ReadinessCheck>> = Arc::default();
    let check: ReadinessCheck = {
        let node_readiness = Arc::clone(&node_readiness);
        Arc::new(move || match node_readiness.get() {
            Some(check) => check(),
            None => Err("opening the Raft log".into()),
        })
    };
    crate::plumbing::announce_when_ready(cfg.role, Arc::clone(&check), &shutdown);
    let ops = ops.map(|l| {
        HttpTask::start(
            l,
            attest_telemetry::ops::routes(Arc::clone(&check), None),
            &shutdown,
        )
    });
    let served = async {
        let started = shutdown
            .unless_signalled(attest_meta::MetaNode::start(config, listener))
            .await;
        if let Some(node) = started {
            let node = node?;
            let _ = node_readiness.set(node.readiness());
            shutdown.signalled().await;
            node.shutdown().await?;
        }
        Ok(())
    }
    .await;
    finish(ops, served).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_peers_parse_and_reject_bad_entries() {
        let p = parse_meta_peers(&["1=127.0.0.1:7601".into(), "2=http://h:2".into()]).unwrap();
        assert_eq!(
            p,
            vec![
                (1, "http://127.0.0.1:7601".into()),
                (2, "http://h:2".into())
            ]
        );
        assert!(parse_meta_peers(&["x=h:1".into()]).is_err());
        assert!(parse_meta_peers(&["h:1".into()]).is_err());
        assert!(parse_meta_peers(&["0=h:1".into()]).is_err());
    }

    #[test]
    fn meta_id_is_the_pod_ordinal_plus_one() {
        assert_eq!(meta_id_of_hostname("demo-attest-meta-0").unwrap(), 1);
        assert_eq!(meta_id_of_hostname("demo-attest-meta-12\n").unwrap(), 13);
        for bad in ["meta", "meta-", "meta-x1", "meta-1a", ""] {
            assert!(meta_id_of_hostname(bad).is_err(), "{bad}");
        }
    }
}
