//! The state machine as RocksDB records: one key per record, so that an apply writes only what it changed
//! instead of the whole state (with 1,000 collections, writing the whole state would rewrite all of them for one
//! heartbeat's manifest report).
//!
//! Key scheme, all under `s/`:
//! - `s/meta` → [`MetaRecord`]: the scalar fields (`last_node_id`). Always written with the records, so its
//!   presence says the store holds records (a store written before them holds one `m/state` blob instead).
//! - `s/v/<meta id>` → `(id, address)` of a Raft voter
//! - `s/n/<node id>` → [`NodeRecord`]
//! - `s/c/<collection>` → [`CollectionRecord`]
//! - `s/k/<key sha256, hex>` → [`ApiKeyRecord`]
//! - `s/m/<collection>/<shard>/<node id>` → [`ManifestRecord`]
//! - `s/d/<node id>` → `(id, DrainKind)` of a node being drained ([`crate::drain`])
//! - `s/j/<job id>` → [`SnapshotJobRecord`] ([`crate::jobs`])
//! - `s/a/<collection name>` → `(name, stored name)` of a collection alias ([`crate::aliases`])
//!
//! Numbers are decimal text, so that a RocksDB dump reads; collection names are `[A-Za-z0-9_-]` (a stored
//! name may add `~` and a tag of `[a-z0-9]`) and key hashes hex, so `/` separates the parts unambiguously. Values are bincode and carry their own identity
//! (id, name, ...): loading never parses a key, its prefix only says which map the value goes to.
//!
//! [`StateMachine::take_changes`] says which records a command touched; [`StateMachine::record`] gives a
//! record's value, or `None` when it no longer exists (the key is deleted).

use serde::{Deserialize, Serialize};

use crate::drain::DrainKind;
use crate::error::MetaError;
use crate::jobs::SnapshotJobRecord;
use crate::state::{ApiKeyRecord, CollectionRecord, ManifestRecord, NodeRecord, StateMachine};

/// First key of the record key space.
pub const START: &[u8] = b"s/";
/// First key after it (`'0'` follows `'/'`): `START..END` holds every record and nothing else.
pub const END: &[u8] = b"s0";
/// The key whose presence says the records are stored.
pub const META_KEY: &[u8] = b"s/meta";

const VOTER: &[u8] = b"s/v/";
const NODE: &[u8] = b"s/n/";
const COLLECTION: &[u8] = b"s/c/";
const API_KEY: &[u8] = b"s/k/";
const MANIFEST: &[u8] = b"s/m/";
const DRAIN: &[u8] = b"s/d/";
const SNAPSHOT_JOB: &[u8] = b"s/j/";
const ALIAS: &[u8] = b"s/a/";

/// The scalar fields of the state, in one small record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaRecord {
    pub last_node_id: u64,
}

/// Names one record of the state machine (what a command touched).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordKey {
    Meta,
    Voter(u64),
    Node(u64),
    Collection(String),
    ApiKey(String),
    /// (collection, shard, node id), as the manifests map is keyed.
    Manifest(String, u32, u64),
    /// A drained node's id.
    Drain(u64),
    SnapshotJob(String),
    /// An alias's name.
    Alias(String),
}

impl RecordKey {
    /// The RocksDB key (the scheme in the module header).
    pub fn to_bytes(&self) -> Vec<u8> {
        let tail = match self {
            RecordKey::Meta => return META_KEY.to_vec(),
            RecordKey::Voter(id) => format!("v/{id}"),
            RecordKey::Node(id) => format!("n/{id}"),
            RecordKey::Collection(name) => format!("c/{name}"),
            RecordKey::ApiKey(hash) => format!("k/{hash}"),
            RecordKey::Manifest(collection, shard, node) => {
                format!("m/{collection}/{shard}/{node}")
            }
            RecordKey::Drain(id) => format!("d/{id}"),
            RecordKey::SnapshotJob(id) => format!("j/{id}"),
            RecordKey::Alias(name) => format!("a/{name}"),
        };
        let mut key = START.to_vec();
        key.extend_from_slice(tail.as_bytes());
        key
    }
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    bincode::serialize(value).expect("records always serialize")
}

