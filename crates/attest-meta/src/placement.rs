//! Replica placement and the rebalance planner: pure functions over the shard map, property-tested.
//!
//! Rules, in order of priority:
//! 1. the replicas of one shard sit on distinct nodes (never two on one node);
//! 2. they spread over zones where the nodes name one (a node without a zone counts as its own zone);
//! 3. the per-node replica count stays balanced (a new replica goes to the least loaded node);
//! 4. ties are broken by node id, so the same input always gives the same map (Raft replicas apply it).
//!
//! Only live shard nodes are offered as candidates by the caller ("prefer alive nodes"): with fewer live
//! nodes than the replication factor, placement fails rather than put a replica on a dead node.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::StateError;

/// State of one replica in the shard map (mirrors `attest.v1.ReplicaState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReplicaState {
    /// Serves reads and takes writes.
    Active,
    /// Being filled from a peer: takes writes, serves no reads yet.
    Joining,
    /// Being moved away: serves until its replacement is active, then removed.
    Leaving,
}

/// One replica of a shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replica {
    pub node_id: u64,
    pub state: ReplicaState,
}

/// The replica set of one shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardReplicas {
    pub shard: u32,
    pub replicas: Vec<Replica>,
}

impl ShardReplicas {
    /// A new shard's replica set: every replica ACTIVE.
    pub fn active(shard: u32, nodes: impl IntoIterator<Item = u64>) -> Self {
        ShardReplicas {
            shard,
            replicas: nodes
                .into_iter()
                .map(|node_id| Replica {
                    node_id,
                    state: ReplicaState::Active,
                })
                .collect(),
        }
    }

    /// Whether `node` holds any replica (in any state) of this shard.
    pub fn has_node(&self, node: u64) -> bool {
        self.replicas.iter().any(|r| r.node_id == node)
    }

    /// Whether a move is in flight (a joining or leaving replica): one move per shard at a time.
    pub fn has_pending_move(&self) -> bool {
        self.replicas
            .iter()
            .any(|r| r.state != ReplicaState::Active)
    }
}

/// A node offered for placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub id: u64,
    /// Empty: no zone (the node is a zone of its own).
    pub zone: String,
    /// Replicas it already holds (all collections).
    pub load: u64,
}

/// One planned replica move.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Move {
    pub collection: String,
    pub shard: u32,
    pub from_node: u64,
    pub to_node: u64,
}

/// Places `shards × replication` replicas on `candidates`; returns the node ids of each shard, in shard order.
pub fn place(
    candidates: &[Candidate],
    shards: u32,
    replication: u32,
) -> Result<Vec<Vec<u64>>, StateError> {
    if replication == 0 || shards == 0 {
        return Err(StateError::InvalidArgument(
            "shards and replication must be at least 1".into(),
        ));
    }
    let distinct: BTreeSet<u64> = candidates.iter().map(|c| c.id).collect();
    if distinct.len() < replication as usize {
        return Err(StateError::FailedPrecondition(format!(
            "replication {replication} needs {replication} live shard nodes, {} available",
            distinct.len()
        )));
    }
    let mut load: BTreeMap<u64, u64> = candidates.iter().map(|c| (c.id, c.load)).collect();
    let zone_of = |c: &Candidate| -> String {
        if c.zone.is_empty() {
            format!("\u{0}node-{}", c.id)
        } else {
            c.zone.clone()
        }
    };
    let mut placement = Vec::with_capacity(shards as usize);
    for _ in 0..shards {
        let mut chosen: Vec<u64> = Vec::with_capacity(replication as usize);
        let mut zones_used: BTreeMap<String, u32> = BTreeMap::new();
        for _ in 0..replication {
            let best = candidates
                .iter()
                .filter(|c| !chosen.contains(&c.id))
                .min_by_key(|c| {
                    (
                        zones_used.get(&zone_of(c)).copied().unwrap_or(0),
                        load[&c.id],
                        c.id,
                    )
                })
                .expect("enough distinct candidates checked above");
            chosen.push(best.id);
            *zones_used.entry(zone_of(best)).or_default() += 1;
            *load.get_mut(&best.id).expect("candidate load") += 1;
        }
        placement.push(chosen);
    }
    Ok(placement)
}

