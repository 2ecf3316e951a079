//! Draining a shard node: taking it out of service without losing what it serves.
//!
//! Two kinds, because Kubernetes stops a pod for two reasons:
//! - [`DrainKind::Restart`] (the shard pod's preStop hook: an upgrade, an eviction, a node reboot). Routers
//!   read from the node's peers first while it goes away, it keeps taking writes until it stops (quorum writes
//!   and catch-up cover the gap), new replicas are not placed on it, and nothing moves: the pod comes back with
//!   its volume. Registering again (the restarted process) ends the drain.
//! - [`DrainKind::Decommission`] (`attest cluster drain --move`, before a scale-in): the same, and a rebalance
//!   moves every replica the node holds onto other nodes (a copy there catches up before the node's copy is
//!   retired). It lasts until undone, a restart included, so that a pod that restarts mid-way is not refilled.
//!
//! The drain is replicated state: every router sees it in the cluster state it already polls.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::error::StateError;
use crate::records::RecordKey;
use crate::state::{NodeRecord, NodeRole, StateMachine};

/// Why a node is being drained (module header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DrainKind {
    Restart,
    Decommission,
}

impl StateMachine {
    /// Starts (`Some`) or ends (`None`) the drain of the shard node registered as `name`; a decommission is
    /// never downgraded to a restart drain (a preStop hook running after `drain --move` must not end the move).
    pub(crate) fn set_node_draining(
        &mut self,
        name: &str,
        drain: Option<DrainKind>,
    ) -> Result<NodeRecord, StateError> {
        let node = self
            .nodes
            .values()
            .find(|n| n.name == name)
            .cloned()
            .ok_or_else(|| StateError::NotFound(format!("node {name:?}")))?;
        if node.role != NodeRole::Shard {
            return Err(StateError::InvalidArgument(format!(
                "node {name:?} is not a shard node"
            )));
        }
        match drain {
            Some(DrainKind::Restart)
                if self.draining.get(&node.id) == Some(&DrainKind::Decommission) => {}
            Some(kind) => {
                self.draining.insert(node.id, kind);
            }
            None => {
                self.draining.remove(&node.id);
            }
        }
        self.changes.insert(RecordKey::Drain(node.id));
        Ok(node)
    }

    /// A node registering again is back in service, unless it is being decommissioned.
    pub(crate) fn end_drain_on_registration(&mut self, id: u64) {
        if self.draining.get(&id) == Some(&DrainKind::Restart) {
            self.draining.remove(&id);
            self.changes.insert(RecordKey::Drain(id));
        }
    }

    /// Shard nodes among `live` that may receive replicas: registered shard nodes not being drained.
    pub fn placement_targets(&self, live: &BTreeSet<u64>) -> Vec<u64> {
        self.nodes
            .values()
            .filter(|n| {
                n.role == NodeRole::Shard
                    && live.contains(&n.id)
                    && !self.draining.contains_key(&n.id)
            })
            .map(|n| n.id)
            .collect()
    }

    /// Nodes whose replicas a rebalance moves away.
    pub fn decommissioning(&self) -> BTreeSet<u64> {
        self.draining
            .iter()
            .filter(|(_, kind)| **kind == DrainKind::Decommission)
            .map(|(id, _)| *id)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{self, ReplicaState};
    use crate::state::{CollectionDef, Command, Output};

    fn register(s: &mut StateMachine, name: &str) -> u64 {
        match s
            .apply(&Command::RegisterNode {
                name: name.into(),
                address: format!("http://{name}"),
                role: NodeRole::Shard,
                zone: String::new(),
            })
            .unwrap()
        {
            Output::Node(n) => n.id,
            other => panic!("{other:?}"),
        }
    }

    fn drain(s: &mut StateMachine, name: &str, kind: Option<DrainKind>) {
        s.apply(&Command::SetNodeDraining {
            name: name.into(),
            drain: kind,
        })
        .unwrap();
    }

    #[test]
    fn a_restart_drain_ends_when_the_node_registers_again_a_decommission_does_not() {
        let mut s = StateMachine::default();
        let a = register(&mut s, "a");
        drain(&mut s, "a", Some(DrainKind::Restart));
        assert_eq!(s.draining.get(&a), Some(&DrainKind::Restart));
        register(&mut s, "a");
        assert!(s.draining.is_empty());

        drain(&mut s, "a", Some(DrainKind::Decommission));
        // A preStop hook after `drain --move` must not turn the decommission into a restart drain.
        drain(&mut s, "a", Some(DrainKind::Restart));
        register(&mut s, "a");
        assert_eq!(s.draining.get(&a), Some(&DrainKind::Decommission));
        drain(&mut s, "a", None);
        assert!(s.draining.is_empty());
        assert!(matches!(
            s.apply(&Command::SetNodeDraining {
                name: "nobody".into(),
                drain: Some(DrainKind::Restart)
            }),
            Err(StateError::NotFound(_))
        ));
    }

    #[test]
    fn drained_nodes_get_no_new_replicas_and_decommissioned_ones_are_emptied() {
        let mut s = StateMachine::default();
        let ids: Vec<u64> = ["a", "b", "c"]
            .iter()
            .map(|n| register(&mut s, n))
            .collect();
        let live: BTreeSet<u64> = ids.iter().copied().collect();
        drain(&mut s, "c", Some(DrainKind::Restart));
        let def = CollectionDef {
            name: "docs".into(),
            shards: 4,
            replication: 2,
            spec: None,
            chunking_json: String::new(),
            thresholds_json: String::new(),
        };
        let created = s.plan_collection(&def, &ids, 0).unwrap();
        assert!(created.placement.iter().all(|sh| !sh.has_node(ids[2])));
        // Replication 3 needs the drained node: refused rather than placed on it.
        let three = CollectionDef {
            replication: 3,
            ..def.clone()
        };
        assert!(matches!(
            s.plan_collection(&three, &ids, 0),
            Err(StateError::FailedPrecondition(_))
        ));

        drain(&mut s, "c", None);
        s.apply(&Command::CreateCollection {
            def,
            live_nodes: ids.clone(),
            created_ms: 0,
        })
        .unwrap();
        drain(&mut s, "c", Some(DrainKind::Decommission));
        let moves = placement::plan_rebalance(
            s.all_shards(),
            &s.placement_targets(&live),
            &s.decommissioning(),
        );
        s.apply(&Command::ApplyRebalance { moves }).unwrap();
        for shard in &s.collections["docs"].placement {
            for r in &shard.replicas {
                if r.node_id == ids[2] {
                    assert_eq!(r.state, ReplicaState::Leaving, "{shard:?}");
                }
            }
            let serving = shard
                .replicas
                .iter()
                .filter(|r| r.node_id != ids[2])
                .count();
            assert_eq!(serving, 2, "{shard:?}");
        }
    }

    #[test]
    fn snapshots_carry_the_drains_and_older_snapshots_still_decode() {
        let mut s = StateMachine::default();
        register(&mut s, "a");
        drain(&mut s, "a", Some(DrainKind::Decommission));
        let decoded = StateMachine::decode(&s.encode()).unwrap();
        assert_eq!(decoded, s);
        // A snapshot written before drains existed is the serde fields alone.
        let older = bincode::serialize(&s).unwrap();
        let decoded = StateMachine::decode(&older).unwrap();
        assert!(decoded.draining.is_empty());
        assert_eq!(decoded.nodes, s.nodes);
    }
}
