//! TCP over ATM (after Romanow and Floyd, 1995; `examples/tcp-epd.toml`):
//! eight bulk TCP connections through one congested switch port, with
//! tail drop, partial packet discard and early packet discard, the segment
//! size and the port's buffer swept. The figure of merit is the effective
//! throughput: bytes the receiving applications got, over what the line
//! carries in cell payload in the same time.

use std::path::Path;

use super::{example, plot, run, say_written, with_field, write_csv, Series};

/// OC-3c's cell payload rate, bits a second (353,207.5 cells × 48 bytes).
const LINE_BPS: f64 = 353_207.5 * 48.0 * 8.0;

/// The segment sizes: MSS for MTUs of 512, 1,500, 4,352 and 9,180 bytes.
const MSS: [u32; 4] = [472, 1460, 4312, 9140];
/// Port buffers swept (cells) with 9,140-byte segments.
const BUFFERS: [i64; 5] = [250, 500, 1000, 2000, 4000];
/// The buffer for the segment-size sweep.
const BUFFER: i64 = 1000;

/// One run.
struct Row {
    discard: &'static str,
    mss: u32,
    buffer: i64,
    /// Effective throughput: goodput over the line's payload rate.
    effective: f64,
    /// Segments retransmitted by all sources.
    retransmits: u64,
    /// Retransmission timeouts of all sources.
    timeouts: u64,
    /// Segments towards the sink lost whole at the port (their end cell
    /// dropped there), from the IP PVCs' books.
    lost_at_port: u64,
    /// Segments that reached the sink damaged (a cell dropped before
    /// their end cell) and failed reassembly: line time wasted.
    failed_at_sink: u64,
}

/// Cells of one full segment: TCP/IP headers, LLC/SNAP and the AAL5
/// trailer, padded to whole cells.
pub(super) fn cells(mss: u32) -> i64 {
    i64::from((mss + 40 + 8 + 8).div_ceil(48))
}

/// The file with `discard` at the congested port, its buffer, the EPD
/// threshold one segment below the top (a new PDU is refused when it
/// might not fit), `mss` for every connection, and the sources sending
/// for `secs`.
fn variant(base: &str, discard: &str, buffer: i64, mss: u32, secs: f64) -> Result<String, String> {
    let t = with_field(base, "port", "discard", Some(discard.into()))?;
    let t = with_field(&t, "port", "buffer", Some(buffer.into()))?;
    let epd = (discard == "epd").then(|| toml::Value::from((buffer - cells(mss)).max(1)));
    let t = with_field(&t, "port", "epd", epd)?;
    let t = with_field(&t, "tcp", "duration", Some(format!("{secs}s").into()))?;
    with_field(&t, "tcp", "mss", Some(i64::from(mss).into()))
}

fn one(base: &str, discard: &'static str, buffer: i64, mss: u32, secs: f64) -> Result<Row, String> {
    let r = run(&variant(base, discard, buffer, mss, secs)?, secs)?;
    let tcp = r.tcp.as_ref().ok_or("the run has no TCP part")?;
    let (mut bytes, mut retransmits, mut timeouts) = (0u64, 0u64, 0u64);
    for c in tcp.flows.iter().flat_map(|f| &f.connections) {
        if c.pattern_errors > 0 {
            return Err(format!(
                "{}: {} bytes arrived wrong",
                c.ends, c.pattern_errors
            ));
        }
        if c.role == "sink" {
            bytes += c.bytes;
        } else {
            retransmits += c.retransmits;
            timeouts += c.timeouts;
        }
    }
    let (mut lost_at_port, mut failed_at_sink) = (0, 0);
    for p in r.ip_pvcs.iter().filter(|p| p.name.ends_with("-> sink")) {
        for l in &p.losses {
            if l.reason == crate::ip_books::FAILED {
                failed_at_sink += l.count;
            } else {
                lost_at_port += l.count;
            }
        }
    }
    Ok(Row {
        lost_at_port,
        failed_at_sink,
        discard,
        mss,
        buffer,
        // The sources stop at `secs`; what they sent arrives in the drain.
        effective: bytes as f64 * 8.0 / (secs + r.drain_secs) / LINE_BPS,
        retransmits,
        timeouts,
    })
}

