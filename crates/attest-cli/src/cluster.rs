//! The operator's cluster commands, through meta's proto client: `attest status`, `attest cluster rebalance`
//! and `attest meta remove` (`attest cluster drain` is in `drain.rs`).

use attest_node::plumbing::meta_client;
use attest_node::plumbing::security::node_credential;
use serde_json::{json, Value};

use crate::cli::{ClusterCommand, MetaCommand, StatusArgs};
use crate::node_args::credentials;

/// `attest status`.
pub async fn status(args: StatusArgs) -> anyhow::Result<()> {
    let meta = meta_client(&args.meta, node_credential(&credentials(&args.node))?)?;
    let state = meta
        .cluster_state(true)
        .await
        .map_err(|e| anyhow::anyhow!("meta did not answer: {}", e.message()))?;
    let each = meta.status_of_each().await;
    let report = attest_api::router::cluster_http::cluster_json(&state, &each);
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
            let meta = meta_client(&meta, node_credential(&credentials(&node))?)?;
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
            let meta = meta_client(&meta, node_credential(&credentials(&node))?)?;
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
