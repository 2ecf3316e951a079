//! Issue 15: a key revoked through one router is refused by every router and answer replica of the cluster
//! within 2 s. A cluster of processes — meta, a shard, two routers and an answer replica reading keys from meta
//! — all with the cluster key; a key minted on router 1 works on router 2 and the answer tier, is revoked on
//! router 1, and each front is polled until it answers 401.
//!
//! The fronts follow meta by its watch, and their fall-back poll is set to ten minutes: only the watch can
//! bring them the revocation in time (issue 44: a change reaches every front as meta applies it).

use crate::common;

use std::time::{Duration, Instant};

use common::{start_role, start_role_with_env, value_of, Proc};
use serde_json::{json, Value};

const ADMIN: &str = "test-admin-key-0123456789abcdef";
const CLUSTER: &str = "test-cluster-key-0123456789abcdef";

/// A fall-back poll far longer than the test: what reaches a front in time came by the watch.
const NO_POLL: [(&str, &str); 2] = [
    ("ATTEST__ROUTER__META_POLL_MS", "600000"),
    ("ATTEST__ANSWER__META_REFRESH_MS", "600000"),
];

/// A front started with [`NO_POLL`], its log in `dir/NAME.log`.
fn start_front(args: &[&str], dir: &std::path::Path, name: &str) -> (Proc, String) {
    start_role_with_env(args, dir, name, &NO_POLL)
}

/// (status, body) of an HTTP call with a bearer token.
fn call(method: &str, url: &str, token: &str, body: Option<&Value>) -> (u16, Value) {
    common::call(method, url, Some(token), body)
}

#[test]
fn a_revoked_key_is_refused_by_every_router_and_answer_replica_within_two_seconds() {
    let dir = common::RunDir::new();
    let d = dir.path();
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
        d,
        "meta",
    );
    let meta = format!("http://{}", value_of(&line, "grpc="));
    let (_shard, _) = start_role(
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
        d,
        "shard",
    );
    let router = |name: &str| {
        start_front(
            &[
                "serve",
                "--insecure",
                "--role",
                "router",
                "--meta",
                &meta,
                "--http",
                "127.0.0.1:0",
                "--grpc",
                "127.0.0.1:0",
                "--admin-key",
                ADMIN,
                "--cluster-key",
                CLUSTER,
            ],
            d,
            name,
        )
    };
    let (_r1, line1) = router("router-1");
    let (_r2, line2) = router("router-2");
    let (r1, r2) = (value_of(&line1, "http="), value_of(&line2, "http="));
    let r1_grpc = format!("http://{}", value_of(&line1, "grpc="));
    let (_answer, line) = start_front(
        &[
            "serve",
            "--insecure",
            "--role",
            "answer",
            "--router",
            &r1_grpc,
            "--meta",
            &meta,
            "--http",
            "127.0.0.1:0",
            "--admin-key",
            ADMIN,
            "--cluster-key",
            CLUSTER,
        ],
        d,
        "answer",
    );
    let answer = value_of(&line, "http=");

    let (s, b) = call(
        "POST",
        &format!("{r1}/v1/collections"),
        ADMIN,
        Some(&json!({"name": "c", "shards": 1, "replication": 1})),
    );
    assert_eq!(s, 201, "{b}");
    let (s, b) = call(
        "POST",
        &format!("{r1}/v1/keys"),
        ADMIN,
        Some(&json!({"scopes": ["read"], "tenants": ["*"]})),
    );
    assert_eq!(s, 201, "{b}");
    let (id, key) = (
        b["id"].as_str().unwrap().to_string(),
        b["key"].as_str().unwrap().to_string(),
    );

    // The status of each front for `key`: router 2's collection list, the answer tier's ask.
    let ask = json!({"question": "who hunts at night?"});
    let status_at = |front: &str| match front {
        "router-2" => call("GET", &format!("{r2}/v1/collections"), &key, None).0,
        "answer" => {
            call(
                "POST",
                &format!("{answer}/v1/collections/c/ask"),
                &key,
                Some(&ask),
            )
            .0
        }
        _ => unreachable!(),
    };
    // The new key reaches every front.
    for front in ["router-2", "answer"] {
        let deadline = Instant::now() + Duration::from_secs(10);
        while status_at(front) == 401 {
            assert!(
                Instant::now() < deadline,
                "{front} never accepted the new key"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    let (s, b) = call("DELETE", &format!("{r1}/v1/keys/{id}"), ADMIN, None);
    assert!(s == 200 || s == 204, "{s} {b}");
    let revoked = Instant::now();
    for front in ["router-2", "answer"] {
        while status_at(front) != 401 {
            assert!(
                revoked.elapsed() < Duration::from_secs(2),
                "{front} still accepts the key {:?} after its revocation",
                revoked.elapsed()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
        eprintln!(
            "{front} refuses the revoked key after {:?}",
            revoked.elapsed()
        );
    }
    // Refused with 401 by router 1, which revoked it, at once.
    assert_eq!(
        call("GET", &format!("{r1}/v1/collections"), &key, None).0,
        401
    );
}
