//! Helpers shared by the snapshot store's tests.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use attest_snapshot::StoreError;
use sha2::{Digest, Sha256};

/// `len` deterministic pseudo-random bytes (xorshift64*, seeded).
pub fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        out.extend_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Writes `len` deterministic bytes to `path`; returns them.
pub fn write_file(path: &Path, len: usize, seed: u64) -> Vec<u8> {
    let data = pseudo_random(len, seed);
    std::fs::write(path, &data).unwrap();
    data
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Counts progress calls and bytes.
#[derive(Default)]
pub struct Progress {
    pub calls: AtomicU64,
    pub bytes: AtomicU64,
}

impl Progress {
    pub fn record(&self, n: u64) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.bytes.fetch_add(n, Ordering::SeqCst);
    }
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::SeqCst)
    }
}

pub const MIB: usize = 1024 * 1024;

/// A download refused because the object's bytes changed (same size, other sha256): the error names the key and
/// the destination file is gone.
pub fn assert_refused_as_altered(err: &StoreError, key: &str, restored: &Path) {
    assert!(
        matches!(err, StoreError::Mismatch { key: k, reason } if k == key && reason.contains("sha256")),
        "{err}"
    );
    assert!(err.to_string().contains(key), "{err}");
    assert!(!restored.exists(), "a refused download leaves no file");
}
