//! A caller that embeds itself, through the real binary (`attest dev`): documents ingested over gRPC with their
//! own vectors are found by a search that brings its own query vector (gRPC and HTTP, dense alone with no text,
//! and hybrid), and a bad vector or a missing text is refused naming the field. The path `benches/cluster_scale`
//! ingests and searches 10M vectors by.

use crate::common;

use attest_proto::v1 as pb;
use attest_proto::v1::router_service_client::RouterServiceClient;
use common::{post, start_dev, unit};
use serde_json::json;
use tonic::Code;

const DIM: usize = 384;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supplied_vectors_are_stored_and_searched_as_given() {
    let data = tempfile::tempdir().unwrap();
    let dev = start_dev(data.path());
    let mut router = RouterServiceClient::connect(dev.grpc.clone())
        .await
        .unwrap();
    router
        .create_collection(pb::CreateCollectionRequest {
            name: "v".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    // Texts of words no other document has (near-duplicate checks see unrelated documents); nothing in them
    // says which vector is whose: only the supplied vector can make `n7` the nearest.
    let docs: Vec<pb::Document> = (0..12)
        .map(|i| pb::Document {
            id: format!("n{i}"),
            text: (0..8)
                .map(|j| format!("t{i}w{j}"))
                .collect::<Vec<_>>()
                .join(" "),
            vector: unit(i),
            ..Default::default()
        })
        .collect();
    let report = router
        .ingest(pb::IngestRequest {
            collection: "v".into(),
            documents: docs,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((report.accepted, report.chunks), (12, 12), "{report:?}");

    let dense = |vector: Vec<f32>, query: &str, lanes: &[&str]| pb::SearchRequest {
        collection: "v".into(),
        query: query.into(),
        k: Some(3),
        lanes: lanes.iter().map(|l| l.to_string()).collect(),
        vector,
        ..Default::default()
    };
    let hits = router
        .search(dense(unit(7), "", &["dense"]))
        .await
        .unwrap()
        .into_inner();
    assert!(!hits.fallback_mode && !hits.degraded, "{hits:?}");
    assert_eq!(hits.hits[0].doc_id, "n7", "{hits:?}");
    let score = hits.hits[0].dense.as_ref().map_or(0.0, |l| l.score);
    assert!(
        score > 0.99,
        "the stored vector is the supplied one: cosine {score}"
    );
    // One lane alone asks each shard for its top k only (not `lane_depth`): still the exact top 3 over both
    // shards, in order.
    let query = unit(7);
    let mut exact: Vec<(f32, String)> = (0..12)
        .map(|i| {
            let cos = unit(i).iter().zip(&query).map(|(a, b)| a * b).sum::<f32>();
            (cos, format!("n{i}"))
        })
        .collect();
    exact.sort_by(|a, b| b.0.total_cmp(&a.0));
    let found: Vec<&str> = hits.hits.iter().map(|h| h.doc_id.as_str()).collect();
    let expected: Vec<&str> = exact[..3].iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(found, expected, "{hits:?}");

    // Hybrid: the vector drives the dense lane, the text the BM25 lane; both lanes rank n7 first.
    let hybrid = router
        .search(dense(unit(7), "t7w3", &[]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(hybrid.hits[0].doc_id, "n7", "{hybrid:?}");
    assert!(hybrid.hits[0].bm25.is_some(), "{hybrid:?}");

    // Over HTTP, the same search with `vector` and an empty query.
    let http_search = |body: serde_json::Value| {
        // The blocking HTTP client of the suites, off the async workers.
        tokio::task::block_in_place(|| post(&format!("{}/v1/collections/v/search", dev.url), &body))
    };
    let (status, body) =
        http_search(json!({"query": "", "lanes": ["dense"], "k": 3, "vector": unit(3)}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["hits"][0]["doc_id"], "n3", "{body}");

    // Refusals name the field.
    let field = |s: &tonic::Status| {
        s.metadata()
            .get("x-attest-field")
            .map(|v| v.to_str().unwrap().to_string())
    };
    let cases = [
        (
            "short vector",
            dense(vec![0.5; 8], "", &["dense"]),
            "vector",
        ),
        ("zero vector", dense(vec![0.0; DIM], "x", &[]), "vector"),
        (
            "no text, no vector",
            dense(Vec::new(), " ", &["dense"]),
            "query",
        ),
        ("BM25 needs a text", dense(unit(1), "", &["bm25"]), "query"),
        ("hybrid needs a text", dense(unit(1), "", &[]), "query"),
    ];
    for (what, request, named) in cases {
        let status = router.search(request).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
        assert_eq!(field(&status).as_deref(), Some(named), "{what}: {status:?}");
    }
    let (status, body) = http_search(json!({"query": "", "vector": [1.0, 2.0]}));
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (400, Some("vector")),
        "{body}"
    );
    let bad_doc = pb::IngestRequest {
        collection: "v".into(),
        documents: vec![pb::Document {
            id: "bad".into(),
            text: "a vector of the wrong size".into(),
            vector: vec![0.1; 10],
            ..Default::default()
        }],
    };
    let status = router.ingest(bad_doc).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(
        field(&status).as_deref(),
        Some("documents[0].vector"),
        "{status:?}"
    );
}
