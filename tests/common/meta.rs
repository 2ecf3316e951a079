//! A meta node and shard nodes in process, for the suites that drive the cluster agent directly.

use std::sync::Arc;
use std::time::{Duration, Instant};

use attest_meta::{MetaConfig, MetaNode};
use attest_proto::v1 as pb;
use attest_proto::MetaClient;
use attest_shard::ShardNode;

/// A one-node meta in `dir` (its config changed by `configure` first), served on loopback, and a client of it.
pub async fn start_meta(
    dir: &std::path::Path,
    configure: impl FnOnce(&mut MetaConfig),
) -> (MetaNode, MetaClient) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let mut config = MetaConfig::new(1, address.clone(), dir.to_path_buf());
    configure(&mut config);
    let node = MetaNode::start(config, listener).await.unwrap();
    (node, MetaClient::new([address.as_str()]).unwrap())
}

/// Creates collection `c` of `dimension` (one shard, two replicas) and waits until each of `nodes` holds its
/// replica.
pub async fn create_c_on(meta: &MetaClient, dimension: u32, nodes: &[&Arc<ShardNode>]) {
    meta.create_collection(pb::MetaCreateCollectionRequest {
        name: "c".into(),
        shards: 1,
        replication: 2,
        spec: Some(pb::CollectionSpec {
            dimension,
            index: None,
            seal_threshold: 0,
            embedder: "test".into(),
            embedder_identity: None,
        }),
        chunking_json: String::new(),
        thresholds_json: String::new(),
        ..Default::default()
    })
    .await
    .unwrap();
    let created = Instant::now();
    while nodes.iter().any(|n| n.get("c", 0).is_none()) {
        assert!(
            created.elapsed() < Duration::from_secs(10),
            "replicas never created"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
