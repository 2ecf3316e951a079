//! The live recall estimate's probe gathers before it scans (issue 73): an exact re-run costs a scan of the whole
//! replica, nearly whatever the number of samples it measures, so searches that arrive within
//! `engine.recall_probe.gather_ms` of the first are measured by one scan — where a probe that scanned on the first
//! sample alone measured 3 samples in four minutes straight after a 10M load. Alone in its process: the probe's
//! queue is the process's, and another test's samples would end the gathering early.

use std::time::{Duration, Instant};

use attest_index::recall_probe::RecallProbeConfig;
use attest_index::{EngineConfig, ShardEngine};

// The engine tests' fixtures; this binary uses a few of them.
#[allow(dead_code)]
#[path = "common.rs"]
mod common;

use common::{config, dense_ids_probing, near_query, sealed_with};

const ROWS: usize = 3_000;

fn engine(dir: &std::path::Path, gather_ms: u64) -> std::sync::Arc<ShardEngine> {
    let config = EngineConfig {
        recall_probe: RecallProbeConfig {
            sample_rate: 1.0,
            cpu_share: 1.0,
            window: 200,
            gather_ms,
        },
        ..config(1_000)
    };
    sealed_with(dir, config, ROWS)
}

/// Serves `n` searches back to back and waits (bounded) until the probe has measured them all; returns the
/// exact scans that took.
fn scans_for_a_burst(engine: &ShardEngine, n: u64) -> u64 {
    for i in 0..n as usize {
        dense_ids_probing(engine, &near_query(i, ROWS), 10, Some(2));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let e = engine.stats().recall;
        if let Some(e) = e.filter(|e| e.measured >= n) {
            assert_eq!(e.dropped, 0, "{e:?}");
            return e.scans;
        }
        assert!(Instant::now() < deadline, "{e:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn searches_within_the_gathering_are_measured_by_one_scan() {
    let gathering = tempfile::tempdir().unwrap();
    // The burst takes milliseconds; the gathering, 10 s after its first sample.
    let gathered = engine(gathering.path(), 10_000);
    assert_eq!(scans_for_a_burst(&gathered, 40), 1);
}
