//! The command line's node arguments turned into what `attest_node` starts: a [`NodeConfig`] for
//! `attest serve`, a [`DevConfig`] for `attest dev`, [`Credentials`] for the operator's commands.

use attest_node::dev::DevConfig;
use attest_node::{config, Credentials, MetaId, NodeConfig};

use crate::cli::{DevArgs, NodeCredentialArgs, ServeArgs};

pub fn credentials(args: &NodeCredentialArgs) -> Credentials {
    Credentials {
        cluster_key: args.cluster_key.clone(),
        tls_ca: args.tls_ca.clone(),
        tls_cert: args.tls_cert.clone(),
        tls_key: args.tls_key.clone(),
    }
}

/// `attest serve`'s arguments with the configuration file and the process's environment.
pub fn node_config(args: ServeArgs) -> anyhow::Result<NodeConfig> {
    let mut config = config::load(args.config.as_deref(), std::env::vars())?;
    config.snapshots.allowed_roots.extend(args.snapshot_roots);
    let meta_id = match (args.meta_id, args.meta_id_from_hostname) {
        (Some(_), true) => {
            anyhow::bail!("give --meta-id (ATTEST_META_ID) or --meta-id-from-hostname, not both")
        }
        (Some(id), false) => MetaId::Given(id),
        (None, true) => MetaId::FromHostname,
        (None, false) => MetaId::Missing,
    };
    Ok(NodeConfig {
        http: args.http,
        grpc: args.grpc,
        model_dir: args.model_dir,
        embedder_url: args.embedder_url,
        router: args.router,
        admin_key: args.admin_key,
        metrics_token: args.metrics_token,
        credentials: credentials(&args.credentials),
        insecure: args.insecure,
        meta: args.meta,
        node_name: args.node_name,
        advertise: args.advertise,
        zone: args.zone,
        meta_id,
        bootstrap_if_empty: args.bootstrap_if_empty,
        meta_peers: args.meta_peers,
        join: args.join,
        ..NodeConfig::new(args.role, config, args.data_dir)
    })
}

/// `attest dev`'s arguments with the configuration file and the process's environment.
pub fn dev_config(args: &DevArgs) -> anyhow::Result<DevConfig> {
    let mut config = config::load(args.config.as_deref(), std::env::vars())?;
    config
        .snapshots
        .allowed_roots
        .extend(args.snapshot_roots.iter().cloned());
    Ok(DevConfig {
        config,
        data_dir: args.data_dir.clone(),
        shards: args.shards,
        model_dir: args.model_dir.clone(),
        embedder_url: args.embedder_url.clone(),
        admin_key: args.admin_key.clone(),
    })
}
