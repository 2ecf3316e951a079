//! The font every PNG plot (`attest-lab eval`, `attest-lab bench --fit`) draws its text with: DejaVu Sans from the
//! Debian package `fonts-dejavu-core` (installed by `scripts/setup.sh`), registered with plotters once.

use std::sync::OnceLock;

use anyhow::anyhow;
use plotters::style::FontStyle;

const FONT_PATHS: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Registers the font as "sans-serif" once per process; the bytes live as long as the process, as plotters
/// requires.
pub fn ensure_font() -> anyhow::Result<()> {
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
