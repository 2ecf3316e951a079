//! Small measurements shared by the bench runs: percentiles, recall@k against ground truth, and the
//! process's resident memory split into anonymous (heap) and file-backed (mapped index) pages.

use serde::Serialize;

/// The p-th percentile (0..=1) by nearest rank; NaN for no values.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    crate::eval::metrics::percentile(values, p).unwrap_or(f64::NAN)
}

/// Mean over queries of |found ∩ truth| / k.
pub fn recall_at_k(found: &[Vec<usize>], truth: &[Vec<usize>], k: usize) -> f64 {
    if found.is_empty() || k == 0 {
        return f64::NAN;
    }
    let hits: usize = found
        .iter()
        .zip(truth)
        .map(|(f, t)| {
            let t = &t[..t.len().min(k)];
            f.iter().take(k).filter(|row| t.contains(row)).count()
        })
        .sum();
    hits as f64 / (found.len() * k) as f64
}

/// Resident memory of this process (`/proc/self/status`), in bytes.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Memory {
    pub rss_bytes: u64,
    /// Heap and other anonymous pages.
    pub rss_anon_bytes: u64,
    /// Pages of mapped files (the IVF_PQ index and the vector file) currently resident.
    pub rss_file_bytes: u64,
}

impl Memory {
    pub fn current() -> Memory {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
                .map_or(0, |kb| kb * 1024)
        };
        Memory {
            rss_bytes: field("VmRSS:"),
            rss_anon_bytes: field("RssAnon:"),
            rss_file_bytes: field("RssFile:"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_counts_overlap_per_query() {
        let truth = vec![vec![1, 2, 3, 4], vec![5, 6, 7, 8]];
        let found = vec![vec![1, 2, 9, 10], vec![8, 7, 6, 5]];
        assert!((recall_at_k(&found, &truth, 4) - 0.75).abs() < 1e-12);
        assert!((recall_at_k(&found, &truth, 2) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn memory_is_read_from_proc() {
        let m = Memory::current();
        assert!(m.rss_bytes > 0 && m.rss_anon_bytes <= m.rss_bytes);
    }
}
