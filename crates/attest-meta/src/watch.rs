//! `WatchClusterState` on one meta node: the cluster state by version, held open until it changes.
//!
//! The caller names the version (Raft applied index) and the liveness digest of the last state it applied. The
//! node answers at once when its own state is newer, or when the caller holds none; otherwise it holds the call
//! until a write is applied, a node's liveness flips or the leader changes, or the wait ends, and then answers
//! "unchanged" without a state. An idle cluster thus costs one small answer per follower per wait instead of
//! the whole state every poll, and a change (a new or revoked API key, a moved replica) reaches every follower
//! as soon as it is applied.
//!
//! Liveness is the leader's soft state (heartbeats, outside the log): a node turns dead by the passing of time,
//! not by an event, so a held call looks at it every [`LIVENESS_CHECK`]. That is far inside the node timeout
//! the flip itself waits for.
//!
//! A node that is behind the caller (a lagging follower asked after the leader) never answers with its older
//! state: it holds the call until it has caught up, so a caller never goes backwards.
//!
//! A caller that accepts deltas is sent only what changed since its version, while this node's [`ChangeLog`]
//! still covers that version: the records each applied batch touched, for its last [`CHANGELOG_BATCHES`]
//! batches (memory only; a restart or an installed Raft snapshot starts it afresh, and an older caller gets the
//! whole state). With a thousand collections the whole state is ~100 KB; one changed key or manifest is a few
//! hundred bytes. Collection aliases are few: every delta carries all of them, so a caller replaces its own.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::time::Duration;

use attest_proto::v1 as pb;
use tokio::time::Instant;

use crate::convert;
use crate::records::RecordKey;
use crate::route::Core;
use crate::state::StateMachine;

/// How often a held call re-reads liveness.
pub(crate) const LIVENESS_CHECK: Duration = Duration::from_millis(100);
/// The wait when the caller names none.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);
/// The longest a call is held, whatever the caller asks: below common proxies' idle timeouts.
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// Applied batches whose changed records a node keeps for deltas.
pub(crate) const CHANGELOG_BATCHES: usize = 4096;

/// The records each recent applied batch changed (see the module header).
#[derive(Debug, Default)]
pub(crate) struct ChangeLog {
    /// (last index of the batch, the records it changed), oldest first.
    batches: VecDeque<(u64, BTreeSet<RecordKey>)>,
    /// Every change after this index is in `batches`: a caller at or above it can be sent a delta.
    floor: u64,
}

impl ChangeLog {
    /// A log that knows nothing before `index` (the state a node starts from or installs).
    pub fn starting_at(index: u64) -> Self {
        ChangeLog {
            batches: VecDeque::new(),
            floor: index,
        }
    }

    pub fn record(&mut self, last: u64, changed: &BTreeSet<RecordKey>) {
        if !changed.is_empty() {
            self.batches.push_back((last, changed.clone()));
        }
        while self.batches.len() > CHANGELOG_BATCHES {
            if let Some((index, _)) = self.batches.pop_front() {
                self.floor = index;
            }
        }
    }

    /// The records changed after `since`, or `None` when the log no longer reaches back that far.
    fn changed_since(&self, since: u64) -> Option<BTreeSet<&RecordKey>> {
        (since >= self.floor).then(|| {
            self.batches
                .iter()
                .filter(|(last, _)| *last > since)
                .flat_map(|(_, keys)| keys)
                .collect()
        })
    }
}

/// The delta from `since` to the node's applied state, when its change log reaches back that far.
fn delta_since(core: &Core, since: u64) -> Option<pb::ClusterStateDelta> {
    let liveness = core.liveness();
    let leader_id = core.shared.status.read().leader_id;
    // Always the applied state first, then the log (the order the apply loop takes them in): once the state is
    // held, the log holds every batch up to it.
    let applied = core.shared.applied.read();
    let changelog = core.shared.changelog.lock();
    let changed = changelog.changed_since(since)?;
    let state: &StateMachine = &applied.state;
    let mut delta = pb::ClusterStateDelta {
        since_version: since,
        version: applied.index,
        leader_id,
        meta_voters: convert::voters_to_pb(state),
        nodes: convert::cluster_state_nodes(state, &liveness),
        aliases: convert::aliases_to_pb(state),
        ..Default::default()
    };
    for key in changed {
        match key {
            RecordKey::Collection(name) => match state.collections.get(name) {
                Some(c) => delta.collections.push(convert::collection_to_pb(c)),
                None => delta.removed_collections.push(name.clone()),
            },
            RecordKey::ApiKey(hash) => match state.api_keys.get(hash) {
                Some(k) => delta.api_keys.push(convert::key_to_pb(k)),
                None => delta.removed_api_keys.push(hash.clone()),
            },
            RecordKey::Manifest(collection, shard, node) => {
                match state.manifests.get(&(collection.clone(), *shard, *node)) {
                    Some(m) => delta.manifests.push(convert::manifest_to_pb(m)),
                    None => delta.removed_manifests.push(pb::SegmentManifest {
                        collection: collection.clone(),
                        shard: *shard,
                        node_id: *node,
                        ..Default::default()
                    }),
                }
            }
            // Nodes (with their drains), voters and aliases come whole; the meta record is not part of the
            // state.
            RecordKey::Meta
            | RecordKey::Voter(_)
            | RecordKey::Node(_)
            | RecordKey::Drain(_)
            | RecordKey::SnapshotJob(_)
            | RecordKey::Alias(_) => {}
        }
    }
    Some(delta)
}

