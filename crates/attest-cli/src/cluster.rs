//! The cluster side of the binary: `attest serve --role meta`, the shard and router roles joined to meta
//! (`--meta`), `attest status`, `attest cluster rebalance` and `attest meta remove`. Meta is reached only through the proto client.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use attest_auth::cluster::ClusterGuard;
use attest_proto::meta_client::with_scheme;
use attest_proto::{ClusterCredential, MetaClient};
use attest_router::topology::ClusterView;
use attest_router::Router;
use attest_shard::{ClusterAgentConfig, ShardNode};
use serde_json::{json, Value};

use crate::cli::{ClusterCommand, MetaCommand, ServeArgs, StatusArgs};
use crate::config::AttestConfig;
use crate::security::Security;

/// A client of the meta group at `addresses` presenting `credential`.
pub(crate) fn meta_client(
    addresses: &[String],
    credential: ClusterCredential,
) -> anyhow::Result<MetaClient> {
    anyhow::ensure!(!addresses.is_empty(), "no meta address given (--meta)");
    MetaClient::with_credential(addresses, credential)
        .map_err(|e| anyhow::anyhow!("bad meta address: {e}"))
}

/// The credential of `--cluster-key` / `ATTEST_CLUSTER_KEY` (none without one).
pub(crate) fn cluster_credential(cluster_key: Option<&str>) -> anyhow::Result<ClusterCredential> {
    cluster_key.map_or(Ok(ClusterCredential::none()), |k| {
        ClusterCredential::new(k).map_err(|e| anyhow::anyhow!("--cluster-key: {e}"))
    })
}

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

/// This meta node's Raft id: `--meta-id` (`ATTEST_META_ID`) or `--meta-id-from-hostname`.
fn meta_id(args: &ServeArgs) -> anyhow::Result<u64> {
    match (args.meta_id, args.meta_id_from_hostname) {
        (Some(_), true) => {
            anyhow::bail!("give --meta-id (ATTEST_META_ID) or --meta-id-from-hostname, not both")
        }
        (Some(id), false) => Ok(id),
        (None, true) => {
            let hostname = match std::env::var("HOSTNAME") {
                Ok(h) if !h.trim().is_empty() => h,
                _ => std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .context("--meta-id-from-hostname: reading the host name")?,
            };
            meta_id_of_hostname(&hostname)
        }
        (None, false) => anyhow::bail!(
            "the meta role needs --meta-id (or ATTEST_META_ID, or --meta-id-from-hostname)"
        ),
    }
}

/// `attest serve --role meta`.
pub async fn serve_meta(
    args: &ServeArgs,
    cfg: &AttestConfig,
    security: &Security,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let id = meta_id(args)?;
    let listen = args.grpc.as_deref().unwrap_or("127.0.0.1:7601");
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let advertise = args.advertise.clone().unwrap_or_else(|| {
        with_scheme(
            &listener
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default(),
        )
    });
    let mut peers = parse_meta_peers(&args.meta_peers)?;
    if peers.is_empty() && args.join.is_none() {
        // A single-node group.
        peers.push((id, advertise.clone()));
    }
    let config = attest_meta::MetaConfig {
        id,
        advertise_address: advertise.clone(),
        peers,
        join: args.join.as_deref().map(with_scheme),
        bootstrap_if_empty: args.bootstrap_if_empty,
        data_dir: args.data_dir.clone(),
        cluster_credential: security.credential().clone(),
        ..cfg.meta.clone()
    };
    let listener = security.internal(listener);
    let ops = crate::roles::bind_optional(args.http.as_deref())
        .await?
        .map(|l| security.public(l));
    println!(
        "attest meta listening grpc={}{} id={id} data_dir={}",
        listener.local_addr()?,
        match &ops {
            Some(l) => format!(" http={}", crate::roles::url_of(l)?),
            None => String::new(),
        },
        args.data_dir.display()
    );
    // `--http`: `/healthz`, `/readyz` (the node runs; readiness never waits for a quorum, or a cluster that lost
    // one could not be reached to repair it) and `/metrics` (the Raft gauges and counters). The routes install
    // the metrics recorder, so they are made before the node records anything.
    let ops = ops.map(|l| {
        (
            l,
            attest_telemetry::ops::routes(attest_telemetry::ops::always_ready(), None),
        )
    });
    let node = attest_meta::MetaNode::start(config, listener).await?;
    let ops_stop = tokio::sync::oneshot::channel::<()>();
    let ops_task = ops.map(|(l, routes)| {
        let stopped = ops_stop.1;
        tokio::spawn(async move {
            attest_telemetry::listener::serve_http(l, routes, async {
                let _ = stopped.await;
            })
            .await
        })
    });
    shutdown.await;
    let _ = ops_stop.0.send(());
    if let Some(task) = ops_task {
        task.await??;
    }
    node.shutdown().await
}

