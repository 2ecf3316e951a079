//! The latest version of every document of a shard, in memory: what decides whether a row is live (a search
//! checks its candidates against it, a seal and a merge every row).
//!
//! Documents are keyed by 128 bits of two SipHashes of (tenant, document id), each with its own random keys, not
//! by their names. A 10M-document shard held every id as its own allocation beside a 48-byte bucket, ~1.1 GB of
//! its 1.59 GB anonymous memory (docs/bench/history.md "10M serving"); a 32-byte bucket and no allocation is half
//! that. Two documents share a key with probability about n² / 2^129 — 10^-25 at 10M documents — and the keys
//! are drawn anew by every process (the map is rebuilt from the log at start-up), so nobody can choose ids that
//! collide.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};

use crate::wal::DocVersion;

/// Bits of a held sequence number: the log's sequence numbers stay below 2^47 (a global row id is the sequence
/// number shifted by 16 bits, in 63), so the top bit can say whether the document is deleted.
const DELETED: u64 = 1 << 63;

/// What the engine keeps in memory of a document's latest version: the log's [`DocVersion`] less its tenant and
/// id, which its key stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct HeldVersion {
    pub seq: u64,
    pub version: u64,
    pub deleted: bool,
}

impl HeldVersion {
    /// Whether a row written by the record `seq` of this document is still current.
    pub fn is_live_row(&self, seq: u64) -> bool {
        !self.deleted && self.seq == seq
    }

    pub fn of(v: &DocVersion) -> Self {
        HeldVersion {
            seq: v.seq,
            version: v.version,
            deleted: v.deleted,
        }
    }
}

/// A held version as stored: the sequence number with the deleted flag in its top bit, and the write version.
#[derive(Clone, Copy)]
struct Slot(u64, u64);

impl From<HeldVersion> for Slot {
    fn from(v: HeldVersion) -> Self {
        Slot(v.seq | if v.deleted { DELETED } else { 0 }, v.version)
    }
}

impl From<Slot> for HeldVersion {
    fn from(s: Slot) -> Self {
        HeldVersion {
            seq: s.0 & !DELETED,
            version: s.1,
            deleted: s.0 & DELETED != 0,
        }
    }
}

/// The keys are already uniformly random: the table uses their low 64 bits as they are.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only u128 keys are hashed; this is what `write_u128` falls back to, kept correct for any input.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u128(&mut self, key: u128) {
        self.0 = key as u64;
    }
}

/// The latest version of every document. The live count is kept as versions are recorded: counting it from the
/// map took ~0.1 s at 10M documents under the state lock, on every heartbeat, metrics scrape and `Stats` call.
/// So is each tenant's: the keys hide the names, and dropping a collection must know whose documents it holds
/// (issue 69: a key limited to some tenants may not destroy another tenant's).
pub(super) struct DocVersions {
    by_key: HashMap<u128, Slot, BuildHasherDefault<KeyHasher>>,
    hashers: (RandomState, RandomState),
    live: u64,
    live_by_tenant: HashMap<Box<str>, u64>,
}

impl Default for DocVersions {
    fn default() -> Self {
        DocVersions {
            by_key: HashMap::default(),
            hashers: (RandomState::new(), RandomState::new()),
            live: 0,
            live_by_tenant: HashMap::new(),
        }
    }
}

impl DocVersions {
    fn key(&self, tenant: &str, doc_id: &str) -> u128 {
        // The tenant's length first: ("ab", "c") and ("a", "bc") are different documents.
        let half = |s: &RandomState| {
            let mut h = s.build_hasher();
            h.write_usize(tenant.len());
            h.write(tenant.as_bytes());
            h.write(doc_id.as_bytes());
            h.finish()
        };
        (u128::from(half(&self.hashers.0)) << 64) | u128::from(half(&self.hashers.1))
    }

    pub fn get(&self, tenant: &str, doc_id: &str) -> Option<HeldVersion> {
        self.by_key
            .get(&self.key(tenant, doc_id))
            .map(|s| HeldVersion::from(*s))
    }

