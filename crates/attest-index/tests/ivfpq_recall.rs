//! Recall of the sealed-segment IVF_PQ index against exact search, on a clustered fixture shaped like
//! sentence embeddings: 50,000 L2-normalised 384-d vectors drawn from a mixture of 500 Gaussian clusters.

use std::time::Instant;

use attest_index::ivfpq::{exact_search, IvfPqIndex, IvfPqParams};
use attest_index::sq8::Sq8File;
use attest_index::vector_file::VectorFile;
use faiss::{Index, MetricType};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

const DIM: usize = 384;
const N: usize = 50_000;
const CENTRES: usize = 500;
const QUERIES: usize = 200;
const K: usize = 10;
/// Training rows: the smallest sample that keeps the default nlist (1024 lists × 39 points per list, FAISS's
/// minimum), to spend less of the test's time in k-means. Rows are in random order, so a prefix is a sample.
const TRAIN: usize = 40_000;

/// Per-dimension noise around a unit centre. 0.05 × √384 ≈ 0.98, so a point's noise is about as long as its
/// centre: after normalisation points of one cluster have cosine ≈ 0.5 with each other and ≈ 0 with other
/// clusters. Neighbours are meaningful (the true top 10 all come from the query's cluster) but not trivial:
/// inside a cluster the order is decided by 384-d noise, the hardest case for a product quantizer.
const SIGMA: f32 = 0.05;

struct Mixture {
    centres: Vec<f32>,
    rng: StdRng,
    sigma: f32,
}

impl Mixture {
    fn new(seed: u64, sigma: f32) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut centres = gaussian(&mut rng, CENTRES * DIM, 1.0);
        normalise_rows(&mut centres);
        Mixture {
            centres,
            rng,
            sigma,
        }
    }

    fn sample(&mut self, n: usize) -> Vec<f32> {
        let mut out = gaussian(&mut self.rng, n * DIM, self.sigma);
        for row in out.chunks_exact_mut(DIM) {
            let c = self.rng.gen_range(0..CENTRES);
            for (x, m) in row.iter_mut().zip(&self.centres[c * DIM..(c + 1) * DIM]) {
                *x += m;
            }
        }
        normalise_rows(&mut out);
        out
    }
}

fn gaussian(rng: &mut StdRng, n: usize, sigma: f32) -> Vec<f32> {
    (0..n)
        .map(|_| sigma * rng.sample::<f32, _>(StandardNormal))
        .collect()
}

