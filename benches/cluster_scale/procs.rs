//! What each process of the local cluster costs, read from `/proc` by the pids in `DIR/pids/`: bytes it caused
//! to be written to storage, CPU seconds, resident memory now and at its peak; and each node's disk use (blocks
//! allocated under its data directory).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::Serialize;

#[derive(Debug, Clone, Default, Serialize)]
pub struct ProcFigures {
    pub write_bytes: u64,
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    pub rss_anon_bytes: u64,
    pub peak_rss_bytes: u64,
}

fn status_kb(status: &str, name: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn figures(pid: u32) -> Option<ProcFigures> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ProcFigures {
        write_bytes: io
            .lines()
            .find_map(|l| l.strip_prefix("write_bytes: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0),
        cpu_seconds: (ticks(11) + ticks(12)) / hz,
        rss_bytes: status_kb(&status, "VmRSS:"),
        rss_anon_bytes: status_kb(&status, "RssAnon:"),
        peak_rss_bytes: status_kb(&status, "VmHWM:"),
    })
}

/// The figures of every process with a pid file in `dir/pids`, by name (`meta-1`, `shard-2`, `router-1`).
pub fn snapshot(dir: &Path) -> BTreeMap<String, ProcFigures> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir.join("pids")) else {
        return out;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(name) = name.strip_suffix(".pid") else {
            continue;
        };
        let pid = std::fs::read_to_string(e.path())
            .ok()
            .and_then(|p| p.trim().parse().ok());
        if let Some(f) = pid.and_then(figures) {
            out.insert(name.to_string(), f);
        }
    }
    out
}

/// Bytes written and CPU seconds between two snapshots, summed over the processes of both.
pub fn delta(
    before: &BTreeMap<String, ProcFigures>,
    after: &BTreeMap<String, ProcFigures>,
) -> (u64, f64) {
    after.iter().fold((0, 0.0), |(bytes, cpu), (name, a)| {
        let b = before.get(name).cloned().unwrap_or_default();
        (
            bytes + a.write_bytes.saturating_sub(b.write_bytes),
            cpu + (a.cpu_seconds - b.cpu_seconds).max(0.0),
        )
    })
}

/// Bytes allocated on disk under `path` (blocks, so sparse and preallocated files count as they cost).
pub fn disk_bytes(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.blocks() * 512;
    }
    std::fs::read_dir(path)
        .map(|entries| entries.flatten().map(|e| disk_bytes(&e.path())).sum())
        .unwrap_or(0)
}
