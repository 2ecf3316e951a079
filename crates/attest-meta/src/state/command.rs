//! The commands the state machine applies (the data of each normal Raft entry, bincode: a variant's index is
//! what is written, so new variants go last) and what applying one returns.

use serde::{Deserialize, Serialize};

use super::{ApiKeyRecord, CollectionDef, CollectionRecord, ManifestRecord, NodeRecord, NodeRole};
use crate::drain::DrainKind;
use crate::jobs::{JobPut, SnapshotJobRecord};
use crate::placement::{Move, ShardReplicas};

/// A state-machine command: the data of one normal Raft entry (bincode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    RegisterNode {
        name: String,
        address: String,
        role: NodeRole,
        zone: String,
    },
    CreateCollection {
        def: CollectionDef,
        /// Shard nodes the leader considered alive when it proposed.
        live_nodes: Vec<u64>,
        /// The leader's clock at proposal time.
        created_ms: u64,
    },
    DropCollection {
        name: String,
    },
    ReplicaCaughtUp {
        collection: String,
        shard: u32,
        node_id: u64,
    },
    ApplyRebalance {
        moves: Vec<Move>,
    },
    PutApiKey {
        key: ApiKeyRecord,
    },
    ReportManifests {
        manifests: Vec<ManifestRecord>,
    },
    /// Appended last: the variant index is what bincode writes, so earlier logs still decode.
    SetThresholds {
        collection: String,
        thresholds_json: String,
    },
    /// A collection with the placement its creator chose (a restore stages each replica's data first).
    CreateCollectionPlaced {
        def: CollectionDef,
        placement: Vec<ShardReplicas>,
        created_ms: u64,
    },
    /// Starts (`Some`) or ends (`None`) the drain of the shard node registered as `name`.
    SetNodeDraining {
        name: String,
        drain: Option<DrainKind>,
    },
    /// Creates or updates a snapshot job ([`crate::jobs`]).
    PutSnapshotJob(JobPut),
    CancelSnapshotJob {
        id: String,
    },
    /// [`Command::PutApiKey`] of a key minted by another key (`key.parent_id`, which the record's serde form
    /// leaves out, carried beside it).
    PutChildApiKey {
        key: ApiKeyRecord,
        parent_id: String,
    },
    /// Points collection name `name` at its copy `to` (`name~tag`) and drops the collection `name` resolved to
    /// ([`crate::aliases`]).
    SwitchCollection {
        name: String,
        to: String,
    },
}

impl Command {
    pub fn encode(&self) -> Vec<u8> {
        bincode::serialize(self).expect("commands always serialize")
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, bincode::Error> {
        bincode::deserialize(bytes)
    }
}

/// What applying a command returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    Node(NodeRecord),
    Collection(CollectionRecord),
    Dropped(bool),
    Moves(Vec<Move>),
    Job(SnapshotJobRecord),
    Done,
}
