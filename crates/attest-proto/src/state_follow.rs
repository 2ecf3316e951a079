//! [`StateFollower`]: how a router, an answer replica or a shard node keeps up with meta's cluster state.
//!
//! It holds a long poll on meta (`WatchClusterState`) naming the version it last saw, so meta answers only when
//! something changed, and as soon as it changed; and it keeps the state it was last sent, so meta may answer
//! with what changed since (a delta, see [`crate::state_delta`]) rather than the whole state. Either way the
//! role is handed the whole state. Two cases fall back to re-reading the whole
//! state every `poll` interval, as every role did before the watch: the role's config turns the watch off, or
//! meta answers `Unimplemented` (an older meta during a rolling upgrade). After a failed call the next one waits
//! `poll` first, so a meta outage is not met with a tight loop.

use std::time::Duration;

use tonic::{Code, Status};

use crate::meta_client::MetaClient;
use crate::state_delta::apply_delta;
use crate::v1 as pb;

/// How long a follower asks meta to hold each watch.
pub const WATCH_WAIT: Duration = Duration::from_secs(10);

/// How a follower reads the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowMode {
    /// Long polls by version.
    Watch,
    /// The whole state every interval.
    Poll,
}

impl FollowMode {
    /// The mode a role's `meta_watch` setting asks for.
    pub fn from_setting(watch: bool) -> Self {
        if watch {
            FollowMode::Watch
        } else {
            FollowMode::Poll
        }
    }
}

/// Follows meta's cluster state; see the module header.
pub struct StateFollower {
    meta: MetaClient,
    mode: FollowMode,
    poll: Duration,
    wait: Duration,
    /// `(version, liveness)` of the last change handed out (`(0, 0)`: none yet).
    held: (u64, u64),
    /// The state handed out last, which a delta applies to.
    held_state: Option<pb::ClusterState>,
    /// Changes that came as deltas.
    deltas: u64,
    /// Whether the next call waits `poll` first: after a poll, or after a failed call.
    pause: bool,
}

impl StateFollower {
    pub fn new(meta: MetaClient, mode: FollowMode, poll: Duration) -> Self {
        StateFollower {
            meta,
            mode,
            poll,
            wait: WATCH_WAIT,
            held: (0, 0),
            held_state: None,
            deltas: 0,
            pause: false,
        }
    }

    /// Sets how long meta may hold each watch (tests shorten it).
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// How many of the states handed out were made from a delta.
    pub fn deltas_applied(&self) -> u64 {
        self.deltas
    }

    /// The next state to apply. The first call answers at once; then, watching, when meta's state changed, or
    /// `Ok(None)` when the wait ended without a change (the caller may check it is still wanted and call again);
    /// polling, the whole state after the interval.
    pub async fn next(&mut self) -> Result<Option<pb::ClusterState>, Status> {
        if std::mem::take(&mut self.pause) {
            tokio::time::sleep(self.poll).await;
        }
        let outcome = match self.mode {
            FollowMode::Watch => self.watch_once().await,
            FollowMode::Poll => {
                self.pause = true;
                self.meta.cluster_state(false).await.map(Some)
            }
        };
        if outcome.is_err() {
            self.pause = true;
        }
        outcome
    }

    async fn watch_once(&mut self) -> Result<Option<pb::ClusterState>, Status> {
        let accept_delta = self.held_state.is_some();
        match self
            .meta
            .watch_cluster_state(self.held, self.wait, accept_delta)
            .await
        {
            Ok(change) => Ok(self.take(change)),
            Err(status) if status.code() == Code::Unimplemented => {
                tracing::warn!(event = "meta_watch_unsupported",
                    "meta does not serve WatchClusterState (an older release); re-reading the whole state instead");
                self.mode = FollowMode::Poll;
                self.pause = true;
                self.meta.cluster_state(false).await.map(Some)
            }
            Err(status) => Err(status),
        }
    }

    /// The state a change brings, whole or as a delta on the held one (`None`: nothing changed). A node behind
    /// the last one asked never answers with a state (meta holds the call instead), so a state here is never
    /// older than the one held.
    fn take(&mut self, change: pb::ClusterStateChange) -> Option<pb::ClusterState> {
        let state = match (change.state, change.delta) {
            (Some(state), _) => state,
            (None, Some(delta)) => {
                let held = self.held_state.take().unwrap_or_default();
                match apply_delta(held, delta) {
                    Ok(state) => {
                        self.deltas += 1;
                        state
                    }
                    Err(e) => {
                        // Not expected (meta makes the delta against the version named): start again whole.
                        tracing::warn!(error = %e, event = "meta_watch_delta_refused", "asking meta for the whole state");
                        self.held = (0, 0);
                        return None;
                    }
                }
            }
            (None, None) => return None,
        };
        self.held = (state.version, change.liveness);
        self.held_state = Some(state.clone());
        Some(state)
    }
}
