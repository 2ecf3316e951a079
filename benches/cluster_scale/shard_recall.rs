//! `--shard-recall N`: where a search's recall is lost, on the first N queries. Each replica is asked directly
//! (`ShardService/Search`, dense, k 10) with its own setting and with every list probed; the replica's recall of
//! the latter is what its live estimate measures. One replica of each shard gives the union of the lists the
//! router merges (the most any merge of them can find) and the merge by score redone here, with both settings.

use std::collections::HashMap;

use attest_proto::v1 as pb;
use pb::shard_service_client::ShardServiceClient;
use serde_json::{json, Value};

use crate::common::cluster::Cluster;
use crate::corpus::{self, DIM, K};
use crate::ingest::COLLECTION;
use crate::serve::QuerySet;

async fn search(
    client: &mut ShardServiceClient<tonic::transport::Channel>,
    shard: u32,
    q: &[f32],
    nprobe: Option<u32>,
    tenant: &str,
) -> anyhow::Result<Vec<(String, f32)>> {
    let r = client
        .search(pb::ShardSearchRequest {
            collection: COLLECTION.into(),
            shard,
            tenant: tenant.into(),
            query_vector: q.to_vec(),
            k: K as u32,
            nprobe,
            exact_rescore: true,
            ..Default::default()
        })
        .await?
        .into_inner();
    Ok(r.dense.into_iter().map(|h| (h.doc_id, h.score)).collect())
}

pub async fn measure(
    cluster: &Cluster,
    queries: &QuerySet,
    n: usize,
    nlist: u32,
) -> anyhow::Result<Value> {
    // The tenant the router searches as when a search names none, as the driver's do.
    let tenant = attest_router::RouterConfig::default().default_tenant;
    let mut clients = Vec::new();
    for (shard, replicas) in cluster.placement(COLLECTION)? {
        for (i, addr) in replicas.into_iter().enumerate() {
            clients.push((shard, i, ShardServiceClient::connect(addr).await?));
        }
    }
    let (mut local, mut local_n) = (0.0, 0usize);
    let (mut union_r, mut merged_r, mut merged_wide_r) = (0.0, 0.0, 0.0);
    let n = n.min(queries.truth.len());
    for q in 0..n {
        let v = &queries.vectors[q * DIM..(q + 1) * DIM];
        let mut served_by_shard: HashMap<u32, Vec<(String, f32)>> = HashMap::new();
        let mut wide_by_shard: HashMap<u32, Vec<(String, f32)>> = HashMap::new();
        for (shard, replica, client) in clients.iter_mut() {
            let served = search(client, *shard, v, None, &tenant).await?;
            let wide = search(client, *shard, v, Some(nlist), &tenant).await?;
            let wide_ids: Vec<String> = wide.iter().map(|h| h.0.clone()).collect();
            let served_ids: Vec<String> = served.iter().map(|h| h.0.clone()).collect();
            local += corpus::recall(&served_ids, &wide_ids);
            local_n += 1;
            if *replica == 0 {
                served_by_shard.insert(*shard, served);
                wide_by_shard.insert(*shard, wide);
            }
        }
        let truth = &queries.truth[q];
        // As the router merges a lane: every shard's hits by score, the best K.
        let merge = |lists: &HashMap<u32, Vec<(String, f32)>>| {
            let mut all: Vec<(String, f32)> = lists.values().flatten().cloned().collect();
            all.sort_by(|a, b| b.1.total_cmp(&a.1));
            all.truncate(K);
            all.into_iter().map(|h| h.0).collect::<Vec<_>>()
        };
        let union: Vec<String> = served_by_shard
            .values()
            .flatten()
            .map(|h| h.0.clone())
            .collect();
        union_r += corpus::recall(&union, truth);
        merged_r += corpus::recall(&merge(&served_by_shard), truth);
        merged_wide_r += corpus::recall(&merge(&wide_by_shard), truth);
    }
    let out = json!({
        "step": "shard_recall", "queries": n,
        "local_recall_against_every_list": local / local_n as f64,
        "union_recall": union_r / n as f64,
        "merged_recall": merged_r / n as f64,
        "merged_every_list_recall": merged_wide_r / n as f64,
    });
    eprintln!("{out}");
    Ok(out)
}
