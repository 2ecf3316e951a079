//! Ingest through the router: the corpus in batches over `RouterService/Ingest`, each document with its vector
//! (the path of a caller that embeds itself), `in_flight` batches outstanding at once, each generated off the
//! async workers. A batch the router refuses as unavailable (a shard still opening) is sent again, unchanged.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use attest_lab::bench::mixture::Mixture;
use attest_proto::v1 as pb;
use futures::StreamExt;
use pb::router_service_client::RouterServiceClient;
use tonic::transport::Channel;

use crate::corpus;

pub const COLLECTION: &str = "scale";

/// What an ingest run did.
pub struct Ingested {
    pub accepted: u64,
    pub near_duplicates: u64,
    pub rejected: u64,
    pub seconds: f64,
    /// The longest any one batch took to be acknowledged, its resends included: how long writes stalled.
    pub slowest_batch_s: f64,
    /// Batches sent again after a refusal (busy, a quorum not reached, a deadline).
    pub resent: u64,
}

/// How long a batch is sent again before the run fails: a bulk loader backs off and resends while the cluster
/// catches up on its seals, and the run reports how long that took (`slowest_batch_s`).
const RESEND_FOR: Duration = Duration::from_secs(600);

/// The batch through the router, sent again on refusals: (the response, resends, seconds until acknowledged).
async fn send(
    router: &mut RouterServiceClient<Channel>,
    docs: Vec<pb::Document>,
) -> anyhow::Result<(pb::IngestResponse, u64, f64)> {
    let started = Instant::now();
    let deadline = started + RESEND_FOR;
    let mut resent = 0;
    loop {
        let request = pb::IngestRequest {
            collection: COLLECTION.into(),
            documents: docs.clone(),
        };
        match router.ingest(request).await {
            Ok(r) => return Ok((r.into_inner(), resent, started.elapsed().as_secs_f64())),
            Err(e)
                if matches!(
                    e.code(),
                    tonic::Code::Unavailable
                        | tonic::Code::ResourceExhausted
                        | tonic::Code::DeadlineExceeded
                ) && Instant::now() < deadline =>
            {
                eprintln!(
                    "ingest: {:?} {} (sending the batch again, {:.0} s after its first send)",
                    e.code(),
                    e.message(),
                    started.elapsed().as_secs_f64()
                );
                resent += 1;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => bail!(
                "ingest: {:?}: {} ({:.0} s after the batch was first sent, {resent} resends)",
                e.code(),
                e.message(),
                started.elapsed().as_secs_f64()
            ),
        }
    }
}

/// Rows `0..n` of `stream` through the router, `batch` documents a request, `in_flight` requests at once.
pub async fn ingest(
    router: &RouterServiceClient<Channel>,
    mixture: &Arc<Mixture>,
    stream: u64,
    n: usize,
    batch: usize,
    in_flight: usize,
) -> anyhow::Result<Ingested> {
    let started = Instant::now();
    let done = Arc::new(AtomicU64::new(0));
    let reporter = {
        let done = Arc::clone(&done);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(30));
            tick.tick().await;
            loop {
                tick.tick().await;
                let d = done.load(Ordering::Relaxed);
                let s = started.elapsed().as_secs_f64();
                eprintln!(
                    "ingest: {d} of {n} documents in {s:.0} s ({:.0}/s)",
                    d as f64 / s
                );
            }
        })
    };
    let results: Vec<anyhow::Result<(pb::IngestResponse, u64, f64)>> =
        futures::stream::iter((0..n).step_by(batch.max(1)))
            .map(|start| {
                let (mut router, mixture, done) =
                    (router.clone(), Arc::clone(mixture), Arc::clone(&done));
                async move {
                    let count = batch.min(n - start);
                    let docs = tokio::task::spawn_blocking(move || {
                        corpus::documents(&mixture, stream, start, count)
                    })
                    .await
                    .context("generating a batch")?;
                    let r = send(&mut router, docs).await?;
                    done.fetch_add(count as u64, Ordering::Relaxed);
                    Ok(r)
                }
            })
            .buffer_unordered(in_flight.max(1))
            .collect()
            .await;
    reporter.abort();
    let mut out = Ingested {
        accepted: 0,
        near_duplicates: 0,
        rejected: 0,
        seconds: started.elapsed().as_secs_f64(),
        slowest_batch_s: 0.0,
        resent: 0,
    };
    for r in results {
        let (r, resent, took) = r?;
        out.resent += resent;
        out.slowest_batch_s = out.slowest_batch_s.max(took);
        out.accepted += u64::from(r.accepted);
        out.near_duplicates += u64::from(r.duplicates);
        out.rejected += r.rejected.len() as u64;
    }
    Ok(out)
}
