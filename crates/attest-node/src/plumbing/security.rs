//! Transport security of a node (`attest serve`): the TLS files of the command line made into the listeners of a role
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

use crate::node_config::{Credentials, NodeConfig, Role};

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
    pub fn for_node(args: &NodeConfig) -> anyhow::Result<Security> {
        // Even with --insecure: this is not "unprotected" but protected in a way that cannot work.
        if let Some(problem) = incomplete_security(args) {
            anyhow::bail!("attest serve --role {}: {problem}", args.role.name());
        }
        if !args.insecure {
            let missing = missing_protection(args);
            anyhow::ensure!(
                missing.is_empty(),
                "attest serve --role {} will not serve without {}; give --insecure to run unprotected anyway \
                 (a test, a trusted network)",
                args.role.name(),
                missing.join(", ")
            );
        } else {
            tracing::warn!(event = "insecure", missing = %missing_protection(args).join(", "),
                "started with --insecure: traffic may be plaintext and unauthenticated");
            attest_telemetry::ops::mark_insecure();
        }
        let (public, internal, internal_http) =
            match (&args.credentials.tls_cert, &args.credentials.tls_key) {
                (Some(cert), Some(key)) => {
                    let files = ServerTlsFiles {
                        cert: cert.clone(),
                        key: key.clone(),
                        client_ca: None,
                        client_cert_optional: false,
                    };
                    let public = ServerTls::load(files.clone()).context("--tls-cert/--tls-key")?;
                    let (internal, internal_http) = match &args.credentials.tls_ca {
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
        if let Some(key) = &args.admin_key {
            attest_auth::keyring::admin_key_problem(key)
                .map_err(|e| anyhow::anyhow!("--admin-key: {e}"))?;
        }
        let credential = node_credential(&args.credentials)?;
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
pub fn node_credential(args: &Credentials) -> anyhow::Result<ClusterCredential> {
    let mut credential = cluster_credential(args.cluster_key.as_deref())?;
    if let Some(ca) = &args.tls_ca {
        let identity = args.tls_cert.as_deref().zip(args.tls_key.as_deref());
        let tls = ClientTls::from_files(ca, identity).context("--tls-ca")?;
        credential = credential.with_tls(tls);
    }
    Ok(credential)
}

/// The credential of `--cluster-key` / `ATTEST_CLUSTER_KEY` (none without one).
pub fn cluster_credential(cluster_key: Option<&str>) -> anyhow::Result<ClusterCredential> {
    cluster_key.map_or(Ok(ClusterCredential::none()), |k| {
        ClusterCredential::new(k).map_err(|e| anyhow::anyhow!("--cluster-key: {e}"))
    })
}

/// A security setting that cannot work without another one: keys on where the keys minted with the admin key
/// cannot be read. The router needs `--meta` anyway (its shard map); an answer replica checks keys against the
/// key ring it reads from meta, and without `--meta` would refuse every key but the admin key.
fn incomplete_security(args: &NodeConfig) -> Option<&'static str> {
    if args.credentials.tls_ca.is_some() && args.credentials.tls_cert.is_none() {
        return Some(
            "--tls-ca needs --tls-cert (and --tls-key): a node's internal services admit only clients with a \
             certificate the CA signed, and serve with the node's own",
        );
    }
    (args.role == Role::Answer && args.admin_key.is_some() && args.meta.is_empty()).then_some(
        "--admin-key needs --meta (the meta nodes holding the API keys minted with it): without it every key \
         but the admin key would be refused",
    )
}

/// What `args` lacks to serve protected, as the flags that would provide it.
fn missing_protection(args: &NodeConfig) -> Vec<&'static str> {
    let mut missing = Vec::new();
    if args.credentials.tls_cert.is_none() {
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
    if needs_cluster_credential
        && args.credentials.cluster_key.is_none()
        && args.credentials.tls_ca.is_none()
    {
        missing.push("the cluster credential (--cluster-key or --tls-ca)");
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn node(role: Role, edit: impl FnOnce(&mut NodeConfig)) -> NodeConfig {
        let mut cfg = NodeConfig::new(role, Default::default(), PathBuf::from("d"));
        edit(&mut cfg);
        cfg
    }

    fn tls(cfg: &mut NodeConfig) {
        cfg.credentials.tls_cert = Some("c".into());
        cfg.credentials.tls_key = Some("k".into());
    }

    #[test]
    fn each_role_names_what_it_lacks() {
        assert_eq!(
            missing_protection(&node(Role::Router, |_| {})),
            [
                "TLS (--tls-cert, --tls-key)",
                "API keys (--admin-key)",
                "the cluster credential (--cluster-key or --tls-ca)"
            ]
        );
        assert_eq!(
            missing_protection(&node(Role::Embedder, |c| {
                c.credentials.cluster_key = Some("k".into())
            })),
            ["TLS (--tls-cert, --tls-key)"]
        );
        assert!(missing_protection(&node(Role::Answer, |c| {
            c.admin_key = Some("a".into());
            tls(c);
        }))
        .is_empty());
        let shard_with = |ca: bool| {
            node(Role::Shard, |c| {
                c.meta = vec!["http://m:1".into()];
                tls(c);
                if ca {
                    c.credentials.tls_ca = Some("ca".into());
                }
            })
        };
        assert!(missing_protection(&shard_with(true)).is_empty());
        assert_eq!(
            missing_protection(&shard_with(false)),
            ["the cluster credential (--cluster-key or --tls-ca)"]
        );
        let refused = Security::for_node(&node(Role::Meta, |_| {})).err().unwrap();
        assert!(refused.to_string().contains("--insecure"), "{refused}");
    }

    /// Keys on an answer replica that cannot read the keys minted with its admin key: refused, even insecure.
    #[test]
    fn an_answer_replica_with_keys_and_no_meta_is_refused() {
        let answer = |meta: bool| {
            node(Role::Answer, |c| {
                c.admin_key = Some("a".repeat(32));
                c.insecure = true;
                if meta {
                    c.meta = vec!["http://m:1".into()];
                }
            })
        };
        let refused = Security::for_node(&answer(false)).err().unwrap();
        assert!(
            refused.to_string().contains("--admin-key needs --meta"),
            "{refused}"
        );
        assert!(incomplete_security(&answer(true)).is_none());
        assert!(incomplete_security(&node(Role::Answer, |c| c.insecure = true)).is_none());
    }

    /// A node given the cluster CA without a certificate of its own cannot take part in mutual TLS: refused at
    /// start, even insecure (the operator's commands take `--tls-ca` alone, for a meta served over TLS).
    #[test]
    fn a_node_with_the_cluster_ca_and_no_certificate_is_refused() {
        let refused = Security::for_node(&node(Role::Shard, |c| {
            c.credentials.tls_ca = Some("ca".into());
            c.insecure = true;
        }))
        .err()
        .unwrap();
        assert!(
            refused.to_string().contains("--tls-ca needs --tls-cert"),
            "{refused}"
        );
    }
}