/// The wait a request asks for, within [`MAX_WAIT`].
pub(crate) fn requested_wait(request: &pb::WatchClusterStateRequest) -> Duration {
    match request.wait_ms {
        0 => DEFAULT_WAIT,
        ms => Duration::from_millis(u64::from(ms)).min(MAX_WAIT),
    }
}

/// This node's applied index and the digest of what it can tell of liveness (the leader it knows, and which
/// data-plane nodes it considers alive).
pub(crate) fn position(core: &Core) -> (u64, u64) {
    let liveness = core.liveness();
    let leader = core.shared.status.read().leader_id;
    let applied = core.shared.applied.read();
    let mut digest = DefaultHasher::new();
    leader.hash(&mut digest);
    for id in applied.state.nodes.keys() {
        (*id, liveness(*id).1).hash(&mut digest);
    }
    (applied.index, digest.finish())
}

/// Whether a node at `now` has something the caller at `since` lacks.
fn is_news(since: (u64, u64), now: (u64, u64)) -> bool {
    let ((since_version, since_liveness), (version, liveness)) = (since, now);
    since_version == 0
        || version > since_version
        || (version == since_version && liveness != since_liveness)
}

/// Answers a watch from this node's own state, holding it for up to `wait` (see the module header).
pub(crate) async fn watch_local(
    core: &Core,
    request: &pb::WatchClusterStateRequest,
    wait: Duration,
    state: impl Fn(&Core) -> pb::ClusterState,
) -> pb::ClusterStateChange {
    let since = (request.since_version, request.since_liveness);
    let deadline = Instant::now() + wait;
    let mut versions = core.shared.versions.subscribe();
    loop {
        versions.borrow_and_update();
        let now = position(core);
        if is_news(since, now) {
            if request.accept_delta && request.since_version != 0 {
                if let Some(delta) = delta_since(core, request.since_version) {
                    return pb::ClusterStateChange {
                        state: None,
                        version: delta.version,
                        liveness: now.1,
                        delta: Some(delta),
                    };
                }
            }
            let state = state(core);
            // The state is read after the position: it is at least as new, and its own version is the one to
            // name next time.
            return pb::ClusterStateChange {
                version: state.version,
                liveness: now.1,
                state: Some(state),
                delta: None,
            };
        }
        if Instant::now() >= deadline {
            return pb::ClusterStateChange {
                state: None,
                version: now.0,
                liveness: now.1,
                delta: None,
            };
        }
        let next_check = (Instant::now() + LIVENESS_CHECK).min(deadline);
        tokio::select! {
            _ = versions.changed() => {}
            _ = tokio::time::sleep_until(next_check) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn news_is_a_newer_version_or_new_liveness_at_the_same_version() {
        assert!(is_news((0, 0), (5, 9)), "a caller holding nothing");
        assert!(is_news((5, 9), (6, 9)));
        assert!(is_news((5, 9), (5, 8)), "a node died, nothing was written");
        assert!(!is_news((5, 9), (5, 9)));
        assert!(
            !is_news((7, 9), (5, 8)),
            "a lagging follower never sends an older state"
        );
    }

    #[test]
    fn the_wait_is_bounded() {
        let ask = |wait_ms| pb::WatchClusterStateRequest {
            wait_ms,
            ..Default::default()
        };
        assert_eq!(requested_wait(&ask(0)), DEFAULT_WAIT);
        assert_eq!(requested_wait(&ask(250)), Duration::from_millis(250));
        assert_eq!(requested_wait(&ask(u32::MAX)), MAX_WAIT);
    }
}
