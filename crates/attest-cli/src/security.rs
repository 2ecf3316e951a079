//! Transport security of `attest serve`: the TLS files of the command line made into the listeners of a role
//! and the credential it presents to other nodes, and the rule that a role does not serve unprotected unless
//! told to (`--insecure`, which then says so at start-up and in every `/readyz` body).
//!
//! Two kinds of listener: *public* ones (router and answer APIs, every `/metrics` port, the gRPC health
//! services) speak TLS without asking for a client certificate — callers prove themselves with API keys, and
//! kubelet probes have no certificate; *internal* ones (shard and meta gRPC, the embedder's API) additionally
//! require a certificate of the cluster CA when `--tls-ca` is given (mutual TLS), which then stands for the
//! cluster key. An internal HTTP API that shares its port with probes (the embedder's) asks for that certificate
//! without requiring it: its guard wants a verified certificate or the cluster key on the API routes only.

use std::sync::Arc;

use anyhow::Context;
use attest_proto::tls::ClientTls;
use attest_proto::ClusterCredential;
use attest_telemetry::listener::Listener;
use attest_telemetry::tls::{ServerTls, ServerTlsFiles};
use tokio::net::TcpListener;

use crate::cli::{NodeCredentialArgs, Role, ServeArgs};

/// The TLS configurations and the cluster credential of one `attest serve` process.
pub struct Security {
    public: Option<Arc<ServerTls>>,
    internal: Option<Arc<ServerTls>>,
    /// `internal` with the client certificate asked for but optional (probes get in; the guard decides).
    internal_http: Option<Arc<ServerTls>>,
    credential: ClusterCredential,
}

impl Security {
    /// Reads the files of `args` (a bad certificate stops the start) and applies the rule: TLS, API keys where
    /// callers come in, the cluster credential where nodes talk — or `--insecure`.
    pub fn from_args(args: &ServeArgs) -> anyhow::Result<Security> {
        if !args.insecure {
            let missing = missing_protection(args);
            anyhow::ensure!(
                missing.is_empty(),
                "attest serve --role {} will not serve without {}; give --insecure to run unprotected anyway \
                 (a test, a trusted network)",
                role_name(args.role),
                missing.join(", ")
            );
        } else {
            tracing::warn!(event = "insecure", missing = %missing_protection(args).join(", "),
                "started with --insecure: traffic may be plaintext and unauthenticated");
            attest_telemetry::ops::mark_insecure();
        }
        let (public, internal, internal_http) = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => {
                let files = ServerTlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                    client_ca: None,
                    client_cert_optional: false,
                };
                let public = ServerTls::load(files.clone()).context("--tls-cert/--tls-key")?;
                let (internal, internal_http) = match &args.tls_ca {
                    Some(ca) => {
                        let mutual = ServerTlsFiles {
                            client_ca: Some(ca.clone()),
                            ..files
                        };
                        let optional = ServerTlsFiles {
                            client_cert_optional: true,
                            ..mutual.clone()
                        };
                        (
                            ServerTls::load(mutual).context("--tls-ca")?,
                            ServerTls::load(optional).context("--tls-ca")?,
                        )
                    }
                    None => (Arc::clone(&public), Arc::clone(&public)),
                };
                (Some(public), Some(internal), Some(internal_http))
            }
            _ => (None, None, None),
        };
        let credential = node_credential(&NodeCredentialArgs {
            cluster_key: args.cluster_key.clone(),
            tls_ca: args.tls_ca.clone(),
            tls_cert: args.tls_cert.clone(),
            tls_key: args.tls_key.clone(),
        })?;
        Ok(Security {
            public,
            internal,
            internal_http,
            credential,
        })
    }

    /// A listener for callers (API keys), TLS when configured.
    pub fn public(&self, tcp: TcpListener) -> Listener {
        Listener::new(tcp, self.public.clone())
    }

    /// A listener for other nodes: mutual TLS when a cluster CA is configured.
    pub fn internal(&self, tcp: TcpListener) -> Listener {
        Listener::new(tcp, self.internal.clone())
    }

    /// A listener for an internal HTTP API beside open probe routes: under mutual TLS the client certificate is
    /// asked for but optional, and `ClusterGuard::for_listener` then checks it (or the cluster key) per route.
    pub fn internal_http(&self, tcp: TcpListener) -> Listener {
        Listener::new(tcp, self.internal_http.clone())
    }

    /// What this process presents to other nodes.
    pub fn credential(&self) -> &ClusterCredential {
        &self.credential
    }

    /// The client side of TLS (the cluster CA and this node's certificate), when configured.
    pub fn client_tls(&self) -> Option<&ClientTls> {
        self.credential.tls()
    }
}

