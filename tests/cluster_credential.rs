//! Issue 15, node to node: `ShardService`, `MetaService` and the embedder's API accept only the cluster
//! credential once one is configured. A cluster of processes (`attest serve --role meta|shard|router --cluster-key K`) works end to end
//! with it — router → shard, shard → meta, router → meta all present K — while a direct call to a shard or to
//! meta is refused without it (UNAUTHENTICATED), with an API key minted by the router (PERMISSION_DENIED) and with
//! the admin key (UNAUTHENTICATED); `attest status` needs it too. `attest dev --admin-key` guards the meta
//! service on its public gRPC listener the same way, with a key of its own.

use crate::common;

use attest_proto::v1 as pb;
use attest_proto::v1::meta_service_client::MetaServiceClient;
use attest_proto::v1::shard_service_client::ShardServiceClient;
use common::{start_role, value_of};
use serde_json::{json, Value};
use tonic::Code;

const ADMIN: &str = "test-admin-key-0123456789abcdef";
const CLUSTER: &str = "test-cluster-key-0123456789abcdef";

/// An HTTP call with a bearer token: (status, body).
fn call(method: &str, url: &str, token: &str, body: Option<&Value>) -> (u16, Value) {
    common::call(method, url, Some(token), body)
}

fn with_token<T>(message: T, token: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(t) = token {
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    request
}

/// The status of `GetClusterState` on meta at `url` presenting `token` (Ok when it answered).
async fn meta_code(url: &str, token: Option<&str>) -> Code {
    let mut client = MetaServiceClient::connect(url.to_string()).await.unwrap();
    let request = with_token(
        pb::GetClusterStateRequest {
            linearizable: false,
        },
        token,
    );
    match client.get_cluster_state(request).await {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    }
}

/// The status of `Stats` of shard 0 of collection `c` on the shard node at `url` presenting `token`.
async fn shard_code(url: &str, token: Option<&str>) -> Code {
    let mut client = ShardServiceClient::connect(url.to_string()).await.unwrap();
    let request = with_token(
        pb::ShardStatsRequest {
            collection: "c".into(),
            shard: 0,
        },
        token,
    );
    match client.stats(request).await {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_services_accept_only_the_cluster_credential() {
    let dir = common::RunDir::new();
    // The embedder is an internal service too: the router embeds through it presenting the cluster key.
    let (_embedder, line) = start_role(
        &[
            "serve",
            "--insecure",
            "--role",
            "embedder",
            "--http",
            "127.0.0.1:0",
            "--cluster-key",
            CLUSTER,
        ],
        dir.path(),
        "embedder",
    );
    let embedder = value_of(&line, "http=");
    let (_meta, line) = start_role(
        &[
            "serve",
            "--insecure",
            "--role",
            "meta",
            "--meta-id",
            "1",
            "--grpc",
            "127.0.0.1:0",
            "--cluster-key",
            CLUSTER,
        ],
        dir.path(),
        "meta",
    );
    let meta = format!("http://{}", value_of(&line, "grpc="));
    // The shard registers with meta and reconciles before it prints its line: meta took its credential.
    let (_shard, line) = start_role(
        &[
            "serve",
            "--insecure",
            "--role",
            "shard",
            "--meta",
            &meta,
            "--grpc",
            "127.0.0.1:0",
            "--cluster-key",
            CLUSTER,
        ],
        dir.path(),
        "shard",
    );
    let shard = format!("http://{}", value_of(&line, "grpc="));
    let (_router, line) = start_role(
        &[
            "serve",
            "--insecure",
            "--role",
            "router",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--meta",
            &meta,
            "--admin-key",
            ADMIN,
            "--cluster-key",
            CLUSTER,
            "--embedder-url",
            &embedder,
        ],
        dir.path(),
        "router",
    );
    let router = value_of(&line, "http=");
    let embedder_url = embedder.clone();

    // End to end through the router: meta (collections, keys) and the shard (ingest, search) take its calls.
    let routes = tokio::task::spawn_blocking(move || {
        let (s, b) = call(
            "POST",
            &format!("{router}/v1/collections"),
            ADMIN,
            Some(&json!({"name": "c", "shards": 1, "replication": 1})),
        );
        assert_eq!(s, 201, "{b}");
        let docs = json!({"documents": [{"id": "d1", "title": "Owls", "text": "The barn owl hunts at night."}]});
        let (s, b) = call(
            "POST",
            &format!("{router}/v1/collections/c/documents"),
            ADMIN,
            Some(&docs),
        );
        assert_eq!(s, 200, "{b}");
        let (s, b) = call(
            "POST",
            &format!("{router}/v1/collections/c/search"),
            ADMIN,
            Some(&json!({"query": "when does the barn owl hunt", "k": 5})),
        );
        assert_eq!(s, 200, "{b}");
        assert_eq!(b["hits"][0]["doc_id"], "d1", "{b}");
        // Embedded by the guarded embedder, not the BM25 fallback.
        assert_eq!(b["fallback_mode"], false, "{b}");
        // Called directly, the embedding API wants the cluster key; its probes do not.
        let embed = json!({"input": ["barn owl"]});
        let url = format!("{embedder_url}/v1/embeddings");
        assert_eq!(call("POST", &url, "", Some(&embed)).0, 401);
        assert_eq!(call("POST", &url, ADMIN, Some(&embed)).0, 401);
        assert_eq!(call("POST", &url, CLUSTER, Some(&embed)).0, 200);
        assert_eq!(call("GET", &format!("{embedder_url}/readyz"), "", None).0, 200);
        let (s, b) = call(
            "POST",
            &format!("{router}/v1/keys"),
            ADMIN,
            Some(&json!({"scopes": ["read", "write", "admin"], "tenants": ["*"]})),
        );
        assert_eq!(s, 201, "{b}");
        b["key"].as_str().unwrap().to_string()
    })
    .await
    .unwrap();
    let api_key = routes.as_str();

    for (name, url) in [("meta", meta.as_str()), ("shard", shard.as_str())] {
        let code = |token| async move {
            if name == "meta" {
                meta_code(url, token).await
            } else {
                shard_code(url, token).await
            }
        };
        assert_eq!(code(Some(CLUSTER)).await, Code::Ok, "{name}: cluster key");
        assert_eq!(code(None).await, Code::Unauthenticated, "{name}: no key");
        assert_eq!(
            code(Some(api_key)).await,
            Code::PermissionDenied,
            "{name}: an admin-scoped API key"
        );
        assert_eq!(
            code(Some(ADMIN)).await,
            Code::Unauthenticated,
            "{name}: the admin key"
        );
        assert_eq!(
            code(Some("test-cluster-key-0123456789abcdeX")).await,
            Code::Unauthenticated,
            "{name}: a wrong cluster key"
        );
    }

    // The operator's `attest status` presents the cluster key too.
    let status = |key: Option<&str>| {
        let mut cmd = std::process::Command::new(common::attest_bin());
        cmd.args(["status", "--json", "--meta", &meta])
            .env_remove("ATTEST_CLUSTER_KEY");
        if let Some(k) = key {
            cmd.env("ATTEST_CLUSTER_KEY", k);
        }
        cmd.output().unwrap()
    };
    let refused = status(None);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("cluster credential"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let ok = status(Some(CLUSTER));
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let report: Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(report["collections"][0]["name"], "c", "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_with_auth_guards_the_meta_service_on_its_public_listener() {
    let dir = common::RunDir::new();
    let (_dev, line) = start_role(
        &[
            "dev",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--admin-key",
            ADMIN,
        ],
        dir.path(),
        "dev",
    );
    let grpc = format!("http://{}", value_of(&line, "grpc="));
    let url = value_of(&line, "http=");
    let key = tokio::task::spawn_blocking(move || {
        // The dev's own roles still reach meta with its key: keys are minted into it, collections listed.
        let (s, b) = call(
            "POST",
            &format!("{url}/v1/keys"),
            ADMIN,
            Some(&json!({"scopes": ["read"], "tenants": ["acme"]})),
        );
        assert_eq!(s, 201, "{b}");
        let (s, listed) = call("GET", &format!("{url}/v1/collections"), ADMIN, None);
        assert_eq!(s, 200, "{listed}");
        b["key"].as_str().unwrap().to_string()
    })
    .await
    .unwrap();
    assert_eq!(meta_code(&grpc, None).await, Code::Unauthenticated);
    assert_eq!(meta_code(&grpc, Some(&key)).await, Code::PermissionDenied);
    assert_eq!(meta_code(&grpc, Some(ADMIN)).await, Code::Unauthenticated);
}
