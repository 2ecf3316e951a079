//! Attest's benchmarks (no library code): the criterion bench `fuse` (RRF merge), the `cluster_bench` and
//! `fallback_bench` drivers (examples that start real role processes), and the scale scripts beside them.
