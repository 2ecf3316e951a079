//! RRF merge time: `attest_router::fanout::fuse` over what 8 shards answered, 1,000 candidates per lane per
//! shard (dense and BM25), fused at depth 1,000 into the top 10 — the router's work between the last shard
//! answer and the response (per-lane global merge, weighted RRF, provenance of each hit).
//!
//! `cargo bench --workspace --bench fuse` (criterion; plain-text report, no plots). Cases:
//! - `fuse/8x1000/payload`: every hit carries a title and a 600-byte text, as the router asks shards for
//!   (`include_payload: true`); `fuse` clones the fan-out, so the payload is part of the cost.
//! - `fuse/8x1000/ids_only`: the same without payload (ids and scores only).
//! - `fuse/8x50/payload`: the router's default lane depth (50) for comparison.
//!
//! Each shard's chunks are its own (chunk ids are unique across shards); within a shard the BM25 list shares
//! half its chunks with the dense list (ids 500..999 are in both), so fusion sees real overlap. Scores are
//! pseudo-random (fixed seed): 80% a per-chunk relevance shared by both lanes, 20% per-lane noise; each shard's
//! list is sorted best first, as a shard returns it.

use attest_proto::v1 as pb;
use attest_router::fanout::{fuse, FanOut, ShardHit};
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const SHARDS: u32 = 8;

/// xorshift64*: deterministic scores without a dependency.
struct Rng(u64);

impl Rng {
    fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (x >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// A chunk's relevance in 0..1, the same in both lanes, so the lanes agree in part (as dense and BM25 do).
fn relevance(shard: u32, i: usize) -> f32 {
    Rng(((shard as u64) << 32 | i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1).next_f32()
}

/// One lane of one shard: chunks `first..first + n` of `shard`, scores in `0..scale`, best first.
fn lane(
    rng: &mut Rng,
    shard: u32,
    first: usize,
    n: usize,
    scale: f32,
    payload: bool,
) -> Vec<ShardHit> {
    let text: String = if payload {
        "The quick brown fox jumps over the lazy dog near the river bank. "
            .repeat(10)
            .chars()
            .take(600)
            .collect()
    } else {
        String::new()
    };
    let mut hits: Vec<ShardHit> = (first..first + n)
        .map(|i| {
            let doc = format!("squad-dev-s{shard}-p{:05}", i / 2);
            ShardHit {
                shard,
                hit: pb::LaneHit {
                    chunk_id: format!("{doc}#{}", i % 2),
                    doc_id: doc,
                    score: scale * (0.8 * relevance(shard, i) + 0.2 * rng.next_f32()),
                    title: if payload {
                        format!("Article {shard}-{i}")
                    } else {
                        String::new()
                    },
                    text: text.clone(),
                    metadata_json: String::new(),
                    has_payload: payload,
                },
            }
        })
        .collect();
    hits.sort_by(|a, b| b.hit.score.total_cmp(&a.hit.score));
    hits
}

/// `SHARDS` shards answering `per_lane` dense and `per_lane` BM25 candidates each, half of them shared.
fn fan_out(per_lane: usize, payload: bool) -> FanOut {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut fan = FanOut::default();
    for shard in 0..SHARDS {
        fan.dense
            .extend(lane(&mut rng, shard, 0, per_lane, 1.0, payload));
        fan.bm25
            .extend(lane(&mut rng, shard, per_lane / 2, per_lane, 30.0, payload));
    }
    fan
}

fn bench_fuse(c: &mut Criterion) {
    let mut group = c.benchmark_group("fuse");
    for (per_lane, payload) in [(1000, true), (1000, false), (50, true)] {
        let fan = fan_out(per_lane, payload);
        // Sanity: the case is what it says, and fusion returns a full top 10 with both lanes represented.
        assert_eq!(fan.dense.len(), SHARDS as usize * per_lane);
        assert_eq!(fan.bm25.len(), SHARDS as usize * per_lane);
        let hits = fuse(&fan, per_lane, 10, 60.0, 1.0, 1.0);
        assert_eq!(hits.len(), 10);
        assert!(hits.iter().any(|h| h.dense.is_some() && h.bm25.is_some()));
        let id = format!(
            "{SHARDS}x{per_lane}/{}",
            if payload { "payload" } else { "ids_only" }
        );
        // Candidates in, both lanes.
        group.throughput(Throughput::Elements(2 * SHARDS as u64 * per_lane as u64));
        group.bench_with_input(BenchmarkId::from_parameter(id), &fan, |b, fan| {
            b.iter(|| fuse(black_box(fan), per_lane, 10, 60.0, 1.0, 1.0))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_fuse);
criterion_main!(benches);
