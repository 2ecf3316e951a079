//! Command-line definitions.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "attest",
    version,
    about = "Grounded retrieval: a sharded hybrid (IVF_PQ + BM25) search cluster"
)]
pub struct Cli {
    /// Router HTTP address used by the client commands.
    #[arg(
        long,
        global = true,
        env = "ATTEST_SERVER",
        default_value = "http://127.0.0.1:7700"
    )]
    pub server: String,
    /// Log level filter (e.g. info, debug, attest_index=debug); ONNX Runtime (`ort`), tantivy and rmcp log at warn
    /// unless named ("info,ort=info"). Default: info, except `attest dev` on a terminal: warn (its start-up
    /// summary on stdout says what a user needs; the JSON lines at info stay a `--log-level info` away).
    #[arg(long, global = true, env = "ATTEST_LOG")]
    pub log_level: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Runs every role in one process: shard nodes, router (HTTP + gRPC), local embedder.
    Dev(DevArgs),
    /// Runs one role.
    Serve(Box<ServeArgs>),
    /// Creates, lists or drops collections.
    #[command(subcommand)]
    Collection(CollectionCommand),
    /// Ingests JSONL / Markdown / text files.
    Ingest(IngestArgs),
    /// Searches a collection.
    Search(SearchArgs),
    /// Asks a question: streams a grounded answer, then its citations and per-claim support (or why it
    /// abstained).
    Ask(AskArgs),
    /// Moved to `attest-lab train`.
    #[command(hide = true, disable_help_flag = true)]
    Train(MovedArgs),
    /// Moved to `attest-lab eval`.
    #[command(hide = true, disable_help_flag = true)]
    Eval(MovedArgs),
    /// Moved to `attest-lab bench`.
    #[command(hide = true, disable_help_flag = true)]
    Bench(MovedArgs),
    /// The cluster as meta sees it: nodes, the Raft leader and term, shards and replica health.
    Status(StatusArgs),
    /// Creates, lists or revokes API keys (admin scope; the caller's key in `ATTEST_API_KEY`).
    #[command(subcommand)]
    Key(KeyCommand),
    /// Cluster operations (through meta).
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Snapshots of collections to a directory or S3-compatible storage, and restores from them (admin scope;
    /// through a running router, `--server`).
    #[command(subcommand)]
    Snapshot(SnapshotCommand),
    /// The meta Raft group itself (its voters).
    #[command(subcommand)]
    Meta(MetaCommand),
    /// The configuration as every role would resolve it (file, then `ATTEST__SECTION__KEY` variables).
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Prints the OpenAPI 3.1 document of HTTP API v1 that `attest dev` serves at `/v1/openapi.json` (the
    /// router's and the answer tier's routes), generated from the handlers; `make openapi` writes it to
    /// docs/openapi.json.
    Openapi(OpenapiArgs),
    /// A Model Context Protocol server for agents (tools `search`, `ask`, `list_collections`; the collections
    /// as resources) in front of the router at `--server`, with the key in `ATTEST_API_KEY`: over stdio, or
    /// streamable HTTP with `--http`.
    Mcp(McpArgs),
}

#[derive(Args)]
pub struct McpArgs {
    /// The collection `search` and `ask` use when a call names none.
    #[arg(long, env = "ATTEST_MCP_COLLECTION")]
    pub collection: Option<String>,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (e.g. 127.0.0.1:7710; port 0: any free one).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// A `Host` the HTTP transport accepts besides loopback's (repeatable; it refuses others against DNS
    /// rebinding).
    #[arg(long, value_name = "HOST", requires = "http")]
    pub allowed_host: Vec<String>,
}

/// Whatever followed a subcommand that moved to `attest-lab`, to print the command to run instead.
#[derive(Args)]
pub struct MovedArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

#[derive(Args)]
pub struct OpenapiArgs {
    /// Write the document to this file instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Subcommand)]
pub enum KeyCommand {
    /// Mints a key and prints it (only this once); meta keeps its hash.
    Create {
        /// read, write, admin (comma-separated; a higher scope includes the lower ones).
        #[arg(long, value_delimiter = ',', required = true)]
        scopes: Vec<String>,
        /// Tenants the key may act for (comma-separated), or `*`.
        #[arg(long, value_delimiter = ',', required = true)]
        tenants: Vec<String>,
        /// Collections the key may act on (default: all).
        #[arg(long, value_delimiter = ',')]
        collections: Vec<String>,
        /// Expiry: 30d, 12h, 90m, 3600s (default: never).
        #[arg(long)]
        expires: Option<String>,
        /// Print the whole response as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Lists the keys (ids and grants; never the keys).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Revokes a key by id: every router and answer replica refuses it within 2 s.
    Revoke { id: String },
}

#[derive(Subcommand)]
pub enum SnapshotCommand {
    /// Snapshots collections while they serve: meta's state, one replica of every shard, a manifest last.
    Create {
        /// A directory every shard node and the router reach, or s3://bucket[/prefix] (credentials and endpoint
        /// from the nodes' AWS_* environment).
        #[arg(long)]
        to: String,
        /// Collections (comma-separated; default: all).
        #[arg(long, value_delimiter = ',')]
        collections: Vec<String>,
        /// The snapshot's id (default: snapshot-<UTC time>).
        #[arg(long)]
        id: Option<String>,
        /// Retention: then delete the oldest complete snapshots of the destination beyond this many.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        keep: Option<u32>,
        #[arg(long)]
        json: bool,
        /// Start the snapshot job and print it, without following it.
        #[arg(long)]
        detach: bool,
    },
    /// Deletes a snapshot from a destination.
    Delete {
        #[arg(long)]
        from: String,
        id: String,
    },
    /// Lists the complete snapshots in a destination (and damaged ones, with why).
    List {
        #[arg(long)]
        from: String,
        #[arg(long)]
        json: bool,
    },
    /// Restores collections into the running cluster, whatever its node count; every file is checked first.
    Restore {
        #[arg(long)]
        from: String,
        /// The snapshot's id (see `attest snapshot list`).
        id: String,
        /// Collections (comma-separated; default: all of the snapshot).
        #[arg(long, value_delimiter = ',')]
        collections: Vec<String>,
        /// Restore a collection under another name: old=new (repeatable).
        #[arg(long, value_parser = parse_rename)]
        rename: Vec<(String, String)>,
        /// Replace collections that exist (only once the snapshot's files are checked and staged).
        #[arg(long)]
        force: bool,
        #[arg(long)]
        json: bool,
        /// Start the restore job and print it, without following it.
        #[arg(long)]
        detach: bool,
    },
    /// Lists snapshot jobs (running ones and the last finished), or shows one; `--follow` waits for it.
    Jobs {
        /// One job's id (default: all).
        id: Option<String>,
        #[arg(long)]
        follow: bool,
        #[arg(long)]
        json: bool,
    },
    /// Stops a running snapshot or restore job.
    Cancel { id: String },
}

fn parse_rename(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((old, new)) if !old.is_empty() && !new.is_empty() => Ok((old.into(), new.into())),
        _ => Err(format!("`{s}`: expected old=new")),
    }
}

#[derive(Subcommand)]
pub enum ConfigCommand {
    /// Prints the resolved configuration as YAML, or every unknown key and invalid value (exit status 1).
    Check {
        /// YAML configuration file (default: only the environment and the built-in defaults).
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

#[derive(Args)]
pub struct StatusArgs {
    /// Meta node addresses, comma-separated (any one answers).
    #[arg(long, env = "ATTEST_META", value_delimiter = ',', required = true)]
    pub meta: Vec<String>,
    #[command(flatten)]
    pub node: NodeCredentialArgs,
    #[arg(long)]
    pub json: bool,
}

/// What a node, and an operator's command to meta, presents to the cluster's internal services: the cluster key,
/// or under mutual TLS the cluster CA and a certificate it signed. The same flags and environment variables for
/// `attest serve` and the operator's commands.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct NodeCredentialArgs {
    /// The cluster credential: what nodes present to each other's internal services (`ShardService`,
    /// `MetaService`), which then accept nothing else. The same on every node of a cluster.
    #[arg(long, env = "ATTEST_CLUSTER_KEY", hide_env_values = true)]
    pub cluster_key: Option<String>,
    /// PEM CA of the cluster: calls to other nodes (and to meta) trust it, and a node's internal services (shard
    /// and meta gRPC) admit only clients with a certificate it signed (mutual TLS; it then stands for
    /// `--cluster-key`). A node needs `--tls-cert` with it.
    #[arg(long, env = "ATTEST_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// PEM certificate (chain) signed by the cluster CA: presented to the other nodes under mutual TLS, and
    /// served on every listener of `attest serve` (re-read when the file changes).
    #[arg(long, env = "ATTEST_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `--tls-cert`.
    #[arg(long, env = "ATTEST_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

#[derive(Subcommand)]
pub enum MetaCommand {
    /// Removes a voter from the meta Raft group (a configuration change through the leader; a leader asked to
    /// remove itself hands leadership over first). Do it BEFORE scaling the meta StatefulSet down; the last
    /// voter cannot be removed.
    Remove {
        /// The Raft id of the voter to remove (a StatefulSet pod's ordinal plus one).
        id: u64,
        #[arg(long, env = "ATTEST_META", value_delimiter = ',', required = true)]
        meta: Vec<String>,
        #[command(flatten)]
        node: NodeCredentialArgs,
        /// Print the voters left as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum ClusterCommand {
    /// Moves replicas onto under-used shard nodes (e.g. one just added) without losing writes: each move adds a
    /// copy on the target that catches up from a peer, and only then retires the source.
    Rebalance {
        #[arg(long, env = "ATTEST_META", value_delimiter = ',', required = true)]
        meta: Vec<String>,
        #[command(flatten)]
        node: NodeCredentialArgs,
        /// Print the plan without changing anything.
        #[arg(long)]
        dry_run: bool,
        #[arg(long)]
        json: bool,
    },
    /// Takes a shard node out of service: routers read from its peers first and no replica is placed on it.
    /// Without --move (a pod's preStop hook) nothing moves and the drain ends when the node registers again;
    /// with --move (before a scale-in) its replicas are moved onto other nodes, and the drain lasts until --undo.
    Drain(DrainArgs),
}

#[derive(Args, Debug)]
pub struct DrainArgs {
    /// The shard node's registered name (`--node-name`; a shard pod's name in Kubernetes).
    #[arg(long)]
    pub node: String,
    /// Decommission: move every replica the node holds onto other shard nodes (each new copy catches up
    /// before the node's copy is retired).
    #[arg(long = "move", conflicts_with = "undo")]
    pub move_replicas: bool,
    /// End the drain: the node serves reads and receives replicas again.
    #[arg(long)]
    pub undo: bool,
    /// Wait until the node's replicas are served by live peers (with --move: until it holds none), then for
    /// routers to re-read the cluster state (--settle-ms).
    #[arg(long, conflicts_with = "undo")]
    pub wait: bool,
    /// Give up waiting after this long (exit status 1; the drain stays in place).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_secs: u64,
    /// After the wait: time for every router to apply the cluster state (a router that watches meta has it within
    /// milliseconds; this covers one that polls: twice `router.meta_poll_ms`).
    #[arg(long, default_value_t = 1000)]
    pub settle_ms: u64,
    #[arg(long, env = "ATTEST_META", value_delimiter = ',', required = true)]
    pub meta: Vec<String>,
    #[command(flatten)]
    pub node_credential: NodeCredentialArgs,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Clone)]
pub struct DevArgs {
    #[arg(long, default_value = ".attest-data")]
    pub data_dir: PathBuf,
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub http: String,
    #[arg(long, default_value = "127.0.0.1:7701")]
    pub grpc: String,
    /// Shard nodes to run in the process (so fan-out and fusion are real).
    #[arg(long, default_value_t = 2)]
    pub shards: usize,
    /// YAML configuration file.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Directory of the configured local embedding model (default: the model's own, `models/<model>`;
    /// `$ATTEST_MODEL_DIR` names all-MiniLM-L6-v2's, wherever that model is loaded).
    #[arg(long)]
    pub model_dir: Option<PathBuf>,
    /// Embed through a remote service instead of the local model (OpenAI-compatible `…/v1/embeddings` or
    /// text-embeddings-inference `…/embed`; a base URL means OpenAI-compatible), behind the circuit breaker.
    #[arg(long, env = "ATTEST_EMBEDDER_URL")]
    pub embedder_url: Option<String>,
    /// Turns authentication on: every API request then needs this admin key or a key minted with it
    /// (`attest key create`). Without it `attest dev` is open (loopback development only).
    #[arg(long, env = "ATTEST_ADMIN_KEY", hide_env_values = true)]
    pub admin_key: Option<String>,
    /// A directory under which snapshot destinations are admitted (repeatable; adds to
    /// `snapshots.allowed_roots`). Default when none is configured: DATA_DIR/snapshots.
    #[arg(long = "snapshot-root", value_name = "DIR")]
    pub snapshot_roots: Vec<PathBuf>,
}

#[derive(Args, Clone)]
pub struct ServeArgs {
    #[arg(long, value_enum)]
    pub role: attest_node::Role,
    #[arg(long, default_value = ".attest-data")]
    pub data_dir: PathBuf,
    /// gRPC listen address: the service of a shard or router (default 127.0.0.1:7701); for the embedder and
    /// answer roles, the gRPC health service only (none unless given).
    #[arg(long)]
    pub grpc: Option<String>,
    /// HTTP listen address: the API of the router (default 127.0.0.1:7700) and the embedder (default
    /// 127.0.0.1:7900); `/healthz`, `/readyz`, `/metrics` of a shard or meta node (none unless given).
    #[arg(long)]
    pub http: Option<String>,
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Directory of the configured local embedding model (as `attest dev --model-dir`).
    #[arg(long)]
    pub model_dir: Option<PathBuf>,
    /// Router: embed queries and chunks through this remote service (see `attest dev --embedder-url`).
    #[arg(long, env = "ATTEST_EMBEDDER_URL")]
    pub embedder_url: Option<String>,
    /// Answer tier: the router's gRPC endpoint, e.g. http://127.0.0.1:7701.
    #[arg(long)]
    pub router: Option<String>,
    /// Router and answer tier: turns authentication on with this bootstrap admin key; the keys minted with it
    /// live in meta (`--meta`).
    #[arg(long, env = "ATTEST_ADMIN_KEY", hide_env_values = true)]
    pub admin_key: Option<String>,
    #[command(flatten)]
    pub credentials: NodeCredentialArgs,
    /// Run without TLS or without keys. Refused otherwise: a role serves only with `--tls-cert`/`--tls-key`, the
    /// router and answer tier only with `--admin-key`, and meta, shard and router only with the cluster
    /// credential (`--cluster-key` or `--tls-ca`).
    #[arg(long)]
    pub insecure: bool,
    /// A bearer token `/metrics` then wants (open without one, as scrapers inside a cluster usually are).
    #[arg(long, env = "ATTEST_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,
    /// Shard and router: a directory under which snapshot destinations are admitted (repeatable; adds to
    /// `snapshots.allowed_roots`; none by default: then only s3:// destinations).
    #[arg(long = "snapshot-root", value_name = "DIR")]
    pub snapshot_roots: Vec<PathBuf>,
    /// Join the cluster whose meta nodes are these (comma-separated): a router takes its shard map from them
    /// (required), a shard without it serves alone, an answer replica reads the collections' thresholds from
    /// them (without it, `answer.min_confidence` holds for every collection).
    #[arg(long, env = "ATTEST_META", value_delimiter = ',')]
    pub meta: Vec<String>,
    /// Shard role in a cluster: the node's stable name (default: its data directory).
    #[arg(long)]
    pub node_name: Option<String>,
    /// The address others reach this node's gRPC at (default: http:// + the --grpc address).
    #[arg(long)]
    pub advertise: Option<String>,
    /// Failure zone of the node (replicas of a shard are spread over zones).
    #[arg(long, default_value = "")]
    pub zone: String,
    /// Meta role: this node's Raft id (1, 2, ...).
    #[arg(long, env = "ATTEST_META_ID")]
    pub meta_id: Option<u64>,
    /// Meta role: the Raft id is the trailing ordinal of the host name plus one (`attest-meta-0` → 1), as a
    /// StatefulSet names its pods; the host name is `$HOSTNAME`, else the kernel's.
    #[arg(long)]
    pub meta_id_from_hostname: bool,
    /// Meta role, with an empty data directory: join the group when any `--meta-peers` node holds one; bootstrap
    /// (alone, the others then join) only when none answers within `meta.bootstrap_wait_ms` and this node has
    /// the lowest id of the list. With data on disk the node resumes as always.
    #[arg(long, conflicts_with = "join")]
    pub bootstrap_if_empty: bool,
    /// Meta role: the initial voters, `ID=ADDRESS` comma-separated, the same on every initial node, e.g.
    /// 1=http://127.0.0.1:7601,2=http://127.0.0.1:7602,3=http://127.0.0.1:7603.
    #[arg(long, value_delimiter = ',')]
    pub meta_peers: Vec<String>,
    /// Meta role: join an existing group through this member instead of bootstrapping.
    #[arg(long)]
    pub join: Option<String>,
}

#[derive(Args)]
pub struct AskArgs {
    /// The question.
    pub question: String,
    /// The collection to answer from.
    #[arg(long, short, default_value = "default")]
    pub collection: String,
    /// Print the whole response as JSON instead of streaming text.
    #[arg(long)]
    pub json: bool,
    /// Continue the conversation: the earlier questions and answers in the conversation file go with this one
    /// as history (without it, a new conversation starts).
    #[arg(long)]
    pub follow_up: bool,
    /// The conversation file (default `$XDG_STATE_HOME/attest/conversation.json`).
    #[arg(long)]
    pub conversation: Option<PathBuf>,
}

#[derive(Subcommand)]
pub enum CollectionCommand {
    Create {
        name: String,
        #[arg(long)]
        shards: Option<u32>,
        /// Replicas of each shard, on distinct shard nodes (default: the router's `default_replication`, 2 in a
        /// cluster, at most one per live shard node; `attest dev` keeps 1).
        #[arg(long)]
        replication: Option<u32>,
        #[arg(long)]
        nlist: Option<u32>,
        #[arg(long)]
        m: Option<u32>,
        #[arg(long)]
        nbits: Option<u32>,
        /// Lists probed by every search that names none (no tuning, unless a recall target is also given).
        #[arg(long)]
        nprobe: Option<u32>,
        /// Recall@10 each shard tunes its search setting to reach, 0.5–1 (default 0.95 unless `--nprobe` is given).
        #[arg(long)]
        recall_target: Option<f64>,
        /// The model that embeds its text, fixed at creation: a local model (`all-minilm-l6-v2`,
        /// `bge-small-en-v1.5`) or the router's embedder (default).
        #[arg(long)]
        embedder: Option<String>,
        #[arg(long)]
        json: bool,
    },
    List {
        #[arg(long)]
        json: bool,
    },
    Drop {
        name: String,
    },
    /// Re-embeds a collection with another model while it serves and takes writes: new vectors and index are
    /// built beside the old, then it switches to them at once. Follows the job (leaving does not stop it).
    Reembed {
        name: String,
        /// The new model: a local model (`all-minilm-l6-v2`, `bge-small-en-v1.5`) or the router's embedder.
        #[arg(long)]
        embedder: String,
        /// Start the job and print it, without following it.
        #[arg(long)]
        detach: bool,
        #[arg(long)]
        json: bool,
    },
    /// Stops a running re-embedding (its copy is dropped; the collection serves as before).
    ReembedCancel {
        /// The job's id (`reembed-…`, printed when it started).
        id: String,
    },
}

#[derive(Args)]
pub struct IngestArgs {
    /// Files or directories (searched for .jsonl, .ndjson, .md, .markdown, .txt).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// The collection to ingest into.
    #[arg(long, short, default_value = "default")]
    pub collection: String,
    /// Create the collection (default shards and index) if it does not exist; without it, a missing collection
    /// is an error, so a typo cannot create one.
    #[arg(long)]
    pub create: bool,
    /// Documents per request.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum Lane {
    Dense,
    Bm25,
    Hybrid,
}

#[derive(Args)]
pub struct SearchArgs {
    /// The query text.
    pub query: String,
    /// The collection to search.
    #[arg(long, short, default_value = "default")]
    pub collection: String,
    /// Hits to return (1 to the router's `max_k`, 100 by default).
    #[arg(long, short, default_value_t = 10)]
    pub k: u32,
    /// Which lane ranks the hits: dense vectors, BM25, or both fused with Reciprocal Rank Fusion.
    #[arg(long, value_enum, default_value = "hybrid")]
    pub lane: Lane,
    /// Search this tenant's documents (default: the router's default tenant).
    #[arg(long)]
    pub tenant: Option<String>,
    /// Print the router's JSON response instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl Cli {
    /// The log filter: `--log-level` / `ATTEST_LOG` when given, else [`Cli::log_level`]'s default.
    pub fn log_filter(&self) -> String {
        use std::io::IsTerminal;
        match &self.log_level {
            Some(level) => level.clone(),
            None if matches!(self.command, Command::Dev(_)) && std::io::stderr().is_terminal() => {
                "warn".to_string()
            }
            None => "info".to_string(),
        }
    }
}
