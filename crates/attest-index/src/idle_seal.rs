//! Seals what an idle replica holds unsealed. A replica seals when its growing segment reaches `seal_threshold`
//! rows; what arrives after the last seal waits for more writes, and every search scans it flat, row by row. When
//! writes stop short of the threshold — the end of a bulk load, documents copied by catch-up, a quiet collection
//! — that scan stays in every search for good: at 10M vectors it was 28% of a shard search's CPU
//! (docs/bench/history.md, "10M, settled"). Milvus seals a growing segment that has stopped growing for the same
//! reason. A replica whose last write is `engine.seal_idle_ms` old and that holds at least
//! `engine.seal_idle_rows` unsealed rows is sealed here (`engine.seal_idle_rows_quantized`, 1,000, once the
//! shard's quantizer is trained: leftovers of a few thousand rows beside 1.67M sealed ones were still 6% of a 10M
//! cluster's search CPU); fewer rows cost a search little and would only make small segments for the merges to
//! undo.
//!
//! The same look asks again for a search tuning that waited for the replica's writes to stop
//! ([`crate::search_tuning`]).
//!
//! One thread per process looks at every open engine once a second; an engine that is dropped leaves its list.

use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;

use crate::engine::ShardEngine;

/// How often the open engines are looked at.
const CHECK_EVERY: Duration = Duration::from_secs(1);

static WATCHED: Mutex<Vec<Weak<ShardEngine>>> = Mutex::new(Vec::new());

/// Looks after `engine` from now on (its idle backlog is sealed): called once per engine, as it opens.
pub(crate) fn watch(engine: &Arc<ShardEngine>) {
    let mut watched = WATCHED.lock();
    let first = watched.is_empty();
    watched.push(Arc::downgrade(engine));
    if first {
        // The thread stops once no engine is left to watch; the next engine opened starts another.
        std::thread::Builder::new()
            .name("idle-seal".into())
            .spawn(look_after_engines)
            .expect("spawn the idle-seal thread");
    }
}

fn look_after_engines() {
    loop {
        std::thread::sleep(CHECK_EVERY);
        let engines: Vec<Arc<ShardEngine>> = {
            let mut watched = WATCHED.lock();
            watched.retain(|w| w.strong_count() > 0);
            if watched.is_empty() {
                return;
            }
            watched.iter().filter_map(Weak::upgrade).collect()
        };
        for engine in engines {
            engine.seal_if_idle();
            engine.resume_deferred_tuning();
        }
    }
}
