//! Issue 15, TLS: a cluster of processes (`attest serve --role meta|shard|router`) started with certificates of a
//! cluster CA made here (rcgen) and no `--insecure` works end to end over HTTPS and gRPC with mutual TLS between
//! its nodes; a client that does not trust the CA is refused; the internal services refuse a client without a
//! cluster certificate (none, or one of another CA) and admit one with it; a certificate rewritten on disk is
//! served from the next connection on, without a restart. The embedder's probe paths need no client certificate
//! under mutual TLS, its API does. `attest serve` without TLS or keys refuses to start unless `--insecure` is
//! given, which `/readyz` then reports.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use attest_proto::v1 as pb;
use attest_proto::v1::shard_service_client::ShardServiceClient;
use common::{start, value_of, Logs, Proc};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use serde_json::{json, Value};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

const ADMIN: &str = "test-admin-key-0123456789abcdef";

/// A certificate authority made for one test.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    /// A node certificate for loopback (server and client use), signed with `key`: (cert PEM, cert DER).
    fn node_cert(&self, name: &str, key: &KeyPair) -> (String, Vec<u8>) {
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params.signed_by(key, &self.cert, &self.key).unwrap();
        (cert.pem(), cert.der().to_vec())
    }
}

/// Files of one node identity under `dir`.
struct NodeFiles {
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
}

fn write_node(dir: &Path, ca: &Ca, name: &str, key: &KeyPair) -> NodeFiles {
    let files = NodeFiles {
        cert: dir.join(format!("{name}.crt")),
        key: dir.join(format!("{name}.key")),
        ca: dir.join("ca.crt"),
    };
    std::fs::write(&files.cert, ca.node_cert(name, key).0).unwrap();
    std::fs::write(&files.key, key.serialize_pem()).unwrap();
    std::fs::write(&files.ca, ca.cert.pem()).unwrap();
    files
}

fn tls_args(f: &NodeFiles) -> Vec<String> {
    [
        "--tls-cert",
        f.cert.to_str().unwrap(),
        "--tls-key",
        f.key.to_str().unwrap(),
        "--tls-ca",
        f.ca.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

fn start_role(args: &[String], dir: &Path, name: &str) -> (Proc, String) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    common::start_role(&args, dir, name)
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// An HTTPS client trusting `ca_pem` only.
fn https_client(ca_pem: &str) -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// The gRPC status of a shard `Stats` call over TLS trusting `ca_pem`, presenting `identity` (cert, key PEM):
/// `Err` when no call got through (the handshake was refused).
async fn shard_stats(
    url: &str,
    ca_pem: &str,
    identity: Option<(&str, &str)>,
) -> Result<tonic::Code, String> {
    let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca_pem));
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    let channel = Channel::from_shared(url.to_string())
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10));
    let channel = channel.connect().await.map_err(|e| format!("{e:?}"))?;
    let request = pb::ShardStatsRequest {
        collection: "c".into(),
        shard: 0,
    };
    // A refused client certificate surfaces on the first call (TLS 1.3 sends its alert after the handshake)
    // as a broken connection (Unavailable, Unknown or Cancelled); only the service's own answers count as
    // having got through.
    match ShardServiceClient::new(channel).stats(request).await {
        Ok(_) => Ok(tonic::Code::Ok),
        Err(s)
            if matches!(
                s.code(),
                tonic::Code::NotFound
                    | tonic::Code::InvalidArgument
                    | tonic::Code::Unauthenticated
                    | tonic::Code::PermissionDenied
            ) =>
        {
            Ok(s.code())
        }
        Err(s) => Err(format!("{s:?}")),
    }
}

