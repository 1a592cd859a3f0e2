//! A TCP connection's time-sequence trace ([`aurora_tcp::trace::Trace`]),
//! for people: as JSON ([`trace_json`]) and as a plot in the style of the
//! congestion-control papers (Jacobson 1988, Fall & Floyd 1996):
//! [`plot_time_sequence`].
//!
//! Sequence numbers are shown relative to the connection's initial
//! sequence number and unwrapped, so a transfer of more than 4 GiB still
//! climbs in a straight line instead of falling back to 0 at the wrap.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use aurora_tcp::trace::{Event, Trace};
use aurora_tcp::Seq;
use aurora_time::Instant;
use plotters::prelude::*;
use serde_json::{json, Value};

/// Turns 32-bit sequence numbers into 64-bit offsets from the ISS. Each
/// number is placed by its signed distance from the one before it (the
/// numbers a connection traces are always much less than 2^31 apart), so
/// the count runs on past 2^32 instead of wrapping.
struct Unwrap {
    /// The number seen last.
    raw: Seq,
    /// Its offset from the ISS (negative only for a number before the ISS,
    /// which a trace should not hold).
    rel: i64,
}

impl Unwrap {
    fn new(iss: Seq) -> Self {
        Unwrap { raw: iss, rel: 0 }
    }

    /// The offset of `s` from the ISS (0 for a number before it).
    fn at(&mut self, s: Seq) -> u64 {
        self.rel += i64::from(s.diff(self.raw));
        self.raw = s;
        self.rel.max(0) as u64
    }
}

/// Seconds since the run's epoch.
fn secs(t: Instant) -> f64 {
    t.as_nanos() as f64 / 1e9
}

/// The trace as JSON, sequence numbers relative to `iss` (the connection's
/// initial sequence number, whose SYN is 0 and first data byte 1) and
/// unwrapped past 2^32.
///
/// The value is an object:
///
/// | field | value |
/// |---|---|
/// | `iss` | the initial sequence number, as it went on the wire (0 to 2^32 − 1) |
/// | `lost` | events that happened after the trace was full and were not kept |
/// | `send` | `[{"t", "seq", "len", "retransmit"}]`: a segment carrying data (or SYN or FIN) left; `seq` is its first sequence number, `len` the sequence space it covers (bytes, SYN and FIN count one each), `retransmit` true if any of it had been sent before |
/// | `ack` | `[{"t", "ack", "dup"}]`: an ACK arrived; `ack` is the cumulative acknowledgement (the next byte expected), `dup` true for a duplicate ACK |
/// | `window` | `[{"t", "cwnd", "ssthresh"}]`: the congestion window or the slow-start threshold changed, both in bytes; `ssthresh` is `null` while there is none yet (the connection holds it as 2^32 − 1, "infinite") |
/// | `fast_retransmit` | `[{"t", "recover"}]`: loss recovery began on duplicate ACKs; `recover` is the highest sequence number sent then |
/// | `partial_ack` | `[{"t", "ack"}]`: an ACK during recovery that did not cover `recover` |
/// | `recovery_end` | `[{"t", "ack"}]`: loss recovery ended on this ACK |
/// | `timeout` | `[{"t", "backoff"}]`: the retransmission timer expired; `backoff` counts the expiries in a row, this one included |
///
/// Every `t` is in seconds since the start of the run (the driver's
/// clock), as a float; every `seq`, `ack` and `recover` is an integer
/// offset from `iss`. Each array is in time order; an event kind that
/// never happened has an empty array.
pub fn trace_json(trace: &Trace, iss: Seq) -> Value {
    let mut u = Unwrap::new(iss);
    let (mut send, mut ack, mut window) = (Vec::new(), Vec::new(), Vec::new());
    let (mut fast, mut partial, mut end, mut timeout) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for &(at, e) in trace.events() {
        let t = secs(at);
        match e {
            Event::Send {
                seq,
                len,
                retransmit,
            } => send.push(json!({
                "t": t,
                "seq": u.at(seq),
                "len": len,
                "retransmit": retransmit,
            })),
            Event::Ack { ack: a, dup } => ack.push(json!({
                "t": t,
                "ack": u.at(a),
                "dup": dup,
            })),
            Event::Window { cwnd, ssthresh } => window.push(json!({
                "t": t,
                "cwnd": cwnd,
                "ssthresh": (ssthresh != u32::MAX).then_some(ssthresh),
            })),
            Event::FastRetransmit { recover } => fast.push(json!({
                "t": t,
                "recover": u.at(recover),
            })),
            Event::PartialAck { ack: a } => partial.push(json!({ "t": t, "ack": u.at(a) })),
            Event::RecoveryEnd { ack: a } => end.push(json!({ "t": t, "ack": u.at(a) })),
            Event::Timeout { backoff } => timeout.push(json!({ "t": t, "backoff": backoff })),
        }
    }
    json!({
        "iss": iss.0,
        "lost": trace.lost,
        "send": send,
        "ack": ack,
        "window": window,
        "fast_retransmit": fast,
        "partial_ack": partial,
        "recovery_end": end,
        "timeout": timeout,
    })
}