/// A key's record: its serde fields, then its parent's id when it has one (a record written before parents
/// ends after the fields).
fn encode_key(key: &ApiKeyRecord) -> Vec<u8> {
    let mut bytes = encode(key);
    if !key.parent_id.is_empty() {
        bytes.extend(encode(&key.parent_id));
    }
    bytes
}

fn decode_key(mut value: &[u8]) -> Result<ApiKeyRecord, bincode::Error> {
    let mut key: ApiKeyRecord = bincode::deserialize_from(&mut value)?;
    if !value.is_empty() {
        key.parent_id = bincode::deserialize(value)?;
    }
    Ok(key)
}

impl StateMachine {
    /// The encoded value of `key` in this state; `None` when the record does not exist (delete the key).
    pub fn record(&self, key: &RecordKey) -> Option<Vec<u8>> {
        match key {
            RecordKey::Meta => Some(encode(&MetaRecord {
                last_node_id: self.last_node_id,
            })),
            RecordKey::Voter(id) => self.voters.get(id).map(|a| encode(&(*id, a))),
            RecordKey::Node(id) => self.nodes.get(id).map(encode),
            RecordKey::Collection(name) => self.collections.get(name).map(encode),
            RecordKey::ApiKey(hash) => self.api_keys.get(hash).map(encode_key),
            RecordKey::Manifest(c, s, n) => self.manifests.get(&(c.clone(), *s, *n)).map(encode),
            RecordKey::Drain(id) => self.draining.get(id).map(|kind| encode(&(*id, kind))),
            RecordKey::SnapshotJob(id) => self.snapshot_jobs.get(id).map(encode),
            RecordKey::Alias(name) => self.aliases.get(name).map(|to| encode(&(name, to))),
        }
    }

    /// The key of every record this state holds (`s/meta` included).
    pub fn record_keys(&self) -> Vec<RecordKey> {
        let mut keys = vec![RecordKey::Meta];
        keys.extend(self.voters.keys().map(|id| RecordKey::Voter(*id)));
        keys.extend(self.nodes.keys().map(|id| RecordKey::Node(*id)));
        keys.extend(self.collections.keys().cloned().map(RecordKey::Collection));
        keys.extend(self.api_keys.keys().cloned().map(RecordKey::ApiKey));
        keys.extend(
            self.manifests
                .keys()
                .map(|(c, s, n)| RecordKey::Manifest(c.clone(), *s, *n)),
        );
        keys.extend(self.draining.keys().map(|id| RecordKey::Drain(*id)));
        keys.extend(
            self.snapshot_jobs
                .keys()
                .cloned()
                .map(RecordKey::SnapshotJob),
        );
        keys.extend(self.aliases.keys().cloned().map(RecordKey::Alias));
        keys
    }

    /// Rebuilds a state from its records (every `s/` key and value, in any order).
    pub fn from_records<K, V>(
        records: impl IntoIterator<Item = (K, V)>,
    ) -> Result<StateMachine, MetaError>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let mut state = StateMachine::default();
        for (key, value) in records {
            let (key, value) = (key.as_ref(), value.as_ref());
            if key == META_KEY {
                let meta: MetaRecord = bincode::deserialize(value)?;
                state.last_node_id = meta.last_node_id;
            } else if key.starts_with(VOTER) {
                let (id, address): (u64, String) = bincode::deserialize(value)?;
                state.voters.insert(id, address);
            } else if key.starts_with(NODE) {
                let node: NodeRecord = bincode::deserialize(value)?;
                state.nodes.insert(node.id, node);
            } else if key.starts_with(COLLECTION) {
                let c: CollectionRecord = bincode::deserialize(value)?;
                state.collections.insert(c.name.clone(), c);
            } else if key.starts_with(API_KEY) {
                let k = decode_key(value)?;
                state.api_keys.insert(k.key_sha256.clone(), k);
            } else if key.starts_with(MANIFEST) {
                let m: ManifestRecord = bincode::deserialize(value)?;
                state
                    .manifests
                    .insert((m.collection.clone(), m.shard, m.node_id), m);
            } else if key.starts_with(DRAIN) {
                let (id, kind): (u64, DrainKind) = bincode::deserialize(value)?;
                state.draining.insert(id, kind);
            } else if key.starts_with(SNAPSHOT_JOB) {
                let job: SnapshotJobRecord = bincode::deserialize(value)?;
                state.snapshot_jobs.insert(job.id.clone(), job);
            } else if key.starts_with(ALIAS) {
                let (name, to): (String, String) = bincode::deserialize(value)?;
                state.aliases.insert(name, to);
            } else {
                return Err(MetaError::Codec(format!(
                    "unknown state record key {:?}",
                    String::from_utf8_lossy(key)
                )));
            }
        }
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::placement::Move;
    use crate::state::{CollectionDef, Command, NodeRole};

