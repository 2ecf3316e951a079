//! The cost model: least-squares fits of build time, disk, serving memory and latency against the size of
//! earlier bench runs, projected to a target size (100M vectors by default) and turned into the number of
//! shards such a cluster needs on nodes like the one measured.
//!
//! The features follow how IVF_PQ spends its time: adding a vector costs a coarse assignment (∝ nlist) plus
//! a PQ encoding (constant), so build ∝ n and n·nlist; a query scans nprobe lists of n/nlist codes and
//! compares against nlist centroids, so latency ∝ nprobe·n/nlist and nlist; disk and memory are linear in n.

use std::path::Path;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::{default_nlist, BenchReport};

/// What one node may hold (the aims for a single node).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct NodeBudget {
    pub max_build_s: f64,
    pub max_p95_ms: f64,
    pub max_rss_bytes: f64,
    /// Mapped IVF_PQ codes a node should keep in page cache (half of a 24 GiB node).
    pub max_index_bytes: f64,
}

pub const BUDGET: NodeBudget = NodeBudget {
    max_build_s: 30.0 * 60.0,
    max_p95_ms: 10.0,
    max_rss_bytes: 2e9,
    max_index_bytes: 12.0 * 1024.0 * 1024.0 * 1024.0,
};

/// A fitted linear model `y = Σ coef_i · feature_i(n)`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fit {
    pub quantity: String,
    pub features: Vec<String>,
    pub coefficients: Vec<f64>,
    /// Largest relative error of the fit on the runs it was fitted to.
    pub max_relative_error: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Projection {
    pub n: u64,
    pub nlist: u32,
    pub nprobe: u32,
    pub build_s: f64,
    pub disk_bytes: f64,
    pub index_bytes: f64,
    pub rss_bytes: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    /// Largest shard meeting every budget, and the shards (and replicas, at replication 2) for `n`.
    pub max_vectors_per_shard: u64,
    pub limiting_budget: String,
    pub shards: u64,
    pub shard_replicas: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CostModel {
    pub runs: Vec<(usize, String)>,
    pub fits: Vec<Fit>,
    pub budget: NodeBudget,
    pub projection: Projection,
}

pub fn run(
    paths: &[std::path::PathBuf],
    project_n: u64,
    plots: Option<&Path>,
    json: Option<&Path>,
) -> anyhow::Result<()> {
    let mut runs = Vec::new();
    for p in paths {
        let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
        let r: BenchReport =
            serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", p.display()))?;
        runs.push(r);
    }
    // One model per search setting: runs measured with another over-fetch than the largest run's are left out.
    let largest = runs
        .iter()
        .filter(|r| r.dataset == "gaussian_mixture")
        .max_by_key(|r| r.n)
        .map(|r| r.overfetch);
    let synthetic: Vec<&BenchReport> = runs
        .iter()
        .filter(|r| r.dataset == "gaussian_mixture" && Some(r.overfetch) == largest)
        .collect();
    for r in runs
        .iter()
        .filter(|r| r.dataset == "gaussian_mixture" && Some(r.overfetch) != largest)
    {
        eprintln!(
            "fit: leaving out the n = {} run (over-fetch {}, the largest run's is {})",
            r.n,
            r.overfetch,
            largest.unwrap_or_default()
        );
    }
    let model = fit(&synthetic, project_n)?;
    println!("{}", describe(&model));
    if let Some(dir) = plots {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        super::plot::latency_vs_n(&synthetic, &model, &dir.join("latency_vs_n.png"))?;
        super::plot::recall_vs_qps(&runs, &dir.join("recall_vs_qps.png"))?;
        eprintln!(
            "wrote {}/latency_vs_n.png and recall_vs_qps.png",
            dir.display()
        );
    }
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_vec_pretty(&model)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

type Feature = (&'static str, fn(f64, f64, f64) -> f64);

/// Features as functions of (n, nlist, nprobe).
/// Build = a fixed training cost (the training sample is capped) + adding (∝ n) + coarse assignment (∝ n·nlist).
const BUILD: [Feature; 3] = [
    ("1", |_, _, _| 1.0),
    ("n", |n, _, _| n),
    ("n*nlist", |n, l, _| n * l),
];
const LINEAR: [Feature; 2] = [("1", |_, _, _| 1.0), ("n", |n, _, _| n)];
const LATENCY: [Feature; 2] = [
    ("1", |_, _, _| 1.0),
    ("nprobe*n/nlist", |n, l, p| p * n / l),
];

pub fn fit(runs: &[&BenchReport], project_n: u64) -> anyhow::Result<CostModel> {
    if runs.len() < 2 {
        bail!("the cost model needs at least two synthetic runs of different sizes");
    }
    let dim = runs[0].dim;
    if runs.iter().any(|r| r.dim != dim) {
        bail!("runs of different dimensions cannot share one cost model");
    }
    let fits = vec![
        fit_one("build_s", &BUILD, runs, |r| r.build_s)?,
        fit_one("disk_bytes", &LINEAR, runs, |r| r.disk_bytes as f64)?,
        fit_one("index_bytes", &LINEAR, runs, |r| r.index_bytes as f64)?,
        fit_one("rss_bytes", &LINEAR, runs, |r| r.rss_bytes as f64)?,
        fit_one("p50_ms", &LATENCY, runs, |r| r.p50_ms)?,
        fit_one("p95_ms", &LATENCY, runs, |r| r.p95_ms)?,
    ];
    let nprobe = runs[runs.len() - 1].params.nprobe;
    let at = |n: u64| -> [f64; 6] {
        let nlist = default_nlist(n as usize);
        let table: [&[Feature]; 6] = [&BUILD, &LINEAR, &LINEAR, &LINEAR, &LATENCY, &LATENCY];
        let mut out = [0.0; 6];
        for (i, (f, features)) in fits.iter().zip(table).enumerate() {
            out[i] = predict(f, features, n as f64, f64::from(nlist), f64::from(nprobe));
        }
        out
    };
    let within = |n: u64| -> Option<&'static str> {
        let [build, _, index, rss, _, p95] = at(n);
        if build > BUDGET.max_build_s {
            Some("build_s")
        } else if p95 > BUDGET.max_p95_ms {
            Some("p95_ms")
        } else if rss > BUDGET.max_rss_bytes {
            Some("rss_bytes")
        } else if index > BUDGET.max_index_bytes {
            Some("index_bytes")
        } else {
            None
        }
    };
    // Every fitted quantity grows with n, so the largest shard within budget is found by bisection.
    let (mut lo, mut hi) = (1_000u64, project_n.max(1_000));
    let limiting = within(hi).unwrap_or("none");
    if limiting == "none" {
        lo = hi;
    }
    while hi - lo > 1_000 {
        let mid = lo + (hi - lo) / 2;
        if within(mid).is_none() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let shards = project_n.div_ceil(lo.max(1));
    let [build_s, disk_bytes, index_bytes, rss_bytes, p50_ms, p95_ms] = at(project_n);
    Ok(CostModel {
        runs: runs.iter().map(|r| (r.n, r.timestamp.clone())).collect(),
        fits,
        budget: BUDGET,
        projection: Projection {
            n: project_n,
            nlist: default_nlist(project_n as usize),
            nprobe,
            build_s,
            disk_bytes,
            index_bytes,
            rss_bytes,
            p50_ms,
            p95_ms,
            max_vectors_per_shard: lo,
            limiting_budget: limiting.to_string(),
            shards,
            shard_replicas: shards * 2,
        },
    })
}

fn features_of(features: &[Feature], r: &BenchReport) -> Vec<f64> {
    features
        .iter()
        .map(|(_, f)| {
            f(
                r.n as f64,
                f64::from(r.params.nlist),
                f64::from(r.params.nprobe),
            )
        })
        .collect()
}

/// The fitted `quantity` (`build_s`, `disk_bytes`, `index_bytes`, `rss_bytes`, `p50_ms`, `p95_ms`) of one shard
/// of `n` rows with `nlist` lists searched at `nprobe`; 0 for a quantity the model lacks.
pub fn predict_quantity(model: &CostModel, quantity: &str, n: f64, nlist: u32, nprobe: u32) -> f64 {
    let features: &[Feature] = match quantity {
        "build_s" => &BUILD,
        "p50_ms" | "p95_ms" => &LATENCY,
        _ => &LINEAR,
    };
    model
        .fits
        .iter()
        .find(|f| f.quantity == quantity)
        .map_or(0.0, |f| {
            predict(f, features, n, f64::from(nlist), f64::from(nprobe))
        })
}

fn predict(fit: &Fit, features: &[Feature], n: f64, nlist: f64, nprobe: f64) -> f64 {
    features
        .iter()
        .zip(&fit.coefficients)
        .map(|((_, f), c)| c * f(n, nlist, nprobe))
        .sum()
}

fn fit_one(
    quantity: &str,
    features: &[Feature],
    runs: &[&BenchReport],
    y: impl Fn(&BenchReport) -> f64,
) -> anyhow::Result<Fit> {
    let x: Vec<Vec<f64>> = runs.iter().map(|r| features_of(features, r)).collect();
    let ys: Vec<f64> = runs.iter().map(|r| y(r)).collect();
    let coefficients = nonnegative_least_squares(&x, &ys)
        .with_context(|| format!("fitting {quantity}: the runs do not pin the model down"))?;
    let max_relative_error = x
        .iter()
        .zip(&ys)
        .map(|(row, &y)| {
            let p: f64 = row.iter().zip(&coefficients).map(|(a, c)| a * c).sum();
            ((p - y) / y.abs().max(1e-12)).abs()
        })
        .fold(0.0, f64::max);
    Ok(Fit {
        quantity: quantity.to_string(),
        features: features.iter().map(|(name, _)| name.to_string()).collect(),
        coefficients,
        max_relative_error,
    })
}

/// Least squares with every coefficient ≥ 0: each term is a cost, and a negative one (a fit that bends the
/// wrong way between measured sizes) projects nonsense far outside them. Exact for the few features used here:
/// the best unconstrained fit over every subset of the features whose coefficients are all ≥ 0.
pub fn nonnegative_least_squares(x: &[Vec<f64>], y: &[f64]) -> Option<Vec<f64>> {
    let p = x.first()?.len();
    let mut best: Option<(f64, Vec<f64>)> = None;
    for mask in 1u32..(1 << p) {
        let cols: Vec<usize> = (0..p).filter(|j| mask & (1 << j) != 0).collect();
        if cols.len() > x.len() {
            continue;
        }
        let sub: Vec<Vec<f64>> = x
            .iter()
            .map(|r| cols.iter().map(|&j| r[j]).collect())
            .collect();
        let Some(c) = least_squares(&sub, y) else {
            continue;
        };
        if c.iter().any(|v| *v < 0.0) {
            continue;
        }
        let residual: f64 = sub
            .iter()
            .zip(y)
            .map(|(r, yi)| {
                let p: f64 = r.iter().zip(&c).map(|(a, b)| a * b).sum();
                ((p - yi) / yi.abs().max(1e-12)).powi(2)
            })
            .sum();
        if best.as_ref().is_none_or(|(b, _)| residual < *b) {
            let mut full = vec![0.0; p];
            for (k, &j) in cols.iter().enumerate() {
                full[j] = c[k];
            }
            best = Some((residual, full));
        }
    }
    best.map(|(_, c)| c)
}

/// Least squares by the normal equations with columns scaled to unit size (features span many orders of
/// magnitude); None when they are singular (fewer distinct runs than coefficients).
pub fn least_squares(x: &[Vec<f64>], y: &[f64]) -> Option<Vec<f64>> {
    let p = x.first()?.len();
    let scale: Vec<f64> = (0..p)
        .map(|j| x.iter().map(|r| r[j].abs()).fold(0.0, f64::max).max(1e-300))
        .collect();
    let mut a = vec![vec![0.0; p + 1]; p];
    for (row, &yi) in x.iter().zip(y) {
        for i in 0..p {
            for j in 0..p {
                a[i][j] += row[i] / scale[i] * row[j] / scale[j];
            }
            a[i][p] += row[i] / scale[i] * yi;
        }
    }
    for col in 0..p {
        let pivot = (col..p).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                for (x, &y) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *x -= f * y;
                }
            }
        }
    }
    Some((0..p).map(|i| a[i][p] / a[i][i] / scale[i]).collect())
}

