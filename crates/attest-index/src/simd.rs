//! Inner products of the search's scan loops: f32 against f32 (re-scoring, the growing segment's flat scan),
//! f32 against f16 (the coarse assignment over half-precision centroids, [`crate::coarse`]) and f32 against
//! bytes (the re-scoring from SQ8 copies, [`crate::sq8`]). AVX2 with FMA (and F16C) where the CPU has them, a
//! loop the optimiser vectorises elsewhere. Public for `examples/sq8_kernel.rs`, which measures one against the
//! other; not an API.

/// Inner product: with AVX2 and FMA where the CPU has them, else with independent accumulators that the
/// optimiser vectorises.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has both features (checked just above).
        return unsafe { dot_avx2(a, b) };
    }
    dot_portable(a, b)
}

/// Eight lanes, as SSE2 (the baseline every x86-64 binary may assume) runs them two vectors at a time.
fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// The sum of the 16 lanes of an AVX2 kernel's two accumulators (the three kernels below end with it).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sum_lanes(acc0: std::arch::x86_64::__m256, acc1: std::arch::x86_64::__m256) -> f32 {
    use std::arch::x86_64::*;
    let mut lanes = [0f32; 8];
    // SAFETY: stores 8 floats into an array of 8.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), _mm256_add_ps(acc0, acc1)) };
    lanes.iter().sum()
}

/// 16 lanes of fused multiply-adds, for the coarse assignment of a query to (say) 4,096 centroids of 384
/// dimensions ([`crate::coarse`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    // SAFETY: every load reads 8 floats at i..i + 8 or i + 8..i + 16 with i + 16 <= n, inside both slices.
    let mut i = 0;
    let head = unsafe {
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        while i + 16 <= n {
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), acc0);
            acc1 = _mm256_fmadd_ps(
                _mm256_loadu_ps(pa.add(i + 8)),
                _mm256_loadu_ps(pb.add(i + 8)),
                acc1,
            );
            i += 16;
        }
        sum_lanes(acc0, acc1)
    };
    head + dot_portable(&a[i..n], &b[i..n])
}

/// `values` in half precision, as [`dot_f16`] reads them.
pub(crate) fn to_f16(values: &[f32]) -> Vec<u16> {
    values
        .iter()
        .map(|&v| half::f16::from_f32(v).to_bits())
        .collect()
}

/// Inner product of `a` with `b` held in half precision ([`to_f16`]): half the bytes of an f32 row read, for a
/// loop bound by memory (4,096 centroids of 384 dimensions are 6.3 MB in f32, read for every query).
pub(crate) fn dot_f16(a: &[f32], b: &[u16]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
    {
        // SAFETY: the CPU has the three features (checked just above).
        return unsafe { dot_f16_avx2(a, b) };
    }
    dot_f16_portable(a, b)
}

fn dot_f16_portable(a: &[f32], b: &[u16]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, &y)| x * half::f16::from_bits(y).to_f32())
        .sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_f16_avx2(a: &[f32], b: &[u16]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    // SAFETY: every load reads 8 values at i..i + 8 or i + 8..i + 16 with i + 16 <= n, inside both slices.
    let mut i = 0;
    let head = unsafe {
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        while i + 16 <= n {
            let b0 = _mm256_cvtph_ps(_mm_loadu_si128(pb.add(i).cast()));
            let b1 = _mm256_cvtph_ps(_mm_loadu_si128(pb.add(i + 8).cast()));
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), b0, acc0);
            acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i + 8)), b1, acc1);
            i += 16;
        }
        sum_lanes(acc0, acc1)
    };
    head + dot_f16_portable(&a[i..n], &b[i..n])
}

/// Inner product of `a` with `b`'s bytes read as 0..=255: an SQ8 row against a query scaled by its steps
/// ([`crate::sq8::Sq8File::score`], ~28% of a shard's search CPU with the portable loop).
pub fn dot_u8(a: &[f32], b: &[u8]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has both features (checked just above).
        return unsafe { dot_u8_avx2(a, b) };
    }
    dot_u8_portable(a, b)
}