    /// Every record of `state`, as RocksDB would hold them.
    fn all_records(state: &StateMachine) -> BTreeMap<Vec<u8>, Vec<u8>> {
        state
            .record_keys()
            .iter()
            .map(|k| (k.to_bytes(), state.record(k).expect("listed keys exist")))
            .collect()
    }

    #[test]
    fn keys_follow_the_documented_scheme() {
        let cases = [
            (RecordKey::Meta, "s/meta"),
            (RecordKey::Voter(3), "s/v/3"),
            (RecordKey::Node(17), "s/n/17"),
            (RecordKey::Collection("docs".into()), "s/c/docs"),
            (
                RecordKey::ApiKey("ab".repeat(32)),
                &format!("s/k/{}", "ab".repeat(32)),
            ),
            (RecordKey::Manifest("docs".into(), 2, 17), "s/m/docs/2/17"),
            (RecordKey::Drain(17), "s/d/17"),
            (RecordKey::SnapshotJob("job-1".into()), "s/j/job-1"),
            (RecordKey::Alias("docs".into()), "s/a/docs"),
            (RecordKey::Collection("docs~r1".into()), "s/c/docs~r1"),
        ];
        for (key, want) in cases {
            let bytes = key.to_bytes();
            assert_eq!(bytes, want.as_bytes());
            assert!(bytes.as_slice() >= START && bytes.as_slice() < END);
        }
        let unknown = StateMachine::from_records([(b"s/x/1".to_vec(), vec![])]);
        assert!(matches!(unknown, Err(MetaError::Codec(_))));
    }

    /// Every kind of command, over few names and ids so that they hit each other's records. Names include
    /// copies (`a~r1`), and creates and switches are weighted up, so that runs hold copies and aliases.
    fn arb_command() -> impl Strategy<Value = Command> {
        let name = prop::sample::select(vec!["a", "b", "c", "a~r1", "a~r2", "b~r1"]);
        let node = prop::sample::select(vec!["n1", "n2", "n3", "n4"]);
        prop_oneof![
            1 => (node.clone(), "[a-z]{0,2}").prop_map(|(n, z)| Command::RegisterNode {
                name: n.into(),
                address: format!("http://{n}"),
                role: NodeRole::Shard,
                zone: z,
            }),
            3 => (name.clone(), 1u32..3, 1u32..3).prop_map(|(n, sh, r)| Command::CreateCollection {
                def: CollectionDef {
                    name: n.into(),
                    shards: sh,
                    replication: r,
                    spec: None,
                    chunking_json: String::new(),
                    thresholds_json: String::new(),
                },
                live_nodes: vec![1, 2, 3, 4],
                created_ms: 1,
            }),
            1 => name.clone()
                .prop_map(|n| Command::DropCollection { name: n.into() }),
            1 => (name.clone(), 0u32..3, 1u64..5).prop_map(|(n, sh, id)| Command::ReplicaCaughtUp {
                collection: n.into(),
                shard: sh,
                node_id: id,
            }),
            1 => (name.clone(), 0u32..3, 1u64..5, 1u64..5).prop_map(|(n, sh, from, to)| {
                Command::ApplyRebalance {
                    moves: vec![Move {
                        collection: n.into(),
                        shard: sh,
                        from_node: from,
                        to_node: to,
                    }],
                }
            }),
            1 => (0u8..3, any::<bool>()).prop_map(|(k, revoked)| Command::PutApiKey {
                key: crate::state::ApiKeyRecord {
                    key_sha256: format!("{k:x}").repeat(64),
                    id: format!("{k:x}").repeat(12),
                    scopes: vec![1],
                    tenants: vec!["t".into()],
                    revoked,
                    ..Default::default()
                },
            }),
            1 => (0u8..3, 0u8..3).prop_map(|(k, parent)| Command::PutChildApiKey {
                key: crate::state::ApiKeyRecord {
                    key_sha256: format!("{k:x}").repeat(64),
                    id: format!("{k:x}").repeat(12),
                    scopes: vec![1],
                    tenants: vec!["t".into()],
                    ..Default::default()
                },
                parent_id: format!("{parent:x}").repeat(12),
            }),
            1 => prop::collection::vec((name.clone(), 0u32..3, 1u64..5, 0u64..9), 1..4).prop_map(|ms| {
                Command::ReportManifests {
                    manifests: ms
                        .into_iter()
                        .map(|(c, shard, node_id, docs)| ManifestRecord {
                            collection: c.into(),
                            shard,
                            node_id,
                            segments: vec![format!("seg{docs}")],
                            live_documents: docs,
                        })
                        .collect(),
                }
            }),
            1 => (name, "[a-z]{0,3}").prop_map(|(n, t)| Command::SetThresholds {
                collection: n.into(),
                thresholds_json: t,
            }),
            2 => (
                prop::sample::select(vec!["a", "b"]),
                prop::sample::select(vec!["a~r1", "a~r2", "b~r1", "c"])
            )
                .prop_map(|(n, to)| Command::SwitchCollection {
                    name: n.into(),
                    to: to.into(),
                }),
            1 => (node, 0u8..3).prop_map(|(n, k)| Command::SetNodeDraining {
                name: n.into(),
                drain: [
                    None,
                    Some(DrainKind::Restart),
                    Some(DrainKind::Decommission)
                ][k as usize],
            }),
        ]
    }