/// The shard role joined to meta: takes its port, registers, reconciles with the shard map (creating its replicas,
/// catching up from peers) and only then starts serving.
pub async fn serve_shard_in_cluster(
    args: &ServeArgs,
    cfg: &AttestConfig,
    security: &Security,
    node: Arc<ShardNode>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let listen = args.grpc.as_deref().unwrap_or("127.0.0.1:7801").to_string();
    // The port is taken before the node registers, so a node that cannot listen never advertises an address
    // nobody answers on. Until catch-up is done, connections wait in the backlog (callers hedge or time out).
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let agent = ClusterAgentConfig {
        name: args
            .node_name
            .clone()
            .unwrap_or_else(|| node_name_from(&args.data_dir)),
        // The bound address, so `--grpc 127.0.0.1:0` advertises the port it got.
        advertise: args.advertise.clone().map_or_else(
            || listener.local_addr().map(|a| with_scheme(&a.to_string())),
            Ok,
        )?,
        zone: args.zone.clone(),
        ..cfg.agent.clone()
    };
    let meta = meta_client(&args.meta, security.credential().clone())?;
    let listener = security.internal(listener);
    let guard = ClusterGuard::for_listener(meta.credential(), &listener);
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let agent_task = tokio::spawn(attest_shard::run_cluster_agent(
        Arc::clone(&node),
        meta,
        agent,
        ready_tx,
        crate::roles::until(stop.clone()),
    ));
    let ops = crate::roles::bind_optional(args.http.as_deref())
        .await?
        .map(|l| security.public(l));
    let node_id = ready_rx
        .await
        .context("the cluster agent stopped before the node was ready")?;
    println!(
        "attest shard listening grpc={}{} node_id={node_id} meta={} data_dir={}",
        listener.local_addr()?,
        match &ops {
            Some(l) => format!(" http={}", crate::roles::url_of(l)?),
            None => String::new(),
        },
        args.meta.join(","),
        args.data_dir.display()
    );
    // `--http`: health, readiness and `/metrics`, as a shard outside a cluster serves them.
    let serve_ops = async {
        match ops {
            Some(l) => {
                attest_shard::serve_ops(Arc::clone(&node), l, crate::roles::until(stop.clone()))
                    .await
            }
            None => Ok(()),
        }
    };
    let (served, ops_served) = tokio::join!(
        attest_shard::serve(
            Arc::clone(&node),
            listener,
            guard,
            crate::roles::until(stop.clone())
        ),
        serve_ops
    );
    agent_task.await??;
    served?;
    ops_served
}

fn node_name_from(dir: &Path) -> String {
    std::fs::canonicalize(dir)
        .unwrap_or_else(|_| dir.to_path_buf())
        .display()
        .to_string()
}

/// The router of a cluster: the shard map from meta, re-read every `meta_poll_ms`.
pub async fn cluster_router(
    args: &ServeArgs,
    cfg: &AttestConfig,
    security: &Security,
    embedder: Arc<dyn attest_embed::Embedder>,
) -> anyhow::Result<Arc<Router>> {
    let meta = meta_client(&args.meta, security.credential().clone())?;
    // Not a wait for meta: the router listens at once, `/readyz` says what it waits for, and the watch (which
    // logs each failed read) brings the shard map in when meta answers.
    let view = ClusterView::unconnected(meta, cfg.router.replicas.clone());
    tracing::info!(meta = %args.meta.join(","), event = "router_waiting_for_meta",
        "not ready until the cluster state is read from meta");
    view.spawn_watch(Duration::from_millis(cfg.router.meta_poll_ms));
    Ok(Arc::new(Router::new(cfg.router.clone(), view, embedder)))
}

