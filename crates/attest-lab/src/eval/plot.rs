//! The risk–coverage curve as a PNG (plotters): hallucination rate against coverage as the abstention threshold
//! moves.

use std::path::Path;

use anyhow::{anyhow, Context};

use crate::plot_font::ensure_font;
use plotters::prelude::*;

use super::metrics::CurvePoint;

pub fn risk_coverage_png(curve: &[CurvePoint], path: &Path) -> anyhow::Result<()> {
    ensure_font()?;
    let root = BitMapBackend::new(path, (800, 560)).into_drawing_area();
    let draw = |e: String| anyhow!("drawing {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| draw(e.to_string()))?;
    let max_h = curve
        .iter()
        .map(|p| p.hallucination_rate)
        .fold(0.05, f64::max)
        .min(1.0);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "risk–coverage (abstention threshold swept)",
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..1f64, 0f64..max_h * 1.05)
        .map_err(|e| draw(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("coverage (answerable questions answered)")
        .y_desc("hallucination rate (unanswerable answered)")
        .draw()
        .map_err(|e| draw(e.to_string()))?;
    let mut points: Vec<(f64, f64)> = curve
        .iter()
        .map(|p| (p.coverage, p.hallucination_rate))
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    chart
        .draw_series(LineSeries::new(points.clone(), &BLUE))
        .map_err(|e| draw(e.to_string()))?;
    chart
        .draw_series(
            points
                .iter()
                .map(|&(x, y)| Circle::new((x, y), 3, BLUE.filled())),
        )
        .map_err(|e| draw(e.to_string()))?;
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_curve_is_written_as_a_png() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rc.png");
        let curve: Vec<CurvePoint> = (0..=10)
            .map(|i| CurvePoint {
                threshold: f64::from(i) / 10.0,
                coverage: 1.0 - f64::from(i) / 10.0,
                hallucination_rate: 0.1 * (1.0 - f64::from(i) / 10.0),
            })
            .collect();
        risk_coverage_png(&curve, &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        assert!(bytes.len() > 2_000);
    }
}
