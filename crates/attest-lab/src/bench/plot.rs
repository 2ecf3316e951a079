//! The bench plots: latency against n (measured runs and the fitted model, log-scaled n) and recall@10
//! against single-thread QPS (one curve per run over nprobe).

use std::path::Path;

use anyhow::anyhow;
use plotters::prelude::*;

use super::fit::CostModel;
use super::BenchReport;
use crate::plot_font::ensure_font;

pub fn latency_vs_n(runs: &[&BenchReport], model: &CostModel, path: &Path) -> anyhow::Result<()> {
    ensure_font()?;
    let draw = |e: String| anyhow!("drawing {}: {e}", path.display());
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw(e.to_string()))?;
    let max_n = model
        .projection
        .n
        .max(runs.iter().map(|r| r.n as u64).max().unwrap_or(1)) as f64;
    let min_n = runs.iter().map(|r| r.n).min().unwrap_or(1) as f64;
    let max_ms = runs
        .iter()
        .map(|r| r.p95_ms)
        .fold(model.projection.p95_ms, f64::max)
        * 1.2;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "IVF_PQ latency against n (one query at a time)",
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d((min_n * 0.8..max_n * 1.2).log_scale(), 0f64..max_ms)
        .map_err(|e| draw(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("vectors (n)")
        .y_desc("latency (ms)")
        .draw()
        .map_err(|e| draw(e.to_string()))?;
    for (label, color, get) in [
        (
            "p50",
            BLUE,
            (|r: &BenchReport| r.p50_ms) as fn(&BenchReport) -> f64,
        ),
        ("p95", RED, |r: &BenchReport| r.p95_ms),
    ] {
        let points: Vec<(f64, f64)> = runs.iter().map(|r| (r.n as f64, get(r))).collect();
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(|e| draw(e.to_string()))?
            .label(format!("{label} measured"))
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
    }
    let projected = [
        ("p50 projected", BLUE, model.projection.p50_ms),
        ("p95 projected", RED, model.projection.p95_ms),
    ];
    for (label, color, ms) in projected {
        chart
            .draw_series(std::iter::once(TriangleMarker::new(
                (model.projection.n as f64, ms),
                7,
                color.mix(0.6).filled(),
            )))
            .map_err(|e| draw(e.to_string()))?
            .label(label)
            .legend(move |(x, y)| TriangleMarker::new((x + 10, y), 5, color.mix(0.6).filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| draw(e.to_string()))?;
    root.present().map_err(|e| draw(e.to_string()))?;
    Ok(())
}

pub fn recall_vs_qps(runs: &[BenchReport], path: &Path) -> anyhow::Result<()> {
    ensure_font()?;
    let draw = |e: String| anyhow!("drawing {}: {e}", path.display());
    // One series per run and over-fetch factor, its points ordered by recall.
    let mut curves: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in runs {
        // One series per over-fetch and re-score path (f32, or the SQ8 copy then 2 × k exactly).
        let mut series: Vec<(usize, bool)> = r.curve.iter().map(|p| (p.overfetch, p.sq8)).collect();
        series.sort_unstable();
        series.dedup();
        for (o, sq8) in series {
            let mut pts: Vec<(f64, f64)> = r
                .curve
                .iter()
                .filter(|p| p.overfetch == o && p.sq8 == sq8)
                .map(|p| (p.recall_at_10, p.qps_1t))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let path = if sq8 { " sq8" } else { "" };
            curves.push((format!("{} n={} overfetch={o}{path}", r.dataset, r.n), pts));
        }
    }
    let max_qps = curves
        .iter()
        .flat_map(|(_, c)| c.iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 1.5;
    let min_recall = curves
        .iter()
        .flat_map(|(_, c)| c.iter().map(|p| p.0))
        .fold(1.0, f64::min)
        .min(0.9);
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "recall@10 against QPS (1 thread), nprobe swept",
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(min_recall - 0.02..1.0f64, (1.0..max_qps).log_scale())
        .map_err(|e| draw(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("recall@10")
        .y_desc("queries per second")
        .draw()
        .map_err(|e| draw(e.to_string()))?;
    for (i, (label, pts)) in curves.into_iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| draw(e.to_string()))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(|e| draw(e.to_string()))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| draw(e.to_string()))?;
    root.present().map_err(|e| draw(e.to_string()))?;
    Ok(())
}
