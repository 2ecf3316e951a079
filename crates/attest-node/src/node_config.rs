//! What one node runs, resolved before it starts: the configuration (file, then `ATTEST__SECTION__KEY`
//! variables) and the per-process settings the command line gives (role, addresses, identity, credentials).
//! The CLI turns its parsed arguments into a [`NodeConfig`]; tests and benchmarks build one directly.

use std::path::PathBuf;

use crate::config::AttestConfig;

/// One role of the cluster; a process runs one (`attest serve --role ...`, whose values and help these are),
/// `attest dev` runs them all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Cluster metadata under Raft (`--meta-id`, `--meta-peers` or `--join`).
    Meta,
    Shard,
    Router,
    /// An embedding service (OpenAI-compatible and text-embeddings-inference APIs) over the local model.
    Embedder,
    /// The answer tier: `POST /v1/collections/{name}/ask`, reaching the router over gRPC (`--router`).
    Answer,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Meta => "meta",
            Role::Shard => "shard",
            Role::Router => "router",
            Role::Embedder => "embedder",
            Role::Answer => "answer",
        }
    }
}

/// What a process presents to the internal services, and trusts: the cluster key, and under TLS the cluster
/// CA and this node's certificate. A node's and an operator's command (`attest status`) alike.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    pub cluster_key: Option<String>,
    /// PEM CA of the cluster (mutual TLS on internal services; it then stands for the cluster key).
    pub tls_ca: Option<PathBuf>,
    /// PEM certificate served on every listener and presented to other nodes under mutual TLS.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
}

/// How a meta node knows its Raft id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaId {
    Given(u64),
    /// The trailing ordinal of the host name plus one (`attest-meta-0` → 1), as a StatefulSet names its pods.
    FromHostname,
    Missing,
}

/// Everything `serve` needs to start a role.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub role: Role,
    pub config: AttestConfig,
    pub data_dir: PathBuf,
    /// HTTP listen address (each role's default when `None`: see [`crate::Listeners::bind`]).
    pub http: Option<String>,
    /// gRPC listen address (each role's default when `None`).
    pub grpc: Option<String>,
    /// Directory of the local embedding model.
    pub model_dir: Option<PathBuf>,
    /// Embed through this remote service instead of the local model.
    pub embedder_url: Option<String>,
    /// Answer role: the router's gRPC endpoint.
    pub router: Option<String>,
    /// Router and answer: the bootstrap admin key (authentication on).
    pub admin_key: Option<String>,
    /// The bearer token `/metrics` wants.
    pub metrics_token: Option<String>,
    pub credentials: Credentials,
    /// Serve without TLS or keys (refused otherwise).
    pub insecure: bool,
    /// The meta nodes of the cluster this node joins.
    pub meta: Vec<String>,
    /// Shard: its stable name (default: the data directory).
    pub node_name: Option<String>,
    /// The address others reach this node's gRPC at.
    pub advertise: Option<String>,
    pub zone: String,
    pub meta_id: MetaId,
    pub bootstrap_if_empty: bool,
    /// Meta: the initial voters, `ID=ADDRESS`.
    pub meta_peers: Vec<String>,
    /// Meta: join an existing group through this member.
    pub join: Option<String>,
}

impl NodeConfig {
    /// A node of `role` with the default configuration, its data under `data_dir`, no addresses chosen.
    pub fn new(role: Role, config: AttestConfig, data_dir: PathBuf) -> NodeConfig {
        NodeConfig {
            role,
            config,
            data_dir,
            http: None,
            grpc: None,
            model_dir: None,
            embedder_url: None,
            router: None,
            admin_key: None,
            metrics_token: None,
            credentials: Credentials::default(),
            insecure: false,
            meta: Vec::new(),
            node_name: None,
            advertise: None,
            zone: String::new(),
            meta_id: MetaId::Missing,
            bootstrap_if_empty: false,
            meta_peers: Vec::new(),
            join: None,
        }
    }

    /// A remote embedder inside the cluster is an internal service: unless configured otherwise, it is reached
    /// with this node's TLS files and cluster key.
    pub(crate) fn embedder_config(&self) -> attest_embed::EmbedderConfig {
        let mut embedder = self.config.embedder.clone();
        let remote = &mut embedder.remote;
        if remote.ca_file.is_none() && self.credentials.tls_ca.is_some() {
            remote.ca_file = self.credentials.tls_ca.clone();
            remote.client_cert_file = self.credentials.tls_cert.clone();
            remote.client_key_file = self.credentials.tls_key.clone();
        }
        if remote.api_key.is_none() {
            remote.api_key = self.credentials.cluster_key.clone();
        }
        embedder
    }
}