/// The certificate (DER) the server at `addr` presents to a client trusting `ca_pem`.
async fn presented_certificate(addr: &str, ca_pem: &str) -> Vec<u8> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_speaks_tls_with_mutual_tls_between_nodes_and_rotates_without_a_restart() {
    let dir = common::RunDir::new();
    let ca = Ca::new("attest test cluster CA");
    let node_key = KeyPair::generate().unwrap();
    let meta_files = write_node(dir.path(), &ca, "meta", &node_key);
    let shard_files = write_node(dir.path(), &ca, "shard", &node_key);
    let router_files = write_node(dir.path(), &ca, "router", &node_key);
    let ca_pem = ca.cert.pem();

    // No --insecure anywhere: mutual TLS stands for the cluster key, the admin key turns API keys on.
    let mut args = strings(&[
        "serve",
        "--role",
        "meta",
        "--meta-id",
        "1",
        "--grpc",
        "127.0.0.1:0",
    ]);
    args.extend(tls_args(&meta_files));
    let (_meta, line) = start_role(&args, dir.path(), "meta");
    let meta = format!("https://{}", value_of(&line, "grpc="));
    let mut args = strings(&[
        "serve",
        "--role",
        "shard",
        "--meta",
        &meta,
        "--grpc",
        "127.0.0.1:0",
    ]);
    args.extend(tls_args(&shard_files));
    let (_shard, line) = start_role(&args, dir.path(), "shard");
    let shard = format!("https://{}", value_of(&line, "grpc="));
    let mut args = strings(&[
        "serve",
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
    ]);
    args.extend(tls_args(&router_files));
    let (_router, line) = start_role(&args, dir.path(), "router");
    let router = value_of(&line, "http=");
    assert!(router.starts_with("https://"), "{line}");

    // End to end over HTTPS: the router reaches meta and the shard over mutual TLS.
    let ca_for_http = ca_pem.clone();
    let router_url = router.clone();
    tokio::task::spawn_blocking(move || {
        let client = https_client(&ca_for_http);
        let post = |path: &str, body: Value| {
            let r = client
                .post(format!("{router_url}{path}"))
                .bearer_auth(ADMIN)
                .json(&body)
                .send()
                .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().unwrap_or(Value::Null))
        };
        let (s, b) = post(
            "/v1/collections",
            json!({"name": "c", "shards": 1, "replication": 1}),
        );
        assert_eq!(s, 201, "{b}");
        let docs = json!({"documents": [{"id": "d1", "title": "Owls", "text": "The barn owl hunts at night."}]});
        let (s, b) = post("/v1/collections/c/documents", docs);
        assert_eq!(s, 200, "{b}");
        let (s, b) = post(
            "/v1/collections/c/search",
            json!({"query": "when does the barn owl hunt", "k": 5}),
        );
        assert_eq!(s, 200, "{b}");
        assert_eq!(b["hits"][0]["doc_id"], "d1", "{b}");
        // A client that does not trust the cluster CA gets no answer at all.
        let untrusting = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let refused = untrusting.get(format!("{router_url}/readyz")).send();
        assert!(refused.is_err(), "{refused:?}");
        // Nor does one speaking plaintext to the TLS port.
        let plain = router_url.replacen("https://", "http://", 1);
        assert!(untrusting.get(format!("{plain}/readyz")).send().is_err());
    })
    .await
    .unwrap();

    // The operator's `attest status` reaches meta over mutual TLS with a cluster certificate.
    let out = std::process::Command::new(common::attest_bin())
        .args(["status", "--json", "--meta", &meta])
        .args(tls_args(&router_files))
        .env("ATTEST_LOG", "error")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["collections"][0]["name"], "c", "{report}");

    // Mutual TLS on the shard's internal service: no certificate, or one of another CA, is refused; a
    // cluster certificate gets in.
    let cert_pem = std::fs::read_to_string(&shard_files.cert).unwrap();
    let key_pem = node_key.serialize_pem();
    let rogue = Ca::new("someone else's CA");
    let rogue_key = KeyPair::generate().unwrap();
    let (rogue_cert, _) = rogue.node_cert("intruder", &rogue_key);
    let anonymous = shard_stats(&shard, &ca_pem, None).await;
    assert!(anonymous.is_err(), "no client certificate: {anonymous:?}");
    let rogue_key_pem = rogue_key.serialize_pem();
    let intruder = shard_stats(&shard, &ca_pem, Some((&rogue_cert, &rogue_key_pem))).await;
    assert!(
        intruder.is_err(),
        "a certificate of another CA: {intruder:?}"
    );
    assert_eq!(
        shard_stats(&shard, &ca_pem, Some((&cert_pem, &key_pem))).await,
        Ok(tonic::Code::Ok),
        "a cluster certificate"
    );

    // Rotation: the router's certificate is renewed on disk (same key, new serial and name); the next
    // connection gets the new one, the process is the same.
    let router_addr = router.trim_start_matches("https://").to_string();
    let old_der = presented_certificate(&router_addr, &ca_pem).await;
    let (renewed_pem, renewed_der) = ca.node_cert("router-renewed", &node_key);
    assert_ne!(old_der, renewed_der);
    let staged = dir.path().join("router.crt.new");
    std::fs::write(&staged, renewed_pem).unwrap();
    std::fs::rename(&staged, &router_files.cert).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = presented_certificate(&router_addr, &ca_pem).await;
        if now == renewed_der {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the router still presents its old certificate 10 s after the rotation"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // And it still serves over the renewed certificate.
    let client_ca = ca_pem.clone();
    tokio::task::spawn_blocking(move || {
        let r = https_client(&client_ca)
            .get(format!("{router}/readyz"))
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
    })
    .await
    .unwrap();
}