/// Plans moves off the `evacuate` nodes (decommissioned: every ACTIVE replica there goes to the least loaded
/// target without a copy of its shard), then from the most loaded target node to the least loaded one until
/// every pair of targets is within one replica of each other, or no legal move is left. `live` = the nodes
/// that may receive replicas. A move never gives a node a second replica of a shard, and a shard with a move
/// in flight is not touched again (a shard with replicas on two evacuated nodes needs a second rebalance).
pub fn plan_rebalance<'a>(
    shards: impl IntoIterator<Item = (&'a str, &'a ShardReplicas)>,
    live: &[u64],
    evacuate: &BTreeSet<u64>,
) -> Vec<Move> {
    let live: BTreeSet<u64> = live
        .iter()
        .filter(|id| !evacuate.contains(id))
        .copied()
        .collect();
    let mut work: Vec<(String, ShardReplicas)> = shards
        .into_iter()
        .map(|(c, s)| (c.to_string(), s.clone()))
        .collect();
    let mut load: BTreeMap<u64, i64> = live.iter().map(|id| (*id, 0)).collect();
    for (_, shard) in &work {
        for r in &shard.replicas {
            if r.state != ReplicaState::Leaving {
                if let Some(l) = load.get_mut(&r.node_id) {
                    *l += 1;
                }
            }
        }
    }
    let mut moves = Vec::new();
    for (collection, shard) in &mut work {
        if shard.has_pending_move() {
            continue;
        }
        let source = shard
            .replicas
            .iter()
            .find(|r| r.state == ReplicaState::Active && evacuate.contains(&r.node_id))
            .map(|r| r.node_id);
        let target = load
            .iter()
            .filter(|(id, _)| !shard.has_node(**id))
            .min_by_key(|(id, l)| (**l, **id))
            .map(|(id, _)| *id);
        if let (Some(src), Some(tgt)) = (source, target) {
            moves.push(planned_move(collection, shard, src, tgt));
            *load.get_mut(&tgt).expect("live target") += 1;
        }
    }
    loop {
        let mut by_load: Vec<u64> = load.keys().copied().collect();
        by_load.sort_by_key(|id| (load[id], *id));
        let mut found = None;
        'search: for src in by_load.iter().rev() {
            for tgt in &by_load {
                if load[src] - load[tgt] < 2 {
                    break;
                }
                for (i, (_, shard)) in work.iter().enumerate() {
                    let movable =
                        !shard.has_pending_move() && shard.has_node(*src) && !shard.has_node(*tgt);
                    if movable {
                        found = Some((i, *src, *tgt));
                        break 'search;
                    }
                }
            }
        }
        let Some((i, src, tgt)) = found else { break };
        let (collection, shard) = &mut work[i];
        moves.push(planned_move(collection, shard, src, tgt));
        *load.get_mut(&src).expect("live source") -= 1;
        *load.get_mut(&tgt).expect("live target") += 1;
    }
    moves
}

/// Applies a move the planner chose to its working copy of the shard and returns it.
fn planned_move(collection: &str, shard: &mut ShardReplicas, from: u64, to: u64) -> Move {
    apply_move(shard, from, to);
    Move {
        collection: collection.to_string(),
        shard: shard.shard,
        from_node: from,
        to_node: to,
    }
}

/// Applies one move to a shard: a JOINING replica on `to`, the ACTIVE replica on `from` marked LEAVING.
/// Returns false (and changes nothing) when the move is not legal on this shard.
pub fn apply_move(shard: &mut ShardReplicas, from: u64, to: u64) -> bool {
    let source_active = shard
        .replicas
        .iter()
        .any(|r| r.node_id == from && r.state == ReplicaState::Active);
    if from == to || !source_active || shard.has_node(to) {
        return false;
    }
    for r in &mut shard.replicas {
        if r.node_id == from {
            r.state = ReplicaState::Leaving;
        }
    }
    shard.replicas.push(Replica {
        node_id: to,
        state: ReplicaState::Joining,
    });
    true
}