/// What a process presents to the internal services: the cluster key, and with a cluster CA the client side of
/// TLS (its certificate, when given, for mutual TLS). A node's and an operator's command (`attest status`,
/// `attest cluster rebalance`) alike.
pub fn node_credential(args: &NodeCredentialArgs) -> anyhow::Result<ClusterCredential> {
    let mut credential = crate::cluster::cluster_credential(args.cluster_key.as_deref())?;
    if let Some(ca) = &args.tls_ca {
        let identity = args.tls_cert.as_deref().zip(args.tls_key.as_deref());
        let tls = ClientTls::from_files(ca, identity).context("--tls-ca")?;
        credential = credential.with_tls(tls);
    }
    Ok(credential)
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Meta => "meta",
        Role::Shard => "shard",
        Role::Router => "router",
        Role::Answer => "answer",
        Role::Embedder => "embedder",
    }
}

/// What `args` lacks to serve protected, as the flags that would provide it.
fn missing_protection(args: &ServeArgs) -> Vec<&'static str> {
    let mut missing = Vec::new();
    if args.tls_cert.is_none() {
        missing.push("TLS (--tls-cert, --tls-key)");
    }
    if matches!(args.role, Role::Router | Role::Answer) && args.admin_key.is_none() {
        missing.push("API keys (--admin-key)");
    }
    // Internal services (meta, shard, embedder) admit only the cluster credential; router and answer present it
    // to them (the answer tier only to meta, for thresholds).
    let needs_cluster_credential = match args.role {
        Role::Meta | Role::Shard | Role::Router | Role::Embedder => true,
        Role::Answer => !args.meta.is_empty(),
    };
    if needs_cluster_credential && args.cluster_key.is_none() && args.tls_ca.is_none() {
        missing.push("the cluster credential (--cluster-key or --tls-ca)");
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn serve_args(extra: &[&str]) -> ServeArgs {
        let mut argv = vec!["attest", "serve"];
        argv.extend_from_slice(extra);
        match crate::cli::Cli::try_parse_from(argv).unwrap().command {
            crate::cli::Command::Serve(args) => args,
            _ => unreachable!(),
        }
    }

    #[test]
    fn each_role_names_what_it_lacks() {
        let missing = |extra: &[&str]| missing_protection(&serve_args(extra));
        assert_eq!(
            missing(&["--role", "router"]),
            [
                "TLS (--tls-cert, --tls-key)",
                "API keys (--admin-key)",
                "the cluster credential (--cluster-key or --tls-ca)"
            ]
        );
        assert_eq!(
            missing(&["--role", "embedder", "--cluster-key", "k"]),
            ["TLS (--tls-cert, --tls-key)"]
        );
        assert_eq!(
            missing(&[
                "--role",
                "answer",
                "--admin-key",
                "a",
                "--tls-cert",
                "c",
                "--tls-key",
                "k"
            ]),
            Vec::<&str>::new()
        );
        assert!(missing(&[
            "--role",
            "shard",
            "--meta",
            "http://m:1",
            "--tls-cert",
            "c",
            "--tls-key",
            "k",
            "--tls-ca",
            "ca"
        ])
        .is_empty());
        assert_eq!(
            missing(&[
                "--role",
                "shard",
                "--meta",
                "http://m:1",
                "--tls-cert",
                "c",
                "--tls-key",
                "k"
            ]),
            ["the cluster credential (--cluster-key or --tls-ca)"]
        );
        let refused = Security::from_args(&serve_args(&["--role", "meta"]))
            .err()
            .unwrap();
        assert!(refused.to_string().contains("--insecure"), "{refused}");
    }
}
