//! A write that waits for a replica's full unsealed backlog holds none of the process's CPU permits, so the
//! node's other replicas keep taking writes meanwhile. (With the wait on a permit, two waiting writes — a process
//! has as many permits as cores — stalled every replica of the node for seconds at a time at 10M.)

use std::sync::Arc;
use std::time::Duration;

use attest_index::maintenance::{self, Work};
use attest_index::{EngineConfig, IvfPqParams};
use attest_proto::v1 as pb;
use attest_proto::v1::shard_service_server::ShardService;
use attest_shard::convert::write_from_proto;
use attest_shard::{ShardNode, ShardNodeConfig, ShardServiceImpl};
use tonic::{Code, Request};

const DIM: usize = 8;

fn chunk(d: usize) -> pb::ChunkRecord {
    pb::ChunkRecord {
        chunk_id: format!("doc-{d}#0"),
        text: format!("document {d}"),
        metadata_json: "{}".into(),
        vector: (0..DIM)
            .map(|i| ((d * 31 + i * 7) % 17) as f32 + 1.0)
            .collect(),
        ..Default::default()
    }
}

fn documents(docs: std::ops::Range<usize>) -> Vec<pb::DocumentChunks> {
    docs.map(|d| pb::DocumentChunks {
        doc_id: format!("doc-{d}"),
        tenant: "t".into(),
        chunks: vec![chunk(d)],
        ..Default::default()
    })
    .collect()
}

fn upsert(shard: u32, docs: std::ops::Range<usize>) -> Request<pb::UpsertRequest> {
    Request::new(pb::UpsertRequest {
        collection: "c".into(),
        shard,
        documents: documents(docs),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_waiting_on_one_replicas_backlog_leave_the_other_replicas_writable() {
    // One CPU permit in this process (this file's only test): a write waiting on it would hold the node.
    assert!(attest_telemetry::cpu::set_threads(1));
    let tmp = tempfile::tempdir().unwrap();
    let node = ShardNode::open(ShardNodeConfig {
        data_dir: tmp.path().to_path_buf(),
        engine_defaults: EngineConfig::default(),
    })
    .unwrap();
    let config = EngineConfig {
        dimension: DIM,
        ivfpq: IvfPqParams {
            nlist: 4,
            m: 2,
            nbits: 4,
            nprobe: 4,
        },
        seal_threshold: 40,
        max_unsealed_rows: 80,
        unsealed_wait_ms: 3_000,
        ..EngineConfig::default()
    };
    node.ensure("c", 0, config.clone()).unwrap();
    node.ensure("c", 1, config).unwrap();
    // No seal runs in this process while its seal slot is held here: shard 0's backlog stays full.
    let seals_held = tokio::task::spawn_blocking(|| maintenance::acquire(Work::Seal))
        .await
        .unwrap();
    node.get("c", 0)
        .unwrap()
        .upsert(documents(0..80).into_iter().map(write_from_proto).collect())
        .unwrap();
    let service = Arc::new(ShardServiceImpl::new(Arc::clone(&node)));
    let waiting: Vec<_> = (0..2)
        .map(|w| {
            let service = Arc::clone(&service);
            tokio::spawn(async move { service.upsert(upsert(0, 100 + w..101 + w)).await })
        })
        .collect();
    // Let both writers reach shard 0's backlog before the write to shard 1.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let other = tokio::time::timeout(Duration::from_secs(2), service.upsert(upsert(1, 0..5)))
        .await
        .expect("the write to shard 1 waited for shard 0's backlog");
    other.unwrap();
    assert!(
        waiting.iter().all(|w| !w.is_finished()),
        "shard 0's writers were still waiting for a seal"
    );
    for w in waiting {
        let refused = w.await.unwrap().unwrap_err();
        assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    }
    drop(seals_held);
    // The seal let go here ends before the test does (a FAISS build still running at exit can crash it).
    let shard0 = node.get("c", 0).unwrap();
    tokio::task::spawn_blocking(move || shard0.seal().unwrap())
        .await
        .unwrap();
    assert_eq!(node.get("c", 0).unwrap().stats().live_documents, 80);
    assert_eq!(node.get("c", 1).unwrap().stats().live_documents, 5);
}
