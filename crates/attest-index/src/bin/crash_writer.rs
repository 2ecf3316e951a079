//! Test helper, not a product binary: the writer process of the crash test (`tests/durability.rs`): opens an engine in `DIR` and upserts batches of
//! documents from `START` on, forever, printing `ack FIRST LAST` after each batch is acknowledged. The test kills
//! it with SIGKILL at random moments.

// The tests' fixtures, of which this writer uses the documents only (not the search helpers).
#[path = "../../tests/common.rs"]
#[allow(dead_code)]
mod common;

use std::io::Write;

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("DIR");
    let start: usize = args.next().expect("START").parse().expect("number");
    // A small threshold so that background seals are often cut short by the kill.
    let engine = attest_index::ShardEngine::open(std::path::Path::new(&dir), common::config(120))
        .expect("open");
    let mut out = std::io::stdout().lock();
    let mut next = start;
    loop {
        let batch: Vec<_> = (next..next + 5).map(|d| common::doc(d, 0)).collect();
        engine.upsert(batch).expect("upsert");
        writeln!(out, "ack {} {}", next, next + 4).unwrap();
        out.flush().unwrap();
        next += 5;
    }
}
