//! What the embedding benchmarks share: texts read from a JSONL file of the bundled sample.

use std::path::Path;

use serde_json::Value;

/// The first `limit` values of `field` in a JSONL file (lines without it are skipped).
pub fn texts_of(file: &Path, field: &str, limit: usize) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v[field].as_str().map(str::to_string))
        .take(limit)
        .collect()
}
