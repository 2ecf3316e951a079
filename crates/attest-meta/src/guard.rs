//! The bootstrap guard of `--bootstrap-if-empty`: how a meta node with EMPTY Raft storage decides between
//! joining a running group and bootstrapping a new one, so that a recreated pod 0 with a wiped volume never
//! starts a second cluster beside the first.
//!
//! Every listed peer (`MetaConfig::peers`, this node excluded) is asked for its Raft status, over and over:
//! - a peer that answers with voters holds the group: this node joins through it (`AddMetaNode`, as `--join`);
//! - only the node with the LOWEST id of the list may bootstrap, and only once no peer has answered with voters
//!   for `bootstrap_wait_ms`; it bootstraps ALONE (one voter) and the others join it, one conf change each;
//! - the other nodes wait until some peer answers with voters (they never bootstrap).
//!
//! A node with data on disk never gets here: it resumes from its storage.

use std::time::Duration;

use attest_proto::meta_client::meta_service_client;
use attest_proto::v1 as pb;
use attest_proto::ClusterCredential;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::config::MetaConfig;

/// What a node with empty storage does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Start {
    /// Become the first voter of a new group.
    Bootstrap,
    /// Join the group through the member at this address.
    Join(String),
}

/// How long one peer may take to answer one probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// Pause between two rounds of probes.
const ROUND_INTERVAL: Duration = Duration::from_millis(250);
/// How often a node that may not bootstrap says it is still waiting.
const WAITING_LOG_EVERY: Duration = Duration::from_secs(10);

/// Whether `id` is the lowest id of `peers` (the one node allowed to bootstrap).
pub(crate) fn is_lowest(id: u64, peers: &[(u64, String)]) -> bool {
    peers.iter().all(|(p, _)| *p >= id)
}

/// The voters `address` reports (empty: it holds no group, e.g. it is empty and waiting too), or `None` when it
/// did not answer.
async fn probe(
    address: String,
    credential: ClusterCredential,
) -> (String, Option<Vec<pb::MetaPeer>>) {
    let answer = async {
        let mut client = meta_service_client(&address, &credential).ok()?;
        let mut request = tonic::Request::new(pb::MetaStatusRequest {});
        request.set_timeout(PROBE_TIMEOUT);
        let status = tokio::time::timeout(PROBE_TIMEOUT, client.status(request))
            .await
            .ok()?
            .ok()?;
        Some(status.into_inner().voters)
    };
    let voters = answer.await;
    (address, voters)
}

/// Asks every peer once, all at the same time; the address of one that holds a group.
async fn round(config: &MetaConfig) -> Option<String> {
    let mut probes = JoinSet::new();
    for (id, address) in &config.peers {
        if *id != config.id {
            probes.spawn(probe(address.clone(), config.cluster_credential.clone()));
        }
    }
    while let Some(done) = probes.join_next().await {
        if let Ok((address, Some(voters))) = done {
            if !voters.is_empty() {
                return Some(address);
            }
        }
    }
    None
}

/// Decides how a node with empty storage starts (see the module header). Returns only when it may bootstrap or
/// has found a group; a node that may not bootstrap waits for as long as it takes.
pub(crate) async fn decide(config: &MetaConfig) -> anyhow::Result<Start> {
    anyhow::ensure!(
        config.peers.iter().any(|(id, _)| *id == config.id),
        "--bootstrap-if-empty: the peers (--meta-peers) must list this node ({})",
        config.id
    );
    let lowest = is_lowest(config.id, &config.peers);
    let started = Instant::now();
    let mut last_log = started;
    loop {
        if let Some(address) = round(config).await {
            tracing::info!(meta_id = config.id, via = %address, event = "meta_guard_join",
                "empty storage and a peer holds the group: joining it");
            return Ok(Start::Join(address));
        }
        if lowest && started.elapsed() >= config.bootstrap_wait() {
            tracing::info!(
                meta_id = config.id,
                waited_ms = started.elapsed().as_millis() as u64,
                event = "meta_guard_bootstrap",
                "empty storage, lowest id and no peer holds a group: bootstrapping"
            );
            return Ok(Start::Bootstrap);
        }
        if !lowest && last_log.elapsed() >= WAITING_LOG_EVERY {
            last_log = Instant::now();
            tracing::info!(
                meta_id = config.id,
                waited_ms = started.elapsed().as_millis() as u64,
                event = "meta_guard_waiting",
                "empty storage: waiting for a peer that holds the group"
            );
        }
        tokio::time::sleep(ROUND_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_lowest_id_of_the_list_may_bootstrap() {
        let peers: Vec<(u64, String)> = [3, 1, 2].iter().map(|i| (*i, format!("h{i}"))).collect();
        assert!(is_lowest(1, &peers));
        assert!(!is_lowest(2, &peers));
        assert!(!is_lowest(3, &peers));
    }
}
