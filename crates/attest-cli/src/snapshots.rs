//! `attest snapshot create | list | restore`: cluster snapshots through a running router (admin scope; the
//! caller's key is `ATTEST_API_KEY`). The router coordinates; shard nodes move the files themselves, so a
//! directory destination must be one every shard node and the router reach (shared or mounted).

use std::time::{Duration, Instant};

use std::collections::HashMap;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use serde_json::{json, Value};

use crate::cli::SnapshotCommand;
use crate::commands::{call, client, server_url};

pub async fn command(server: &str, cmd: SnapshotCommand) -> anyhow::Result<()> {
    let server = server_url(server)?;
    let http = client()?;
    match cmd {
        SnapshotCommand::Create {
            to,
            collections,
            id,
            keep,
            json,
        } => {
            // The id is chosen here, so that the progress of this snapshot can be asked for while it runs.
            let id = id.unwrap_or_else(|| {
                format!("snapshot-{}", attest_core::clock::UtcTime::now().compact())
            });
            let destination = absolute(&to)?;
            let body = json!({"destination": destination, "collections": collections, "keep": keep, "id": id});
            let started = Instant::now();
            let create = call(http.post(format!("{server}/v1/snapshots")).json(&body));
            let manifest = if json {
                create.await?
            } else {
                with_progress_bars(&http, &server, &destination, &id, create).await?
            };
            if json {
                println!("{manifest}");
            } else {
                print_manifest(&manifest, Some(started.elapsed()));
            }
        }
        SnapshotCommand::List { from, json } => {
            let listed = call(
                http.get(format!("{server}/v1/snapshots"))
                    .query(&[("from", absolute(&from)?)]),
            )
            .await?;
            if json {
                println!("{listed}");
            } else {
                for s in listed["snapshots"].as_array().into_iter().flatten() {
                    match s["problem"].as_str() {
                        Some(problem) => println!("{}  DAMAGED: {problem}", text(&s["id"])),
                        None => print_manifest(&s["manifest"], None),
                    }
                }
            }
        }
        SnapshotCommand::Delete { from, id } => {
            call(
                http.delete(format!("{server}/v1/snapshots/{id}"))
                    .query(&[("from", absolute(&from)?)]),
            )
            .await?;
            println!("deleted {id}");
        }
        SnapshotCommand::Restore {
            from,
            id,
            collections,
            rename,
            force,
            json,
        } => {
            let rename: serde_json::Map<String, Value> = rename
                .into_iter()
                .map(|(old, new)| (old, json!(new)))
                .collect();
            let body = json!({"source": absolute(&from)?, "id": id, "collections": collections,
                "rename": rename, "force": force});
            let started = Instant::now();
            let restored = with_spinner(
                "restoring",
                json,
                call(
                    http.post(format!("{server}/v1/snapshots/restore"))
                        .json(&body),
                ),
            )
            .await?;
            if json {
                println!("{restored}");
            } else {
                let secs = started.elapsed().as_secs_f64().max(1e-3);
                for c in restored["collections"].as_array().into_iter().flatten() {
                    let bytes = c["bytes"].as_u64().unwrap_or(0);
                    println!(
                        "restored {} (from {}): {} shards x {} replicas, {} documents, {}",
                        text(&c["name"]),
                        text(&c["from"]),
                        c["shards"],
                        c["replication"],
                        c["live_documents"],
                        size(bytes)
                    );
                }
                eprintln!("done in {secs:.1} s");
            }
        }
    }
    Ok(())
}

/// A directory destination as an absolute path: the router and the shard nodes resolve it, not this shell.
fn absolute(location: &str) -> anyhow::Result<String> {
    if location.contains("://") {
        return Ok(location.to_string());
    }
    Ok(std::path::absolute(location)?
        .to_string_lossy()
        .into_owned())
}

/// Runs `work` (the create call) with a bar per replica showing the bytes it has uploaded and its rate, polled
/// from the router every 300 ms.
async fn with_progress_bars<T>(
    http: &reqwest::Client,
    server: &str,
    destination: &str,
    id: &str,
    work: impl std::future::Future<Output = T>,
) -> T {
    let bars = MultiProgress::new();
    let style = ProgressStyle::with_template(
        "{prefix:>24} {spinner} {bytes:>10} {bytes_per_sec:>12} {msg}",
    )
    .expect("static template");
    let mut shown: HashMap<String, ProgressBar> = HashMap::new();
    tokio::pin!(work);
    let mut tick = tokio::time::interval(Duration::from_millis(300));
    loop {
        tokio::select! {
            out = &mut work => {
                for bar in shown.values() {
                    bar.finish_with_message("done");
                }
                return out;
            }
            _ = tick.tick() => {
                let progress = http
                    .get(format!("{server}/v1/snapshots/{id}/progress"))
                    .query(&[("from", destination)])
                    .send()
                    .await;
                let Ok(progress) = progress else { continue };
                let Ok(progress) = progress.json::<Value>().await else { continue };
                for r in progress["replicas"].as_array().into_iter().flatten() {
                    let name = format!("{}/shard-{}", text(&r["collection"]), r["shard"]);
                    let bar = shown.entry(name.clone()).or_insert_with(|| {
                        let bar = bars.add(ProgressBar::no_length().with_style(style.clone()));
                        bar.set_prefix(name);
                        bar
                    });
                    bar.set_position(r["bytes"].as_u64().unwrap_or(0));
                    if r["complete"].as_bool() == Some(true) && !bar.is_finished() {
                        bar.finish_with_message("uploaded");
                    } else {
                        bar.tick();
                    }
                }
            }
        }
    }
}

async fn with_spinner<T>(
    what: &'static str,
    quiet: bool,
    work: impl std::future::Future<Output = T>,
) -> T {
    if quiet {
        return work.await;
    }
    let bar = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("static template"),
    );
    bar.set_message(what);
    bar.enable_steady_tick(Duration::from_millis(120));
    let out = work.await;
    bar.finish_and_clear();
    out
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

fn size(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// The snapshot, one line per shard (bytes and, when it was just made, throughput).
fn print_manifest(m: &Value, took: Option<Duration>) {
    let replicas = || {
        m["collections"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| {
                c["replicas"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(move |r| (c, r))
            })
    };
    let total: u64 = replicas().filter_map(|(_, r)| r["bytes"].as_u64()).sum();
    println!(
        "{}  meta index {}  {} collection(s)  {}",
        text(&m["id"]),
        m["meta_version"],
        m["collections"].as_array().map_or(0, Vec::len),
        size(total)
    );
    for (c, r) in replicas() {
        println!(
            "  {}/shard-{}  node {}  {} documents  {}",
            text(&c["name"]),
            r["shard"],
            r["node_id"],
            r["live_documents"],
            size(r["bytes"].as_u64().unwrap_or(0))
        );
    }
    if let Some(took) = took {
        let secs = took.as_secs_f64().max(1e-3);
        eprintln!(
            "done in {secs:.1} s ({:.1} MiB/s)",
            total as f64 / (1024.0 * 1024.0) / secs
        );
    }
}
