//! The cluster snapshot manifest (`<id>/attest-snapshot.json`): its types, and the checksum that makes an edit
//! to it visible.
//!
//! Every other file of a snapshot is vouched for by a sha256 this manifest records (the meta state, each replica's
//! `SNAPSHOT.json`, which in turn records its files'), so the manifest is the one file whose damage nothing else
//! would catch: an edit that keeps it valid JSON — two shard entries swapped, a collection dropped — would restore
//! without a word, the swap putting documents on shards their ids do not route to. So it records `checksum`,
//! `sha256:<hex>` of its canonical content, and a manifest whose content does not match, or that has no checksum,
//! is not restored.
//!
//! The canonical content is the compact JSON of the typed manifest without its `checksum`: fields in declaration
//! order, lists in their order, no maps, so the same manifest always gives the same bytes. It is recomputed from
//! what was parsed rather than from the stored bytes, so reformatting alone (whitespace, key order) does not
//! count as damage while every value does; a field this version does not know is refused when parsed, since the
//! recomputed content could not include it.
//!
//! This detects accidental and careless edits, not a deliberate forgery: whoever can write the destination can
//! also recompute the checksum. Guarding against that needs a key the destination does not hold.

use attest_proto::{ApiError, ErrorCode};
use attest_snapshot::SnapshotStore;
use serde::{Deserialize, Serialize};

use super::{damaged, from_store, sha256_hex};
use crate::error::RouterError;