    /// Shard nodes and collections `a` and `b` for the generated steps to start from: most creates of a copy
    /// and switches to one need them.
    fn prelude() -> Vec<(Option<(bool, u64)>, Command)> {
        let mut steps: Vec<_> = ["n1", "n2", "n3", "n4"]
            .map(|n| Command::RegisterNode {
                name: n.into(),
                address: format!("http://{n}"),
                role: NodeRole::Shard,
                zone: String::new(),
            })
            .into_iter()
            .collect();
        steps.extend(["a", "b"].map(|n| Command::CreateCollection {
            def: CollectionDef {
                name: n.into(),
                shards: 2,
                replication: 2,
                spec: None,
                chunking_json: String::new(),
                thresholds_json: "{}".into(),
            },
            live_nodes: vec![1, 2, 3, 4],
            created_ms: 1,
        }));
        steps.into_iter().map(|cmd| (None, cmd)).collect()
    }

    /// A conf change (`None`: a command) on top of the commands.
    fn arb_step() -> impl Strategy<Value = (Option<(bool, u64)>, Command)> {
        (
            prop::option::weighted(0.1, (any::<bool>(), 1u64..4)),
            arb_command(),
        )
    }

    proptest! {
        /// Writing only the records each command touched keeps the stored records equal to the full state's:
        /// a mutation site that forgets to mark its record fails here.
        #[test]
        fn changed_records_track_the_whole_state(steps in prop::collection::vec(arb_step(), 0..60)) {
            let mut state = StateMachine::with_voters([(1, "http://m1".to_string())]);
            state.take_changes();
            let mut stored = all_records(&state);
            for (conf, cmd) in prelude().iter().chain(&steps) {
                match conf {
                    Some((true, id)) => state.add_voter(*id, format!("http://m{id}")),
                    Some((false, id)) => state.remove_voter(*id),
                    None => {
                        let before = state.clone();
                        if state.apply(cmd).is_err() {
                            prop_assert_eq!(&state, &before);
                            prop_assert!(state.take_changes().is_empty(), "a refused command touches nothing");
                        }
                    }
                }
                for key in state.take_changes() {
                    match state.record(&key) {
                        Some(value) => stored.insert(key.to_bytes(), value),
                        None => stored.remove(&key.to_bytes()),
                    };
                }
                prop_assert_eq!(&stored, &all_records(&state));
            }
            prop_assert_eq!(StateMachine::from_records(&stored).unwrap(), state);
        }
    }
}
