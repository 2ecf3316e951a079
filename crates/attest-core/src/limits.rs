//! Limits and defaults every role applies the same way: collection names, shard counts and replication, the
//! most hits a lane returns, vector checks, the IVF_PQ defaults and which `nprobe` and `m` an index can take.
//! The router checks a request with these before it reaches meta or a shard, and meta and the shards check it
//! again with the same rules.

/// Longest collection name (names travel in URLs and directory names).
pub const MAX_COLLECTION_NAME: usize = 128;
/// Most shards one collection may have.
pub const MAX_SHARDS: u32 = 4096;
/// Most replicas of one shard.
pub const MAX_REPLICATION: u32 = 16;
/// Replicas per shard of a collection created in a cluster without saying (SPEC: 2): the router's
/// `default_replication` and meta's answer to a request of 0.
pub const DEFAULT_REPLICATION: u32 = 2;
/// The most hits a shard returns per lane, and the most a caller may ask a lane for.
pub const MAX_TOP_K: usize = 1000;
/// Most searches of one batch (router `SearchBatch`, shard `SearchBatch`): a hop's rewrites and pins, with room.
pub const MAX_BATCH_SEARCHES: usize = 32;
/// Widest vector a collection may hold.
pub const MAX_DIMENSION: u32 = 4096;
/// Most bits per PQ code FAISS supports here.
pub const MAX_NBITS: u32 = 16;
/// Most inverted lists of one IVF index.
pub const MAX_NLIST: u32 = 1 << 20;

/// IVF_PQ defaults of a new collection (SPEC: nlist 1024, m 96, 8 bits, nprobe 32).
pub const DEFAULT_NLIST: u32 = 1024;
pub const DEFAULT_M: u32 = 96;
pub const DEFAULT_NBITS: u32 = 8;
pub const DEFAULT_NPROBE: u32 = 32;
/// A new collection's `index.recall_target` when it names neither a target nor an `nprobe`: the recall@10 its
/// replicas tune their search settings to reach (issue 73).
pub const DEFAULT_RECALL_TARGET: f64 = 0.95;

/// Why a collection name is refused, or `None` when it is fine: 1–128 characters of `[A-Za-z0-9_-]`.
pub fn collection_name_problem(name: &str) -> Option<String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_COLLECTION_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    (!ok).then(|| format!("use 1-{MAX_COLLECTION_NAME} characters from [A-Za-z0-9_-]"))
}

/// What separates a collection's name from the tag of a copy the cluster keeps under another name (the new
/// index a re-embedding builds, which the collection's name then points at): users' names cannot contain it, so
/// no user collection is ever mistaken for one.
pub const STORED_NAME_SEPARATOR: char = '~';
/// Longest tag after [`STORED_NAME_SEPARATOR`].
pub const MAX_STORED_NAME_TAG: usize = 16;

/// The name a copy of collection `name` is stored under: `name~tag`.
pub fn stored_collection_name(name: &str, tag: &str) -> String {
    format!("{name}{STORED_NAME_SEPARATOR}{tag}")
}

/// The collection a stored name belongs to: the part before [`STORED_NAME_SEPARATOR`] (the name itself when it
/// has none).
pub fn owner_of_stored_name(stored: &str) -> &str {
    stored
        .split_once(STORED_NAME_SEPARATOR)
        .map_or(stored, |(name, _)| name)
}

/// Why a stored collection name (what meta keys a collection by and shard nodes name directories after) is
/// refused: a collection name ([`collection_name_problem`]), optionally followed by [`STORED_NAME_SEPARATOR`]
/// and a tag of 1-16 characters from `[a-z0-9]`.
pub fn stored_collection_name_problem(stored: &str) -> Option<String> {
    let (name, tag) = match stored.split_once(STORED_NAME_SEPARATOR) {
        Some((name, tag)) => (name, Some(tag)),
        None => (stored, None),
    };
    let tag_ok = tag.is_none_or(|t| {
        (1..=MAX_STORED_NAME_TAG).contains(&t.len())
            && t.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    });
    match collection_name_problem(name) {
        Some(problem) => Some(problem),
        None if !tag_ok => Some(format!(
            "a stored name's tag after `{STORED_NAME_SEPARATOR}` is 1-{MAX_STORED_NAME_TAG} characters from [a-z0-9]"
        )),
        None => None,
    }
}

/// Longest snapshot id (ids become key prefixes at a snapshot destination).
pub const MAX_SNAPSHOT_ID: usize = 128;

/// Why a snapshot id is refused: 1–128 characters of `[A-Za-z0-9._-]`, not starting with `.` (the router also
/// keeps the destination's shared folder's name for itself).
pub fn snapshot_id_problem(id: &str) -> Option<String> {
    let ok = (1..=MAX_SNAPSHOT_ID).contains(&id.len())
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    (!ok).then(|| {
        format!("use 1-{MAX_SNAPSHOT_ID} characters from [A-Za-z0-9._-], not starting with '.'")
    })
}

/// Why a snapshot job's id is refused: job ids become meta's record keys, 1–128 characters of `[A-Za-z0-9._-]`.
pub fn job_id_problem(id: &str) -> Option<String> {
    let ok = (1..=MAX_SNAPSHOT_ID).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    (!ok).then(|| format!("job id {id:?}: use 1-{MAX_SNAPSHOT_ID} characters from [A-Za-z0-9._-]"))
}

/// Longest embedding model id a collection may name (`BAAI/bge-large-en-v1.5`, `text-embedding-3-small`).
pub const MAX_EMBEDDER_MODEL: usize = 128;

