//! Fashion-MNIST as installed by the Debian package `dataset-fashion-mnist`
//! (`/usr/share/datasets/fashion-mnist/{train,t10k}-images-idx3-ubyte.gz`): 28×28 grey images as 784-d
//! vectors, L2-normalised because Attest's dense index ranks by inner product (cosine), where ann-benchmarks
//! uses Euclidean distance on the raw pixels.

use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context};

/// `(rows, dim)`: the images of `split` ("train" or "t10k"), row-major, each row unit-norm.
pub fn load_images(dir: &Path, split: &str) -> anyhow::Result<(Vec<f32>, usize)> {
    let path = dir.join(format!("{split}-images-idx3-ubyte.gz"));
    let file = std::fs::File::open(&path).with_context(|| {
        format!(
            "opening {} (install the Debian package dataset-fashion-mnist: scripts/setup.sh)",
            path.display()
        )
    })?;
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(file)
        .read_to_end(&mut bytes)
        .with_context(|| format!("decompressing {}", path.display()))?;
    parse_idx3(&bytes).with_context(|| format!("reading {}", path.display()))
}

/// The IDX3 format: magic 0x00000803, then big-endian u32 counts (images, rows, columns), then the pixels.
fn parse_idx3(bytes: &[u8]) -> anyhow::Result<(Vec<f32>, usize)> {
    if bytes.len() < 16 {
        bail!("{} bytes is too short for an IDX3 header", bytes.len());
    }
    let word = |i: usize| {
        u32::from_be_bytes(bytes[4 * i..4 * i + 4].try_into().expect("4 bytes")) as usize
    };
    if word(0) != 0x0803 {
        bail!("bad magic {:#x}, not an IDX3 image file", word(0));
    }
    let (n, dim) = (word(1), word(2) * word(3));
    let pixels = &bytes[16..];
    if dim == 0 || pixels.len() != n * dim {
        bail!(
            "{} pixel bytes for {n} images of {dim} pixels",
            pixels.len()
        );
    }
    let mut out: Vec<f32> = pixels.iter().map(|&p| f32::from(p)).collect();
    for row in out.chunks_exact_mut(dim) {
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        // An all-black image has no direction; any unit vector would invent one, so it stays zero.
        if norm > 0.0 {
            row.iter_mut().for_each(|x| *x /= norm);
        }
    }
    Ok((out, dim))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx3(n: u32, rows: u32, cols: u32, pixels: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        for w in [0x0803, n, rows, cols] {
            b.extend_from_slice(&w.to_be_bytes());
        }
        b.extend_from_slice(pixels);
        b
    }

    #[test]
    fn parses_and_normalises_rows() {
        let (v, dim) = parse_idx3(&idx3(2, 1, 2, &[3, 4, 0, 0])).unwrap();
        assert_eq!(dim, 2);
        assert_eq!(v, vec![0.6, 0.8, 0.0, 0.0]);
    }

    #[test]
    fn rejects_bad_files() {
        assert!(parse_idx3(b"short").is_err());
        assert!(parse_idx3(&idx3(2, 1, 2, &[1, 2, 3])).is_err());
        let mut bad = idx3(1, 1, 1, &[1]);
        bad[3] = 0x01;
        assert!(parse_idx3(&bad).is_err());
    }

    #[test]
    fn loads_the_installed_data_set_when_present() {
        let dir = Path::new("/usr/share/datasets/fashion-mnist");
        if !dir.exists() {
            eprintln!("dataset-fashion-mnist not installed; scripts/setup.sh installs it");
            return;
        }
        let (test, dim) = load_images(dir, "t10k").unwrap();
        assert_eq!((test.len() / dim, dim), (10_000, 784));
    }
}
