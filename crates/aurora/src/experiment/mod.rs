//! `aurora experiment NAME`: the papers' experiments, re-run. Each takes an
//! example topology from `examples/`, runs variants of it in virtual time
//! (a field of the file changed per variant), checks that every run's
//! books balance, and writes a table (printed, and as CSV) and plots (SVG,
//! and PNG when a font is installed) to a folder.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use aurora_time::Duration;
use plotters::prelude::*;

use crate::run::{run_network, Clock, Report};

mod ack_compression;
mod epd;
mod linkshare;
mod striping;
mod tcp_drops;
mod tcp_epd;
mod tcp_epd_linux;
mod tcp_long;
mod vidboard;
mod vusystem;

pub use ack_compression::main as ack_compression;
pub use epd::main as epd;
pub use linkshare::main as linkshare;
pub use striping::main as striping;
pub use tcp_drops::main as tcp_drops;
pub use tcp_epd::main as tcp_epd;
pub use tcp_epd_linux::{main as tcp_epd_linux, Opts as TcpEpdLinuxOpts};
pub use tcp_long::main as tcp_long;
pub use vidboard::{main as vidboard, Opts as VidboardOpts, PARTS as VIDBOARD_PARTS};
pub use vusystem::main as vusystem;

/// Reads example `name` from the `examples/` folder beside the binary's
/// source, or from `examples/` under the current folder.
fn example(name: &str) -> Result<String, String> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    let local = Path::new("examples").join(name);
    std::fs::read_to_string(&here)
        .or_else(|_| std::fs::read_to_string(&local))
        .map_err(|e| format!("cannot read examples/{name}: {e}"))
}

/// Runs topology `text` in virtual time for `secs` (and a drain of
/// 100 ms); fails if its books do not balance.
fn run(text: &str, secs: f64) -> Result<Report, String> {
    let net = aurora_topo::load(text, 1).map_err(|p| p.to_string())?;
    let r = run_network(
        net,
        Duration::from_nanos((secs * 1e9) as i64),
        Duration::from_millis(100),
        (None, None),
        Clock::Virtual,
        None,
    )?;
    if let Some(why) = r.imbalance() {
        return Err(why);
    }
    Ok(r)
}

/// Runs topology `text` in real time (the wall-clock driver `aurora run`
/// uses, one worker, sleeping between events or with `spin` busy-waiting)
/// for `secs` and a drain of 100 ms; fails if its books do not balance.
/// The report's `lateness` says whether the run kept up with the wall
/// clock.
fn run_real(text: &str, secs: f64, spin: bool) -> Result<Report, String> {
    let net = aurora_topo::load(text, 1).map_err(|p| p.to_string())?;
    let r = run_network(
        net,
        Duration::from_nanos((secs * 1e9) as i64),
        Duration::from_millis(100),
        (None, None),
        Clock::Wall { spin },
        None,
    )?;
    if let Some(why) = r.imbalance() {
        return Err(why);
    }
    Ok(r)
}

/// Topology `text` run in virtual time for `secs`, the network kept so
/// its nodes (TCP hosts and their traces) can be read.
fn virtual_net(text: &str, secs: f64) -> Result<aurora_topo::Network, String> {
    let mut net = aurora_topo::load(text, 1).map_err(|p| p.to_string())?;
    net.sim
        .run_until(aurora_time::Instant::ZERO + Duration::from_nanos((secs * 1e9) as i64));
    Ok(net)
}

/// The node id of host (or IP node) `name` in `net`.
fn host_id(net: &aurora_topo::Network, name: &str) -> Result<aurora_engine::NodeId, String> {
    net.hosts
        .iter()
        .chain(&net.ip_nodes)
        .find(|(n, _)| n == name)
        .map(|&(_, id)| id)
        .ok_or_else(|| format!("no host {name}"))
}

/// `text` with field `key` of every `[[table]]` entry set to `value`
/// (or removed when `None`).
fn with_field(
    text: &str,
    table: &str,
    key: &str,
    value: Option<toml::Value>,
) -> Result<String, String> {
    let mut doc: toml::Table = text.parse().map_err(|e| format!("{e}"))?;
    let Some(toml::Value::Array(entries)) = doc.get_mut(table) else {
        return Err(format!("the example has no [[{table}]]"));
    };
    for e in entries {
        if let toml::Value::Table(t) = e {
            match &value {
                Some(v) => {
                    t.insert(key.to_string(), v.clone());
                }
                None => {
                    t.remove(key);
                }
            }
        }
    }
    toml::to_string(&doc).map_err(|e| e.to_string())
}

/// The colour index that draws in grey rather than from the palette.
const GREY: usize = usize::MAX;

