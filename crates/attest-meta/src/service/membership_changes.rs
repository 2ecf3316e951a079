//! Adding and removing meta nodes: Raft configuration changes proposed on the leader, one at a time.

use std::sync::Arc;
use std::time::Duration;

use attest_proto::v1 as pb;
use raft::prelude::{ConfChange, ConfChangeType};
use tokio::time::Instant;

use super::membership;
use crate::error::{MetaError, StateError};
use crate::node::Input;
use crate::route::Core;

pub(super) async fn add_meta_node(
    core: Arc<Core>,
    req: pb::AddMetaNodeRequest,
    deadline: Instant,
) -> Result<pb::MetaMembership, MetaError> {
    let peer = req
        .peer
        .ok_or_else(|| MetaError::InvalidArgument("peer is required".into()))?;
    if peer.id == 0 || peer.address.is_empty() {
        return Err(MetaError::InvalidArgument(
            "peer needs a non-zero id and an address".into(),
        ));
    }
    loop {
        let known = core
            .shared
            .applied
            .read()
            .state
            .voters
            .get(&peer.id)
            .cloned();
        if known.as_deref() == Some(peer.address.as_str()) {
            return Ok(membership(&core));
        }
        let mut cc = ConfChange::default();
        cc.set_change_type(ConfChangeType::AddNode);
        cc.node_id = peer.id;
        cc.context = peer.address.clone().into_bytes().into();
        match core.propose_conf_change(cc, deadline).await {
            Ok(()) => return Ok(membership(&core)),
            // Another conf change was still pending: raft-rs refused this one; try again.
            Err(MetaError::Dropped(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

pub(super) async fn remove_meta_node(
    core: Arc<Core>,
    req: pb::RemoveMetaNodeRequest,
    deadline: Instant,
) -> Result<pb::MetaMembership, MetaError> {
    loop {
        let voters = core.shared.applied.read().state.voters.clone();
        if !voters.contains_key(&req.id) {
            return Ok(membership(&core));
        }
        if voters.len() == 1 {
            return Err(
                StateError::FailedPrecondition("cannot remove the last meta voter".into()).into(),
            );
        }
        if req.id == core.shared.id {
            // The leader does not remove itself: it hands leadership to the most up-to-date other voter
            // and the request is re-routed to the new leader.
            let matched = core.shared.status.read().matched.clone();
            let to = voters
                .keys()
                .filter(|id| **id != core.shared.id)
                .max_by_key(|id| {
                    (
                        matched.get(id).copied().unwrap_or(0),
                        std::cmp::Reverse(**id),
                    )
                })
                .copied()
                .expect("another voter exists");
            core.send(Input::TransferLeader { to })?;
            while core.shared.is_leader() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            return Err(MetaError::NotLeader { leader_id: to });
        }
        let mut cc = ConfChange::default();
        cc.set_change_type(ConfChangeType::RemoveNode);
        cc.node_id = req.id;
        match core.propose_conf_change(cc, deadline).await {
            Ok(()) => return Ok(membership(&core)),
            Err(MetaError::Dropped(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e),
        }
    }
}