pub const CLUSTER_MANIFEST: &str = "attest-snapshot.json";
/// The cluster snapshot's layout (`attest_core::format`): this manifest, `meta-state.pb` and the replica
/// snapshots it lists. Version 2 keeps the replicas' files content-addressed under `blobs` (shared by the
/// destination's snapshots); version 1 kept them under each replica's prefix.
pub const CLUSTER_SNAPSHOT: attest_core::format::Layout = attest_core::format::Layout {
    what: "cluster snapshot",
    current: 2,
};
pub const CLUSTER_SNAPSHOT_FORMAT: u32 = CLUSTER_SNAPSHOT.current;
const CHECKSUM_ALGORITHM: &str = "sha256:";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterManifest {
    pub format: u32,
    pub id: String,
    pub created_ms: u64,
    /// The Raft applied index of the meta state in `meta-state.pb`.
    pub meta_version: u64,
    pub meta_state_sha256: String,
    pub collections: Vec<CollectionSnapshot>,
    /// Format 2: the key prefix of the content-addressed files (`attest_snapshot::blob_key`); empty in format 1,
    /// whose files are under each replica's prefix.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub blobs: String,
    /// `sha256:<hex>` of the canonical content (everything above); set by [`ClusterManifest::encode`].
    /// Absent (empty) in manifests written before it existed, and while the canonical content is serialised.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub checksum: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CollectionSnapshot {
    pub name: String,
    pub shards: u32,
    pub replication: u32,
    /// One per shard, in shard order.
    pub replicas: Vec<ReplicaSnapshot>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplicaSnapshot {
    pub shard: u32,
    /// The node whose replica was snapshotted.
    pub node_id: u64,
    /// Its files' key prefix under the destination.
    pub prefix: String,
    /// sha256 of its `SNAPSHOT.json`.
    pub manifest_sha256: String,
    pub last_seq: u64,
    pub live_documents: u64,
    pub bytes: u64,
    /// Of `bytes`, those not sent because the destination already held them (format 2).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why a manifest's checksum does not vouch for its content.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum ChecksumProblem {
    /// Written by a version before manifests were checksummed (or the field was removed).
    Missing,
    Mismatch {
        recorded: String,
        computed: String,
    },
}

impl ClusterManifest {
    pub fn total_bytes(&self) -> u64 {
        self.collections
            .iter()
            .flat_map(|c| &c.replicas)
            .map(|r| r.bytes)
            .sum()
    }

    pub fn skipped_bytes(&self) -> u64 {
        self.collections
            .iter()
            .flat_map(|c| &c.replicas)
            .map(|r| r.skipped_bytes)
            .sum()
    }

    /// `sha256:<hex>` of the canonical content (see the module's header), whatever `checksum` holds now.
    pub fn content_checksum(&self) -> String {
        let canonical = ClusterManifest {
            checksum: String::new(),
            ..self.clone()
        };
        // A struct of strings, integers and lists always serialises.
        let bytes = serde_json::to_vec(&canonical).expect("a manifest serialises");
        format!("{CHECKSUM_ALGORITHM}{}", sha256_hex(&bytes))
    }

    /// The manifest as stored: its checksum set, then pretty JSON (for people reading the destination).
    pub fn encode(&mut self) -> Vec<u8> {
        self.checksum = self.content_checksum();
        serde_json::to_vec_pretty(self).expect("a manifest serialises")
    }

    pub(super) fn verify_checksum(&self) -> Result<(), ChecksumProblem> {
        if self.checksum.is_empty() {
            return Err(ChecksumProblem::Missing);
        }
        let computed = self.content_checksum();
        if computed != self.checksum {
            return Err(ChecksumProblem::Mismatch {
                recorded: self.checksum.clone(),
                computed,
            });
        }
        Ok(())
    }
}

/// The refusal of a manifest, under `key`, whose checksum does not vouch for it.
fn refusal(key: &str, id: &str, problem: ChecksumProblem) -> RouterError {
    match problem {
        ChecksumProblem::Missing => RouterError::Callee(ApiError::new(
            ErrorCode::FailedPrecondition,
            format!(
                "snapshot `{id}` cannot be verified: {key} has no checksum (written by a version of Attest from \
                 before manifests were checksummed); it is not restored — take a new snapshot"
            ),
        )),
        ChecksumProblem::Mismatch { recorded, computed } => damaged(format!(
            "{key}: checksum mismatch: it records {recorded}, its content is {computed} (edited or corrupted after \
             it was written)"
        )),
    }
}

/// Snapshot `id`'s manifest, parsed and of this format and id, its checksum not yet verified.
pub(super) async fn read_unverified(
    store: &SnapshotStore,
    id: &str,
) -> Result<ClusterManifest, RouterError> {
    let key = format!("{id}/{CLUSTER_MANIFEST}");
    let bytes = store
        .get_bytes(&key)
        .await
        .map_err(|e| from_store("source", e))?
        .ok_or_else(|| RouterError::NotFound(format!("{key}: no snapshot `{id}` here")))?;
    let manifest: ClusterManifest =
        serde_json::from_slice(&bytes).map_err(|e| damaged(format!("{key}: {e}")))?;
    if let Err(e) = CLUSTER_SNAPSHOT.check(Some(manifest.format), &key) {
        return Err(RouterError::Callee(ApiError::new(
            ErrorCode::FailedPrecondition,
            e.to_string(),
        )));
    }
    if manifest.id != id {
        return Err(damaged(format!(
            "{key}: the manifest of snapshot `{}` (expected `{id}`)",
            manifest.id
        )));
    }
    Ok(manifest)
}

/// Snapshot `id`'s manifest, refused unless its checksum matches its content and each collection's shard
/// entries are in shard order (restore gives entry `n` to shard `n`).
pub(super) async fn read_manifest(
    store: &SnapshotStore,
    id: &str,
) -> Result<ClusterManifest, RouterError> {
    let manifest = read_unverified(store, id).await?;
    check(&manifest, &format!("{id}/{CLUSTER_MANIFEST}"))?;
    Ok(manifest)
}

fn check(manifest: &ClusterManifest, key: &str) -> Result<(), RouterError> {
    manifest
        .verify_checksum()
        .map_err(|p| refusal(key, &manifest.id, p))?;
    // Only a manifest written wrong gets here: the checksum was computed over the same order.
    for c in &manifest.collections {
        if let Some((n, r)) = c
            .replicas
            .iter()
            .enumerate()
            .find(|(n, r)| r.shard as usize != *n)
        {
            return Err(damaged(format!(
                "{key}: `{}` lists shard {} in place {n}",
                c.name, r.shard
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(shard: u32, docs: u64) -> ReplicaSnapshot {
        ReplicaSnapshot {
            shard,
            node_id: 10 + u64::from(shard),
            prefix: format!("s1/docs/shard-{shard}"),
            manifest_sha256: format!("{shard:064x}"),
            last_seq: 100 + u64::from(shard),
            live_documents: docs,
            bytes: 4096,
            skipped_bytes: 0,
        }
    }

    fn manifest() -> ClusterManifest {
        let collection = |name: &str| CollectionSnapshot {
            name: name.to_string(),
            shards: 2,
            replication: 2,
            replicas: vec![replica(0, 40), replica(1, 60)],
        };
        ClusterManifest {
            format: CLUSTER_SNAPSHOT_FORMAT,
            id: "s1".to_string(),
            created_ms: 1_795_600_000_000,
            meta_version: 42,
            meta_state_sha256: "ab".repeat(32),
            collections: vec![collection("docs"), collection("faq")],
            blobs: String::new(),
            checksum: String::new(),
        }
    }

    /// The stored bytes, edited as JSON by `edit`, parsed and checked as restore does.
    fn after_edit(edit: impl FnOnce(&mut serde_json::Value)) -> Result<(), RouterError> {
        let mut value: serde_json::Value = serde_json::from_slice(&manifest().encode()).unwrap();
        edit(&mut value);
        let parsed: ClusterManifest = serde_json::from_value(value).unwrap();
        check(&parsed, "s1/attest-snapshot.json")
    }

    fn assert_mismatch(result: Result<(), RouterError>) {
        let e = result.expect_err("an edited manifest was accepted");
        assert_eq!(e.code(), ErrorCode::FailedPrecondition, "{e}");
        let message = e.to_string();
        assert!(
            message.contains("s1/attest-snapshot.json") && message.contains("checksum mismatch"),
            "{message}"
        );
    }

    #[test]
    fn an_untouched_manifest_passes_and_its_checksum_is_stable() {
        let mut m = manifest();
        let bytes = m.encode();
        assert!(m.checksum.starts_with("sha256:") && m.checksum.len() == 7 + 64);
        let parsed: ClusterManifest = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(parsed, m);
        check(&parsed, "s1/attest-snapshot.json").unwrap();
        // The canonical content leaves the checksum out, so sealing again changes nothing.
        assert_eq!(parsed.content_checksum(), m.checksum);
        assert_eq!(parsed.clone().encode(), bytes);
        // Formatting is not content: the compact form of the same manifest passes too.
        let compact: ClusterManifest =
            serde_json::from_slice(&serde_json::to_vec(&parsed).unwrap()).unwrap();
        check(&compact, "s1/attest-snapshot.json").unwrap();
    }

    #[test]
    fn a_changed_value_is_refused() {
        assert_mismatch(after_edit(|v| {
            v["collections"][0]["replicas"][1]["live_documents"] = 61.into()
        }));
        assert_mismatch(after_edit(|v| {
            v["meta_state_sha256"] = "cd".repeat(32).into()
        }));
        assert_mismatch(after_edit(|v| {
            v["collections"][1]["replicas"][0]["prefix"] = "s0/docs/shard-0".into()
        }));
    }

    #[test]
    fn a_changed_byte_in_the_stored_manifest_is_refused() {
        let bytes = manifest().encode();
        let at = bytes
            .windows(4)
            .position(|w| w == b"\"s1/")
            .expect("a prefix in the manifest")
            + 2;
        let mut edited = bytes.clone();
        edited[at] = b'2';
        let parsed: ClusterManifest = serde_json::from_slice(&edited).unwrap();
        assert_mismatch(check(&parsed, "s1/attest-snapshot.json"));
    }

    #[test]
    fn swapped_shard_entries_are_refused() {
        assert_mismatch(after_edit(|v| {
            v["collections"][0]["replicas"]
                .as_array_mut()
                .unwrap()
                .swap(0, 1)
        }));
        // Swapped along with their shard numbers: the entries still say which shard they hold.
        assert_mismatch(after_edit(|v| {
            let replicas = v["collections"][0]["replicas"].as_array_mut().unwrap();
            replicas.swap(0, 1);
            replicas[0]["shard"] = 0.into();
            replicas[1]["shard"] = 1.into();
        }));
    }

    #[test]
    fn a_dropped_collection_a_dropped_shard_or_an_added_field_is_refused() {
        assert_mismatch(after_edit(|v| {
            v["collections"].as_array_mut().unwrap().remove(1);
        }));
        assert_mismatch(after_edit(|v| {
            v["collections"][0]["replicas"]
                .as_array_mut()
                .unwrap()
                .pop();
            v["collections"][0]["shards"] = 1.into();
        }));
        let mut added: serde_json::Value = serde_json::from_slice(&manifest().encode()).unwrap();
        added["collections"][0]["replicas"][0]["node"] = 3.into();
        let e = serde_json::from_value::<ClusterManifest>(added).unwrap_err();
        assert!(e.to_string().contains("unknown field `node`"), "{e}");
    }

    #[test]
    fn a_manifest_without_a_checksum_is_refused_saying_so() {
        let e = after_edit(|v| {
            v.as_object_mut().unwrap().remove("checksum");
        })
        .expect_err("an unchecksummed manifest was accepted");
        assert_eq!(e.code(), ErrorCode::FailedPrecondition);
        assert!(e.to_string().contains("has no checksum"), "{e}");
        // Its own checksum recomputed does not make a manifest with its shards out of order acceptable.
        let mut m = manifest();
        m.collections[1].replicas.swap(0, 1);
        m.encode();
        let e = check(&m, "s1/attest-snapshot.json").unwrap_err();
        assert!(e.to_string().contains("lists shard 1 in place 0"), "{e}");
    }

    #[tokio::test]
    async fn reading_refuses_an_edited_manifest_in_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::open(dir.path().to_str().unwrap()).unwrap();
        let key = format!("s1/{CLUSTER_MANIFEST}");
        let bytes = manifest().encode();
        store.put_bytes(&key, bytes.clone()).await.unwrap();
        assert_eq!(read_manifest(&store, "s1").await.unwrap().id, "s1");
        let text = String::from_utf8(bytes).unwrap();
        let edited = text.replacen("\"live_documents\": 40", "\"live_documents\": 4", 1);
        assert_ne!(edited, text);
        store.put_bytes(&key, edited.into_bytes()).await.unwrap();
        assert_mismatch(read_manifest(&store, "s1").await.map(|_| ()));
        // Still parsed (for retention), only not vouched for.
        assert!(read_unverified(&store, "s1").await.is_ok());
    }
}
