//! The live recall estimate (issue 73): a shard that serves searches with a narrow probe measures, off the request
//! path, a recall below 1 that agrees with what an exact search of the same queries gives; with every list probed
//! it measures 1.

use std::time::{Duration, Instant};

use attest_index::recall_probe::{RecallEstimate, RecallProbeConfig};
use attest_index::{EngineConfig, ShardEngine};

use crate::common::{
    config, dense_ids_probing, exact_top_k, near_query, recall_of, sealed_with, vector_for,
};

const ROWS: usize = 3_000;
const QUERIES: usize = 60;
const K: usize = 10;

fn probed() -> EngineConfig {
    EngineConfig {
        recall_probe: RecallProbeConfig {
            sample_rate: 1.0,
            cpu_share: 1.0,
            window: QUERIES,
            // Each query waits for its own measurement below; gathering is `recall_probe_gather`'s.
            gather_ms: 0,
        },
        ..config(1_000)
    }
}

/// ROWS documents sealed, every search sampled by the probe.
fn sealed_and_probed(dir: &std::path::Path) -> std::sync::Arc<ShardEngine> {
    sealed_with(dir, probed(), ROWS)
}

/// Serves the queries with `nprobe`, each once the probe has measured the one before (so none is dropped from
/// its queue); returns the mean recall@k of what was served.
fn serve(engine: &ShardEngine, nprobe: u32) -> f64 {
    let stored: Vec<Vec<f32>> = (0..ROWS).map(vector_for).collect();
    let mut total = 0.0;
    for i in 0..QUERIES {
        let q = near_query(i, ROWS);
        let before = measured(engine);
        let served = dense_ids_probing(engine, &q, K, Some(nprobe));
        total += recall_of(&served, &exact_top_k(&q, &stored, 0, K));
        let deadline = Instant::now() + Duration::from_secs(60);
        while measured(engine) == before {
            assert!(
                Instant::now() < deadline,
                "the probe never measured query {i}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    total / QUERIES as f64
}

fn measured(engine: &ShardEngine) -> u64 {
    engine.stats().recall.map_or(0, |e| e.measured)
}

fn estimate(engine: &ShardEngine) -> RecallEstimate {
    engine.stats().recall.expect("an estimate")
}

#[test]
fn the_estimate_measures_the_recall_a_narrow_probe_delivers() {
    let dir = tempfile::tempdir().unwrap();
    let engine = sealed_and_probed(dir.path());

    // The window holds the last QUERIES samples: each estimate is of one run's queries alone.
    let narrow = serve(&engine, 1);
    let narrow_estimate = estimate(&engine);
    assert!(
        narrow < 0.9,
        "nprobe 1 of 16 lists should miss neighbours: {narrow}"
    );
    assert_eq!(narrow_estimate.samples, QUERIES as u64);
    assert!(
        (narrow_estimate.recall - narrow).abs() < 0.02,
        "estimate {narrow_estimate:?}, measured {narrow}"
    );
    assert!(
        narrow_estimate.low <= narrow && narrow <= narrow_estimate.high,
        "{narrow_estimate:?}"
    );

    let wide = serve(&engine, 16);
    let wide_estimate = estimate(&engine);
    assert!(
        wide > narrow + 0.05,
        "every list probed finds more: {wide} against {narrow}"
    );
    assert!(
        (wide_estimate.recall - wide).abs() < 0.02,
        "estimate {wide_estimate:?}, measured {wide}"
    );
    assert_eq!(wide_estimate.dropped, 0);
}

/// Searches arriving faster than the probe measures them wait in its queue and are measured together, a replica's
/// in one scan: none is dropped, and each is held to its own exact top k.
#[test]
fn a_burst_of_searches_is_measured_together_and_each_against_its_own_top_k() {
    let dir = tempfile::tempdir().unwrap();
    let engine = sealed_and_probed(dir.path());
    let stored: Vec<Vec<f32>> = (0..ROWS).map(vector_for).collect();

    // Two depths in one burst: a probe that held both to the deeper one would score the shallow ones too low.
    let burst = 40;
    let mut total = 0.0;
    for i in 0..burst {
        let q = near_query(i, ROWS);
        let k = if i % 2 == 0 { K } else { 3 };
        let served = dense_ids_probing(&engine, &q, k, Some(2));
        total += recall_of(&served, &exact_top_k(&q, &stored, 0, k));
    }
    let served = total / burst as f64;
    let deadline = Instant::now() + Duration::from_secs(60);
    while measured(&engine) < burst as u64 {
        assert!(
            Instant::now() < deadline,
            "{} of {burst} measured",
            measured(&engine)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let e = estimate(&engine);
    assert_eq!(e.dropped, 0, "{e:?}");
    assert!(
        served < 0.95,
        "nprobe 2 of 16 lists should miss neighbours: {served}"
    );
    assert!(
        (e.recall - served).abs() < 0.02,
        "estimate {e:?}, measured {served}"
    );
}
