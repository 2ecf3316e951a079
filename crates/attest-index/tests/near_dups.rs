//! The near-duplicate keys a shard keeps beside its log: written with the document, per tenant, replaced when the
//! document is, removed when it is deleted, kept across a restart and copied by catch-up.

use crate::common;

use attest_index::{DocumentWrite, FetchedDocument, NearDupKeys, ShardEngine};
use common::*;

/// Eight signature slots in four bands of two; `differ` slots (from the end) changed.
fn keys(seed: u32, differ: usize) -> NearDupKeys {
    let mut signature: Vec<u32> = (0..8).map(|i| seed * 100 + i).collect();
    for slot in signature.iter_mut().rev().take(differ) {
        *slot += 50;
    }
    let bands = signature
        .chunks(2)
        .map(|rows| (u64::from(rows[0]) << 32) | u64::from(rows[1]))
        .collect();
    NearDupKeys { signature, bands }
}

fn with_keys(d: usize, tenant: &str, k: Option<NearDupKeys>) -> DocumentWrite {
    DocumentWrite {
        tenant: tenant.into(),
        near_dup: k,
        ..doc(d, 1)
    }
}

fn found(
    e: &ShardEngine,
    tenant: &str,
    id: &str,
    k: NearDupKeys,
    threshold: f64,
) -> Option<(String, f64)> {
    e.near_duplicates(tenant, &[(id.to_string(), k)], threshold)
        .unwrap()
        .pop()
        .unwrap()
        .map(|m| (m.doc_id, m.similarity))
}

#[test]
fn near_dup_keys_follow_their_document() {
    let dir = tempfile::tempdir().unwrap();
    let e = ShardEngine::open(dir.path(), config(1000)).unwrap();
    e.upsert(vec![
        with_keys(1, "t1", Some(keys(1, 0))),
        with_keys(2, "t1", Some(keys(2, 0))),
    ])
    .unwrap();
    assert_eq!(
        found(&e, "t1", "new", keys(1, 0), 0.9),
        Some(("doc-1".into(), 1.0))
    );
    // Two of eight slots differ (two bands still equal): 0.75.
    assert_eq!(found(&e, "t1", "new", keys(1, 2), 0.9), None);
    // A shard keeps the low byte of each value: the estimate takes out their chance agreement (1 in 256).
    let (id, similarity) = found(&e, "t1", "new", keys(1, 2), 0.7).expect("found");
    assert_eq!(id, "doc-1");
    assert!((similarity - 0.75).abs() < 0.01, "{similarity}");
    assert_eq!(
        found(&e, "t1", "doc-1", keys(1, 0), 0.9),
        None,
        "a document is not its own duplicate"
    );
    assert_eq!(
        found(&e, "t2", "new", keys(1, 0), 0.9),
        None,
        "another tenant's documents never match"
    );

    // Replaced with new keys: the old ones are gone.
    e.upsert(vec![with_keys(1, "t1", Some(keys(7, 0)))])
        .unwrap();
    assert_eq!(found(&e, "t1", "new", keys(1, 0), 0.5), None);
    assert_eq!(
        found(&e, "t1", "new", keys(7, 0), 0.9),
        Some(("doc-1".into(), 1.0))
    );
    // Deleted: forgotten.
    assert!(e.delete("t1", "doc-1").unwrap());
    assert_eq!(found(&e, "t1", "new", keys(7, 0), 0.5), None);

    // Catch-up copies the keys with the document.
    match e
        .fetch_documents(&[("t1".to_string(), "doc-2".to_string())])
        .unwrap()
        .pop()
    {
        Some(FetchedDocument::Live(w)) => assert_eq!(w.near_dup, Some(keys(2, 0))),
        other => panic!("{other:?}"),
    }
    drop(e);
    let e = ShardEngine::open(dir.path(), config(1000)).unwrap();
    assert_eq!(
        found(&e, "t1", "new", keys(2, 0), 0.9),
        Some(("doc-2".into(), 1.0)),
        "kept across a restart"
    );
    assert_eq!(
        found(&e, "t1", "new", keys(7, 0), 0.5),
        None,
        "and the deletion too"
    );
}

/// The first `n` bands of `k` (what a router storing fewer bands sends).
fn first_bands(mut k: NearDupKeys, n: usize) -> NearDupKeys {
    k.bands.truncate(n);
    k
}

/// Documents stored with all their bands (before `router.dedup.stored_bands`) and with a prefix of them are both
/// found by lookups that ask a prefix, and replacing one removes every band entry it had.
#[test]
fn documents_stored_with_more_or_fewer_bands_are_found_by_a_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let e = ShardEngine::open(dir.path(), config(1000)).unwrap();
    e.upsert(vec![
        with_keys(1, "t1", Some(keys(1, 0))),
        with_keys(2, "t1", Some(first_bands(keys(2, 0), 2))),
    ])
    .unwrap();
    for (d, asked) in [(1, 2), (1, 4), (2, 2), (2, 4)] {
        assert_eq!(
            found(&e, "t1", "new", first_bands(keys(d, 0), asked), 0.9),
            Some((format!("doc-{d}"), 1.0)),
            "doc-{d} asked with {asked} bands"
        );
    }
    // Two of eight slots differ: only the first two bands match, the stored prefix finds it.
    assert!(found(&e, "t1", "new", first_bands(keys(2, 2), 2), 0.7).is_some());

    // doc-1 replaced with keys of two bands: none of its four old band entries is left to find it.
    e.upsert(vec![with_keys(1, "t1", Some(first_bands(keys(7, 0), 2)))])
        .unwrap();
    for band in 0..4 {
        let mut only = keys(1, 0);
        only.bands = (0..4)
            .map(|b| {
                if b == band {
                    only.bands[b]
                } else {
                    u64::MAX - b as u64
                }
            })
            .collect();
        assert_eq!(found(&e, "t1", "new", only, 0.0), None, "band {band}");
    }
}
