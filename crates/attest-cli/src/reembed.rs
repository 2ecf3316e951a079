//! `attest collection reembed NAME --embedder MODEL`: starts a re-embedding through a running router (admin
//! scope) and follows its job — a bar of documents copied — until it switched, failed or was cancelled. Leaving
//! does not stop the job (`attest collection reembed-cancel ID` does).

use std::time::Duration;

use anyhow::bail;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};

use crate::commands::call;

/// How often the job is read while followed.
const POLL: Duration = Duration::from_millis(500);

pub async fn start(
    http: &reqwest::Client,
    server: &str,
    name: &str,
    embedder: &str,
    detach: bool,
    json: bool,
) -> anyhow::Result<()> {
    let url = format!("{server}/v1/collections/{name}/reembed");
    let job = call(http.post(url).json(&json!({"embedder": embedder}))).await?;
    let id = job["id"].as_str().unwrap_or("").to_string();
    if detach {
        if json {
            println!("{job}");
        } else {
            println!("started {id}: re-embedding {name} with {embedder}");
        }
        return Ok(());
    }
    let bar = (!json).then(|| {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} documents")
                .expect("a valid template"),
        );
        bar
    });
    let job = loop {
        let job = call(http.get(format!("{server}/v1/reembed/jobs/{id}"))).await?;
        if let Some(bar) = &bar {
            let (documents, copied) = totals(&job);
            bar.set_length(documents.max(copied));
            bar.set_position(copied);
            bar.set_message(format!("{} pass {}", text(&job["phase"]), job["passes"]));
        }
        if job["state"] != "running" {
            break job;
        }
        tokio::time::sleep(POLL).await;
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if json {
        println!("{job}");
    }
    match job["state"].as_str() {
        Some("succeeded") => {
            if !json {
                let (documents, copied) = totals(&job);
                println!(
                    "re-embedded {name} with {embedder}: {documents} documents ({copied} written to the new index)"
                );
            }
            Ok(())
        }
        Some(state) => bail!(
            "re-embedding {id} {state}: {}",
            job["error"].as_str().unwrap_or("no error recorded")
        ),
        None => bail!("the router answered a job without a state: {job}"),
    }
}

/// (live documents, documents copied) over the job's shards.
fn totals(job: &Value) -> (u64, u64) {
    let shards = job["shards"].as_array().into_iter().flatten();
    shards.fold((0, 0), |(d, c), s| {
        (
            d + s["documents"].as_u64().unwrap_or(0),
            c + s["copied"].as_u64().unwrap_or(0),
        )
    })
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}