/// What the plot draws, in its own units: seconds across, packets up.
#[derive(Default)]
struct Points {
    new_data: Vec<(f64, f64)>,
    retransmits: Vec<(f64, f64)>,
    acks: Vec<(f64, f64)>,
    fast_retransmits: Vec<f64>,
    timeouts: Vec<f64>,
    /// `(t, cwnd, ssthresh)`, the threshold `None` while infinite.
    windows: Vec<(f64, f64, Option<f64>)>,
    /// The time axis.
    t0: f64,
    t1: f64,
    /// The highest packet number reached (the end of the highest segment
    /// sent, or the highest ACK).
    top: f64,
    /// The lowest packet number of a segment sent or an ACK (`f64::MAX`
    /// when there is none).
    bottom: f64,
}

impl Points {
    fn new(trace: &Trace, iss: Seq, mss: u32) -> Self {
        let mss = f64::from(mss);
        let mut u = Unwrap::new(iss);
        let mut p = Points {
            t0: f64::MAX,
            t1: f64::MIN,
            bottom: f64::MAX,
            ..Points::default()
        };
        for &(at, e) in trace.events() {
            let t = secs(at);
            p.t0 = p.t0.min(t);
            p.t1 = p.t1.max(t);
            match e {
                Event::Send {
                    seq,
                    len,
                    retransmit,
                } => {
                    let s = u.at(seq);
                    p.top = p.top.max((s + u64::from(len)) as f64 / mss);
                    p.bottom = p.bottom.min(s as f64 / mss);
                    let pt = (t, s as f64 / mss);
                    if retransmit {
                        p.retransmits.push(pt);
                    } else {
                        p.new_data.push(pt);
                    }
                }
                Event::Ack { ack, .. } => {
                    let a = u.at(ack) as f64 / mss;
                    p.top = p.top.max(a);
                    p.bottom = p.bottom.min(a);
                    p.acks.push((t, a));
                }
                Event::Window { cwnd, ssthresh } => p.windows.push((
                    t,
                    f64::from(cwnd) / mss,
                    (ssthresh != u32::MAX).then(|| f64::from(ssthresh) / mss),
                )),
                Event::FastRetransmit { recover } => {
                    u.at(recover);
                    p.fast_retransmits.push(t);
                }
                Event::PartialAck { ack } | Event::RecoveryEnd { ack } => {
                    u.at(ack);
                }
                Event::Timeout { .. } => p.timeouts.push(t),
            }
        }
        if p.t0 > p.t1 {
            (p.t0, p.t1) = (0.0, 1.0);
        } else if p.t0 == p.t1 {
            p.t1 = p.t0 + 1.0;
        }
        p
    }

    /// The time axis: the trace's span, and a little room on the right so
    /// the last marks are not cut in half.
    fn time_axis(&self) -> std::ops::Range<f64> {
        self.t0..self.t1 + (self.t1 - self.t0) * 0.02
    }
}