/// The embedder under mutual TLS: kubelet (no client certificate) reaches `/healthz`, `/readyz` and `/metrics`;
/// the embedding API wants a certificate of the cluster CA (or the cluster key), and a certificate of another CA
/// is refused at the handshake.
#[test]
fn the_embedders_probes_need_no_client_certificate_but_its_api_does() {
    let dir = common::RunDir::new();
    let ca = Ca::new("attest test cluster CA");
    let key = KeyPair::generate().unwrap();
    let files = write_node(dir.path(), &ca, "embedder", &key);
    let mut args = strings(&["serve", "--role", "embedder", "--http", "127.0.0.1:0"]);
    args.extend(tls_args(&files));
    let (_embedder, line) = start_role(&args, dir.path(), "embedder");
    let url = value_of(&line, "http=");
    assert!(url.starts_with("https://"), "{line}");
    let ca_pem = ca.cert.pem();
    let body = json!({"input": ["a probe has no certificate"], "model": "bge-small-en-v1.5"});

    let kubelet = https_client(&ca_pem);
    for path in ["/healthz", "/readyz", "/metrics"] {
        let r = kubelet.get(format!("{url}{path}")).send().unwrap();
        assert_eq!(
            r.status().as_u16(),
            200,
            "{path} without a client certificate"
        );
    }
    let r = kubelet
        .post(format!("{url}/v1/embeddings"))
        .json(&body)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 401, "the API without a certificate");

    let with_identity = |ca_of_cert: &Ca| {
        let (cert, _) = ca_of_cert.node_cert("router", &key);
        let identity =
            reqwest::Identity::from_pem(format!("{cert}{}", key.serialize_pem()).as_bytes())
                .unwrap();
        reqwest::blocking::Client::builder()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
            .identity(identity)
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap()
    };
    let node = with_identity(&ca);
    let r = node
        .post(format!("{url}/v1/embeddings"))
        .json(&body)
        .send()
        .unwrap();
    assert_eq!(
        r.status().as_u16(),
        200,
        "the API with a cluster certificate"
    );
    let v: Value = r.json().unwrap();
    assert_eq!(v["data"][0]["embedding"].as_array().unwrap().len(), 384);

    let stranger = with_identity(&Ca::new("another CA"));
    let refused = stranger
        .post(format!("{url}/v1/embeddings"))
        .json(&body)
        .send();
    assert!(
        refused.is_err(),
        "a certificate of another CA is refused at the handshake: {refused:?}"
    );
}

#[test]
fn serve_refuses_to_run_unprotected_unless_told_to() {
    let dir = common::RunDir::new();
    let out = std::process::Command::new(common::attest_bin())
        .args(["serve", "--role", "router", "--meta", "http://127.0.0.1:9"])
        .env("ATTEST_LOG", "error")
        .env_remove("ATTEST_ADMIN_KEY")
        .env_remove("ATTEST_CLUSTER_KEY")
        .env_remove("ATTEST_TLS_CERT")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needed in ["--tls-cert", "--admin-key", "--cluster-key", "--insecure"] {
        assert!(stderr.contains(needed), "{needed} not named: {stderr}");
    }

    // With --insecure it serves, and says so; `/metrics` wants its token when one is set.
    let (_shard, line) = start(
        &[
            "serve",
            "--insecure",
            "--metrics-token",
            "scrape-token",
            "--role",
            "shard",
            "--grpc",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
        ],
        Some(&dir.path().join("shard")),
        Logs::Quiet,
    );
    let url = value_of(&line, "http=");
    let body = common::http()
        .get(format!("{url}/readyz"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(body.starts_with("ready (insecure"), "{body}");
    let metrics = |token: Option<&str>| {
        let mut req = common::http().get(format!("{url}/metrics"));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().unwrap().status().as_u16()
    };
    assert_eq!(metrics(None), 401);
    assert_eq!(metrics(Some("wrong-token")), 401);
    assert_eq!(metrics(Some("scrape-token")), 200);
}