/// `node`'s replica of this shard has caught up: it becomes ACTIVE and every LEAVING replica of the shard
/// is removed. Returns false when `node` holds no replica of the shard.
pub fn caught_up(shard: &mut ShardReplicas, node: u64) -> bool {
    if !shard.has_node(node) {
        return false;
    }
    for r in &mut shard.replicas {
        if r.node_id == node {
            r.state = ReplicaState::Active;
        }
    }
    shard.replicas.retain(|r| r.state != ReplicaState::Leaving);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn nodes(n: u64, zones: u64) -> Vec<Candidate> {
        (1..=n)
            .map(|id| Candidate {
                id,
                zone: if zones == 0 {
                    String::new()
                } else {
                    format!("z{}", id % zones)
                },
                load: 0,
            })
            .collect()
    }

    fn to_map(placement: &[Vec<u64>]) -> Vec<(String, ShardReplicas)> {
        placement
            .iter()
            .enumerate()
            .map(|(i, ids)| {
                (
                    "c".to_string(),
                    ShardReplicas {
                        shard: i as u32,
                        replicas: ids
                            .iter()
                            .map(|id| Replica {
                                node_id: *id,
                                state: ReplicaState::Active,
                            })
                            .collect(),
                    },
                )
            })
            .collect()
    }

    fn loads(map: &[(String, ShardReplicas)], live: &[u64]) -> BTreeMap<u64, i64> {
        let mut l: BTreeMap<u64, i64> = live.iter().map(|id| (*id, 0)).collect();
        for (_, s) in map {
            for r in &s.replicas {
                *l.entry(r.node_id).or_default() += 1;
            }
        }
        l
    }

    fn distinct(s: &ShardReplicas) -> bool {
        let set: BTreeSet<u64> = s.replicas.iter().map(|r| r.node_id).collect();
        set.len() == s.replicas.len()
    }

    #[test]
    fn too_few_nodes_is_a_failed_precondition() {
        let err = place(&nodes(1, 0), 3, 2).unwrap_err();
        assert!(matches!(err, StateError::FailedPrecondition(_)), "{err}");
        assert!(place(&[], 1, 1).is_err());
    }

    #[test]
    fn zones_are_spread_when_nodes_name_them() {
        // Nodes 1..=6 in zones z1, z2, z0, z1, z2, z0: every shard of replication 3 covers three zones.
        let cands = nodes(6, 3);
        let p = place(&cands, 8, 3).unwrap();
        for ids in &p {
            let zones: BTreeSet<&str> = ids
                .iter()
                .map(|id| cands[(*id - 1) as usize].zone.as_str())
                .collect();
            assert_eq!(zones.len(), 3, "{ids:?}");
        }
    }

    #[test]
    fn caught_up_activates_and_drops_leaving() {
        let mut s = ShardReplicas {
            shard: 0,
            replicas: vec![
                Replica {
                    node_id: 1,
                    state: ReplicaState::Active,
                },
                Replica {
                    node_id: 2,
                    state: ReplicaState::Active,
                },
            ],
        };
        assert!(apply_move(&mut s, 1, 3));
        assert!(!apply_move(&mut s, 2, 3), "3 already holds the shard");
        assert!(caught_up(&mut s, 3));
        assert_eq!(
            s.replicas,
            vec![
                Replica {
                    node_id: 2,
                    state: ReplicaState::Active
                },
                Replica {
                    node_id: 3,
                    state: ReplicaState::Active
                },
            ]
        );
        assert!(!caught_up(&mut s, 9));
    }

    proptest! {
        #[test]
        fn replicas_of_a_shard_never_share_a_node_and_counts_balance(
            n in 1u64..12, shards in 1u32..40, replication in 1u32..5,
        ) {
            let cands = nodes(n, 0);
            match place(&cands, shards, replication) {
                Err(StateError::FailedPrecondition(_)) => prop_assert!((n as u32) < replication),
                Err(e) => prop_assert!(false, "unexpected error {e}"),
                Ok(p) => {
                    prop_assert!((n as u32) >= replication);
                    prop_assert_eq!(p.len(), shards as usize);
                    let map = to_map(&p);
                    for (_, s) in &map {
                        prop_assert_eq!(s.replicas.len(), replication as usize);
                        prop_assert!(distinct(s));
                    }
                    let live: Vec<u64> = (1..=n).collect();
                    let l = loads(&map, &live);
                    let (min, max) = (l.values().min().unwrap(), l.values().max().unwrap());
                    prop_assert!(max - min <= 1, "loads {:?}", l);
                }
            }
        }

        #[test]
        fn zoned_placement_keeps_distinct_nodes(
            n in 2u64..10, zones in 1u64..4, shards in 1u32..20, replication in 1u32..4,
        ) {
            let cands = nodes(n, zones);
            if let Ok(p) = place(&cands, shards, replication) {
                for ids in &p {
                    let set: BTreeSet<u64> = ids.iter().copied().collect();
                    prop_assert_eq!(set.len(), ids.len());
                    let zone_count = ids.iter().map(|id| &cands[(*id - 1) as usize].zone)
                        .collect::<BTreeSet<_>>().len();
                    prop_assert_eq!(zone_count, ids.len().min(zones.min(n) as usize));
                }
            } else {
                prop_assert!((n as u32) < replication);
            }
        }

        #[test]
        fn rebalance_after_adding_nodes_moves_replicas_onto_them(
            n in 2u64..8, added in 1u64..3, shards in 1u32..24, replication in 1u32..4,
        ) {
            prop_assume!(n as u32 >= replication);
            let p = place(&nodes(n, 0), shards, replication).unwrap();
            let mut map = to_map(&p);
            let live: Vec<u64> = (1..=n + added).collect();
            // Rounds of plan -> apply -> every joining replica catches up, until nothing is left to move.
            let mut rounds = 0;
            loop {
                let moves = plan_rebalance(map.iter().map(|(c, s)| (c.as_str(), s)), &live, &BTreeSet::new());
                if rounds == 0 && shards * replication >= live.len() as u32 {
                    prop_assert!(!moves.is_empty(), "nothing moved onto the new nodes");
                }
                if moves.is_empty() {
                    break;
                }
                rounds += 1;
                prop_assert!(rounds < 64, "the planner does not converge");
                for m in &moves {
                    // Old nodes start balanced within one: only the new, emptier nodes can receive.
                    prop_assert!(m.to_node > n, "a move onto an old node: {:?}", m);
                    let s = &mut map[m.shard as usize].1;
                    prop_assert!(apply_move(s, m.from_node, m.to_node), "illegal move {:?}", m);
                    prop_assert!(distinct(s));
                }
                for m in &moves {
                    prop_assert!(caught_up(&mut map[m.shard as usize].1, m.to_node));
                }
                for (_, s) in &map {
                    prop_assert_eq!(s.replicas.len(), replication as usize);
                    prop_assert!(distinct(s));
                }
            }
            let l = loads(&map, &live);
            let (min, max) = (l.values().min().unwrap(), l.values().max().unwrap());
            prop_assert!(max - min <= 1, "loads {:?}", l);
        }

        /// Decommissioning nodes empties them (while enough other nodes remain) and leaves the rest balanced.
        #[test]
        fn rebalance_empties_decommissioned_nodes(
            n in 3u64..8, gone in 1u64..3, shards in 1u32..24, replication in 1u32..3,
        ) {
            prop_assume!(n as u32 >= replication + gone as u32);
            let p = place(&nodes(n, 0), shards, replication).unwrap();
            let mut map = to_map(&p);
            let live: Vec<u64> = (1..=n).collect();
            let evacuate: BTreeSet<u64> = (1..=gone).collect();
            let mut rounds = 0;
            loop {
                let moves = plan_rebalance(map.iter().map(|(c, s)| (c.as_str(), s)), &live, &evacuate);
                if moves.is_empty() {
                    break;
                }
                rounds += 1;
                prop_assert!(rounds < 64, "the planner does not converge");
                for m in &moves {
                    prop_assert!(!evacuate.contains(&m.to_node), "a move onto a decommissioned node {:?}", m);
                    prop_assert!(apply_move(&mut map[m.shard as usize].1, m.from_node, m.to_node));
                }
                for m in &moves {
                    prop_assert!(caught_up(&mut map[m.shard as usize].1, m.to_node));
                }
            }
            for (_, s) in &map {
                prop_assert_eq!(s.replicas.len(), replication as usize);
                prop_assert!(distinct(s));
                prop_assert!(s.replicas.iter().all(|r| !evacuate.contains(&r.node_id)), "{:?}", s);
            }
            let remaining: Vec<u64> = live.iter().copied().filter(|id| !evacuate.contains(id)).collect();
            let l = loads(&map, &remaining);
            let (min, max) = (l.values().min().unwrap(), l.values().max().unwrap());
            prop_assert!(max - min <= 1, "loads {:?}", l);
        }
    }
}