/// Why the embedding model a new collection names is refused: 1–128 characters of `[A-Za-z0-9._:/-]`.
pub fn embedder_model_problem(model: &str) -> Option<String> {
    let ok = (1..=MAX_EMBEDDER_MODEL).contains(&model.len())
        && model
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':' | b'/'));
    (!ok).then(|| {
        format!("model {model:?}: use 1-{MAX_EMBEDDER_MODEL} characters from [A-Za-z0-9._:/-] (leave it out for the router's embedder)")
    })
}

/// Why a shard count is refused (0 is refused: "use the default" is said by leaving the field out).
pub fn shards_problem(shards: u32) -> Option<String> {
    (shards == 0 || shards > MAX_SHARDS).then(|| format!("must be 1..={MAX_SHARDS}"))
}

/// Why a replication factor is refused.
pub fn replication_problem(replication: u32) -> Option<String> {
    (replication == 0 || replication > MAX_REPLICATION)
        .then(|| format!("must be 1..={MAX_REPLICATION}"))
}

/// Why `nprobe` (inverted lists probed per search) is refused for an index of `nlist` lists: it must be
/// `1..=nlist`; 0 probes nothing and more lists than exist is a mistake, not a request for all of them.
pub fn nprobe_problem(nprobe: u32, nlist: u32) -> Option<String> {
    (nprobe == 0 || nprobe > nlist)
        .then(|| format!("must be 1..={nlist} (the index's nlist), got {nprobe}"))
}

/// The lowest recall target a collection may state: a lower aim is a mistake, not a saving.
pub const MIN_RECALL_TARGET: f64 = 0.5;

/// Why a recall target is refused: a recall@k from [`MIN_RECALL_TARGET`] to 1.
pub fn recall_target_problem(target: f64) -> Option<String> {
    (!(MIN_RECALL_TARGET..=1.0).contains(&target))
        .then(|| format!("must be a recall from {MIN_RECALL_TARGET} to 1, got {target}"))
}

/// Why `m` (PQ sub-quantizers) is refused for vectors of `dimension`: FAISS splits a vector into `m` equal
/// slices, so `m` must divide the dimension.
pub fn pq_m_problem(m: u32, dimension: u32) -> Option<String> {
    (m == 0 || !dimension.is_multiple_of(m))
        .then(|| format!("must divide the dimension ({dimension}), got {m}"))
}

/// Why a vector cannot be stored or searched with in a collection of `dimension`: a wrong length, a component
/// that is not finite, or all zeros (no direction: every cosine with it is undefined).
pub fn vector_problem(v: &[f32], dimension: usize) -> Option<String> {
    if v.len() != dimension {
        return Some(format!(
            "dimension {} but the collection has {dimension}",
            v.len()
        ));
    }
    if let Some(i) = v.iter().position(|x| !x.is_finite()) {
        return Some(format!("component {i} is not a finite number"));
    }
    if v.iter().all(|x| *x == 0.0) {
        return Some("all components are zero".to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_name_is_a_collection_name_and_an_optional_tag_users_cannot_write() {
        let stored = stored_collection_name("docs", "r1a2");
        assert_eq!(stored, "docs~r1a2");
        assert!(stored_collection_name_problem(&stored).is_none());
        assert!(stored_collection_name_problem("docs").is_none());
        assert!(collection_name_problem(&stored).is_some());
        assert_eq!(owner_of_stored_name(&stored), "docs");
        assert_eq!(owner_of_stored_name("docs"), "docs");
        for bad in [
            "docs~",
            "docs~A1",
            "docs~a~b",
            "~a1",
            "a/b~r1",
            &format!("d~{}", "a".repeat(17)),
        ] {
            assert!(stored_collection_name_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn names_counts_and_vectors_follow_one_rule() {
        assert!(collection_name_problem("docs_v2-eu").is_none());
        assert!(collection_name_problem(&"a".repeat(MAX_COLLECTION_NAME)).is_none());
        assert!(collection_name_problem(&"a".repeat(MAX_COLLECTION_NAME + 1)).is_some());
        assert!(collection_name_problem("").is_some());
        assert!(collection_name_problem("a/b").is_some());
        assert!(shards_problem(0).is_some());
        assert!(shards_problem(MAX_SHARDS).is_none());
        assert!(shards_problem(MAX_SHARDS + 1).is_some());
        assert!(replication_problem(0).is_some());
        assert!(replication_problem(MAX_REPLICATION + 1).is_some());
        assert!(vector_problem(&[0.6, 0.8], 2).is_none());
        assert!(vector_problem(&[0.6], 2).unwrap().contains("dimension 1"));
        assert!(vector_problem(&[0.0, f32::NAN], 2)
            .unwrap()
            .contains("component 1"));
        assert!(vector_problem(&[0.0, 0.0], 2).unwrap().contains("zero"));
    }

    #[test]
    fn nprobe_is_one_to_nlist_and_m_divides_the_dimension() {
        assert!(nprobe_problem(1, 1024).is_none());
        assert!(nprobe_problem(1024, 1024).is_none());
        assert!(nprobe_problem(0, 1024).unwrap().contains("1..=1024"));
        assert!(nprobe_problem(1_000_000, 1024)
            .unwrap()
            .contains("got 1000000"));
        assert!(pq_m_problem(96, 384).is_none());
        assert!(pq_m_problem(384, 384).is_none());
        assert!(pq_m_problem(1, 384).is_none());
        assert!(pq_m_problem(7, 384).unwrap().contains("dimension (384)"));
        assert!(pq_m_problem(768, 384).is_some());
        assert!(pq_m_problem(0, 384).is_some());
    }
}