/// A line of a plot: its name, its points, whether to draw them as a
/// line (else as small marks), and its colour (an index into a palette).
struct Series {
    name: String,
    points: Vec<(f64, f64)>,
    line: bool,
    color: usize,
}

/// Says which files an experiment wrote.
fn say_written(files: &[PathBuf]) {
    println!();
    for f in files {
        println!("wrote {}", f.display());
    }
}

/// Writes `rows` (the first the header) as CSV to `out/name.csv`.
fn write_csv(out: &Path, name: &str, rows: &[Vec<String>]) -> Result<PathBuf, String> {
    let mut s = String::new();
    // A field with a comma or a quote is quoted, its quotes doubled.
    let field = |f: &String| {
        if f.contains([',', '"', '\n']) {
            format!("\"{}\"", f.replace('"', "\"\""))
        } else {
            f.clone()
        }
    };
    for r in rows {
        let _ = writeln!(s, "{}", r.iter().map(field).collect::<Vec<_>>().join(","));
    }
    let path = out.join(format!("{name}.csv"));
    std::fs::write(&path, s).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// Draws `series` against `x_desc` and `y_desc` to `out/name.svg` and
/// `out/name.png`; returns the files written (none, with a note on
/// stderr, when the font the labels need is not installed).
fn plot(
    out: &Path,
    name: &str,
    title: &str,
    axes: (&str, &str),
    series: &[Series],
) -> Result<Vec<PathBuf>, String> {
    plot_with(out, name, title, axes, series, None)
}

/// As [`plot`], the x axis naming categories: a point at x = i belongs
/// to `categories[i]`, and the axis shows the names instead of numbers.
fn plot_categories(
    out: &Path,
    name: &str,
    title: &str,
    axes: (&str, &str),
    categories: &[String],
    series: &[Series],
) -> Result<Vec<PathBuf>, String> {
    plot_with(out, name, title, axes, series, Some(categories))
}

fn plot_with(
    out: &Path,
    name: &str,
    title: &str,
    axes: (&str, &str),
    series: &[Series],
    categories: Option<&[String]>,
) -> Result<Vec<PathBuf>, String> {
    if !crate::ttcp::plot::load_font() {
        eprintln!(
            "aurora experiment: no plot drawn: it needs the DejaVu Sans font (Debian package fonts-dejavu-core)"
        );
        return Ok(Vec::new());
    }
    let svg = out.join(format!("{name}.svg"));
    draw(
        SVGBackend::new(&svg, (900, 560)).into_drawing_area(),
        title,
        axes,
        series,
        categories,
    )?;
    let png = out.join(format!("{name}.png"));
    draw(
        BitMapBackend::new(&png, (900, 560)).into_drawing_area(),
        title,
        axes,
        series,
        categories,
    )?;
    Ok(vec![svg, png])
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    (x_desc, y_desc): (&str, &str),
    series: &[Series],
    categories: Option<&[String]>,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("cannot draw the plot: {e}");
    root.fill(&WHITE).map_err(err)?;
    let all = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 >= x1 {
        x1 = x0 + 1.0;
    }
    // Categories sit at whole numbers, half a step in from the edges;
    // the key goes above the lines.
    let mut top = y1 * 1.15;
    if let Some(c) = categories {
        (x0, x1) = (-0.5, c.len() as f64 - 0.5);
        top = y1 * 1.6;
    }
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, 0.0..top + 1e-9)
        .map_err(err)?;
    let name_of = |x: &f64| {
        let i = x.round();
        categories
            .filter(|_| (x - i).abs() < 1e-6 && i >= 0.0)
            .and_then(|c| c.get(i as usize).cloned())
            .unwrap_or_default()
    };
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(x_desc).y_desc(y_desc);
    if let Some(c) = categories {
        // One label a category; the grid lines between them stay.
        mesh.x_labels(c.len() * 2 + 1).x_label_formatter(&name_of);
    }
    mesh.draw().map_err(err)?;
    for s in series {
        let color = match s.color {
            GREY => RGBAColor(150, 150, 150, 1.0),
            c => Palette99::pick(c).to_rgba(),
        };
        if s.line {
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(err)?
                .label(s.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2))
                });
            // Over categories a line may have one point: mark each.
            if categories.is_some() {
                chart
                    .draw_series(s.points.iter().map(|&p| Circle::new(p, 4, color.filled())))
                    .map_err(err)?;
            }
        } else {
            chart
                .draw_series(s.points.iter().map(|&p| Circle::new(p, 2, color.filled())))
                .map_err(err)?
                .label(s.name.clone())
                .legend(move |(x, y)| Circle::new((x + 9, y), 2, color.filled()));
        }
    }
    let mut labels = chart.configure_series_labels();
    if categories.is_some() {
        labels.position(SeriesLabelPosition::UpperRight);
    }
    labels
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