/// `attest status`.
pub async fn status(args: StatusArgs) -> anyhow::Result<()> {
    let meta = meta_client(&args.meta, crate::security::node_credential(&args.node)?)?;
    let state = meta
        .cluster_state(true)
        .await
        .map_err(|e| anyhow::anyhow!("meta did not answer: {}", e.message()))?;
    let each = meta.status_of_each().await;
    let report = attest_router::cluster_http::cluster_json(&state, &each);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "raft leader: {}  term: {}  commit index: {}",
        report["leader"], report["term"], report["commit_index"]
    );
    for m in report["meta"].as_array().into_iter().flatten() {
        println!(
            "  meta {:<28} id={:<3} {}",
            m["address"].as_str().unwrap_or(""),
            m["id"],
            if m["reachable"] == true {
                m["raft_role"].as_str().unwrap_or("").to_string()
            } else {
                format!("unreachable ({})", m["error"].as_str().unwrap_or(""))
            }
        );
    }
    println!("nodes:");
    for n in report["nodes"].as_array().into_iter().flatten() {
        let drain = match n["draining"].as_str() {
            Some("none") | None => String::new(),
            Some(kind) => format!(" draining ({kind})"),
        };
        println!(
            "  {:<4} {:<7} {:<28} {:<6} {}{drain}",
            n["id"],
            n["role"].as_str().unwrap_or(""),
            n["address"].as_str().unwrap_or(""),
            if n["alive"] == true { "alive" } else { "DOWN" },
            n["zone"].as_str().unwrap_or("")
        );
    }
    for c in report["collections"].as_array().into_iter().flatten() {
        println!(
            "collection {} ({} shards x {} replicas):",
            c["name"].as_str().unwrap_or(""),
            c["shards"],
            c["replication"]
        );
        for s in c["placement"].as_array().into_iter().flatten() {
            let replicas: Vec<String> = s["replicas"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| {
                    format!(
                        "node {} {}{}",
                        r["node"],
                        r["state"].as_str().unwrap_or(""),
                        if r["alive"] == true { "" } else { " DOWN" }
                    )
                })
                .collect();
            println!(
                "  shard {:<3} {:<9} {}",
                s["shard"],
                s["health"].as_str().unwrap_or(""),
                replicas.join(", ")
            );
        }
    }
    Ok(())
}

/// `attest meta ...`.
pub async fn meta_command(cmd: MetaCommand) -> anyhow::Result<()> {
    match cmd {
        MetaCommand::Remove {
            id,
            meta,
            node,
            json,
        } => {
            anyhow::ensure!(id > 0, "meta ids start at 1");
            let meta = meta_client(&meta, crate::security::node_credential(&node)?)?;
            let voters = meta.remove_meta_node(id).await.map_err(|e| {
                anyhow::anyhow!("removing meta voter {id} refused: {}", e.message())
            })?;
            let voters: Vec<Value> = voters
                .iter()
                .map(|v| json!({"id": v.id, "address": v.address}))
                .collect();
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&json!({"removed": id, "voters": voters}))?
                );
            } else {
                println!("meta voter {id} removed; voters now:");
                for v in &voters {
                    println!("  {:<3} {}", v["id"], v["address"].as_str().unwrap_or(""));
                }
            }
            Ok(())
        }
    }
}

/// `attest cluster ...`.
pub async fn command(cmd: ClusterCommand) -> anyhow::Result<()> {
    match cmd {
        ClusterCommand::Rebalance {
            meta,
            node,
            dry_run,
            json,
        } => {
            let meta = meta_client(&meta, crate::security::node_credential(&node)?)?;
            let plan = meta
                .rebalance(dry_run)
                .await
                .map_err(|e| anyhow::anyhow!("rebalance refused: {}", e.message()))?;
            let moves: Vec<Value> = plan
                .iter()
                .map(|m| json!({"collection": m.collection, "shard": m.shard, "from": m.from_node, "to": m.to_node}))
                .collect();
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&json!({"dry_run": dry_run, "moves": moves}))?
                );
            } else if moves.is_empty() {
                println!("balanced: no replica to move");
            } else {
                for m in &plan {
                    println!(
                        "{} {}/{}: node {} -> node {}",
                        if dry_run { "would move" } else { "moving" },
                        m.collection,
                        m.shard,
                        m.from_node,
                        m.to_node
                    );
                }
                if !dry_run {
                    println!("the new copies catch up from their peers; `attest status` shows them turn active");
                }
            }
            Ok(())
        }
        ClusterCommand::Drain(args) => crate::drain::drain(args).await,
    }
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
