//! Link sharing at one port (`examples/linkshare.toml`, the seed's S13):
//! hierarchical WF2Q+ against the flat approximation with weight walks
//! from one cell time to 10 ms apart; each leaf's service, slice by slice,
//! against the ideal hierarchical fluid (H-GPS) share of the leaves that
//! held cells for most of that slice.

use std::path::Path;

use aurora_topo::qos::DisciplineSpec;

use super::{example, plot, run, say_written, with_field, write_csv, Series};

/// An OC-3c cell time, µs.
const CELL_US: f64 = 1e6 / 353_207.0;

/// A variant's per-leaf share of each slice's service.
struct Shares {
    name: String,
    /// Update period, µs (none for HWFQ).
    period_us: Option<f64>,
    /// Per slice, per leaf: the share of the cells served in the slice.
    slices: Vec<Vec<f64>>,
    /// Per slice, the ideal share of each leaf: H-GPS over the leaves that
    /// held cells for at least half the slice.
    ideal: Vec<Vec<f64>>,
}

/// Runs the experiment for `secs` of virtual time per variant and writes
/// its table and plots to `out`.
pub fn main(out: &Path, secs: f64) -> Result<(), String> {
    let base = example("linkshare.toml")?;
    // The tree, the leaves' names and each source's on-time, from the file.
    let net = aurora_topo::load(&base, 1).map_err(|p| p.to_string())?;
    let plan = &net.ports.first().ok_or("the example has no [[port]]")?.1;
    let DisciplineSpec::Hwfq(tree) = &plan.discipline else {
        return Err("the example's port is not hwfq".into());
    };
    let leaves = plan.queues.clone();

    let mut variants = vec![("HWFQ".to_string(), None, base.clone())];
    let flat = with_field(&base, "port", "discipline", Some("flat".into()))?;
    for (label, us) in [
        ("0", 0.0),
        ("1 cell", CELL_US),
        ("10us", 10.0),
        ("100us", 100.0),
        ("1ms", 1000.0),
        ("10ms", 10_000.0),
    ] {
        let text = with_field(
            &flat,
            "port",
            "update_period",
            Some(format!("{}ns", (us * 1e3).round() as i64).into()),
        )?;
        variants.push((format!("flat every {label}"), Some(us), text));
    }
    let mut runs = Vec::new();
    let mut bin_ms = 10.0;
    for (name, period_us, text) in variants {
        let r = run(&text, secs)?;
        let p = r.ports.first().ok_or("the run reported no port")?;
        bin_ms = p.queues.first().map_or(10.0, |q| q.bin_us / 1e3);
        let bins = p.queues.iter().map(|q| q.series.len()).max().unwrap_or(0);
        let bins = bins.min(((secs * 1e3) / bin_ms) as usize);
        let slices = (0..bins)
            .map(|b| {
                let cells: Vec<f64> = p
                    .queues
                    .iter()
                    .map(|q| q.series.get(b).copied().unwrap_or(0) as f64)
                    .collect();
                let total: f64 = cells.iter().sum::<f64>().max(1.0);
                cells.iter().map(|c| c / total).collect()
            })
            .collect();
        let ideal = (0..bins)
            .map(|b| {
                let busy = |q: u32| {
                    p.queues
                        .get(q as usize)
                        .and_then(|x| x.busy_us.get(b))
                        .is_some_and(|&us| us >= 500.0 * bin_ms)
                };
                let mut v = vec![0.0; leaves.len()];
                for (q, r) in tree.hgps_rates(busy, 1.0) {
                    if let Some(x) = v.get_mut(q as usize) {
                        *x = r;
                    }
                }
                v
            })
            .collect();
        runs.push(Shares {
            name,
            period_us,
            slices,
            ideal,
        });
    }
    let error = |a: &[Vec<f64>], b: &[Vec<f64>]| {
        let each: Vec<f64> = a
            .iter()
            .zip(b)
            .map(|(x, y)| x.iter().zip(y).map(|(p, q)| (p - q).abs()).sum::<f64>() / 2.0)
            .collect();
        each.iter().sum::<f64>() / each.len().max(1) as f64
    };
    std::fs::create_dir_all(out).map_err(|e| format!("cannot make {}: {e}", out.display()))?;
    println!(
        "aurora experiment linkshare: 4 leaves in 2 agencies at one OC-3c port, {secs} s each; \
         error = share of the link given to the wrong leaves, mean over {bin_ms} ms slices\n"
    );
    println!("{:<26} {:>14} {:>14}", "discipline", "vs H-GPS", "vs HWFQ");
    let mut csv = vec![vec![
        "discipline".to_string(),
        "update_period_us".into(),
        "error_vs_hgps".into(),
        "error_vs_hwfq".into(),
    ]];
    let mut points = (Vec::new(), Vec::new());
    for r in &runs {
        let (vs_ideal, vs_hwfq) = (
            error(&r.slices, &r.ideal),
            error(&r.slices, &runs[0].slices),
        );
        println!("{:<26} {:>14.4} {:>14.4}", r.name, vs_ideal, vs_hwfq);
        csv.push(vec![
            r.name.clone(),
            r.period_us.map_or(String::new(), |p| format!("{p:.3}")),
            format!("{vs_ideal:.5}"),
            format!("{vs_hwfq:.5}"),
        ]);
        if let Some(p) = r.period_us.filter(|&p| p > 0.0) {
            points.0.push((p.log10(), vs_ideal));
            points.1.push((p.log10(), vs_hwfq));
        }
    }
    let mut files = vec![write_csv(out, "linkshare", &csv)?];
    files.extend(plot(
        out,
        "linkshare-error",
        "Flat approximation: share of the link misallocated against update period",
        (
            "log10 of the update period, us",
            "share of the link to the wrong leaves",
        ),
        &[
            Series {
                name: "against ideal H-GPS".into(),
                points: points.0,
                line: true,
                color: 0,
            },
            Series {
                name: "against HWFQ".into(),
                points: points.1,
                line: true,
                color: 1,
            },
        ],
    )?);
    // Service over time of HWFQ and the slowest walk, with the ideal.
    for (i, r) in runs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i == 0 || *i == runs.len() - 1)
    {
        let mut series = Vec::new();
        for (q, leaf) in leaves.iter().enumerate() {
            let at = |v: &[Vec<f64>]| -> Vec<(f64, f64)> {
                v.iter()
                    .enumerate()
                    .filter_map(|(b, s)| Some(((b as f64 + 0.5) * bin_ms, *s.get(q)?)))
                    .collect()
            };
            series.push(Series {
                name: leaf.clone(),
                points: at(&r.slices),
                line: true,
                color: q,
            });
            series.push(Series {
                name: format!("{leaf}, ideal"),
                points: at(&r.ideal),
                line: false,
                color: q,
            });
        }
        let stem = if i == 0 {
            "linkshare-hwfq"
        } else {
            "linkshare-flat-10ms"
        };
        files.extend(plot(
            out,
            stem,
            &format!("{}: each leaf's share of the link per {bin_ms} ms", r.name),
            ("time, ms", "share of the cells sent"),
            &series,
        )?);
    }
    say_written(&files);
    Ok(())
}