    /// Records `held` as the document's latest version; returns the one it replaces.
    pub fn insert(&mut self, tenant: &str, doc_id: &str, held: HeldVersion) -> Option<HeldVersion> {
        let key = self.key(tenant, doc_id);
        let replaced = self.by_key.insert(key, held.into()).map(HeldVersion::from);
        let was_live = replaced.is_some_and(|v| !v.deleted);
        self.live = self.live + u64::from(!held.deleted) - u64::from(was_live);
        self.count_tenant(tenant, u64::from(!held.deleted), u64::from(was_live));
        replaced
    }

    /// Forgets the document (as if never written); returns the version it held.
    pub fn remove(&mut self, tenant: &str, doc_id: &str) -> Option<HeldVersion> {
        let key = self.key(tenant, doc_id);
        let removed = self.by_key.remove(&key).map(HeldVersion::from);
        let was_live = u64::from(removed.is_some_and(|v| !v.deleted));
        self.live -= was_live;
        self.count_tenant(tenant, 0, was_live);
        removed
    }

    /// Moves a tenant's live count by `added - removed`, forgetting a tenant left with none.
    fn count_tenant(&mut self, tenant: &str, added: u64, removed: u64) {
        if added == removed {
            return;
        }
        if let Some(n) = self.live_by_tenant.get_mut(tenant) {
            *n = *n + added - removed;
            if *n == 0 {
                self.live_by_tenant.remove(tenant);
            }
        } else if added > removed {
            self.live_by_tenant.insert(tenant.into(), added - removed);
        }
    }

    /// The tenants with at least one live document, sorted.
    pub fn tenants(&self) -> Vec<String> {
        let mut tenants: Vec<String> = self.live_by_tenant.keys().map(|t| t.to_string()).collect();
        tenants.sort();
        tenants
    }

    pub fn live(&self) -> u64 {
        self.live
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(seq: u64, version: u64, deleted: bool) -> HeldVersion {
        HeldVersion {
            seq,
            version,
            deleted,
        }
    }

    #[test]
    fn versions_are_per_tenant_and_document_and_count_the_live_ones() {
        let mut v = DocVersions::default();
        assert_eq!(v.insert("t", "a", held(1, 10, false)), None);
        assert_eq!(v.insert("u", "a", held(2, 11, false)), None);
        // The tenant's length is part of the key: these are other documents.
        assert_eq!(v.insert("ta", "", held(3, 12, false)), None);
        assert_eq!(v.insert("", "ta", held(4, 13, false)), None);
        assert_eq!(v.live(), 4);
        assert_eq!(v.get("t", "a"), Some(held(1, 10, false)));
        assert_eq!(v.get("u", "a"), Some(held(2, 11, false)));
        assert_eq!(v.get("t", "b"), None);
        assert_eq!(
            v.insert("t", "a", held(5, 14, true)),
            Some(held(1, 10, false))
        );
        assert_eq!(v.live(), 3);
        let deleted = v.get("t", "a").unwrap();
        assert!(deleted.deleted && deleted.seq == 5 && !deleted.is_live_row(5));
        assert_eq!(v.insert("t", "a", held(6, 15, false)), Some(deleted));
        assert_eq!(v.live(), 4);
        assert!(v.get("t", "a").unwrap().is_live_row(6));
        assert!(!v.get("t", "a").unwrap().is_live_row(1));
        assert_eq!(v.tenants(), ["", "t", "ta", "u"]);
    }

    #[test]
    fn a_tenant_is_listed_while_it_has_a_live_document() {
        let mut v = DocVersions::default();
        v.insert("beta", "a", held(1, 1, false));
        v.insert("beta", "b", held(2, 1, false));
        v.insert("acme", "a", held(3, 1, true));
        assert_eq!(v.tenants(), ["beta"]);
        v.insert("beta", "a", held(4, 2, true));
        assert_eq!(v.tenants(), ["beta"]);
        v.remove("beta", "b");
        assert!(v.tenants().is_empty());
        v.insert("acme", "a", held(5, 2, false));
        assert_eq!(v.tenants(), ["acme"]);
    }

    #[test]
    fn the_largest_sequence_numbers_keep_their_flag_apart() {
        let top = (1u64 << 47) - 1;
        for deleted in [false, true] {
            let h = held(top, u64::MAX, deleted);
            assert_eq!(HeldVersion::from(Slot::from(h)), h);
        }
    }
}
