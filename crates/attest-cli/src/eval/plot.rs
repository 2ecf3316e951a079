//! The risk–coverage curve as a PNG (plotters): hallucination rate against coverage as the abstention threshold
//! moves. Text is drawn with DejaVu Sans (Debian `fonts-dejavu-core`, installed by `scripts/setup.sh`).

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{anyhow, Context};
use plotters::prelude::*;

use super::metrics::CurvePoint;

const FONT_PATHS: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Registers the font once per process; the bytes live as long as the process, as plotters requires.
fn ensure_font() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let bytes = FONT_PATHS
                .iter()
                .find_map(|p| std::fs::read(p).ok())
                .ok_or_else(|| {
                    format!("no DejaVu Sans font at {FONT_PATHS:?} (install fonts-dejavu-core: scripts/setup.sh)")
                })?;
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| "the DejaVu Sans file is not a usable font".to_string())
        })
        .clone()
        .map_err(|e| anyhow!(e))
}

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
