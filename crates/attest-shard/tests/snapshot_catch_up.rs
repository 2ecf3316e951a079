//! Catch-up between replicas over the real shard gRPC service. A replica snapshot first catches up from its peers
//! when the write quorum is smaller than the replica set: a write acknowledged by the other replica alone is in
//! the snapshot; a snapshot that cannot reach enough peers is refused rather than taken incomplete. And a peer
//! that came back with an empty disk (its log restarted behind the position remembered from before) is listed
//! in full, so the writes it took since are copied rather than skipped; a pass after a complete one reads the
//! peer's changes, not all of its documents; and a pass cut short goes on where it stopped.

use std::sync::Arc;

use attest_auth::cluster::ClusterGuard;
use attest_index::{DocumentWrite, EngineConfig, LoggedChunk};
use attest_proto::v1 as pb;
use attest_proto::v1::shard_service_server::ShardService;
use attest_proto::ClusterCredential;
use attest_shard::catchup::{catch_up_from, Listing, PeerCursor};
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
    a.set_snapshot_destinations(
        attest_snapshot::DestinationPolicy::new(
            std::slice::from_ref(&dest),
            &[a.data_dir().to_path_buf()],
        )
        .unwrap(),
    );
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

/// Node `b` takes documents `0..n` one write each and is served; node `a` catches up from it once, then `b` stops.
/// Returns `a`'s engine, its cursor on `b`, that pass's report, and `b`.
async fn caught_up_once(
    tmp: &std::path::Path,
    n: usize,
) -> (
    Arc<attest_index::ShardEngine>,
    PeerCursor,
    attest_shard::catchup::CatchUpReport,
    Arc<ShardNode>,
) {
    let (a, b) = (node(&tmp.join("a")), node(&tmp.join("b")));
    for i in 0..n {
        b.get("c", 0).unwrap().upsert(vec![doc(i)]).unwrap();
    }
    let (b_address, stop_b) = serve(&b);
    let a_engine = a.get("c", 0).unwrap();
    let mut cursor = PeerCursor::default();
    let first = catch_up_from(
        Arc::clone(&a_engine),
        &client(&b_address),
        "c",
        0,
        &mut cursor,
    )
    .await
    .unwrap();
    assert_eq!(first.copied, n as u64);
    assert!(first.peer_last_seq >= n as u64, "{first:?}");
    let _ = stop_b.send(());
    (a_engine, cursor, first, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_whose_log_restarted_is_listed_in_full() {
    let tmp = tempfile::tempdir().unwrap();
    let (a_engine, mut cursor, first, b) = caught_up_once(tmp.path(), 20).await;

    // b comes back with an empty disk and takes three writes: its log is at 3, behind the remembered position.
    let wiped = node(&tmp.path().join("b-wiped"));
    for i in 100..103 {
        wiped.get("c", 0).unwrap().upsert(vec![doc(i)]).unwrap();
    }
    let (wiped_address, stop_wiped) = serve(&wiped);
    assert_eq!(
        cursor,
        PeerCursor::complete_through(first.peer_last_seq, b.get("c", 0).unwrap().log_id())
    );
    let again = catch_up_from(
        Arc::clone(&a_engine),
        &client(&wiped_address),
        "c",
        0,
        &mut cursor,
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

/// A peer back with an empty disk that has taken *more* writes than the remembered position by the next pass:
/// its log is ahead, not behind, so only its log id tells that the positions are another log's. Listed in full,
/// so the writes it took at positions the cursor had passed are copied too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_writes_a_new_log_is_listed_in_full() {
    let tmp = tempfile::tempdir().unwrap();
    let (a_engine, cursor, first, _) = caught_up_once(tmp.path(), 5).await;

    let wiped = node(&tmp.path().join("b-wiped"));
    for i in 100..120 {
        wiped.get("c", 0).unwrap().upsert(vec![doc(i)]).unwrap();
    }
    let (wiped_address, stop_wiped) = serve(&wiped);
    // Kept and read back, as the cluster agent does across a restart of this node.
    let mut cursor = PeerCursor::from_note(&cursor.to_note()).unwrap();
    let again = catch_up_from(
        Arc::clone(&a_engine),
        &client(&wiped_address),
        "c",
        0,
        &mut cursor,
    )
    .await
    .unwrap();
    assert!(again.peer_last_seq > first.peer_last_seq, "{again:?}");
    assert_eq!(again.copied, 20, "{again:?}");
    assert_eq!(cursor.peer_log_id, wiped.get("c", 0).unwrap().log_id());
    assert_eq!(a_engine.stats().live_documents, 25);
    let _ = stop_wiped.send(());
}

/// The pass after a complete one lists what the peer changed since — overwrites, deletes and new documents, over
/// more than one page — by reading those changes alone: 2,500 documents held, 1,207 changed, two pages (a listing
/// that filtered every document read three, and at 10M documents a whole collection every 10 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incremental_pass_reads_only_the_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (node(&tmp.path().join("a")), node(&tmp.path().join("b")));
    let b_engine = b.get("c", 0).unwrap();
    b_engine.upsert((0..2_500).map(doc).collect()).unwrap();
    let (b_address, stop_b) = serve(&b);
    let a_engine = a.get("c", 0).unwrap();
    let peer = client(&b_address);
    let mut cursor = PeerCursor::default();
    let first = catch_up_from(Arc::clone(&a_engine), &peer, "c", 0, &mut cursor)
        .await
        .unwrap();
    assert_eq!((first.copied, first.pages), (2_500, 3), "{first:?}");

    let overwritten = (0..5).map(|i| DocumentWrite {
        version: 5000 + i as u64,
        ..doc(i)
    });
    b_engine
        .upsert(overwritten.chain((2_500..3_700).map(doc)).collect())
        .unwrap();
    for i in [10, 11] {
        b_engine
            .delete_versioned("t", &format!("doc-{i}"), 6000 + i as u64)
            .unwrap();
    }
    let again = catch_up_from(Arc::clone(&a_engine), &peer, "c", 0, &mut cursor)
        .await
        .unwrap();
    assert_eq!(
        (again.listed, again.copied, again.tombstones, again.pages),
        (1_207, 1_205, 2, 2),
        "{again:?}"
    );
    for (i, version) in [(0, 5000), (4, 5004), (10, 6010), (3_699, 4_699)] {
        assert_eq!(
            a_engine.version_of("t", &format!("doc-{i}")),
            version,
            "doc-{i}"
        );
    }
    assert_eq!(
        a_engine.stats().live_documents,
        b_engine.stats().live_documents
    );
    let idle = catch_up_from(Arc::clone(&a_engine), &peer, "c", 0, &mut cursor)
        .await
        .unwrap();
    assert_eq!((idle.listed, idle.pages), (0, 1), "{idle:?}");
    let _ = stop_b.send(());
}

/// A listing cut short after its first page (what the agent's 30 s timeout does to a full listing of a large
/// replica) goes on after that page in the next pass, rather than from the first again, and ends as a complete one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_cut_short_goes_on_after_its_last_page() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (node(&tmp.path().join("a")), node(&tmp.path().join("b")));
    let b_engine = b.get("c", 0).unwrap();
    b_engine.upsert((0..2_500).map(doc).collect()).unwrap();
    let (b_address, stop_b) = serve(&b);
    let mut peer = client(&b_address);
    let page = peer
        .doc_versions(pb::DocVersionsRequest {
            collection: "c".into(),
            shard: 0,
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    // Where a pass that applied the first page and was dropped during the second leaves its cursor.
    let a_engine = a.get("c", 0).unwrap();
    let first_page: Vec<_> = (0..2_500)
        .map(doc)
        .filter(|d| page.entries.iter().any(|e| e.doc_id == d.doc_id))
        .collect();
    a_engine.upsert(first_page).unwrap();
    let mut cursor = PeerCursor {
        complete_through: 0,
        under_way: Some(Listing {
            changed_after_seq: 0,
            peer_last_seq: page.last_seq,
            after: page.next_after.clone(),
        }),
        peer_log_id: page.log_id,
    };
    let resumed = catch_up_from(Arc::clone(&a_engine), &peer, "c", 0, &mut cursor)
        .await
        .unwrap();
    assert_eq!(
        (resumed.listed, resumed.copied, resumed.pages),
        (1_500, 1_500, 2),
        "{resumed:?}"
    );
    assert_eq!(
        cursor,
        PeerCursor::complete_through(page.last_seq, page.log_id)
    );
    assert_eq!(a_engine.stats().live_documents, 2_500);
    let _ = stop_b.send(());
}
