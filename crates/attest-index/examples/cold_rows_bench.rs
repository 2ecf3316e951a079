//! What asking the page cache ahead (`engine.prefetch_rows`) saves a search that reads rows the cache does not
//! hold — a node serving more rows than its memory, as at 10M (the full vectors alone are 15 GB at 384-d).
//!
//! A sealed segment's two row files are written by their own writers (`VectorFile`, half precision, 384-d;
//! `ChunkStore`, ~700-byte texts) in `DIR`, then each trial reads what the dense lane reads for a top 10 with the
//! default re-score (`exact_refine` 2): 20 random rows' ids and tenants, then their full vectors' inner products
//! with a query — one row after another (`serial`), or after [`ChunkStore::read_ahead`] and
//! [`VectorFile::read_ahead`] of all 20 (`prefetch`), the two in alternating order. `cold`: both files dropped from
//! the page cache before each trial (`MADV_DONTNEED` on the maps, `POSIX_FADV_DONTNEED` on the files); `warm`:
//! everything cached, which shows what the advice costs when it is not needed. Prints p50 / p95 of each and the
//! ratios prefetch / serial.
//!
//! `cargo run -p attest-index --example cold_rows_bench -- [DIR] [ROWS=1000000] [TRIALS=300]` (DIR defaults to a
//! temporary directory beside the cargo target; it must be on a disk, not tmpfs, for `cold` to mean anything).

use std::path::Path;
use std::time::Instant;

use attest_index::chunk_store::{ChunkStore, StoredChunk};
use attest_index::vector_file::VectorFile;
use rand::{Rng, SeedableRng};

const DIM: usize = 384;
/// Rows a top 10 reads with the default re-score (`exact_refine` 2 × k).
const READ: usize = 20;

fn chunk(i: usize) -> StoredChunk {
    StoredChunk {
        chunk_id: format!("doc-{i:09}#0"),
        doc_id: format!("doc-{i:09}"),
        tenant: "tenant-a".into(),
        title: format!("Document {i}"),
        text: format!(
            "Row {i} of the cold-rows benchmark, a passage of about seven hundred bytes. "
        )
        .repeat(9),
        metadata_json: format!(r#"{{"row":{i}}}"#),
        seq: i as u64 + 1,
    }
}

/// Drops `bytes` (a whole file's map) from this process and the file's pages from the cache.
fn drop_cached(bytes: &[u8], path: &Path) {
    // SAFETY: MADV_DONTNEED on a read-only shared file map only unmaps its pages: the next read faults them in
    // from the file again, with the same contents.
    unsafe {
        libc::madvise(
            bytes.as_ptr() as *mut libc::c_void,
            bytes.len(),
            libc::MADV_DONTNEED,
        )
    };
    let file = std::fs::File::open(path).expect("open");
    use std::os::fd::AsRawFd;
    // SAFETY: a valid descriptor, the whole file.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

/// What the dense lane reads of `rows`: each row's ids and tenant, then its full vector against `query`.
fn read(
    chunks: &ChunkStore,
    vectors: &VectorFile,
    rows: &[usize],
    query: &[f32],
    prefetch: bool,
) -> f32 {
    if prefetch {
        vectors.read_ahead(rows.iter().copied());
        chunks.read_ahead(rows);
    }
    let mut sum = 0.0;
    for &r in rows {
        let c = chunks.get(r).expect("row");
        sum += (c.chunk_id.len() + c.doc_id.len() + c.tenant.len()) as f32;
    }
    for &r in rows {
        sum += vectors.get(r).expect("row").dot(query);
    }
    sum
}

fn percentile(mut ms: Vec<f64>, p: usize) -> f64 {
    ms.sort_by(f64::total_cmp);
    ms[(ms.len() * p / 100).min(ms.len() - 1)]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let made;
    let dir = match args.first() {
        Some(d) => Path::new(d).to_path_buf(),
        None => {
            let beside = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
            std::fs::create_dir_all(&beside).expect("target dir");
            made = tempfile::tempdir_in(beside).expect("temp dir");
            made.path().to_path_buf()
        }
    };
    let rows: usize = args.get(1).map_or(1_000_000, |a| a.parse().expect("rows"));
    let trials: usize = args.get(2).map_or(300, |a| a.parse().expect("trials"));
    let (vector_path, chunk_path) = (dir.join("vectors.f32"), dir.join("chunks.rkyv"));
    let mut rng = rand::rngs::StdRng::seed_from_u64(73);
    if !vector_path.exists() || !chunk_path.exists() {
        let started = Instant::now();
        let values: Vec<f32> = (0..rows * DIM).map(|_| rng.gen_range(-0.1..0.1)).collect();
        VectorFile::write(&vector_path, DIM, &values).expect("write vectors");
        drop(values);
        let stored: Vec<StoredChunk> = (0..rows).map(chunk).collect();
        ChunkStore::write(&chunk_path, &stored).expect("write chunks");
        println!(
            "wrote {rows} rows in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let vectors = VectorFile::open(&vector_path).expect("open vectors");
    let chunks = ChunkStore::open(&chunk_path).expect("open chunks");
    let rows = vectors.len().min(chunks.len());
    let query: Vec<f32> = (0..DIM).map(|_| rng.gen_range(-0.1..0.1)).collect();
    println!(
        "{rows} rows: vectors {:.0} MB, chunks {:.0} MB; {trials} trials of {READ} random rows",
        vectors.file().len() as f64 / 1e6,
        chunks.file().len() as f64 / 1e6
    );
    for cold in [true, false] {
        if !cold {
            // Every page of both files read once, so that the warm trials find them cached.
            let touched: u64 = [vectors.file(), chunks.file()]
                .iter()
                .flat_map(|f| f.iter().step_by(4096))
                .map(|b| *b as u64)
                .sum();
            std::hint::black_box(touched);
        }
        let (mut serial, mut ahead) = (Vec::new(), Vec::new());
        for trial in 0..trials {
            let picked: Vec<usize> = (0..READ).map(|_| rng.gen_range(0..rows)).collect();
            let order = if trial % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for prefetch in order {
                if cold {
                    drop_cached(vectors.file(), &vector_path);
                    drop_cached(chunks.file(), &chunk_path);
                }
                let started = Instant::now();
                std::hint::black_box(read(&chunks, &vectors, &picked, &query, prefetch));
                let ms = started.elapsed().as_secs_f64() * 1e3;
                if prefetch {
                    ahead.push(ms)
                } else {
                    serial.push(ms)
                }
            }
        }
        let (s50, s95) = (percentile(serial.clone(), 50), percentile(serial, 95));
        let (a50, a95) = (percentile(ahead.clone(), 50), percentile(ahead, 95));
        println!(
            "{}: serial p50 {s50:.3} / p95 {s95:.3} ms; prefetch p50 {a50:.3} / p95 {a95:.3} ms: **{:.2}× / {:.2}×**",
            if cold { "cold" } else { "warm" },
            a50 / s50,
            a95 / s95
        );
    }
}
