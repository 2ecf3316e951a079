//! `attest snapshot create | list | delete | restore | jobs | cancel`: cluster snapshots through a running router
//! (admin scope; the caller's key is `ATTEST_API_KEY`). Create and restore start jobs that the router runs and
//! meta records; the CLI follows a job (a bar per replica transfer) unless `--detach`ed, and leaving it does not
//! stop the job (`attest snapshot cancel` does). Shard nodes move the files themselves, so a directory
//! destination must be one every shard node and the router reach (shared or mounted) and admit (under their
//! `snapshots.allowed_roots`, `--snapshot-root`).

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
            detach,
        } => {
            let body = json!({"destination": absolute(&to)?, "collections": collections, "keep": keep, "id": id});
            let started = Instant::now();
            let job = call(http.post(format!("{server}/v1/snapshots")).json(&body)).await?;
            if detach {
                return print_started(&job, json);
            }
            let job = follow(&http, &server, job, !json).await?;
            if json {
                println!("{}", job["manifest"]);
            } else {
                print_manifest(&job["manifest"], Some(started.elapsed()));
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
            detach,
        } => {
            let rename: serde_json::Map<String, Value> = rename
                .into_iter()
                .map(|(old, new)| (old, json!(new)))
                .collect();
            let body = json!({"source": absolute(&from)?, "id": id, "collections": collections,
                "rename": rename, "force": force});
            let started = Instant::now();
            let job = call(
                http.post(format!("{server}/v1/snapshots/restore"))
                    .json(&body),
            )
            .await?;
            if detach {
                return print_started(&job, json);
            }
            let job = follow(&http, &server, job, !json).await?;
            let restored = json!({"collections": job["restored"]});
            if json {
                println!("{restored}");
            } else {
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
                eprintln!("done in {:.1} s", started.elapsed().as_secs_f64());
            }
        }
        SnapshotCommand::Jobs {
            id,
            follow: wait,
            json,
        } => {
            let Some(id) = id else {
                let listed = call(http.get(format!("{server}/v1/snapshots/jobs"))).await?;
                if json {
                    println!("{listed}");
                } else {
                    for j in listed["jobs"].as_array().into_iter().flatten() {
                        print_job(j);
                    }
                }
                return Ok(());
            };
            let mut job = call(http.get(format!("{server}/v1/snapshots/jobs/{id}"))).await?;
            if wait {
                job = follow(&http, &server, job, !json).await?;
            }
            if json {
                println!("{job}");
            } else {
                print_job(&job);
            }
        }
        SnapshotCommand::Cancel { id } => {
            let job = call(http.post(format!("{server}/v1/snapshots/jobs/{id}/cancel"))).await?;
            if text(&job["state"]) == "running" {
                println!(
                    "cancelling {id} (the router running it stops at its next progress report)"
                );
            } else {
                println!("{id} already finished: {}", text(&job["state"]));
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

/// Polls the job every 300 ms until it finishes, with a bar per replica transfer (bytes moved, of the replica's
/// total once its node reports it, and the rate) when `bars`. Returns the finished job; an error when it failed
/// or was cancelled.
async fn follow(
    http: &reqwest::Client,
    server: &str,
    mut job: Value,
    bars: bool,
) -> anyhow::Result<Value> {
    let id = text(&job["id"]).to_string();
    let all = MultiProgress::new();
    if !bars {
        all.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let style = ProgressStyle::with_template(
        "{prefix:>28} {spinner} {bytes:>10}/{total_bytes:<10} {bytes_per_sec:>12} {msg}",
    )
    .expect("static template");
    let mut shown: HashMap<String, ProgressBar> = HashMap::new();
    loop {
        for t in job["transfers"].as_array().into_iter().flatten() {
            let name = format!(
                "{}/shard-{} node {}",
                text(&t["collection"]),
                t["shard"],
                t["node_id"]
            );
            let bar = shown
                .entry(format!("{}/{}", t["collection"], t["shard"]))
                .or_insert_with(|| {
                    let bar = all.add(ProgressBar::new(0).with_style(style.clone()));
                    bar.set_prefix(name.clone());
                    bar
                });
            bar.set_prefix(name);
            bar.set_length(t["total_bytes"].as_u64().unwrap_or(0));
            bar.set_position(t["bytes"].as_u64().unwrap_or(0));
            let state = text(&t["state"]);
            if matches!(state, "done" | "failed") && !bar.is_finished() {
                let skipped = t["skipped_bytes"].as_u64().unwrap_or(0);
                bar.finish_with_message(if skipped > 0 {
                    format!("{state}, {} already there", size(skipped))
                } else {
                    state.to_string()
                });
            } else {
                bar.tick();
            }
        }
        match text(&job["state"]) {
            "running" => {}
            "succeeded" => return Ok(job),
            "cancelled" => anyhow::bail!("job {id} was cancelled"),
            _ => anyhow::bail!("job {id} failed: {}", text(&job["error"])),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        job = call(http.get(format!("{server}/v1/snapshots/jobs/{id}"))).await?;
    }
}

/// A job started with `--detach`: its id (what `attest snapshot jobs ID` takes), or the whole job as JSON.
fn print_started(job: &Value, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{job}");
    } else {
        println!("{}", text(&job["id"]));
    }
    Ok(())
}

fn print_job(j: &Value) {
    let transfers = j["transfers"].as_array().map_or(&[][..], Vec::as_slice);
    let sum = |field: &str| -> u64 { transfers.iter().filter_map(|t| t[field].as_u64()).sum() };
    println!(
        "{}  {} {}  {}  {}  {} moved, {} already there{}",
        text(&j["id"]),
        text(&j["kind"]),
        text(&j["snapshot"]),
        text(&j["location"]),
        text(&j["state"]),
        size(sum("bytes")),
        size(sum("skipped_bytes")),
        j["error"]
            .as_str()
            .map(|e| format!("  error: {e}"))
            .unwrap_or_default()
    );
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
