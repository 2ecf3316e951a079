//! The read-back of the history suite (`tests/history.rs`), once every fault is healed: what each replica of
//! each shard holds (read from the replica itself, through its proxy) and what the router serves for each id.

use std::collections::BTreeMap;
use std::time::Duration;

use attest_proto::v1 as pb;
use serde_json::{json, Value};

use super::checker::ReplicaState;
use super::cluster::Cluster;
use super::{doc_id, http, id_word, marker, wait_until, IDS};

/// The value a stored document carries: its metadata `v`, if every chunk has it and the text has its marker.
fn value_in(chunks: &[(String, String)]) -> String {
    let values: Vec<Option<String>> = chunks
        .iter()
        .map(|(_, meta)| {
            let m: Value = serde_json::from_str(meta).unwrap_or(Value::Null);
            m["v"].as_str().map(str::to_string)
        })
        .collect();
    match values.first() {
        Some(Some(v))
            if values.iter().all(|x| x.as_deref() == Some(v))
                && chunks.iter().any(|(text, _)| text.contains(&marker(v))) =>
        {
            v.clone()
        }
        _ => format!("torn:{chunks:?}"),
    }
}

/// Every live document each replica of each shard of `c` holds, read from the replicas themselves (DocVersions,
/// then FetchDocuments): shard → [(replica name, state)]. Err: a replica did not answer.
pub(super) fn replica_states(
    cluster: &Cluster,
) -> Result<BTreeMap<u32, Vec<(String, ReplicaState)>>, String> {
    let state = cluster.status();
    let nodes: BTreeMap<u64, (String, String)> = state["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["id"].as_u64().unwrap(),
                (
                    n["name"].as_str().unwrap().to_string(),
                    n["address"].as_str().unwrap().to_string(),
                ),
            )
        })
        .collect();
    let c = state["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "c")
        .ok_or("no collection c in the status")?;
    let mut out = BTreeMap::new();
    for s in c["placement"].as_array().unwrap() {
        let shard = s["shard"].as_u64().unwrap() as u32;
        let mut replicas = Vec::new();
        for r in s["replicas"].as_array().unwrap() {
            let (name, addr) = nodes[&r["node"].as_u64().unwrap()].clone();
            let held = cluster
                .rt
                .block_on(read_replica(addr, shard))
                .map_err(|e| format!("shard {shard} on {name}: {e}"))?;
            replicas.push((name, held));
        }
        out.insert(shard, replicas);
    }
    Ok(out)
}

async fn read_replica(addr: String, shard: u32) -> Result<ReplicaState, String> {
    let mut client = pb::shard_service_client::ShardServiceClient::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let mut live = Vec::new();
    let mut after = String::new();
    loop {
        let page = client
            .doc_versions(pb::DocVersionsRequest {
                collection: "c".into(),
                shard,
                after_doc_id: after.clone(),
                limit: 0,
                changed_after_seq: 0,
            })
            .await
            .map_err(|e| e.to_string())?
            .into_inner();
        live.extend(page.entries.into_iter().filter(|e| !e.deleted));
        if page.next_after.is_empty() {
            break;
        }
        after = page.next_after;
    }
    let mut state = ReplicaState::new();
    for batch in live.chunks(64) {
        let docs = client
            .fetch_documents(pb::FetchDocumentsRequest {
                collection: "c".into(),
                shard,
                docs: batch
                    .iter()
                    .map(|e| pb::DocRef {
                        tenant: e.tenant.clone(),
                        doc_id: e.doc_id.clone(),
                    })
                    .collect(),
            })
            .await
            .map_err(|e| e.to_string())?
            .into_inner();
        for d in docs.documents {
            let chunks: Vec<(String, String)> = d
                .chunks
                .iter()
                .map(|c| (c.text.clone(), c.metadata_json.clone()))
                .collect();
            state.insert(d.doc_id.clone(), (value_in(&chunks), d.version));
        }
    }
    Ok(state)
}

/// What the router serves for every id: a BM25 search for the id's own word, filtered on the id's metadata key.
pub(super) fn router_reads(cluster: &Cluster) -> BTreeMap<String, Option<String>> {
    let client = http(Duration::from_secs(30));
    let mut out = BTreeMap::new();
    for i in 0..IDS {
        let id = doc_id(i);
        let mut last = String::new();
        let mut answer = None;
        wait_until(
            Duration::from_secs(60),
            &format!("the router to read {id} ({last})"),
            || {
                let r = client
                .post(format!("{}/v1/collections/c/search", cluster.url))
                .json(&json!({"query": id_word(i), "k": 10, "lanes": ["bm25"], "filter": {"key": id}}))
                .send();
                match r {
                    Ok(r) if r.status().as_u16() == 200 => {
                        let b: Value = r.json().unwrap();
                        if b["degraded"] == false {
                            answer = Some(b);
                            return true;
                        }
                        last = b.to_string();
                    }
                    Ok(r) => last = format!("{} {}", r.status(), r.text().unwrap_or_default()),
                    Err(e) => last = e.to_string(),
                }
                false
            },
        );
        let b = answer.unwrap();
        let mut values: Vec<String> = b["hits"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h["doc_id"] == id.as_str())
            .map(|h| {
                value_in(&[(
                    h["text"].as_str().unwrap_or_default().to_string(),
                    h["metadata"].to_string(),
                )])
            })
            .collect();
        values.sort();
        values.dedup();
        let read = match values.len() {
            0 => None,
            1 => values.pop(),
            _ => Some(format!("several:{values:?}")),
        };
        out.insert(id, read);
    }
    out
}
