//! Sweep plots: Mb/s against PDU size per series, with memcpy as a line.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::sweep::Sweep;

/// SONET OC-3c payload rate, the link of Penn's and Almesberger's testbeds.
const OC3C_MBPS: f64 = 149.76;
/// OC-12c payload rate.
const OC12C_MBPS: f64 = 599.04;

const FONT_PATHS: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// Makes fonts available to the PNG backend; false when none is installed.
pub fn load_font() -> bool {
    static LOADED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LOADED.get_or_init(|| {
        for p in FONT_PATHS {
            if let Ok(bytes) = std::fs::read(p) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

fn draw<DB: DrawingBackend>(
    s: &Sweep,
    root: DrawingArea<DB, plotters::coord::Shift>,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("cannot draw the plot: {e}");
    root.fill(&WHITE).map_err(err)?;
    let min = s.rows.iter().map(|r| r.size).min().unwrap_or(1024) as f64;
    let max = s.rows.iter().map(|r| r.size).max().unwrap_or(65536) as f64;
    let top = s.rows.iter().map(|r| r.mbps).fold(s.memcpy_mbps, f64::max) * 2.0;
    let bottom = s
        .rows
        .iter()
        .map(|r| r.mbps)
        .filter(|v| *v > 0.0)
        .fold(OC3C_MBPS, f64::min)
        / 2.0;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("aurora ttcp over {}: goodput against PDU size", s.link),
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (min * 0.9..max * 1.1).log_scale(),
            (bottom..top).log_scale(),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("PDU size (bytes)")
        .x_labels(8)
        .y_desc("Mb/s (log scale)")
        .y_label_formatter(&|v| format!("{:.0}", v))
        .x_label_formatter(&|v| format!("{:.0}", v))
        .draw()
        .map_err(err)?;
    let palette = [
        RED,
        BLUE,
        GREEN,
        MAGENTA,
        RGBColor(255, 140, 0),
        CYAN,
        RGBColor(120, 60, 20),
    ];
    let mut names: Vec<&str> = Vec::new();
    for r in &s.rows {
        if !names.contains(&r.series.as_str()) {
            names.push(&r.series);
        }
    }
    for (i, name) in names.iter().enumerate() {
        let color = palette[i % palette.len()];
        let pts: Vec<(f64, f64)> = s
            .rows
            .iter()
            .filter(|r| r.series == *name)
            .map(|r| (r.size as f64, r.mbps))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(name.to_string())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    // Reference lines: this machine's memcpy, and the link rates the seeds
    // measured against.
    let refs = [
        (
            format!("memcpy 64 KiB, one core ({:.0} Mb/s)", s.memcpy_mbps),
            s.memcpy_mbps,
            BLACK,
        ),
        (
            format!("OC-12c payload ({OC12C_MBPS:.0} Mb/s)"),
            OC12C_MBPS,
            RGBColor(128, 128, 128),
        ),
        (
            format!("OC-3c payload ({OC3C_MBPS:.0} Mb/s)"),
            OC3C_MBPS,
            RGBColor(180, 180, 180),
        ),
    ];
    for (label, v, color) in refs {
        chart
            .draw_series(LineSeries::new(
                vec![(min * 0.9, v), (max * 1.1, v)],
                color.stroke_width(1),
            ))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Writes `sweep.svg` and `sweep.png` into `dir`. Plots need a font to lay
/// out their text; without one no plot is drawn and the user is told why.
pub fn sweep(s: &Sweep, dir: &Path) -> Result<Vec<PathBuf>, String> {
    if !load_font() {
        eprintln!(
            "aurora ttcp: no plot drawn: it needs the DejaVu Sans font (Debian package fonts-dejavu-core)"
        );
        return Ok(Vec::new());
    }
    let svg = dir.join("sweep.svg");
    draw(s, SVGBackend::new(&svg, (960, 600)).into_drawing_area())?;
    let png = dir.join("sweep.png");
    draw(s, BitMapBackend::new(&png, (960, 600)).into_drawing_area())?;
    Ok(vec![svg, png])
}
