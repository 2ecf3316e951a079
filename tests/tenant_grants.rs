//! Issue 69 through the real binary (`attest dev --admin-key`): an admin key limited to some tenants acts on a
//! whole collection — drop, thresholds, maintenance, the cluster view — only when its grant covers every tenant
//! with documents there, so another tenant's documents survive it; expiry and revocation are part of a key's
//! grant (a key mints none that outlives it, and a key stops working when the key that minted it is revoked);
//! and the key and threshold bodies are bounded (`expires_in` ≤ 10 years, thresholds an object with a short
//! `data_hash`), a malformed key body audited like any refused mint. Logs of a failed run are kept (RunDir).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use attest_proto::v1 as pb;
use attest_proto::v1::router_service_client::RouterServiceClient;
use serde_json::{json, Value};

use crate::common::{call, start_with_env, value_of, Logs, Proc, RunDir};

const ADMIN: &str = "tenant-grants-admin-key-0123456789";

struct Dev {
    _proc: Proc,
    url: String,
    grpc: String,
    log: std::path::PathBuf,
}

fn start_dev(dir: &RunDir) -> Dev {
    let log = dir.path().join("dev.log");
    let (proc, line) = start_with_env(
        &[
            "dev",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--admin-key",
            ADMIN,
        ],
        Some(&dir.path().join("data")),
        Logs::InfoTo(&log),
        &[],
    );
    Dev {
        _proc: proc,
        url: value_of(&line, "http="),
        grpc: format!("http://{}", value_of(&line, "grpc=")),
        log,
    }
}

impl Dev {
    fn call(&self, method: &str, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
        call(
            method,
            &format!("{}{path}", self.url),
            Some(token),
            body.as_ref(),
        )
    }

    /// Mints a key with `grant` as `by`; returns (id, key).
    fn mint(&self, by: &str, grant: Value) -> (String, String) {
        let (s, b) = self.call("POST", "/v1/keys", by, Some(grant));
        assert_eq!(s, 201, "{b}");
        (
            b["id"].as_str().unwrap().to_string(),
            b["key"].as_str().unwrap().to_string(),
        )
    }

    fn create(&self, name: &str, token: &str) {
        let (s, b) = self.call(
            "POST",
            "/v1/collections",
            token,
            Some(json!({"name": name})),
        );
        assert_eq!(s, 201, "{b}");
    }

    /// Ingests `ids` as documents of `tenant` into `collection` (as the bootstrap admin key), each with a text of
    /// its own (near-duplicates would be refused).
    fn ingest(&self, collection: &str, tenant: &str, ids: &[String]) {
        let docs: Vec<Value> = ids
            .iter()
            .map(|id| json!({"id": id, "title": format!("Note {id}"), "tenant": tenant, "text": text_of(id)}))
            .collect();
        let (s, b) = self.call(
            "POST",
            &format!("/v1/collections/{collection}/documents"),
            ADMIN,
            Some(json!({ "documents": docs })),
        );
        assert_eq!(s, 200, "{b}");
        assert_eq!(b["accepted"].as_u64(), Some(ids.len() as u64), "{b}");
    }