/// A value that holds from one time to the next as a stepped line: one
/// line per stretch where it is defined (a `None` breaks the line), each
/// value held until the next one's time or, for the last, until `t_end`.
fn steps(values: &[(f64, Option<f64>)], t_end: f64) -> Vec<Vec<(f64, f64)>> {
    let mut lines = Vec::new();
    let mut line = Vec::new();
    for (i, &(t, v)) in values.iter().enumerate() {
        let until = values.get(i + 1).map_or(t_end.max(t), |n| n.0);
        match v {
            Some(v) => {
                line.push((t, v));
                line.push((until, v));
            }
            None if !line.is_empty() => lines.push(std::mem::take(&mut line)),
            None => {}
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// `path` with `ext` appended (`run.1` becomes `run.1.svg`, where
/// [`Path::with_extension`] would give `run.svg`).
fn with_ext(path: &Path, ext: &str) -> PathBuf {
    let mut s = OsString::from(path.as_os_str());
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

/// Plots the trace against time, as the congestion-control papers do, to
/// `<path>.svg` and `<path>.png`; returns the files written.
///
/// The upper panel is the time-sequence plot: time in seconds across (the
/// run's clock), packet number up, a packet number being the sequence
/// number's offset from `iss` divided by `mss` (bytes per segment). Each
/// segment sent is a mark at its first byte: a small filled square for
/// new data, a red cross for a retransmission. Each ACK is a dot at the
/// packet number it acknowledges up to, so a run of duplicate ACKs is a
/// row of dots at one height. Fast retransmits (orange) and timeouts (red)
/// are short vertical ticks along the top. The lower panel shows the
/// congestion window and the slow-start threshold in packets, each held
/// until it next changes; the threshold is left out while it is infinite
/// (before the first loss).
///
/// Like the other plots, this needs the DejaVu Sans font to lay out its
/// text: without it nothing is written, a note says why on stderr, and the
/// list is empty. Fails if `mss` is 0 or a file cannot be drawn.
pub fn plot_time_sequence(
    trace: &Trace,
    iss: Seq,
    mss: u32,
    title: &str,
    path: &Path,
) -> Result<Vec<PathBuf>, String> {
    if mss == 0 {
        return Err("cannot plot the trace: the segment size is 0".to_string());
    }
    if !crate::ttcp::plot::load_font() {
        eprintln!(
            "aurora: no time-sequence plot drawn: it needs the DejaVu Sans font (Debian package fonts-dejavu-core)"
        );
        return Ok(Vec::new());
    }
    let p = Points::new(trace, iss, mss);
    let svg = with_ext(path, "svg");
    draw(
        SVGBackend::new(&svg, (900, 720)).into_drawing_area(),
        title,
        &p,
    )?;
    let png = with_ext(path, "png");
    draw(
        BitMapBackend::new(&png, (900, 720)).into_drawing_area(),
        title,
        &p,
    )?;
    Ok(vec![svg, png])
}

/// The series' legend, in the upper left corner of `chart`.
fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<
        'a,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    p: &Points,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("cannot draw the plot: {e}");
    let new_color = RGBColor(0, 0, 160);
    let retx_color = RGBColor(220, 0, 0);
    let ack_color = RGBColor(0, 140, 0);
    let fr_color = RGBColor(255, 140, 0);
    let to_color = RGBColor(220, 0, 0);
    root.fill(&WHITE).map_err(err)?;
    let area = root.titled(title, ("sans-serif", 20)).map_err(err)?;
    let (upper, lower) = area.split_vertically(area.dim_in_pixel().1 * 7 / 10);

    // Time against packet number.
    // From 0, unless the trace is a stretch far from the start: then from
    // just below its lowest mark.
    let y0 = if p.bottom != f64::MAX && p.bottom > 0.2 * p.top {
        (p.bottom - (p.top - p.bottom) * 0.05 - 1.0).max(0.0)
    } else {
        0.0
    };
    let y1 = p.top + (p.top - y0) * 0.1 + 1.0;
    let mut chart = ChartBuilder::on(&upper)
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(64)
        .build_cartesian_2d(p.time_axis(), y0..y1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .y_desc("packet number")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    if !p.new_data.is_empty() {
        chart
            .draw_series(p.new_data.iter().map(|&pt| {
                EmptyElement::at(pt) + Rectangle::new([(-2, -2), (2, 2)], new_color.filled())
            }))
            .map_err(err)?
            .label("segment sent")
            .legend(move |(x, y)| {
                Rectangle::new([(x + 7, y - 2), (x + 11, y + 2)], new_color.filled())
            });
    }
    if !p.retransmits.is_empty() {
        chart
            .draw_series(
                p.retransmits
                    .iter()
                    .map(|&pt| Cross::new(pt, 4, retx_color.stroke_width(2))),
            )
            .map_err(err)?
            .label("retransmission")
            .legend(move |(x, y)| Cross::new((x + 9, y), 4, retx_color.stroke_width(2)));
    }
    if !p.acks.is_empty() {
        chart
            .draw_series(
                p.acks
                    .iter()
                    .map(|&pt| Circle::new(pt, 1, ack_color.filled())),
            )
            .map_err(err)?
            .label("ACK")
            .legend(move |(x, y)| Circle::new((x + 9, y), 2, ack_color.filled()));
    }
    // Ticks in a band along the top, above the marks (which reach at most
    // 1/1.1 of the height).
    let ticks = [
        (&p.fast_retransmits, fr_color, "fast retransmit"),
        (&p.timeouts, to_color, "timeout"),
    ];
    for (times, color, name) in ticks {
        if times.is_empty() {
            continue;
        }
        chart
            .draw_series(times.iter().map(|&t| {
                PathElement::new([(t, y1 - (y1 - y0) * 0.06), (t, y1)], color.stroke_width(2))
            }))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new([(x + 9, y - 5), (x + 9, y + 5)], color.stroke_width(2))
            });
    }
    legend(&mut chart).map_err(err)?;

    // The window, in packets.
    let cwnd: Vec<_> = p.windows.iter().map(|&(t, c, _)| (t, Some(c))).collect();
    let ssthresh: Vec<_> = p.windows.iter().map(|&(t, _, s)| (t, s)).collect();
    let w1 = p
        .windows
        .iter()
        .map(|&(_, c, s)| c.max(s.unwrap_or(0.0)))
        .fold(0.0, f64::max);
    let mut chart = ChartBuilder::on(&lower)
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(p.time_axis(), 0.0..w1 * 1.15 + 1.0)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("packets")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    let lines = [
        (steps(&cwnd, p.t1), BLUE.stroke_width(2), "cwnd"),
        (
            steps(&ssthresh, p.t1),
            retx_color.stroke_width(1),
            "ssthresh",
        ),
    ];
    for (lines, style, name) in lines {
        for (i, line) in lines.into_iter().enumerate() {
            let s = chart
                .draw_series(LineSeries::new(line, style))
                .map_err(err)?;
            if i == 0 {
                s.label(name)
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], style));
            }
        }
    }
    if !p.windows.is_empty() {
        legend(&mut chart).map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Writes the trace of every Aurora end of every `[[tcp]]` entry of `net`
/// that kept one (`trace = true`) to folder `dir`: as JSON
/// (`NAME-ROLE-HOST.json`, a sink's further connections from the same
/// source numbered `-2`, `-3`...) and as a time-sequence plot (`.svg` and
/// `.png`, for a connection that sent data). Returns the files written.
pub fn write_traces<F: aurora_net::Frame>(
    net: &aurora_topo::Network<F>,
    dir: &Path,
) -> Result<Vec<String>, String> {
    let mut files = Vec::new();
    for t in &net.tcp {
        let mut seen: Vec<String> = Vec::new();
        for (host, flow) in crate::tcp_report::ends_of(t, &net.sim) {
            let Some(conn) = flow.connection() else {
                continue;
            };
            if conn.trace().events().is_empty() {
                continue;
            }
            let role = match flow.role() {
                aurora_tcp::host::Role::Source => "source",
                aurora_tcp::host::Role::Sink => "sink",
            };
            let mut name = format!("{}-{role}-{host}", t.name);
            let n = seen.iter().filter(|s| **s == name).count();
            seen.push(name.clone());
            if n > 0 {
                name += &format!("-{}", n + 1);
            }
            if files.is_empty() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
            }
            let json = dir.join(format!("{name}.json"));
            let text = serde_json::to_string(&trace_json(conn.trace(), flow.iss()))
                .map_err(|e| e.to_string())?;
            std::fs::write(&json, text)
                .map_err(|e| format!("cannot write {}: {e}", json.display()))?;
            files.push(json.display().to_string());
            // A sink that sent no data (its SYN and FIN only) has no
            // sequence plot worth drawing; its JSON says what it did.
            let data = conn
                .trace()
                .events()
                .iter()
                .any(|(_, e)| matches!(e, Event::Send { len, .. } if *len > 1));
            if !data {
                continue;
            }
            let title = format!(
                "{} ({} TCP), {role} at {host}",
                t.name,
                conn.config().variant
            );
            for p in plot_time_sequence(
                conn.trace(),
                flow.iss(),
                conn.smss(),
                &title,
                &dir.join(&name),
            )? {
                files.push(p.display().to_string());
            }
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: i64) -> Instant {
        Instant::from_millis(n)
    }

    /// A transfer whose sequence numbers wrap: the ISS is 100 bytes short
    /// of 2^32, so the third 1000-byte segment starts past the wrap.
    fn wrapping() -> (Trace, Seq) {
        let iss = Seq(u32::MAX - 99);
        let mut t = Trace::new(100);
        let send = |seq: Seq, retransmit| Event::Send {
            seq,
            len: 1000,
            retransmit,
        };
        t.push(
            ms(0),
            Event::Send {
                seq: iss,
                len: 1,
                retransmit: false,
            },
        );
        t.push(
            ms(10),
            Event::Window {
                cwnd: 3000,
                ssthresh: u32::MAX,
            },
        );
        t.push(
            ms(10),
            Event::Ack {
                ack: iss + 1,
                dup: false,
            },
        );
        t.push(ms(11), send(iss + 1, false));
        t.push(ms(12), send(iss + 1001, false));
        t.push(ms(13), send(iss + 2001, false));
        t.push(
            ms(21),
            Event::Ack {
                ack: iss + 1001,
                dup: false,
            },
        );
        t.push(
            ms(22),
            Event::Ack {
                ack: iss + 1001,
                dup: true,
            },
        );
        t.push(
            ms(23),
            Event::FastRetransmit {
                recover: iss + 3001,
            },
        );
        t.push(
            ms(23),
            Event::Window {
                cwnd: 4500,
                ssthresh: 1500,
            },
        );
        t.push(ms(23), send(iss + 1001, true));
        t.push(ms(33), Event::PartialAck { ack: iss + 2001 });
        t.push(ms(43), Event::RecoveryEnd { ack: iss + 3001 });
        t.push(ms(1043), Event::Timeout { backoff: 1 });
        (t, iss)
    }

    #[test]
    fn unwraps_past_the_wrap() {
        let mut u = Unwrap::new(Seq(u32::MAX - 9));
        assert_eq!(u.at(Seq(u32::MAX)), 9);
        assert_eq!(u.at(Seq(5)), 15);
        // Back before the wrap (a retransmission), then forward again.
        assert_eq!(u.at(Seq(u32::MAX - 4)), 5);
        // Steps of up to 2^31 − 1, past a second wrap: more than 4 GiB
        // sent.
        assert_eq!(u.at(Seq(2_000_000_000)), 2_000_000_010);
        assert_eq!(u.at(Seq(4_000_000_000)), 4_000_000_010);
        assert_eq!(u.at(Seq(1_000_000_000)), (1 << 32) + 1_000_000_010);
        assert_eq!(u.at(Seq(999_999_000)), (1 << 32) + 999_999_010);
        // A number before the ISS is shown as 0.
        let mut u = Unwrap::new(Seq(3));
        assert_eq!(u.at(Seq(u32::MAX)), 0);
        assert_eq!(u.at(Seq(4)), 1);
    }

    #[test]
    fn json_is_relative_unwrapped_and_in_seconds() {
        let (t, iss) = wrapping();
        let j = trace_json(&t, iss);
        let expect = json!({
            "iss": 4294967196u32,
            "lost": 0,
            "send": [
                {"t": 0.0, "seq": 0, "len": 1, "retransmit": false},
                {"t": 0.011, "seq": 1, "len": 1000, "retransmit": false},
                {"t": 0.012, "seq": 1001, "len": 1000, "retransmit": false},
                {"t": 0.013, "seq": 2001, "len": 1000, "retransmit": false},
                {"t": 0.023, "seq": 1001, "len": 1000, "retransmit": true},
            ],
            "ack": [
                {"t": 0.01, "ack": 1, "dup": false},
                {"t": 0.021, "ack": 1001, "dup": false},
                {"t": 0.022, "ack": 1001, "dup": true},
            ],
            "window": [
                {"t": 0.01, "cwnd": 3000, "ssthresh": null},
                {"t": 0.023, "cwnd": 4500, "ssthresh": 1500},
            ],
            "fast_retransmit": [{"t": 0.023, "recover": 3001}],
            "partial_ack": [{"t": 0.033, "ack": 2001}],
            "recovery_end": [{"t": 0.043, "ack": 3001}],
            "timeout": [{"t": 1.043, "backoff": 1}],
        });
        assert_eq!(j, expect);
        // The raw numbers did wrap: the segment at offset 1001 went out as
        // sequence number 901.
        assert_eq!((iss + 1001).0, 901);
    }

    #[test]
    fn json_unwraps_a_transfer_of_more_than_4_gib() {
        // 5 GiB in 1 MiB steps (a trace keeps whatever it is given), the
        // ISS just short of the wrap: every offset is exact.
        let iss = Seq(u32::MAX - 2);
        let step = 1u32 << 20;
        let n = 5 * 1024;
        let mut t = Trace::new(n + 1);
        for i in 0..n as u32 {
            t.push(
                Instant::from_micros(i64::from(i)),
                Event::Ack {
                    ack: iss + i.wrapping_mul(step),
                    dup: false,
                },
            );
        }
        t.push(Instant::ZERO, Event::Timeout { backoff: 1 });
        t.push(Instant::ZERO, Event::Timeout { backoff: 2 });
        let j = trace_json(&t, iss);
        let acks = j["ack"].as_array().unwrap();
        assert_eq!(acks.len(), n);
        for (i, a) in acks.iter().enumerate() {
            assert_eq!(a["ack"], json!(i as u64 * u64::from(step)));
            assert_eq!(a["t"], json!(i as f64 / 1e6));
        }
        assert_eq!(j["timeout"], json!([{"t": 0.0, "backoff": 1}]));
        assert_eq!(j["lost"], json!(1));
    }

    #[test]
    fn steps_hold_each_value_and_break_on_none() {
        let v = [
            (0.0, None),
            (1.0, Some(4.0)),
            (2.0, Some(2.0)),
            (3.0, None),
            (4.0, Some(1.0)),
        ];
        assert_eq!(
            steps(&v, 5.0),
            vec![
                vec![(1.0, 4.0), (2.0, 4.0), (2.0, 2.0), (3.0, 2.0)],
                vec![(4.0, 1.0), (5.0, 1.0)],
            ]
        );
        assert!(steps(&[], 1.0).is_empty());
    }

    #[test]
    fn plot_points_are_packets() {
        let (t, iss) = wrapping();
        let p = Points::new(&t, iss, 1000);
        assert_eq!(p.new_data[3], (0.013, 2.001));
        assert_eq!(p.retransmits, vec![(0.023, 1.001)]);
        assert_eq!(p.acks[1], (0.021, 1.001));
        assert_eq!(p.fast_retransmits, vec![0.023]);
        assert_eq!(p.timeouts, vec![1.043]);
        assert_eq!(p.windows, vec![(0.01, 3.0, None), (0.023, 4.5, Some(1.5))]);
        assert_eq!((p.t0, p.t1, p.top), (0.0, 1.043, 3.001));
    }

    #[test]
    fn plot_writes_svg_and_png() {
        if !crate::ttcp::plot::load_font() {
            eprintln!("skipped: no DejaVu Sans font to lay out the plot");
            return;
        }
        let dir = std::env::temp_dir().join(format!("aurora-tcp-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (t, iss) = wrapping();
        let files =
            plot_time_sequence(&t, iss, 1000, "a test: one loss", &dir.join("seq.1")).unwrap();
        assert_eq!(files, vec![dir.join("seq.1.svg"), dir.join("seq.1.png")]);
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("packet number"));
        assert!(std::fs::metadata(&files[1]).unwrap().len() > 0);
        // An empty trace still draws (empty axes).
        let files =
            plot_time_sequence(&Trace::new(0), iss, 1000, "empty", &dir.join("empty")).unwrap();
        assert!(std::fs::metadata(&files[0]).unwrap().len() > 0);
        assert!(plot_time_sequence(&t, iss, 0, "", &dir.join("x")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
