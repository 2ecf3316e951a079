//! The nemesis of the history suite (`tests/history.rs`): seeded faults, one at a time, each healed before the
//! next, while the clients run.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::Rng;

use super::cluster::Cluster;
use super::{wait_until, START_LIMIT};
use crate::common::Proc;

fn signal(proc: &Proc, sig: i32) {
    unsafe {
        libc::kill(proc.0.id() as i32, sig);
    }
}

/// What the nemesis did.
#[derive(Debug, Default)]
pub(super) struct Faults {
    pub(super) shard_kills: usize,
    pub(super) meta_kills: usize,
    pub(super) pauses: usize,
    pub(super) partitions: usize,
    /// One line per fault and per heal, with the time since the load began.
    pub(super) log: Vec<String>,
}

impl Faults {
    pub(super) fn total(&self) -> usize {
        self.shard_kills + self.meta_kills + self.pauses + self.partitions
    }
}

/// One fault at a time until `until`, each healed before the next: SIGKILL a shard process (restarted with its
/// data), SIGKILL a meta process (restarted; the next fault waits until it knows the leader and has applied the
/// log up to where the group was), SIGSTOP a shard process (then SIGCONT), or partition a shard node (its proxy
/// relays nothing, then heals). Every shard has a replica on the two other shard nodes, so one faulted shard
/// node leaves every shard reachable. `wipe` (ATTEST_HISTORY_WIPE=1, a deliberately broken cluster that must
/// fail the run) turns each shard kill into a lost disk after a peer's pause.
pub(super) fn nemesis(
    cluster: &mut Cluster,
    rng: &mut StdRng,
    t0: Instant,
    until: Duration,
    wipe: bool,
) -> Faults {
    let mut faults = Faults::default();
    let note = |faults: &mut Faults, what: String| {
        let line = format!("[{:>8.3}s] {what}", t0.elapsed().as_secs_f64());
        eprintln!("nemesis {line}");
        faults.log.push(line);
    };
    loop {
        // With `wipe`, the run ends on a lost disk, so that writes it loses are not all overwritten later.
        let last = t0.elapsed() >= until;
        if last && !wipe {
            break;
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(300..1500)));
        let hold = Duration::from_millis(rng.gen_range(500..3000));
        let roll = rng.gen_range(0..100);
        if wipe && (roll < 40 || last) {
            // A broken disk, to show the suite catches lost writes: a replica misses writes while paused, its
            // peer acknowledged them alone and loses its data before anti-entropy copied them.
            let i = rng.gen_range(0..3);
            let j = (i + rng.gen_range(1..3)) % 3;
            // Longer than the router's replica deadline: writes it sent the paused replica are given up, not
            // merely delayed.
            let hold = hold + Duration::from_secs(3);
            note(
                &mut faults,
                format!(
                    "SIGSTOP shard-{} for {hold:?}, then SIGKILL shard-{} and WIPE its data",
                    j + 1,
                    i + 1
                ),
            );
            signal(cluster.shards[j].as_ref().unwrap(), libc::SIGSTOP);
            faults.pauses += 1;
            std::thread::sleep(hold);
            signal(cluster.shards[j].as_ref().unwrap(), libc::SIGCONT);
            drop(cluster.shards[i].take());
            faults.shard_kills += 1;
            std::fs::remove_dir_all(cluster.dir.join(format!("shard-{}", i + 1))).unwrap();
            cluster.start_shard(i);
            note(&mut faults, format!("shard-{} restarted empty", i + 1));
            if last {
                break;
            }
        } else if roll < 30 {
            let i = rng.gen_range(0..3);
            note(&mut faults, format!("SIGKILL shard-{} for {hold:?}", i + 1));
            drop(cluster.shards[i].take());
            faults.shard_kills += 1;
            std::thread::sleep(hold);
            let restarted = Instant::now();
            cluster.start_shard(i);
            note(
                &mut faults,
                format!(
                    "shard-{} restarted, serving after {:?}",
                    i + 1,
                    restarted.elapsed()
                ),
            );
        } else if roll < 55 {
            let i = rng.gen_range(0..3);
            note(&mut faults, format!("SIGSTOP shard-{} for {hold:?}", i + 1));
            let proc = cluster.shards[i].as_ref().unwrap();
            signal(proc, libc::SIGSTOP);
            faults.pauses += 1;
            std::thread::sleep(hold);
            signal(proc, libc::SIGCONT);
            note(&mut faults, format!("SIGCONT shard-{}", i + 1));
        } else if roll < 80 {
            // The node keeps running and keeps talking to meta (heartbeats) and, through their own proxies, to
            // its peers; the router and the peers hear nothing from it: their calls wait for their deadlines.
            let i = rng.gen_range(0..3);
            note(
                &mut faults,
                format!("PARTITION shard-{} for {hold:?}", i + 1),
            );
            cluster.proxies[i].partition();
            faults.partitions += 1;
            std::thread::sleep(hold);
            cluster.proxies[i].heal();
            note(&mut faults, format!("HEAL shard-{}", i + 1));
        } else {
            let i = rng.gen_range(0..3);
            let leader = (0..3)
                .filter_map(|j| cluster.meta_status(j))
                .map(|s| s.leader_id)
                .max()
                .unwrap_or(0);
            note(
                &mut faults,
                format!(
                    "SIGKILL meta-{} (leader: meta-{leader}) for {hold:?}",
                    i + 1
                ),
            );
            drop(cluster.metas[i].take());
            faults.meta_kills += 1;
            std::thread::sleep(hold);
            let restarted = Instant::now();
            cluster.start_meta(i);
            let mut target = None;
            wait_until(START_LIMIT, &format!("meta-{} to rejoin", i + 1), || {
                // The log the others had committed when it came back: it has rejoined once it applied that.
                let t = *target.get_or_insert_with(|| {
                    (0..3)
                        .filter(|&j| j != i)
                        .filter_map(|j| cluster.meta_status(j))
                        .map(|s| s.commit_index)
                        .max()
                        .unwrap_or(0)
                });
                cluster
                    .meta_status(i)
                    .is_some_and(|s| s.leader_id != 0 && s.applied_index >= t)
            });
            note(
                &mut faults,
                format!(
                    "meta-{} restarted, rejoined after {:?}",
                    i + 1,
                    restarted.elapsed()
                ),
            );
        }
    }
    faults
}
