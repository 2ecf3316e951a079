//! Crash test: a child process ingesting is killed with SIGKILL at random moments; after each restart every
//! acknowledged chunk is searchable exactly once.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use attest_index::{Filter, SearchParams, ShardEngine};
use common::*;
use rand::{Rng, SeedableRng};

#[test]
fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_crash-writer");
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let mut acked: Vec<usize> = Vec::new();
    let trials = 12;
    for trial in 0..trials {
        let mut child = Command::new(bin)
            .arg(dir.path())
            .arg((trial * 100_000).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut ids = Vec::new();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let parts: Vec<usize> = line
                    .split_whitespace()
                    .skip(1)
                    .map(|p| p.parse().unwrap())
                    .collect();
                ids.extend(parts[0]..=parts[1]);
            }
            ids
        });
        std::thread::sleep(Duration::from_millis(rng.gen_range(300..2000)));
        unsafe {
            libc::kill(child.id() as i32, libc::SIGKILL);
        }
        child.wait().unwrap();
        let ids = reader.join().unwrap();
        acked.extend(ids);
    }
    assert!(
        acked.len() > 100,
        "the writer made progress ({} acks)",
        acked.len()
    );

    // What is checked is durability, not recall: a deep candidate list makes the exact re-score find every
    // stored vector however large the compacted segment grew (with the default 12 PQ candidates for k = 3, one
    // run in five missed one on a machine fast enough to write far more documents per trial).
    let engine = ShardEngine::open(
        dir.path(),
        attest_index::EngineConfig {
            overfetch: 256,
            ..config(120)
        },
    )
    .unwrap();
    let f = Filter::default();
    for &d in &acked {
        let token = token_for(d);
        let p = SearchParams {
            tenant: "t1",
            query_vector: None,
            query_text: Some(&token),
            k: 10,
            nprobe: None,
            filter: &f,
            exact_rescore: true,
            payload_top: attest_index::ALL_PAYLOADS,
        };
        let hits = engine.search(&p).unwrap().bm25;
        assert_eq!(
            hits.len(),
            1,
            "acknowledged doc-{d} must be found exactly once, got {hits:?}"
        );
        assert_eq!(hits[0].chunk_id, format!("doc-{d}#0"));
    }
    for &d in acked.iter().step_by(97) {
        let v = vector_for(d);
        let p = SearchParams {
            tenant: "t1",
            query_vector: Some(&v),
            query_text: None,
            k: 3,
            nprobe: None,
            filter: &f,
            exact_rescore: true,
            payload_top: attest_index::ALL_PAYLOADS,
        };
        let hits = engine.search(&p).unwrap().dense;
        assert_eq!(hits[0].chunk_id, format!("doc-{d}#0"));
        assert_eq!(
            hits.iter()
                .filter(|h| h.chunk_id == hits[0].chunk_id)
                .count(),
            1
        );
    }
    let live = engine.stats().live_documents as usize;
    // Each kill may leave one batch written but not yet acknowledged; nothing acknowledged is missing.
    assert!(
        live >= acked.len() && live <= acked.len() + 5 * trials,
        "live {live}, acked {}",
        acked.len()
    );
}
