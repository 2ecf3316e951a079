//! Issue 15 through the real binary: `attest dev --admin-key` turns authentication on. Keys are minted through
//! the router (`POST /v1/keys`, `attest key create`), kept hashed in meta, and checked by the router and the
//! answer tier on HTTP and gRPC alike: every route × credential cell answers its exact status; the tenant a
//! request acts as comes from its key, so two tenants with the same vocabulary never see each other's text
//! (searches, asks, citations, suggestions); a revoked key is refused by router and answer tier within 2 s; audit
//! lines and `auth_denied_total{reason}` record what happened. Logs of each run are kept in its temp directory
//! (printed on failure).

use crate::common;
#[path = "security/scoped_admin.rs"]
mod scoped_admin;

use std::path::Path;
use std::time::{Duration, Instant};

use attest_proto::v1 as pb;
use attest_proto::v1::answer_service_client::AnswerServiceClient;
use attest_proto::v1::router_service_client::RouterServiceClient;
use common::{attest_ok, call, start_with_env, value_of, Logs, Proc};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tonic::Code;

const ADMIN: &str = "test-admin-key-0123456789abcdef";

struct SecureDev {
    _proc: Proc,
    url: String,
    grpc: String,
    log: std::path::PathBuf,
}

fn start_secure_dev(dir: &Path) -> SecureDev {
    start_secure_dev_with(dir, &[])
}

/// [`start_secure_dev`] with extra environment variables (configuration overrides).
fn start_secure_dev_with(dir: &Path, env: &[(&str, &str)]) -> SecureDev {
    let log = dir.join("dev.log");
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
        Some(&dir.join("data")),
        Logs::InfoTo(&log),
        env,
    );
    eprintln!("attest dev log: {}", log.display());
    SecureDev {
        _proc: proc,
        url: value_of(&line, "http="),
        grpc: format!("http://{}", value_of(&line, "grpc=")),
        log,
    }
}

fn mint(dev: &SecureDev, grant: Value) -> (String, String) {
    let (s, b) = call(
        "POST",
        &format!("{}/v1/keys", dev.url),
        Some(ADMIN),
        Some(&grant),
    );
    assert_eq!(s, 201, "{b}");
    let key = b["key"].as_str().unwrap().to_string();
    assert!(key.starts_with("attest_"), "{b}");
    (b["id"].as_str().unwrap().to_string(), key)
}

