//! Issue 46 through the real binary: an admin key limited to tenant `a` and collection `docs` mints, lists and
//! revokes only keys within its own grant (HTTP and gRPC), and may not touch snapshots; the audit line of a
//! delete that found nothing says `not_found`, and a revoke's names the key as its target and the key's tenants;
//! a key is accepted by the answer tier the moment it is minted, however long the tier's poll of meta.

use std::time::Duration;

use attest_proto::v1 as pb;
use attest_proto::v1::router_service_client::RouterServiceClient;
use serde_json::{json, Value};
use tonic::Code;

use super::common::call;
use super::{create_docs_collection, mint, start_secure_dev_with, with_key, SecureDev, ADMIN};

/// The audit lines of the dev log whose `action` is `action`.
fn audit_lines(dev: &SecureDev, action: &str) -> Vec<Value> {
    let log = std::fs::read_to_string(&dev.log).unwrap();
    log.lines()
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

#[test]
fn a_scoped_admin_key_stays_within_its_grant_and_audit_lines_tell_the_truth() {
    let dir = super::common::RunDir::new();
    // The answer tier does not watch meta and re-reads it only every 10 minutes: a key it accepts at once was
    // looked up when shown.
    let dev = start_secure_dev_with(
        dir.path(),
        &[
            ("ATTEST__ANSWER__META_WATCH", "false"),
            ("ATTEST__ANSWER__META_REFRESH_MS", "600000"),
        ],
    );
    create_docs_collection(&dev);
    let url = |path: &str| format!("{}{path}", dev.url);

    // Minted and used at once on the answer tier (its poll is 10 min away).
    let (_, fresh) = mint(&dev, json!({"scopes": ["read"], "tenants": ["a"]}));
    let (s, b) = call(
        "POST",
        &url("/v1/collections/docs/ask"),
        Some(&fresh),
        Some(&json!({"question": "What does the heron eat?"})),
    );
    assert_eq!(s, 200, "a key minted a moment ago is refused by ask: {b}");

    let (scoped_id, scoped) = mint(
        &dev,
        json!({"scopes": ["admin"], "tenants": ["a"], "collections": ["docs"]}),
    );
    let (b_id, _) = mint(&dev, json!({"scopes": ["read"], "tenants": ["b"]}));

    // Minting: nothing wider than itself.
    for (grant, names) in [
        (
            json!({"scopes": ["read"], "tenants": ["*"]}),
            "every tenant",
        ),
        (json!({"scopes": ["read"], "tenants": ["b"]}), "\"b\""),
        (
            json!({"scopes": ["read"], "tenants": ["a", "b"], "collections": ["docs"]}),
            "\"b\"",
        ),
        (
            json!({"scopes": ["read"], "tenants": ["a"]}),
            "every collection",
        ),
        (
            json!({"scopes": ["read"], "tenants": ["a"], "collections": ["wiki"]}),
            "\"wiki\"",
        ),
    ] {
        let (s, b) = call("POST", &url("/v1/keys"), Some(&scoped), Some(&grant));
        assert_eq!(s, 403, "{grant} was minted: {b}");
        let message = b["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(names), "{grant}: {b}");
    }
    let (s, b) = call(
        "POST",
        &url("/v1/keys"),
        Some(&scoped),
        Some(&json!({"scopes": ["write"], "tenants": ["a"], "collections": ["docs"]})),
    );
    assert_eq!(s, 201, "{b}");
    let narrow_id = b["id"].as_str().unwrap().to_string();

    // Listing and revoking: only keys within its grant.
    let listed = |token: &str| -> Vec<String> {
        let (s, b) = call("GET", &url("/v1/keys"), Some(token), None);
        assert_eq!(s, 200, "{b}");
        b["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["id"].as_str().unwrap().to_string())
            .collect()
    };
    let seen = listed(&scoped);
    assert!(
        seen.contains(&narrow_id) && seen.contains(&scoped_id),
        "{seen:?}"
    );
    assert!(!seen.contains(&b_id), "tenant b's key is listed: {seen:?}");
    assert!(listed(ADMIN).contains(&b_id));
    let (s, b) = call(
        "DELETE",
        &url(&format!("/v1/keys/{b_id}")),
        Some(&scoped),
        None,
    );
    assert_eq!(s, 403, "{b}");
    let (s, b) = call(
        "DELETE",
        &url(&format!("/v1/keys/{narrow_id}")),
        Some(&scoped),
        None,
    );
    assert_eq!((s, b["revoked"].clone()), (200, json!(true)), "{b}");

    // Snapshots hold every tenant's documents: refused before anything is read.
    let dest = dir.path().join("snapshots");
    let dest = format!("file://{}", dest.display());
    for (method, path, body) in [
        (
            "POST",
            "/v1/snapshots".to_string(),
            Some(json!({"destination": dest})),
        ),
        ("GET", format!("/v1/snapshots?from={dest}"), None),
        ("DELETE", format!("/v1/snapshots/x?from={dest}"), None),
        ("GET", format!("/v1/snapshots/x/progress?from={dest}"), None),
        (
            "POST",
            "/v1/snapshots/restore".to_string(),
            Some(json!({"source": dest, "id": "x"})),
        ),
    ] {
        let (s, b) = call(method, &url(&path), Some(&scoped), body.as_ref());
        assert_eq!(s, 403, "{method} {path}: {b}");
    }

    // gRPC: the same rules.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut router = RouterServiceClient::connect(dev.grpc.clone())
            .await
            .unwrap();
        let wide = pb::CreateKeyRequest {
            scopes: vec!["read".into()],
            tenants: vec!["*".into()],
            ..Default::default()
        };
        let refused = router.create_key(with_key(wide, Some(&scoped))).await;
        assert_eq!(refused.unwrap_err().code(), Code::PermissionDenied);
        let keys = router
            .list_keys(with_key(pb::ListKeysRequest::default(), Some(&scoped)))
            .await
            .unwrap()
            .into_inner()
            .keys;
        assert!(
            keys.iter().all(|k| k.id != b_id),
            "gRPC lists tenant b's key"
        );
        let revoke = pb::RevokeKeyRequest { id: b_id.clone() };
        let refused = router.revoke_key(with_key(revoke, Some(&scoped))).await;
        assert_eq!(refused.unwrap_err().code(), Code::PermissionDenied);
    });

    // Audit: a delete of nothing is NOT_FOUND, not `ok`; a revoke names its key as the target and the key's tenants.
    let (_, writer) = mint(&dev, json!({"scopes": ["write"], "tenants": ["a"]}));
    let (s, b) = call(
        "DELETE",
        &url("/v1/collections/docs/documents/never-there"),
        Some(&writer),
        None,
    );
    assert_eq!(s, 404, "{b}");
    // The log is written by another process: wait until its lines are there.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let deletes = loop {
        let lines = audit_lines(&dev, "delete_document");
        if !lines.is_empty() || std::time::Instant::now() > deadline {
            break lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert_eq!(deletes[0]["result"], "NOT_FOUND", "{deletes:?}");
    assert_eq!(deletes[0]["target_id"], "never-there", "{deletes:?}");
    assert_eq!(deletes[0]["tenant"], "a", "{deletes:?}");
    let revokes = audit_lines(&dev, "revoke_key");
    let ok = revokes
        .iter()
        .find(|l| l["target_id"] == narrow_id.as_str() && l["result"] == "ok")
        .unwrap_or_else(|| panic!("no ok revoke line for {narrow_id}: {revokes:?}"));
    assert_eq!(ok["tenant"], "a", "{ok}");
    assert_eq!(ok["key_id"], scoped_id.as_str(), "{ok}");
    assert!(
        revokes
            .iter()
            .any(|l| l["target_id"] == b_id.as_str() && l["result"] == "PERMISSION_DENIED"),
        "{revokes:?}"
    );
}