fn normalise_rows(v: &mut [f32]) {
    for row in v.chunks_exact_mut(DIM) {
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        row.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Exact top-K ids per query, computed by FAISS's flat inner-product index (BLAS; the crate's own
/// `exact_search` is cross-checked on a few queries — unoptimised test builds make it too slow for all 200).
fn ground_truth(base: &[f32], queries: &[f32]) -> Vec<Vec<i64>> {
    let mut flat = faiss::index_factory(DIM as u32, "Flat", MetricType::InnerProduct).unwrap();
    flat.add(base).unwrap();
    let res = flat.search(queries, K).unwrap();
    let truth: Vec<Vec<i64>> = res
        .labels
        .chunks_exact(K)
        .map(|c| c.iter().map(|l| l.get().unwrap() as i64).collect())
        .collect();
    for (qi, q) in queries.chunks_exact(DIM).take(3).enumerate() {
        let ours: Vec<i64> = exact_search(base, DIM, q, K)
            .iter()
            .map(|&(r, _)| r as i64)
            .collect();
        let overlap = ours.iter().filter(|id| truth[qi].contains(id)).count();
        assert!(
            overlap >= K - 1,
            "exact_search disagrees with FAISS Flat on query {qi}: {ours:?} vs {:?}",
            truth[qi]
        );
    }
    truth
}

fn recall(truth: &[Vec<i64>], found: &[Vec<i64>]) -> f64 {
    let hits: usize = truth
        .iter()
        .zip(found)
        .map(|(t, f)| f.iter().take(K).filter(|id| t.contains(id)).count())
        .sum();
    hits as f64 / (truth.len() * K) as f64
}

struct Fixture {
    _dir: tempfile::TempDir,
    index: IvfPqIndex,
    vectors: VectorFile,
    compact: Sq8File,
    queries: Vec<f32>,
    truth: Vec<Vec<i64>>,
    eff: IvfPqParams,
}

fn fixture(params: &IvfPqParams, sigma: f32) -> Fixture {
    let t = Instant::now();
    let mut mixture = Mixture::new(0x5eed, sigma);
    let base = mixture.sample(N);
    let queries = mixture.sample(QUERIES);
    let ids: Vec<i64> = (0..N as i64).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dense.faiss");
    eprintln!("fixture generated in {:.1?}", t.elapsed());
    let t = Instant::now();
    let eff = IvfPqIndex::build(&path, DIM, params, &base[..TRAIN * DIM], &base, &ids).unwrap();
    eprintln!("built {eff:?} in {:.1?}", t.elapsed());
    let index = IvfPqIndex::open_mmap(&path).unwrap();
    let vpath = dir.path().join("vectors.f32");
    VectorFile::write(&vpath, DIM, &base).unwrap();
    let vectors = VectorFile::open(&vpath).unwrap();
    let cpath = dir.path().join("vectors.sq8");
    Sq8File::write(&cpath, DIM, &base).unwrap();
    let compact = Sq8File::open(&cpath).unwrap();
    let t = Instant::now();
    let truth = ground_truth(&base, &queries);
    eprintln!("ground truth in {:.1?}", t.elapsed());
    Fixture {
        _dir: dir,
        index,
        vectors,
        compact,
        queries,
        truth,
        eff,
    }
}

impl Fixture {
    /// Top-K straight from PQ distances.
    fn raw(&self, nprobe: u32) -> Vec<Vec<i64>> {
        self.queries
            .chunks_exact(DIM)
            .map(|q| {
                self.index
                    .search(q, K, nprobe)
                    .unwrap()
                    .iter()
                    .map(|h| h.0)
                    .collect()
            })
            .collect()
    }

    /// Top-K after exact re-scoring of the best `candidates` PQ hits with the full vectors — the engine's
    /// pipeline.
    fn rescored(&self, nprobe: u32, candidates: usize) -> Vec<Vec<i64>> {
        self.queries
            .chunks_exact(DIM)
            .map(|q| {
                let hits = self.index.search(q, candidates, nprobe).unwrap();
                let exact = self
                    .vectors
                    .rescore(q, hits.iter().map(|h| h.0 as usize))
                    .unwrap();
                exact.iter().take(K).map(|h| h.0 as i64).collect()
            })
            .collect()
    }

    /// Top-K the way a segment with an SQ8 copy runs: the best `candidates` PQ hits re-scored from the copy,
    /// the best `EXACT_REFINE × K` of those exactly.
    fn rescored_compact(&self, nprobe: u32, candidates: usize) -> Vec<Vec<i64>> {
        self.queries
            .chunks_exact(DIM)
            .map(|q| {
                let hits = self.index.search(q, candidates, nprobe).unwrap();
                let ranked = self
                    .compact
                    .rescore(q, hits.iter().map(|h| h.0 as usize))
                    .unwrap();
                let refine = ranked
                    .iter()
                    .take(attest_index::engine::EXACT_REFINE * K)
                    .map(|h| h.0);
                let exact = self.vectors.rescore(q, refine).unwrap();
                exact.iter().take(K).map(|h| h.0 as i64).collect()
            })
            .collect()
    }
}

/// The dense lane as the engine runs it on a sealed segment, with every default: IVF_PQ search (nlist 1024,
/// nprobe 32, PQ96x8) for `overfetch × k` candidates, exact re-scoring of those from the vector file, top 10.
#[test]
fn recall_at_10_with_default_params_on_50k_clustered_vectors() {
    let start = Instant::now();
    let params = IvfPqParams::default();
    let f = fixture(&params, SIGMA);
    assert_eq!(f.eff, params, "{TRAIN} training points keep every default");
    let candidates = attest_index::EngineConfig::default().overfetch * K;

    let t = Instant::now();
    let raw = recall(&f.truth, &f.raw(params.nprobe));
    let raw_time = t.elapsed();
    let t = Instant::now();
    let rescored = recall(&f.truth, &f.rescored(params.nprobe, candidates));
    eprintln!(
        "recall@10 over {QUERIES} queries: PQ distances {raw:.3} ({raw_time:.1?}); top-{candidates} re-scored \
         exactly {rescored:.3} ({:.1?}); whole test {:.1?}",
        t.elapsed(),
        start.elapsed()
    );
    assert!(
        rescored >= 0.90,
        "recall@10 after re-scoring {candidates} candidates: {rescored:.3} < 0.90"
    );
    // With an SQ8 copy the engine re-scores a 4× deeper PQ list (`compact_overfetch`, 64 × k) yet reads the full
    // vectors of only 2 × k rows: recall is at least what exact re-scoring of 16 × k gives. Over the same
    // 16 × k list the copy must hold the exact top 10 in its top 2 × k: a broken copy (wrong ranges, offsets or
    // rows) ranks the list worse than that.
    let config = attest_index::EngineConfig::default();
    let same_list = recall(&f.truth, &f.rescored_compact(params.nprobe, candidates));
    let deep = recall(
        &f.truth,
        &f.rescored_compact(params.nprobe, config.compact_overfetch * K),
    );
    eprintln!(
        "SQ8 then 2 x k exact: top-{candidates} {same_list:.3}, top-{} {deep:.3}",
        config.compact_overfetch * K
    );
    assert!(
        same_list >= rescored - 0.005,
        "{same_list:.3} < {rescored:.3}"
    );
    assert!(deep >= rescored, "{deep:.3} < {rescored:.3}");
    // PQ distances alone: 0.70 measured with PQ96 (0.48 with PQ48; ≥ 0.90 needs PQ192, see `IvfPqParams`).
    // A drop below this floor means the codes got worse (training, residuals, metric), not noise.
    assert!(
        raw >= 0.65,
        "recall@10 from PQ distances alone {raw:.3} < 0.65"
    );
}

/// Parameter sweep behind the defaults. `cargo test -p attest-index --test integration ivfpq_recall -- --ignored
/// --nocapture`. Measured with all 50k rows as training set (recall@10; nprobe 8, 32 and 64 gave identical
/// figures on this fixture; the 40k training prefix used now gives 0.700 / 0.996 for m = 96):
///
/// | sigma | m   | PQ only | re-scored top 20 | top 40 | top 100 |
/// |-------|-----|---------|------------------|--------|---------|
/// | 0.05  | 48  | 0.480   | 0.695            | 0.909  | 1.000   |
/// | 0.05  | 96  | 0.709   | 0.934            | 0.997  | 1.000   |
/// | 0.05  | 192 | 0.901   | 1.000            | 1.000  | 1.000   |
/// | 0.03  | 48  | 0.399   | 0.611            | 0.855  | 0.999   |
/// | 0.08  | 48  | 0.526   | 0.740            | 0.936  | 1.000   |
#[test]
#[ignore = "exploratory sweep, minutes"]
fn sweep() {
    let cases = [
        (0.05f32, 48u32),
        (0.05, 96),
        (0.05, 192),
        (0.03, 48),
        (0.08, 48),
    ];
    for (sigma, m) in cases {
        let params = IvfPqParams {
            m,
            ..IvfPqParams::default()
        };
        let f = fixture(&params, sigma);
        for nprobe in [8u32, 32, 64] {
            let raw = recall(&f.truth, &f.raw(nprobe));
            let r20 = recall(&f.truth, &f.rescored(nprobe, 20));
            let r40 = recall(&f.truth, &f.rescored(nprobe, 40));
            let r100 = recall(&f.truth, &f.rescored(nprobe, 100));
            eprintln!(
                "sigma {sigma} m {m} nprobe {nprobe}: raw {raw:.3} rescored@20 {r20:.3} @40 {r40:.3} @100 {r100:.3}"
            );
        }
    }
}
