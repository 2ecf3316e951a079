//! Near-duplicate detection lives in the data plane: the shard that stores a document keeps its MinHash sketch
//! in its RocksDB, and every router asks the shards. Two routers over one control plane therefore agree, a
//! restart of everything forgets nothing, detection is per tenant (a rejection never names another tenant's
//! document) and a deleted document's text can be stored again at once. Turned off (`router.check_near_duplicates`),
//! nothing is matched and nothing sketched.

use crate::common;

use std::sync::Arc;

use attest_embed::{build_embedder, Embedder, EmbedderConfig};
use attest_ingest::SourceDocument;
use attest_node::config::AttestConfig;
use attest_node::local::ControlPlane;
use attest_router::{IngestDocument, IngestReport, Router};

const ARTICLE: &str = "The river otter spends most of its day in the water, diving for fish, crayfish and frogs \
    along the banks of slow streams. It dens in burrows dug by other animals and can hold its breath for \
    up to eight minutes while it hunts under the ice in winter.";
/// The same article with a changed case, punctuation and one word: a near-duplicate, not an exact copy.
const ARTICLE_EDITED: &str = "The River Otter spends most of its day in the water; diving for fish, crayfish and \
    frogs along the banks of slow streams! It dens in burrows dug by other animals and can hold its breath \
    for up to eight minutes while it hunts under the ice in winter time.";
const OTHER: &str =
    "Beavers build dams of branches and mud across slow streams, raising the water until a \
    pond deep enough for their lodge forms behind it; a family repairs the dam every night.";

fn doc(id: &str, tenant: Option<&str>, text: &str) -> IngestDocument {
    IngestDocument {
        vector: None,
        source: SourceDocument {
            id: id.into(),
            title: "Animals".into(),
            text: text.into(),
            tenant: tenant.map(str::to_string),
            ..Default::default()
        },
    }
}

async fn ingest(router: &Router, docs: Vec<IngestDocument>) -> IngestReport {
    router.ingest().run("c", docs, "test").await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_routers_agree_on_near_duplicates_and_a_restart_forgets_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let embedder: Arc<dyn Embedder> = build_embedder(&EmbedderConfig::default()).unwrap();
    let cfg = AttestConfig::default();
    let (router_a, plane) =
        common::router_with_collection_c(dir.path(), Arc::clone(&embedder)).await;
    let router_b = plane.router(&cfg, Arc::clone(&embedder)).await.unwrap();

    let r = ingest(&router_a, vec![doc("otter", None, ARTICLE)]).await;
    assert_eq!((r.accepted, r.duplicates.len()), (1, 0), "{r:?}");
    let r = ingest(&router_b, vec![doc("otter-copy", None, ARTICLE_EDITED)]).await;
    assert_eq!(r.accepted, 0, "{r:?}");
    assert_eq!(
        r.duplicates,
        vec![(0, "otter".to_string())],
        "router B sees what A stored"
    );
    // Re-sending a document under its own id is an update, not a duplicate of itself.
    let r = ingest(&router_b, vec![doc("otter", None, ARTICLE_EDITED)]).await;
    assert_eq!((r.accepted, r.duplicates.len()), (1, 0), "{r:?}");

    // Per tenant: tenant b may store the same text, and is never told about the default tenant's document.
    let r = ingest(&router_b, vec![doc("b-otter", Some("b"), ARTICLE)]).await;
    assert_eq!((r.accepted, r.duplicates.len()), (1, 0), "{r:?}");
    let r = ingest(&router_a, vec![doc("b-otter-2", Some("b"), ARTICLE_EDITED)]).await;
    assert_eq!(r.duplicates, vec![(0, "b-otter".to_string())], "{r:?}");

    // Within one batch, and with an unrelated document beside it.
    let r = ingest(
        &router_a,
        vec![
            doc("beaver", None, OTHER),
            doc("beaver-copy", None, &OTHER.to_uppercase()),
        ],
    )
    .await;
    assert_eq!(r.accepted, 1, "{r:?}");
    assert_eq!(r.duplicates, vec![(1, "beaver".to_string())]);

    // A deleted document is forgotten with it: its text can be stored again at once.
    assert!(router_a
        .ingest()
        .delete("c", None, "otter", "test")
        .await
        .unwrap());
    let r = ingest(&router_b, vec![doc("otter-again", None, ARTICLE)]).await;
    assert_eq!((r.accepted, r.duplicates.len()), (1, 0), "{r:?}");

    // Every router and the control plane restart: the shards still know.
    drop((router_a, router_b));
    plane.shutdown().await.unwrap();
    let plane = ControlPlane::start(&cfg, dir.path(), 1, None, Default::default())
        .await
        .unwrap();
    let router_c = plane.router(&cfg, Arc::clone(&embedder)).await.unwrap();
    let r = ingest(&router_c, vec![doc("otter-late", None, ARTICLE_EDITED)]).await;
    assert_eq!(r.duplicates, vec![(0, "otter-again".to_string())], "{r:?}");
    let r = ingest(&router_c, vec![doc("beaver-late", None, OTHER)]).await;
    assert_eq!(r.duplicates, vec![(0, "beaver".to_string())], "{r:?}");
    drop(router_c);
    plane.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_check_off_nothing_is_matched_nor_sketched() {
    let dir = tempfile::tempdir().unwrap();
    let embedder: Arc<dyn Embedder> = build_embedder(&EmbedderConfig::default()).unwrap();
    let (router_on, plane) =
        common::router_with_collection_c(dir.path(), Arc::clone(&embedder)).await;
    let mut off = AttestConfig::default();
    off.router.check_near_duplicates = false;
    let router_off = plane.router(&off, Arc::clone(&embedder)).await.unwrap();

    let r = ingest(&router_on, vec![doc("otter", None, ARTICLE)]).await;
    assert_eq!((r.accepted, r.duplicates.len()), (1, 0), "{r:?}");
    // Off: neither a stored document's edited copy nor a copy within the batch is a duplicate.
    let r = ingest(
        &router_off,
        vec![
            doc("otter-copy", None, ARTICLE_EDITED),
            doc("beaver", None, OTHER),
            doc("beaver-copy", None, &OTHER.to_uppercase()),
        ],
    )
    .await;
    assert_eq!((r.accepted, r.duplicates.len()), (3, 0), "{r:?}");
    // What was written with the check off has no keys: on again, the check matches only what it sketched.
    let r = ingest(&router_on, vec![doc("beaver-late", None, OTHER)]).await;
    assert_eq!((r.accepted, r.duplicates.len()), (1, 0), "{r:?}");
    let r = ingest(&router_on, vec![doc("otter-late", None, ARTICLE_EDITED)]).await;
    assert_eq!(r.duplicates, vec![(0, "otter".to_string())], "{r:?}");
    drop((router_on, router_off));
    plane.shutdown().await.unwrap();
}