    /// The document ids a search of `collection` as `token` finds.
    fn found(&self, collection: &str, token: &str) -> BTreeSet<String> {
        let (s, b) = self.call(
            "POST",
            &format!("/v1/collections/{collection}/search"),
            token,
            Some(json!({"query": "heron", "k": 50, "lanes": ["bm25"]})),
        );
        assert_eq!(s, 200, "{b}");
        b["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["doc_id"].as_str().unwrap().to_string())
            .collect()
    }

    /// The collections `GET /v1/cluster` shows `token`.
    fn cluster_collections(&self, token: &str) -> BTreeSet<String> {
        let (s, b) = self.call("GET", "/v1/cluster", token, None);
        assert_eq!(s, 200, "{b}");
        b["collections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// The audit lines of the log whose `action` is `action`.
    fn audit_lines(&self, action: &str) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|l| {
                if l["fields"].is_object() {
                    l["fields"].clone()
                } else {
                    l
                }
            })
            .filter(|f| f["event"] == "audit" && f["action"] == action)
            .collect()
    }
}

/// A text of its own for document `id`, mentioning the heron (what the searches ask for).
fn text_of(id: &str) -> String {
    const PLACES: [&str; 8] = [
        "reed bed",
        "tidal flat",
        "mill race",
        "flooded meadow",
        "harbour wall",
        "canal lock",
        "salt marsh",
        "gravel pit",
    ];
    const DEEDS: [&str; 8] = [
        "spears a roach",
        "preens its plumes",
        "stalks frogs slowly",
        "roosts in an alder",
        "swallows an eel whole",
        "drives off a gull",
        "stands on one leg",
        "flies low over the water",
    ];
    let n: usize = id.bytes().map(usize::from).sum::<usize>() + id.len() * 7;
    format!(
        "At the {} the heron {}. Observer log {id}, entry {} of the {} survey, notes {} weather and {} ripples.",
        PLACES[n % 8],
        DEEDS[(n / 8) % 8],
        n % 97,
        ["spring", "summer", "autumn", "winter"][id.len() % 4],
        ["calm", "gusty", "misty", "bright", "wet"][n % 5],
        ["few", "many", "broad", "fine"][(n / 3) % 4],
    )
}

fn ids(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Asserts a 403 whose message names tenant `beta`.
fn refused_naming_beta((s, b): (u16, Value), what: &str) {
    assert_eq!(s, 403, "{what}: {b}");
    assert_eq!(b["error"]["code"], "PERMISSION_DENIED", "{what}: {b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("\"beta\""),
        "{what}: the refusal does not name tenant beta: {b}"
    );
}

#[test]
fn tenant_limited_admin_keys_never_touch_what_other_tenants_hold() {
    let dir = RunDir::new();
    let dev = start_dev(&dir);
    dev.create("docs", ADMIN);
    dev.create("betaonly", ADMIN);
    let (acme_docs, beta_docs, beta_only) = (ids("acme", 6), ids("beta", 6), ids("solo", 5));
    dev.ingest("docs", "acme", &acme_docs);
    dev.ingest("docs", "beta", &beta_docs);
    dev.ingest("betaonly", "beta", &beta_only);

    let (_, docs_key) = dev.mint(
        ADMIN,
        json!({"scopes": ["admin"], "tenants": ["acme"], "collections": ["docs"]}),
    );
    let (_, acme_key) = dev.mint(ADMIN, json!({"scopes": ["admin"], "tenants": ["acme"]}));
    let (_, beta_reader) = dev.mint(ADMIN, json!({"scopes": ["read"], "tenants": ["beta"]}));

    // Drop, thresholds and maintenance of a collection holding beta's documents: refused, naming beta.
    for key in [&docs_key, &acme_key] {
        refused_naming_beta(
            dev.call("DELETE", "/v1/collections/docs", key, None),
            "drop docs",
        );
        refused_naming_beta(
            dev.call(
                "PUT",
                "/v1/collections/docs/thresholds",
                key,
                Some(json!({"min_confidence": 0.99})),
            ),
            "set thresholds",
        );
        refused_naming_beta(
            dev.call("DELETE", "/v1/collections/docs/thresholds", key, None),
            "clear thresholds",
        );
        refused_naming_beta(
            dev.call(
                "POST",
                "/v1/collections/docs/maintain",
                key,
                Some(json!({"seal": true})),
            ),
            "maintain",
        );
    }
    refused_naming_beta(
        dev.call("DELETE", "/v1/collections/betaonly", &acme_key, None),
        "drop a collection holding only beta's documents",
    );
    // gRPC says the same.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let status = rt.block_on(async {
        let mut router = RouterServiceClient::connect(dev.grpc.clone())
            .await
            .unwrap();
        let mut req = tonic::Request::new(pb::DropCollectionRequest {
            name: "betaonly".into(),
        });
        req.metadata_mut().insert(
            "authorization",
            format!("Bearer {acme_key}").parse().unwrap(),
        );
        router.drop_collection(req).await.unwrap_err()
    });
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert!(status.message().contains("\"beta\""), "{status:?}");
    // The refusals are audited as such.
    let drops = dev.audit_lines("drop_collection");
    assert!(
        !drops.is_empty() && drops.iter().all(|l| l["result"] == "PERMISSION_DENIED"),
        "{drops:?}"
    );
    // No threshold was set on the shared collection.
    let (_, docs) = dev.call("GET", "/v1/collections/docs", ADMIN, None);
    assert!(docs["thresholds"].is_null(), "{docs}");

    // The cluster view shows a tenant-limited key only what it could administer: an acme-only collection.
    dev.create("acmeonly", &acme_key);
    dev.ingest("acmeonly", "acme", &ids("own", 3));
    assert_eq!(
        dev.cluster_collections(&acme_key),
        BTreeSet::from(["acmeonly".to_string()])
    );
    assert!(dev.cluster_collections(&docs_key).is_empty());
    assert_eq!(dev.cluster_collections(ADMIN).len(), 3);
    // ... and it may act on that one: its thresholds, then dropping it.
    let (s, b) = dev.call(
        "PUT",
        "/v1/collections/acmeonly/thresholds",
        &acme_key,
        Some(json!({"min_confidence": 0.5})),
    );
    assert_eq!(s, 200, "{b}");
    let (s, b) = dev.call("DELETE", "/v1/collections/acmeonly", &acme_key, None);
    assert_eq!(s, 200, "{b}");
    // It may still delete its own tenant's documents in the shared collection.
    let (s, b) = dev.call(
        "DELETE",
        &format!("/v1/collections/docs/documents/{}", acme_docs[0]),
        &acme_key,
        None,
    );
    assert_eq!(s, 200, "{b}");

    // Every beta document is still there.
    let want = |v: &[String]| v.iter().cloned().collect::<BTreeSet<_>>();
    // (the acme document deleted above and the rest of acme's are not beta's to see)
    assert_eq!(dev.found("docs", &beta_reader), want(&beta_docs));
    assert_eq!(dev.found("betaonly", &beta_reader), want(&beta_only));

    // A key covering both tenants may drop both.
    let (_, both) = dev.mint(
        ADMIN,
        json!({"scopes": ["admin"], "tenants": ["acme", "beta"]}),
    );
    for name in ["betaonly", "docs"] {
        let (s, b) = dev.call("DELETE", &format!("/v1/collections/{name}"), &both, None);
        assert_eq!(s, 200, "drop {name}: {b}");
    }
    assert!(dev.cluster_collections(ADMIN).is_empty());
}

