//! `attest-lab bench` through the real binary on a small synthetic set: every figure of the report is present
//! and sane (recall against exact search, exact slower than IVF_PQ, sizes on disk), the nprobe sweep is
//! monotone in recall, and `--fit` turns two runs into a cost model with plots.

use crate::common;

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

fn attest(args: &[&str]) -> String {
    let out = Command::new(common::lab_bin())
        .args(args)
        .arg("--log-level")
        .arg("warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "attest {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn bench(dir: &Path, n: usize, extra: &[&str]) -> Value {
    let json = dir.join(format!("bench-{n}.json"));
    let n_text = n.to_string();
    let mut args = vec![
        "bench",
        "--vectors",
        &n_text,
        "--dim",
        "32",
        "--queries",
        "60",
        "--m",
        "8",
        "--batch",
        "3000",
        "--sweep",
        "1,4,16",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let stdout = attest(&args);
    assert!(stdout.contains("recall@10"), "{stdout}");
    serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap()
}

#[test]
fn bench_reports_every_figure_and_fits_a_cost_model() {
    let dir = tempfile::tempdir().unwrap();
    let small = bench(dir.path(), 8_000, &[]);
    let r = bench(dir.path(), 20_000, &["--sweep-compact", "16,64"]);
    assert_eq!(r["n"], 20_000);
    assert_eq!(r["dim"], 32);
    assert_eq!(r["queries"], 60);
    assert_eq!(r["dataset"], "gaussian_mixture");
    // √20000 → 256 lists, the engine's nprobe and over-fetch.
    assert_eq!(r["params"]["nlist"], 256);
    assert_eq!(r["params"]["nprobe"], 32);
    assert_eq!(r["overfetch"], 16);
    let f = |k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k} missing: {r}"));
    for k in [
        "build_s",
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "qps_1t",
        "qps_2t",
        "exact_p50_ms",
    ] {
        assert!(f(k) > 0.0, "{k} = {}", f(k));
    }
    assert!(f("p50_ms") <= f("p95_ms") && f("p95_ms") <= f("p99_ms"));
    // Full vectors (32 floats + header) plus PQ codes and ids on disk.
    assert!(f("vectors_bytes") >= (20_000 * 32 * 4) as f64);
    assert_eq!(f("disk_bytes"), f("index_bytes") + f("vectors_bytes"));
    assert!(f("rss_bytes") > 0.0 && f("rss_bytes") >= f("rss_anon_bytes"));
    // Re-scored IVF_PQ on clustered data finds nearly all true neighbours.
    assert!(f("recall_at_10") >= 0.9, "recall {}", f("recall_at_10"));
    assert!((f("speedup_vs_exact") - f("exact_p50_ms") / f("p50_ms")).abs() < 1e-9);
    let (curve, compact): (Vec<&Value>, Vec<&Value>) = r["curve"]
        .as_array()
        .unwrap()
        .iter()
        .partition(|p| p["sq8"] != true);
    assert_eq!(curve.len(), 3);
    // The same nprobe sweep re-scored from the SQ8 copy (a byte per dimension, plus its per-dimension ranges),
    // at over-fetch 16 and 64: the copy ranks the 16 × k list as well as exact scores do, a deeper list is no
    // worse.
    assert_eq!(f("compact_bytes"), (32 + 32 * 8 + 20_000 * 32) as f64);
    assert_eq!(compact.len(), 6);
    for (i, nprobe) in [1, 4, 16].into_iter().enumerate() {
        let recall = |p: &Value| p["recall_at_10"].as_f64().unwrap();
        let (exact16, sq8_16, sq8_64) = (curve[i], compact[i], compact[3 + i]);
        assert_eq!(
            (&exact16["nprobe"], &sq8_16["nprobe"], &sq8_64["overfetch"]),
            (&json!(nprobe), &json!(nprobe), &json!(64))
        );
        assert!(
            recall(sq8_16) >= recall(exact16) - 0.02,
            "{sq8_16} vs {exact16}"
        );
        assert!(
            recall(sq8_64) >= recall(sq8_16) - 1e-9,
            "{sq8_64} vs {sq8_16}"
        );
    }
    let recalls: Vec<f64> = curve
        .iter()
        .map(|p| p["recall_at_10"].as_f64().unwrap())
        .collect();
    assert!(
        recalls.windows(2).all(|w| w[0] <= w[1] + 1e-9),
        "{recalls:?}"
    );
    assert!(
        recalls[0] < recalls[2],
        "probing 1 list must miss neighbours: {recalls:?}"
    );

    let plots = dir.path().join("plots");
    let model_json = dir.path().join("model.json");
    let small_path = dir.path().join("bench-8000.json");
    let big_path = dir.path().join("bench-20000.json");
    let stdout = attest(&[
        "bench",
        "--fit",
        small_path.to_str().unwrap(),
        big_path.to_str().unwrap(),
        "--project-n",
        "1000000",
        "--plots",
        plots.to_str().unwrap(),
        "--json",
        model_json.to_str().unwrap(),
    ]);
    assert!(stdout.contains("projected to n = 1000000"), "{stdout}");
    let model: Value = serde_json::from_slice(&std::fs::read(model_json).unwrap()).unwrap();
    let p = &model["projection"];
    assert!(p["shards"].as_u64().unwrap() >= 1);
    assert_eq!(
        p["shard_replicas"].as_u64().unwrap(),
        2 * p["shards"].as_u64().unwrap()
    );
    // Disk is linear in n: the projection to 1M is ~50× the 20k run.
    let ratio = p["disk_bytes"].as_f64().unwrap() / f("disk_bytes");
    assert!((40.0..60.0).contains(&ratio), "disk ratio {ratio}");
    for png in ["latency_vs_n.png", "recall_vs_qps.png"] {
        let bytes = std::fs::read(plots.join(png)).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
    }
    assert!(small["n"] == 8_000);
}

#[test]
fn bench_rejects_bad_arguments() {
    let out = Command::new(common::lab_bin())
        .args(["bench", "--vectors", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--vectors must be at least 1"));
    let out = Command::new(common::lab_bin())
        .args(["bench", "--fit", "/nonexistent/run.json"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/run.json"));
}
