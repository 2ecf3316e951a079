//! Catch-up between replicas over the real shard gRPC service. A replica snapshot first catches up from its peers
//! when the write quorum is smaller than the replica set: a write acknowledged by the other replica alone is in
//! the snapshot; a snapshot that cannot reach enough peers is refused rather than taken incomplete. And a peer
//! that came back with an empty disk (its log restarted behind the position remembered from before) is listed
//! in full, so the writes it took since are copied rather than skipped.

use std::sync::Arc;

use attest_auth::cluster::ClusterGuard;
use attest_index::{DocumentWrite, EngineConfig, LoggedChunk};
use attest_proto::v1 as pb;
use attest_proto::v1::shard_service_server::ShardService;
use attest_proto::ClusterCredential;
use attest_shard::{ShardNode, ShardNodeConfig, ShardServiceImpl};
use tonic::Request;

const DIM: usize = 8;

fn node(dir: &std::path::Path) -> Arc<ShardNode> {
    let node = ShardNode::open(ShardNodeConfig {
        data_dir: dir.to_path_buf(),
        engine_defaults: EngineConfig::default(),
    })
    .unwrap();
    let config = EngineConfig {
        dimension: DIM,
        ..EngineConfig::default()
    };
    node.ensure("c", 0, config).unwrap();
    node
}

fn doc(i: usize) -> DocumentWrite {
    let mut vector = vec![0.0; DIM];
    vector[i % DIM] = 1.0;
    DocumentWrite {
        doc_id: format!("doc-{i}"),
        tenant: "t".into(),
        chunks: vec![LoggedChunk {
            chunk_id: format!("doc-{i}#0"),
            title: String::new(),
            text: format!("document {i}"),
            metadata_json: "{}".into(),
            vector,
        }],
        // The router's write version, the same on every replica.
        version: 1000 + i as u64,
        near_dup: None,
    }
}

fn request(
    dest: &std::path::Path,
    prefix: &str,
    peers: Vec<String>,
    needed: u32,
) -> Request<pb::SnapshotShardRequest> {
    Request::new(pb::SnapshotShardRequest {
        collection: "c".into(),
        shard: 0,
        destination: dest.to_string_lossy().into_owned(),
        prefix: prefix.into(),
        peers,
        catch_up_needed: needed,
        ..Default::default()
    })
}

fn live_documents(manifest_json: &str) -> u64 {
    serde_json::from_str::<serde_json::Value>(manifest_json).unwrap()["live_documents"]
        .as_u64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_holds_writes_only_its_peer_acknowledged() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (node(&tmp.path().join("a")), node(&tmp.path().join("b")));
    let both: Vec<_> = (0..10).map(doc).collect();
    a.get("c", 0).unwrap().upsert(both.clone()).unwrap();
    b.get("c", 0).unwrap().upsert(both).unwrap();
    // Acknowledged by b alone (a write quorum of 1 of 2).
    b.get("c", 0)
        .unwrap()
        .upsert(vec![doc(10), doc(11)])
        .unwrap();

    let credential = ClusterCredential::none();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let b_address = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(attest_shard::serve(
        Arc::clone(&b),
        listener,
        ClusterGuard::new(&credential),
        async {
            let _ = stopped.await;
        },
    ));
    a.set_peer_credential(credential);
    let dest = tmp.path().join("backups");
    let service = ShardServiceImpl::new(Arc::clone(&a));

    // Without catching up, a's snapshot lacks b's two writes: the case the router must never produce.
    let alone = service
        .snapshot_shard(request(&dest, "alone/c/shard-0", Vec::new(), 0))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(live_documents(&alone.manifest_json), 10);

    let caught_up = service
        .snapshot_shard(request(
            &dest,
            "caught-up/c/shard-0",
            vec![b_address.clone()],
            1,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(live_documents(&caught_up.manifest_json), 12);
    assert!(dest.join("caught-up/c/shard-0/SNAPSHOT.json").exists());

    // A peer that cannot be reached when one is needed: refused, nothing uploaded.
    let refused = service
        .snapshot_shard(request(
            &dest,
            "refused/c/shard-0",
            vec!["http://127.0.0.1:9".into()],
            1,
        ))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(
        refused
            .message()
            .contains("caught up from 0 of the 1 peers"),
        "{refused:?}"
    );
    assert!(!dest.join("refused").exists());

    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

/// Serves `node` on a loopback port; returns its address and the sender that stops it.
fn serve(node: &Arc<ShardNode>) -> (String, tokio::sync::oneshot::Sender<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(attest_shard::serve(
        Arc::clone(node),
        listener,
        ClusterGuard::new(&ClusterCredential::none()),
        async {
            let _ = stopped.await;
        },
    ));
    (address, stop)
}

fn client(
    address: &str,
) -> attest_proto::v1::shard_service_client::ShardServiceClient<attest_proto::credential::Stamped> {
    let credential = ClusterCredential::none();
    let channel = credential
        .channel(address, std::time::Duration::from_secs(2))
        .unwrap();
    attest_proto::v1::shard_service_client::ShardServiceClient::with_interceptor(
        channel, credential,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_whose_log_restarted_is_listed_in_full() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (node(&tmp.path().join("a")), node(&tmp.path().join("b")));
    for i in 0..20 {
        b.get("c", 0).unwrap().upsert(vec![doc(i)]).unwrap();
    }
    let (b_address, stop_b) = serve(&b);
    let a_engine = a.get("c", 0).unwrap();
    let first =
        attest_shard::catchup::catch_up_from(Arc::clone(&a_engine), &client(&b_address), "c", 0, 0)
            .await
            .unwrap();
    assert_eq!(first.copied, 20);
    assert!(first.peer_last_seq >= 20, "{first:?}");
    let _ = stop_b.send(());

    // b comes back with an empty disk and takes three writes: its log is at 3, behind the remembered position.
    let wiped = node(&tmp.path().join("b-wiped"));
    for i in 100..103 {
        wiped.get("c", 0).unwrap().upsert(vec![doc(i)]).unwrap();
    }
    let (wiped_address, stop_wiped) = serve(&wiped);
    let again = attest_shard::catchup::catch_up_from(
        Arc::clone(&a_engine),
        &client(&wiped_address),
        "c",
        0,
        first.peer_last_seq,
    )
    .await
    .unwrap();
    assert_eq!(again.copied, 3, "{again:?}");
    assert!(again.peer_last_seq < first.peer_last_seq, "{again:?}");
    for i in 100..103 {
        assert_eq!(
            a_engine.version_of("t", &format!("doc-{i}")),
            1000 + i as u64
        );
    }
    let _ = stop_wiped.send(());
}