/// Waits (up to 20 s) until `token` is refused with 401 on `method path`.
fn wait_refused(dev: &Dev, token: &str, method: &str, path: &str, body: Option<Value>) {
    let started = Instant::now();
    loop {
        let (s, b) = dev.call(method, path, token, body.clone());
        if s == 401 {
            return;
        }
        assert_eq!(s, 200, "{method} {path}: {b}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "a child key still works after its parent was revoked"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_key_never_outlives_the_key_that_minted_it_and_bodies_are_bounded() {
    let dir = RunDir::new();
    let dev = start_dev(&dir);
    dev.create("docs", ADMIN);

    // expires_in is bounded: 10^15 s is refused, 10 years accepted.
    let (s, b) = dev.call(
        "POST",
        "/v1/keys",
        ADMIN,
        Some(json!({"scopes": ["read"], "tenants": ["*"], "expires_in": "1000000000000000s"})),
    );
    assert_eq!(
        (s, b["error"]["field"].as_str()),
        (400, Some("expires_in")),
        "{b}"
    );
    dev.mint(
        ADMIN,
        json!({"scopes": ["read"], "tenants": ["*"], "expires_in": "3650d"}),
    );

    // A key expiring in an hour mints nothing that lives longer.
    let (parent_id, parent) = dev.mint(
        ADMIN,
        json!({"scopes": ["admin"], "tenants": ["*"], "expires_in": "1h"}),
    );
    for grant in [
        json!({"scopes": ["read"], "tenants": ["*"]}),
        json!({"scopes": ["read"], "tenants": ["*"], "expires_in": "2h"}),
    ] {
        let (s, b) = dev.call("POST", "/v1/keys", &parent, Some(grant.clone()));
        assert_eq!(s, 403, "{grant}: {b}");
        assert!(
            b["error"]["message"].as_str().unwrap().contains("outlives"),
            "{grant}: {b}"
        );
    }
    let (_, child) = dev.mint(
        &parent,
        json!({"scopes": ["admin"], "tenants": ["*"], "expires_in": "30m"}),
    );
    // A grandchild, minted by the child: refused without an expiry, accepted within the child's.
    let (s, b) = dev.call(
        "POST",
        "/v1/keys",
        &child,
        Some(json!({"scopes": ["read"], "tenants": ["*"]})),
    );
    assert_eq!(s, 403, "{b}");
    let (_, grandchild) = dev.mint(
        &child,
        json!({"scopes": ["read"], "tenants": ["*"], "expires_in": "10m"}),
    );
    for key in [&child, &grandchild] {
        let (s, b) = dev.call("GET", "/v1/collections", key, None);
        assert_eq!(s, 200, "{b}");
    }

    // Revoking the parent stops every key below it.
    let (s, b) = dev.call("DELETE", &format!("/v1/keys/{parent_id}"), ADMIN, None);
    assert_eq!(s, 200, "{b}");
    for key in [&child, &grandchild] {
        wait_refused(&dev, key, "GET", "/v1/collections", None);
        // The answer tier's key ring follows the chain too.
        let ask = json!({"question": "What does the heron eat?"});
        wait_refused(&dev, key, "POST", "/v1/collections/docs/ask", Some(ask));
    }

    // Thresholds are an object with a bounded data_hash.
    let put = |body: Value| dev.call("PUT", "/v1/collections/docs/thresholds", ADMIN, Some(body));
    let (s, b) = put(json!([0.5]));
    assert_eq!(s, 400, "{b}");
    let (s, b) = put(json!({"min_confidence": 0.5, "data_hash": "f".repeat(100_000)}));
    assert_eq!(
        (s, b["error"]["field"].as_str()),
        (400, Some("data_hash")),
        "{b}"
    );
    let (s, b) = put(json!({"min_confidence": 0.5, "data_hash": "f".repeat(64)}));
    assert_eq!(s, 200, "{b}");

    // A key body that is not a grant is audited like any refused mint.
    let (s, b) = dev.call("POST", "/v1/keys", ADMIN, Some(json!({"scopes": "admin"})));
    assert_eq!(s, 400, "{b}");
    let refused = dev.audit_lines("create_key");
    assert!(
        refused
            .iter()
            .any(|l| l["result"] == "INVALID_ARGUMENT" && l["key_id"] == "admin"),
        "no audit line for the malformed key body: {refused:?}"
    );
}