fn describe(m: &CostModel) -> String {
    let p = &m.projection;
    let mut out = String::from("fitted on runs of n = ");
    out.push_str(
        &m.runs
            .iter()
            .map(|(n, _)| n.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    );
    out.push('\n');
    for f in &m.fits {
        let terms: Vec<String> = f
            .features
            .iter()
            .zip(&f.coefficients)
            .map(|(name, c)| format!("{c:.4e}·{name}"))
            .collect();
        out.push_str(&format!(
            "  {} = {}   (max error on the runs {:.1}%)\n",
            f.quantity,
            terms.join(" + "),
            100.0 * f.max_relative_error
        ));
    }
    out.push_str(&format!(
        "projected to n = {} (nlist {}, nprobe {}) on one node: build {:.0} min, disk {:.1} GB (index {:.1} GB), \
         serving RSS {:.2} GB, p50 {:.2} ms, p95 {:.2} ms\n",
        p.n,
        p.nlist,
        p.nprobe,
        p.build_s / 60.0,
        p.disk_bytes / 1e9,
        p.index_bytes / 1e9,
        p.rss_bytes / 1e9,
        p.p50_ms,
        p.p95_ms
    ));
    out.push_str(&format!(
        "largest shard within budget (build ≤ 30 min, p95 ≤ 10 ms, RSS ≤ 2 GB, index ≤ 12 GiB): {} vectors \
         (limited by {}) → {} shards, {} shard replicas at replication 2\n",
        p.max_vectors_per_shard, p.limiting_budget, p.shards, p.shard_replicas
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_squares_recovers_exact_coefficients() {
        let x: Vec<Vec<f64>> = [1e5, 1e6, 1e7]
            .iter()
            .map(|&n: &f64| vec![n, n * n.sqrt()])
            .collect();
        let y: Vec<f64> = x.iter().map(|r| 3e-5 * r[0] + 2e-9 * r[1]).collect();
        let c = least_squares(&x, &y).unwrap();
        assert!((c[0] - 3e-5).abs() / 3e-5 < 1e-6, "{c:?}");
        assert!((c[1] - 2e-9).abs() / 2e-9 < 1e-6, "{c:?}");
        assert!(least_squares(&[vec![1.0, 2.0], vec![2.0, 4.0]], &[1.0, 2.0]).is_none());
    }

    #[test]
    fn nonnegative_fit_never_returns_a_negative_cost() {
        // Data that an unconstrained fit explains with a negative n·nlist term.
        let x: Vec<Vec<f64>> = [(1e5, 256.0), (1e6, 1024.0), (1e7, 4096.0)]
            .iter()
            .map(|&(n, l)| vec![1.0, n, n * l])
            .collect();
        let y = [80.0, 400.0, 1500.0];
        let free = least_squares(&x, &y).unwrap();
        assert!(free.iter().any(|c| *c < 0.0), "{free:?}");
        let c = nonnegative_least_squares(&x, &y).unwrap();
        assert!(c.iter().all(|v| *v >= 0.0), "{c:?}");
        // Within the measured range it still tracks the data.
        let p: f64 = x[2].iter().zip(&c).map(|(a, b)| a * b).sum();
        assert!((p - 1500.0).abs() / 1500.0 < 0.35, "{p}");
        // Exact non-negative data is recovered.
        let y2: Vec<f64> = x.iter().map(|r| 50.0 + 1e-4 * r[1]).collect();
        let c2 = nonnegative_least_squares(&x, &y2).unwrap();
        assert!(
            (c2[0] - 50.0).abs() < 1e-6 && (c2[1] - 1e-4).abs() < 1e-10 && c2[2] == 0.0,
            "{c2:?}"
        );
    }
}