/// Runs the experiment, `secs` of virtual time per run, and writes its
/// table and plots to `out`.
pub fn main(out: &Path, secs: f64) -> Result<(), String> {
    let base = example("tcp-epd.toml")?;
    let discards = ["tail", "ppd", "epd"];
    let mut rows = Vec::new();
    for &mss in &MSS {
        for d in discards {
            rows.push(one(&base, d, BUFFER, mss, secs)?);
        }
    }
    for &b in &BUFFERS {
        if b == BUFFER {
            continue;
        }
        for d in discards {
            rows.push(one(&base, d, b, 9140, secs)?);
        }
    }
    std::fs::create_dir_all(out).map_err(|e| format!("cannot make {}: {e}", out.display()))?;
    println!(
        "aurora experiment tcp-epd: 8 Reno connections into one OC-3c port; {secs} s of virtual \
         time each; effective throughput = goodput / the line's cell payload rate (135.6 Mb/s); \
         lost = segments dropped whole at the port, damaged = segments that crossed the line \
         with a cell missing and failed at the sink (every run's books balance by PDU)"
    );
    println!(
        "{:<8} {:>6} {:>7} {:>10} {:>8} {:>9} {:>9} {:>11}",
        "discard", "mss", "buffer", "effective", "resent", "timeouts", "lost", "damaged"
    );
    let mut csv = vec![vec![
        "discard".to_string(),
        "mss".into(),
        "buffer_cells".into(),
        "effective_throughput".into(),
        "retransmits".into(),
        "timeouts".into(),
        "segments_lost_at_port".into(),
        "segments_damaged_at_sink".into(),
    ]];
    for r in &rows {
        println!(
            "{:<8} {:>6} {:>7} {:>10.3} {:>8} {:>9} {:>9} {:>11}",
            r.discard,
            r.mss,
            r.buffer,
            r.effective,
            r.retransmits,
            r.timeouts,
            r.lost_at_port,
            r.failed_at_sink
        );
        csv.push(vec![
            r.discard.into(),
            r.mss.to_string(),
            r.buffer.to_string(),
            format!("{:.4}", r.effective),
            r.retransmits.to_string(),
            r.timeouts.to_string(),
            r.lost_at_port.to_string(),
            r.failed_at_sink.to_string(),
        ]);
    }
    let mut files = vec![write_csv(out, "tcp-epd", &csv)?];
    let line = |pick: &dyn Fn(&Row) -> Option<f64>, d: &str, color: usize| {
        let mut points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.discard == d)
            .filter_map(|r| pick(r).map(|x| (x, r.effective)))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        Series {
            name: d.to_uppercase().replace("TAIL", "tail drop"),
            points,
            line: true,
            color,
        }
    };
    let by_mss: Vec<Series> = discards
        .iter()
        .enumerate()
        .map(|(i, d)| {
            line(
                &|r: &Row| (r.buffer == BUFFER).then_some(f64::from(r.mss)),
                d,
                i,
            )
        })
        .collect();
    files.extend(plot(
        out,
        "tcp-epd-mss",
        "8 TCP connections, one OC-3c port of 1,000 cells",
        ("segment size (bytes)", "effective throughput"),
        &by_mss,
    )?);
    let by_buffer: Vec<Series> = discards
        .iter()
        .enumerate()
        .map(|(i, d)| line(&|r: &Row| (r.mss == 9140).then_some(r.buffer as f64), d, i))
        .collect();
    files.extend(plot(
        out,
        "tcp-epd-buffer",
        "8 TCP connections, 9,140-byte segments",
        ("port buffer (cells)", "effective throughput"),
        &by_buffer,
    )?);
    say_written(&files);
    Ok(())
}