/// Four independent sums (an f32 sum is not reassociated by the compiler, so one sum would not vectorise): the
/// loop SQ8 scoring had before [`dot_u8`].
pub fn dot_u8_portable(a: &[f32], b: &[u8]) -> f32 {
    let mut acc = [0f32; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, &y)| x * f32::from(y))
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..4 {
            acc[i] += x[i] * f32::from(y[i]);
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// 16 bytes a step, widened to two vectors of eight f32 (`vpmovzxbd`, `vcvtdq2ps`) and fused-multiply-added.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_u8_avx2(a: &[f32], b: &[u8]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    // SAFETY: every load reads 16 bytes at i..i + 16 of `b` and 8 floats at i..i + 8 or i + 8..i + 16 of `a`,
    // with i + 16 <= n, inside both slices.
    let mut i = 0;
    let head = unsafe {
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        while i + 16 <= n {
            let bytes = _mm_loadu_si128(pb.add(i).cast());
            let lo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
            let hi = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128::<8>(bytes)));
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), lo, acc0);
            acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i + 8)), hi, acc1);
            i += 16;
        }
        sum_lanes(acc0, acc1)
    };
    head + dot_u8_portable(&a[i..n], &b[i..n])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ivfpq::tests::unit_vectors;

    #[test]
    fn dot_agrees_with_the_portable_loop_at_every_length() {
        let v = unit_vectors(2, 400, 11);
        let (a, b) = v.split_at(400);
        for n in [0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 383, 384, 400] {
            let exact: f64 = a[..n]
                .iter()
                .zip(&b[..n])
                .map(|(x, y)| f64::from(*x) * f64::from(*y))
                .sum();
            for got in [dot(&a[..n], &b[..n]), dot_portable(&a[..n], &b[..n])] {
                assert!(
                    (f64::from(got) - exact).abs() < 1e-5,
                    "length {n}: {got} vs {exact}"
                );
            }
        }
    }

    #[test]
    fn half_precision_dot_is_within_f16_rounding_at_every_length() {
        let v = unit_vectors(2, 400, 5);
        let (a, b) = v.split_at(400);
        let b16 = to_f16(b);
        for n in [0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 383, 384, 400] {
            let exact: f64 = a[..n]
                .iter()
                .zip(&b16[..n])
                .map(|(x, &y)| f64::from(*x) * f64::from(half::f16::from_bits(y).to_f32()))
                .sum();
            for got in [
                dot_f16(&a[..n], &b16[..n]),
                dot_f16_portable(&a[..n], &b16[..n]),
            ] {
                assert!(
                    (f64::from(got) - exact).abs() < 1e-5,
                    "length {n}: {got} vs {exact}"
                );
            }
            // And within half precision's rounding of the f32 product.
            assert!((dot_f16(&a[..n], &b16[..n]) - dot(&a[..n], &b[..n])).abs() < 2e-3);
        }
    }

    #[test]
    fn byte_dot_agrees_with_the_exact_sum_at_every_length() {
        let a = unit_vectors(1, 400, 17);
        // Every byte value, in an order unrelated to `a`'s.
        let b: Vec<u8> = (0..400u32).map(|i| (i * 97 % 256) as u8).collect();
        for n in [0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 383, 384, 400] {
            let exact: f64 = a[..n]
                .iter()
                .zip(&b[..n])
                .map(|(x, &y)| f64::from(*x) * f64::from(y))
                .sum();
            for got in [dot_u8(&a[..n], &b[..n]), dot_u8_portable(&a[..n], &b[..n])] {
                assert!(
                    (f64::from(got) - exact).abs() < 1e-3 * (1.0 + exact.abs()),
                    "length {n}: {got} vs {exact}"
                );
            }
        }
    }
}