/// Waits (up to 20 s) until `token` is refused with 401 on a read route.
fn wait_refused(dev: &SecureDev, token: &str) -> Duration {
    let started = Instant::now();
    loop {
        let (s, _) = call(
            "GET",
            &format!("{}/v1/collections", dev.url),
            Some(token),
            None,
        );
        if s == 401 {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "still accepted"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Ingests as `token`; returns how many documents were accepted (template-made ones may be near-duplicates).
fn ingest(dev: &SecureDev, token: &str, docs: Value) -> u64 {
    let (s, b) = call(
        "POST",
        &format!("{}/v1/collections/docs/documents", dev.url),
        Some(token),
        Some(&json!({ "documents": docs })),
    );
    assert_eq!(s, 200, "{b}");
    for r in b["rejected"].as_array().unwrap() {
        assert!(
            r["reason"].as_str().unwrap().contains("near-duplicate"),
            "{b}"
        );
    }
    b["accepted"].as_u64().unwrap()
}

fn create_docs_collection(dev: &SecureDev) {
    let (s, b) = call(
        "POST",
        &format!("{}/v1/collections", dev.url),
        Some(ADMIN),
        Some(&json!({"name": "docs"})),
    );
    assert_eq!(s, 201, "{b}");
}

/// Who calls, in the matrix.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Who {
    NoKey,
    Junk,
    Revoked,
    Expired,
    Read,
    Write,
    MintedAdmin,
    BootstrapAdmin,
    /// A write key of tenant b, on requests that act for tenant a.
    OtherTenant,
}

/// (method, path, body, scope, status when allowed, whether the request acts for tenant a)
type Route = (&'static str, &'static str, Option<Value>, Need, u16, bool);

/// The scope a route needs; `Open`: none.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Need {
    Open,
    Read,
    Write,
    Admin,
}

fn expected(who: Who, need: Need, ok: u16, names_tenant_a: bool) -> u16 {
    match (who, need) {
        (_, Need::Open) => ok,
        (Who::NoKey | Who::Junk | Who::Revoked | Who::Expired, _) => 401,
        (Who::OtherTenant, _) if names_tenant_a && need != Need::Admin => 403,
        (Who::Read, Need::Write | Need::Admin) => 403,
        (Who::Write | Who::OtherTenant, Need::Admin) => 403,
        _ => ok,
    }
}

#[test]
fn every_route_answers_each_credential_with_its_status() {
    let dir = common::RunDir::new();
    let dev = start_secure_dev(dir.path());
    create_docs_collection(&dev);
    let grant = |scope: &str, tenant: &str| json!({"scopes": [scope], "tenants": [tenant]});
    let (_, read) = mint(&dev, grant("read", "a"));
    let (write_id, write) = mint(&dev, grant("write", "a"));
    let (_, admin) = mint(&dev, grant("admin", "*"));
    let (_, other) = mint(&dev, grant("write", "b"));
    let (revoked_id, revoked) = mint(&dev, grant("write", "a"));
    let (s, b) = call(
        "DELETE",
        &format!("{}/v1/keys/{revoked_id}", dev.url),
        Some(ADMIN),
        None,
    );
    assert_eq!((s, b["revoked"].clone()), (200, json!(true)), "{b}");
    let (_, expired) = mint(
        &dev,
        json!({"scopes": ["write"], "tenants": ["a"], "expires_in": "1s"}),
    );
    wait_refused(&dev, &expired);
    let accepted = ingest(
        &dev,
        &write,
        json!([{"id": "m1", "title": "Herons", "text": "The grey heron stands in shallow water waiting for fish.", "tenant": "a"}]),
    );
    assert_eq!(accepted, 1);

    let token = |who: Who| -> Option<&str> {
        match who {
            Who::NoKey => None,
            Who::Junk => Some("not-a-key"),
            Who::Revoked => Some(&revoked),
            Who::Expired => Some(&expired),
            Who::Read => Some(&read),
            Who::Write => Some(&write),
            Who::MintedAdmin => Some(&admin),
            Who::BootstrapAdmin => Some(ADMIN),
            Who::OtherTenant => Some(&other),
        }
    };
    // (method, path, body, scope, status when allowed, whether the request acts for tenant a)
    let doc = json!({"documents": [{"id": "m1", "title": "Herons", "text": "The grey heron stands in shallow water waiting for fish.", "tenant": "a"}]});
    let routes: Vec<Route> = vec![
        (
            "POST",
            "/v1/collections",
            Some(json!({"name": "bad name!"})),
            Need::Admin,
            400,
            false,
        ),
        ("GET", "/v1/collections", None, Need::Read, 200, false),
        ("GET", "/v1/collections/docs", None, Need::Read, 200, false),
        (
            "DELETE",
            "/v1/collections/missing",
            None,
            Need::Admin,
            404,
            false,
        ),
        (
            "POST",
            "/v1/collections/docs/documents",
            Some(doc),
            Need::Write,
            200,
            true,
        ),
        (
            "DELETE",
            "/v1/collections/docs/documents/nope?tenant=a",
            None,
            Need::Write,
            404,
            true,
        ),
        (
            "POST",
            "/v1/collections/docs/search",
            Some(json!({"query": "heron", "tenant": "a"})),
            Need::Read,
            200,
            true,
        ),
        (
            "POST",
            "/v1/collections/docs/maintain",
            Some(json!({})),
            Need::Admin,
            200,
            false,
        ),
        (
            "GET",
            "/v1/collections/docs/stats",
            None,
            Need::Read,
            200,
            false,
        ),
        (
            "PUT",
            "/v1/collections/docs/thresholds",
            Some(json!({"min_confidence": 2})),
            Need::Admin,
            400,
            false,
        ),
        (
            "DELETE",
            "/v1/collections/missing/thresholds",
            None,
            Need::Admin,
            404,
            false,
        ),
        (
            "POST",
            "/v1/keys",
            Some(json!({"scopes": [], "tenants": ["a"]})),
            Need::Admin,
            400,
            false,
        ),
        ("GET", "/v1/keys", None, Need::Admin, 200, false),
        (
            "DELETE",
            "/v1/keys/000000000000",
            None,
            Need::Admin,
            404,
            false,
        ),
        (
            "POST",
            "/v1/collections/docs/ask",
            Some(json!({"question": "What does the heron wait for?", "tenant": "a"})),
            Need::Read,
            200,
            true,
        ),
        ("GET", "/v1/cluster", None, Need::Admin, 200, false),
        // No `router.eval_reports_dir` here: an allowed caller learns there is no report.
        (
            "GET",
            "/v1/collections/docs/eval",
            None,
            Need::Read,
            404,
            false,
        ),
        // The web console loads without a key (it asks for one and calls the routes above with it).
        ("GET", "/", None, Need::Open, 200, false),
        ("GET", "/console/js/app.js", None, Need::Open, 200, false),
        ("GET", "/healthz", None, Need::Open, 200, false),
        ("GET", "/readyz", None, Need::Open, 200, false),
        ("GET", "/metrics", None, Need::Open, 200, false),
    ];
    let everyone = [
        Who::NoKey,
        Who::Junk,
        Who::Revoked,
        Who::Expired,
        Who::Read,
        Who::Write,
        Who::MintedAdmin,
        Who::BootstrapAdmin,
        Who::OtherTenant,
    ];
    let mut wrong = Vec::new();
    for (method, path, body, need, ok, names_a) in &routes {
        for who in everyone {
            let want = expected(who, *need, *ok, *names_a);
            let (got, b) = call(
                method,
                &format!("{}{path}", dev.url),
                token(who),
                body.as_ref(),
            );
            if got != want {
                wrong.push(format!(
                    "{method} {path} as {who:?}: {got} (want {want}) {b}"
                ));
            }
            if want == 401 || want == 403 {
                let code = b["error"]["code"].as_str().unwrap_or_default();
                let named = if want == 401 {
                    "UNAUTHENTICATED"
                } else {
                    "PERMISSION_DENIED"
                };
                if code != named {
                    wrong.push(format!(
                        "{method} {path} as {who:?}: code {code} (want {named})"
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // A key limited to one collection sees and acts on that one only.
    let (_, narrow) = mint(
        &dev,
        json!({"scopes": ["read"], "tenants": ["a"], "collections": ["elsewhere"]}),
    );
    let (s, b) = call(
        "GET",
        &format!("{}/v1/collections", dev.url),
        Some(&narrow),
        None,
    );
    assert_eq!((s, b["collections"].clone()), (200, json!([])), "{b}");
    let (s, _) = call(
        "POST",
        &format!("{}/v1/collections/docs/search", dev.url),
        Some(&narrow),
        Some(&json!({"query": "heron"})),
    );
    assert_eq!(s, 403);

    grpc_matrix(&dev, &read, &write, &other);

    // Audit lines name the key, tenant, action and outcome; refusals are counted by reason.
    let (_, metrics) = common::get_text(&format!("{}/metrics", dev.url));
    for reason in [
        "missing",
        "unknown",
        "revoked",
        "expired",
        "scope",
        "tenant",
        "collection",
    ] {
        assert!(
            metrics.contains(&format!("auth_denied_total{{reason=\"{reason}\"}}")),
            "no auth_denied_total for {reason}"
        );
    }
    let log = std::fs::read_to_string(&dev.log).unwrap();
    let audited = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|l| {
            let f = &l["fields"];
            let field = |k: &str| f[k].as_str().or(l[k].as_str()).map(str::to_string);
            field("event").as_deref() == Some("audit")
                && field("action").as_deref() == Some("ingest")
                && field("key_id").as_deref() == Some(write_id.as_str())
                && field("tenant").as_deref() == Some("a")
                && field("result").as_deref() == Some("ok")
        });
    assert!(
        audited,
        "no audit line for the write key's ingest in {}",
        dev.log.display()
    );
}

fn with_key<T>(message: T, token: Option<&str>) -> tonic::Request<T> {
    let mut req = tonic::Request::new(message);
    if let Some(t) = token {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    req
}

/// The router's and the answer tier's gRPC methods, per credential: the same rules as HTTP.
fn grpc_matrix(dev: &SecureDev, read: &str, write: &str, other: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut router = RouterServiceClient::connect(dev.grpc.clone())
            .await
            .unwrap();
        let mut answer = AnswerServiceClient::connect(dev.grpc.clone())
            .await
            .unwrap();
        let creds: [(&str, Option<&str>); 6] = [
            ("none", None),
            ("junk", Some("junk")),
            ("read", Some(read)),
            ("write", Some(write)),
            ("admin", Some(ADMIN)),
            ("other", Some(other)),
        ];
        let mut wrong = Vec::new();
        for (name, token) in creds {
            let want = |need: Need, ok: Code, names_a: bool| -> Code {
                let who = match name {
                    "none" => Who::NoKey,
                    "junk" => Who::Junk,
                    "read" => Who::Read,
                    "write" => Who::Write,
                    "admin" => Who::BootstrapAdmin,
                    _ => Who::OtherTenant,
                };
                match expected(who, need, 0, names_a) {
                    401 => Code::Unauthenticated,
                    403 => Code::PermissionDenied,
                    _ => ok,
                }
            };
            let code = |r: Result<(), tonic::Status>| r.err().map_or(Code::Ok, |s| s.code());
            let checks = [
                (
                    "CreateCollection",
                    want(Need::Admin, Code::InvalidArgument, false),
                    code(
                        router
                            .create_collection(with_key(
                                pb::CreateCollectionRequest {
                                    name: "bad name!".into(),
                                    ..Default::default()
                                },
                                token,
                            ))
                            .await
                            .map(|_| ()),
                    ),
                ),
                (
                    "ListCollections",
                    want(Need::Read, Code::Ok, false),
                    code(
                        router
                            .list_collections(with_key(pb::ListCollectionsRequest {}, token))
                            .await
                            .map(|_| ()),
                    ),
                ),
                (
                    "DropCollection",
                    want(Need::Admin, Code::NotFound, false),
                    code(
                        router
                            .drop_collection(with_key(
                                pb::DropCollectionRequest {
                                    name: "missing".into(),
                                },
                                token,
                            ))
                            .await
                            .map(|_| ()),
                    ),
                ),
                (
                    "Ingest",
                    want(Need::Write, Code::Ok, true),
                    code(
                        router
                            .ingest(with_key(
                                pb::IngestRequest {
                                    collection: "docs".into(),
                                    documents: vec![pb::Document {
                                        id: "g1".into(),
                                        text: "Kingfishers dive from a perch to catch small fish."
                                            .into(),
                                        tenant: "a".into(),
                                        ..Default::default()
                                    }],
                                },
                                token,
                            ))
                            .await
                            .map(|_| ()),
                    ),
                ),
                (
                    "DeleteDocument",
                    want(Need::Write, Code::Ok, true),
                    code(
                        router
                            .delete_document(with_key(
                                pb::DeleteDocumentRequest {
                                    collection: "docs".into(),
                                    id: "nope".into(),
                                    tenant: "a".into(),
                                },
                                token,
                            ))
                            .await
                            .map(|_| ()),
                    ),
                ),
                (
                    "Search",
                    want(Need::Read, Code::Ok, true),
                    code(
                        router
                            .search(with_key(
                                pb::SearchRequest {
                                    collection: "docs".into(),
                                    query: "heron".into(),
                                    tenant: "a".into(),
                                    ..Default::default()
                                },
                                token,
                            ))
                            .await
                            .map(|_| ()),
                    ),
                ),
                (
                    "CreateKey",
                    want(Need::Admin, Code::InvalidArgument, false),
                    code(
                        router
                            .create_key(with_key(
                                pb::CreateKeyRequest {
                                    scopes: vec!["root".into()],
                                    tenants: vec!["a".into()],
                                    ..Default::default()
                                },
                                token,
                            ))
                            .await
                            .map(|_| ()),
                    ),
                ),
                (
                    "ListKeys",
                    want(Need::Admin, Code::Ok, false),
                    code(
                        router
                            .list_keys(with_key(pb::ListKeysRequest {}, token))
                            .await
                            .map(|_| ()),
                    ),
                ),
                (
                    "RevokeKey",
                    want(Need::Admin, Code::NotFound, false),
                    code(
                        router
                            .revoke_key(with_key(
                                pb::RevokeKeyRequest {
                                    id: "000000000000".into(),
                                },
                                token,
                            ))
                            .await
                            .map(|_| ()),
                    ),
                ),
                (
                    "Ask",
                    want(Need::Read, Code::Ok, true),
                    code(
                        answer
                            .ask(with_key(
                                pb::AskRequest {
                                    collection: "docs".into(),
                                    question: "What does the heron wait for?".into(),
                                    tenant: "a".into(),
                                    ..Default::default()
                                },
                                token,
                            ))
                            .await
                            .map(|_| ()),
                    ),
                ),
            ];
            for (method, want, got) in checks {
                if want != got {
                    wrong.push(format!("{method} as {name}: {got:?} (want {want:?})"));
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    });
}

const ANIMALS: [&str; 8] = [
    "heron", "otter", "badger", "falcon", "salmon", "beaver", "lynx", "stork",
];
const PLACES: [&str; 6] = ["river", "marsh", "forest", "valley", "lake", "meadow"];
const FOODS: [&str; 6] = ["fish", "berries", "insects", "frogs", "seeds", "roots"];

/// A tenant's documents: the same vocabulary for both tenants, plus a marker word only this tenant has.
fn tenant_docs(tenant: &str, marker: &str, rng: &mut rand::rngs::StdRng) -> Value {
    let docs: Vec<Value> = (0..24)
        .map(|i| {
            let (a, p, f) = (
                ANIMALS.choose(rng).unwrap(),
                PLACES.choose(rng).unwrap(),
                FOODS.choose(rng).unwrap(),
            );
            let (b, q, g) = (
                ANIMALS.choose(rng).unwrap(),
                PLACES.choose(rng).unwrap(),
                FOODS.choose(rng).unwrap(),
            );
            json!({
                "id": format!("{tenant}-{i}"),
                "title": format!("{marker} {a} of the {p}"),
                "text": format!("In the {p} the {a} of {marker} eats {f} every {i}th morning. Survey {i} counted {n} of them. \
                    A {b} from the {q} shares its {g}, and {marker} rangers saw {m} near the water.",
                    n = 3 + i * 7, m = 100 - i),
                "tenant": tenant,
            })
        })
        .collect();
    json!(docs)
}

#[test]
fn tenants_never_see_each_other_and_revocation_reaches_every_front() {
    let dir = common::RunDir::new();
    let dev = start_secure_dev(dir.path());
    create_docs_collection(&dev);
    // Keys through the CLI (ATTEST_API_KEY = the admin key), as an operator would mint them.
    let cli_key = |tenant: &str| -> (String, String) {
        let out = attest_ok(
            &[
                "key",
                "create",
                "--scopes",
                "write",
                "--tenants",
                tenant,
                "--json",
                "--server",
                &dev.url,
            ],
            &[("ATTEST_API_KEY", ADMIN)],
        );
        let v: Value = serde_json::from_slice(&out).unwrap();
        (
            v["id"].as_str().unwrap().into(),
            v["key"].as_str().unwrap().into(),
        )
    };
    let (a_id, key_a) = cli_key("a");
    let (_, key_b) = cli_key("b");
    // A minted key is accepted by the answer tier at once: it looks a key it does not know up in meta.
    for key in [&key_a, &key_b] {
        let (s, b) = call(
            "POST",
            &format!("{}/v1/collections/docs/ask", dev.url),
            Some(key),
            Some(&json!({"question": "What does the heron eat?"})),
        );
        assert_eq!(s, 200, "{b}");
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(15);
    assert!(ingest(&dev, &key_a, tenant_docs("a", "Zorblax", &mut rng)) >= 8);
    assert!(ingest(&dev, &key_b, tenant_docs("b", "Quintar", &mut rng)) >= 8);
    // Without naming a tenant, a key acts for its own: b's key writes under b even when the body says a.
    let (s, _) = call(
        "POST",
        &format!("{}/v1/collections/docs/documents", dev.url),
        Some(&key_b),
        Some(&json!({"documents": [{"id": "b-x", "text": "Quintar herons wade.", "tenant": "a"}]})),
    );
    assert_eq!(s, 403, "naming another tenant is refused, nothing written");

    for (key, own, foreign, foreign_marker, other_tenant) in [
        (&key_a, "a-", "b-", "Quintar", "b"),
        (&key_b, "b-", "a-", "Zorblax", "a"),
    ] {
        let mut seen_own = 0;
        for i in 0..200 {
            let (a, p, f) = (
                ANIMALS.choose(&mut rng).unwrap(),
                PLACES.choose(&mut rng).unwrap(),
                FOODS.choose(&mut rng).unwrap(),
            );
            let kind = rng.gen_range(0..10);
            let (path, body, refused) = match kind {
                // Searches, plain or with a filter that tries to widen the tenant.
                0..=4 => (
                    "search",
                    json!({"query": format!("{a} {p} {f} {foreign_marker}"), "k": 20}),
                    false,
                ),
                5 => (
                    "search",
                    json!({"query": format!("{a} {f}"), "filter": {"tenant": other_tenant}}),
                    false,
                ),
                6 => (
                    "search",
                    json!({"query": format!("{a} {p}"), "tenant": other_tenant}),
                    true,
                ),
                7 => (
                    "ask",
                    json!({"question": format!("What does the {a} of the {p} eat?"), "tenant": other_tenant}),
                    true,
                ),
                // Asks, whose citations, suggestions and terminology must stay the caller's.
                // (The question never carries the other's marker: the response may echo its terms.)
                _ => (
                    "ask",
                    json!({"question": format!("What does the {a} eat in the {p}?")}),
                    false,
                ),
            };
            let (s, b) = call(
                "POST",
                &format!("{}/v1/collections/docs/{path}", dev.url),
                Some(key),
                Some(&body),
            );
            if refused {
                assert_eq!(s, 403, "request {i} {body}: {b}");
                continue;
            }
            assert_eq!(s, 200, "request {i} {body}: {b}");
            let text = b.to_string();
            assert!(
                !text.contains(foreign_marker),
                "request {i} {body} saw the other tenant: {b}"
            );
            for hit in b["hits"].as_array().into_iter().flatten() {
                let id = hit["doc_id"].as_str().unwrap();
                assert!(
                    id.starts_with(own) && !id.starts_with(foreign),
                    "{id} in {b}"
                );
                seen_own += 1;
            }
            for c in b["citations"].as_array().into_iter().flatten() {
                assert!(c["doc_id"].as_str().unwrap().starts_with(own), "{b}");
            }
        }
        assert!(
            seen_own > 0,
            "the searches found nothing of the tenant's own"
        );
    }

    // Ids are per tenant: b writing an id that a holds is b's own document (no "belongs to another tenant",
    // which would confirm a's id), and b's delete of it leaves a's alone.
    let (s, b) = call(
        "POST",
        &format!("{}/v1/collections/docs/documents", dev.url),
        Some(&key_b),
        Some(
            &json!({"documents": [{"id": "a-0", "text": "Quintar ospreys nest on the old pier every spring."}]}),
        ),
    );
    assert_eq!((s, b["accepted"].as_u64()), (200, Some(1)), "{b}");
    let hits_of = |key: &str, query: &str| -> Vec<String> {
        let (s, b) = call(
            "POST",
            &format!("{}/v1/collections/docs/search", dev.url),
            Some(key),
            Some(&json!({"query": query, "k": 20})),
        );
        assert_eq!(s, 200, "{b}");
        b["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["text"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(hits_of(&key_b, "ospreys pier")
        .iter()
        .any(|t| t.contains("ospreys")));
    assert!(!hits_of(&key_a, "ospreys pier")
        .iter()
        .any(|t| t.contains("ospreys")));
    let (s, b) = call(
        "DELETE",
        &format!("{}/v1/collections/docs/documents/a-0", dev.url),
        Some(&key_b),
        None,
    );
    assert_eq!(s, 200, "{b}");
    assert!(!hits_of(&key_b, "ospreys pier")
        .iter()
        .any(|t| t.contains("ospreys")));
    let a0_title = tenant_docs("a", "Zorblax", &mut rand::rngs::StdRng::seed_from_u64(15))[0]
        ["title"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        hits_of(&key_a, &a0_title)
            .iter()
            .any(|t| t.contains("Zorblax")),
        "b's delete of its own a-0 removed a's"
    );

    // Revoked through the CLI: the router and the answer tier both refuse the key within 2 s.
    attest_ok(
        &["key", "revoke", &a_id, "--server", &dev.url],
        &[("ATTEST_API_KEY", ADMIN)],
    );
    let revoked_at = Instant::now();
    let refused = |path: &str, body: Value| loop {
        let (s, _) = call(
            "POST",
            &format!("{}/v1/collections/docs/{path}", dev.url),
            Some(&key_a),
            Some(&body),
        );
        if s == 401 {
            return revoked_at.elapsed();
        }
        assert!(
            revoked_at.elapsed() < Duration::from_secs(10),
            "{path} still accepts a revoked key"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let router_took = refused("search", json!({"query": "heron"}));
    let answer_took = refused("ask", json!({"question": "What does the heron eat?"}));
    assert!(
        router_took < Duration::from_secs(2),
        "router took {router_took:?}"
    );
    assert!(
        answer_took < Duration::from_secs(2),
        "answer tier took {answer_took:?}"
    );
    let (s, _) = call(
        "POST",
        &format!("{}/v1/collections/docs/search", dev.url),
        Some(&key_b),
        Some(&json!({"query": "heron"})),
    );
    assert_eq!(s, 200, "the other key still works");
}
