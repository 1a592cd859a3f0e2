//! Striped VCs through topology files, in virtual time: the ends built as
//! striping hosts, member PVCs over parallel links with skew and loss, and
//! what the receiver delivers; and every mistake in a `[[stripe]]` entry
//! reported with its line.

use aurora_stripe::node::RecvStats;
use aurora_stripe::tx::TxStats;
use aurora_stripe::{RxStats, StripeHost};
use aurora_time::{Duration, Instant};

/// A network where host `a` stripes to host `b` over `delays_us.len()`
/// channels of the given delays, each losing cells with probability
/// `loss[i]`. `direct`: the hosts have one port per channel, linked
/// directly; else one OC-12c port each, into multiplexors joined by the
/// channels. `stripe` is the rest of the `[[stripe]]` entry.
fn network(delays_us: &[u32], loss: &[f64], direct: bool, stripe: &str) -> String {
    let n = delays_us.len();
    let mut t = String::new();
    if direct {
        t += &format!("[[host]]\nname = \"a\"\nports = {n}\n[[host]]\nname = \"b\"\nports = {n}\n");
    } else {
        t += &format!(
            "[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n\
             [[switch]]\nname = \"ma\"\nports = {p}\n[[switch]]\nname = \"mb\"\nports = {p}\n\
             [[link]]\na = \"a\"\nb = \"ma:0\"\nrate = \"oc12\"\n\
             [[link]]\na = \"mb:0\"\nb = \"b\"\nrate = \"oc12\"\n",
            p = n + 1
        );
    }
    for (i, d) in delays_us.iter().enumerate() {
        let (x, y) = if direct {
            (format!("a:{i}"), format!("b:{i}"))
        } else {
            (format!("ma:{}", i + 1), format!("mb:{}", i + 1))
        };
        t += &format!(
            "[[link]]\na = \"{x}\"\nb = \"{y}\"\nrate = \"oc3\"\ndelay = \"{d}us\"\nloss = {}\n",
            loss.get(i).copied().unwrap_or(0.0)
        );
    }
    let path = if direct {
        "[\"a\", \"b\"]"
    } else {
        "[\"a\", \"ma\", \"mb\", \"b\"]"
    };
    let mut names = Vec::new();
    for i in 0..n {
        t += &format!("[[pvc]]\nname = \"m{i}\"\npath = {path}\n");
        names.push(format!("\"m{i}\""));
    }
    t += &format!(
        "[[stripe]]\nname = \"s\"\nfrom = \"a\"\nto = \"b\"\npvcs = [{}]\n{stripe}\n",
        names.join(", ")
    );
    t
}

/// What the two ends did.
struct Outcome {
    /// PDUs the sender made.
    sent_pdus: u64,
    tx: TxStats,
    rx: RxStats,
    held: usize,
    recv: RecvStats,
    /// Cells lost on each channel (data and markers).
    lost: Vec<u64>,
}

/// Runs `text` in virtual time until `until` and reads the ends.
fn run(text: &str, seed: u64, until: Duration) -> Outcome {
    let mut net = aurora_topo::load(text, seed).unwrap_or_else(|p| panic!("{p}\n{text}"));
    net.sim.run_until(Instant::ZERO + until);
    let id = |n: &str| net.hosts.iter().find(|h| h.0 == n).unwrap().1;
    let src = net
        .sim
        .node::<StripeHost>(id("a"))
        .expect("a striping host");
    let dst = net
        .sim
        .node::<StripeHost>(id("b"))
        .expect("a striping host");
    let (_, tx, sent) = src.senders().next().unwrap();
    let (_, rx, recv) = dst.receivers().next().unwrap();
    // The channels: the links from a to b (direct) or from ma to mb.
    let lost = net
        .links
        .iter()
        .filter(|(x, y)| (x.0 == "a" && y.0 == "b") || (x.0 == "ma" && y.0 == "mb"))
        .map(|(x, _)| net.sim.link(x.1, x.2).unwrap().lost)
        .collect();
    Outcome {
        sent_pdus: sent.pdus,
        tx: tx.stats().clone(),
        rx: rx.stats().clone(),
        held: rx.held(),
        recv: recv.clone(),
        lost,
    }
}

impl Outcome {
    /// Units given up by the receiver.
    fn lost_units(&self) -> u64 {
        self.rx.discarded.total() + self.rx.gaps.total()
    }

    /// Units sent that the receiver has not seen (nor given up on).
    fn unseen(&self) -> u64 {
        self.tx.units - self.rx.delivered - self.lost_units() - self.held as u64
    }

    /// Every unit sent is delivered, given up or held, but for `unseen`
    /// at most; nothing is left held.
    fn assert_settled(&self, what: &str, unseen: u64) {
        assert!(
            self.unseen() <= unseen,
            "{what}: sent {} = delivered {} + lost {} + held {} + {} unseen",
            self.tx.units,
            self.rx.delivered,
            self.lost_units(),
            self.held,
            self.unseen()
        );
        assert_eq!(self.held, 0, "{what}: nothing left held");
        assert_eq!(self.rx.arrival_balance(), 0, "{what}: arrivals balance");
    }

    /// Delivered in order, nothing damaged, no PDU out of order.
    fn assert_in_order(&self, what: &str) {
        assert_eq!(self.recv.order.reordered(), 0, "{what}: units misordered");
        assert_eq!(self.recv.pdus_misordered, 0, "{what}: PDUs misordered");
        assert_eq!(self.recv.units_corrupted, 0, "{what}: units corrupted");
    }
}

/// Skews (µs) from 0 to `bound`, from a seed: the channels' delays, the
/// first 0 and one at the bound.
fn delays(n: usize, bound: u32, seed: u64) -> Vec<u32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut d: Vec<u32> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % u64::from(bound + 1)) as u32
        })
        .collect();
    d[0] = 0;
    d[n - 1] = bound;
    d
}

#[test]
fn with_sync_every_pdu_arrives_intact_and_in_order_at_any_skew_up_to_the_bound() {
    // The bound: 3 ms of skew, which the 10 ms timeout and the buffer of
    // 8,192 units (sequence numbers ahead: 3 ms of OC-12c is 4,240 cells)
    // hold.
    let bound = 3000;
    for (k, (unit, sdu)) in [
        ("cell", "sdu = 2000"),
        ("pdu", "sdu = 1500\nsdu_min = 40"),
        ("ip", "sdu = 1500\nsdu_min = 28"),
    ]
    .into_iter()
    .enumerate()
    {
        for sync in ["sequence", "marker"] {
            for (j, direct) in [false, true].into_iter().enumerate() {
                let d = delays(4, bound, (k * 4 + j) as u64 + 7);
                let stripe = format!(
                    "unit = \"{unit}\"\nsync = \"{sync}\"\n{sdu}\ncount = 400\nbuffer = 8192"
                );
                let o = run(
                    &network(&d, &[], direct, &stripe),
                    1,
                    Duration::from_millis(60),
                );
                let what = format!("{unit} {sync} direct={direct} delays {d:?}");
                assert_eq!(o.sent_pdus, 400, "{what}");
                assert_eq!(
                    (o.recv.pdus, o.recv.failed(), o.recv.pdus_missing),
                    (400, 0, 0),
                    "{what}"
                );
                assert_eq!(o.lost_units(), 0, "{what}");
                o.assert_in_order(&what);
                o.assert_settled(&what, 0);
                // The skew was felt: some unit waited most of it.
                assert!(
                    o.rx.delay.max() >= u64::from(bound) * 900,
                    "{what}: {:?}",
                    o.rx.delay
                );
            }
        }
    }
}

#[test]
fn with_loss_the_loss_is_counted_and_the_receiver_is_back_in_step_within_the_bound() {
    for (unit, sdu) in [("cell", "sdu = 2000"), ("pdu", "sdu = 1500\nsdu_min = 40")] {
        for sync in ["sequence", "marker"] {
            for seed in [1, 2, 3] {
                let d = [0, 400, 900, 1500];
                let loss = [0.0, 1e-3, 0.0, 4e-4];
                let k = if unit == "cell" { 16 } else { 4 };
                let stripe = format!(
                    "unit = \"{unit}\"\nsync = \"{sync}\"\n{sdu}\ncount = 600\nmarker_interval = {k}\nbuffer = 8192"
                );
                let o = run(
                    &network(&d, &loss, true, &stripe),
                    seed,
                    Duration::from_millis(80),
                );
                let what = format!("{unit} {sync} seed {seed}");
                let lost_cells: u64 = o.lost.iter().sum();
                assert!(lost_cells > 0, "{what}: the channels lost nothing");
                o.assert_in_order(&what);
                // Markers (idle ones at the end) reveal every lost unit;
                // sequence numbers only those with a later unit behind
                // them, so units lost at the very end stay unseen.
                o.assert_settled(&what, if sync == "marker" { 0 } else { lost_cells });
                let lost = o.lost_units();
                assert!(lost > 0, "{what}: the loss went uncounted");
                // The bound: with sequence numbers a lost cell costs its own
                // unit (a PDU unit: its PDU, and the next on its stripe if it
                // was the last cell); with markers at most K units per cell
                // lost (data or marker).
                let bound = match (unit, sync) {
                    ("cell", "sequence") => lost_cells,
                    (_, "sequence") => 2 * lost_cells,
                    _ => k * lost_cells,
                };
                assert!(
                    lost <= bound,
                    "{what}: {lost} units lost for {lost_cells} cells"
                );
                // Back in step: delivery went on to the end, and each unit
                // given up or unseen cost at most its PDU (a cell unit that
                // ended one PDU: the next one too, run together with it).
                let per = if unit == "cell" { 2 } else { 1 };
                let gone = per * (lost + o.unseen());
                assert!(
                    o.recv.next_pdu + gone >= 600,
                    "{what}: delivery stopped at PDU {}",
                    o.recv.next_pdu
                );
                assert!(o.recv.pdus + gone >= 600, "{what}: {} PDUs", o.recv.pdus);
            }
        }
    }
}

#[test]
fn without_sync_misordering_after_a_loss_is_measured_not_hidden() {
    let stripe = "unit = \"cell\"\nsync = \"none\"\nsdu = 2000\ncount = 400";
    // Without loss, the replayed round robin restores the order.
    let o = run(
        &network(&[0, 300, 700, 1200], &[], false, stripe),
        1,
        Duration::from_millis(50),
    );
    assert_eq!((o.recv.pdus, o.recv.order.reordered()), (400, 0));
    // A lost cell shifts its stripe by a round from then on.
    let o = run(
        &network(&[0, 300, 700, 1200], &[0.0, 0.0, 2e-4, 0.0], false, stripe),
        1,
        Duration::from_millis(50),
    );
    let lost_cells: u64 = o.lost.iter().sum();
    assert!(lost_cells > 0);
    assert!(
        o.recv.order.reordered() > 100,
        "{}",
        o.recv.order.reordered()
    );
    assert!(
        o.recv.failed() > 0,
        "PDUs built from misordered cells fail their CRC"
    );
    // Nothing that arrived was given up: what never arrived is what the
    // channel lost.
    assert_eq!(o.lost_units(), 0);
    assert_eq!(o.tx.units - o.rx.delivered, lost_cells);
}

#[test]
fn every_mistake_in_a_stripe_entry_is_reported_with_its_line() {
    let good = network(&[0, 100], &[], true, "sdu = 100\ncount = 1");
    aurora_topo::compile(&good).unwrap_or_else(|p| panic!("{p}"));
    let paced = network(
        &[0, 100],
        &[],
        true,
        "sdu = 1000\nrate = \"8Mbps\"\ncount = 5",
    );
    aurora_topo::compile(&paced).unwrap_or_else(|p| panic!("{p}"));
    let cases: &[(&str, &str)] = &[
        (
            "unit = \"atm\"\nsdu = 100",
            "stripe \"s\": unit \"atm\" is not cell, pdu or ip",
        ),
        (
            "sync = \"magic\"\nsdu = 100",
            "stripe \"s\": sync \"magic\" is not none, sequence or marker",
        ),
        ("sdu = 8", "stripe \"s\": sdu 8 is outside 16 to 65535"),
        (
            "unit = \"ip\"\nsdu = 100\nsdu_min = 20",
            "stripe \"s\": sdu_min 20 is outside 28 to 65535",
        ),
        (
            "sdu = 100\ncount = 3\nduration = \"1s\"",
            "stripe \"s\": give count or duration, not both",
        ),
        (
            "sdu = 100\ntimeout = \"50us\"",
            "stripe \"s\": with marker sync the timeout must be longer than the idle-marker delay",
        ),
        (
            "sdu = 100\nsync = \"sequence\"\nbuffer = 40000",
            "stripe \"s\": a buffer of 40000 units is more than half the sequence space (32768)",
        ),
        (
            "sdu = 100\nquantum = 0",
            "stripe \"s\": quantum 0 is outside 1 to 16777216",
        ),
        (
            "sdu = 100\ninterval = \"fast\"",
            "stripe \"s\": interval: \"fast\" is not a duration",
        ),
        (
            "sdu = 100\ninterval = \"1ms\"\nrate = \"1Mbps\"",
            "stripe \"s\": give interval or rate, not both",
        ),
        (
            "sdu = 100\nrate = \"fast\"",
            "stripe \"s\": rate: \"fast\" is not a bit rate",
        ),
    ];
    for (fields, want) in cases {
        let text = network(&[0, 100], &[], true, fields);
        let line = text.lines().position(|l| l == "[[stripe]]").unwrap() + 1;
        let p = aurora_topo::compile(&text)
            .err()
            .unwrap_or_else(|| panic!("accepted: {fields}"));
        assert!(
            p.0.iter()
                .any(|x| x.line == line && x.msg.starts_with(want)),
            "{fields}: wanted \"{want}\" at line {line}, got:\n{p}"
        );
    }
    // The ends and members.
    let text = format!(
        "{good}[[host]]\nname = \"c\"\nports = 2\n[[host]]\nname = \"d\"\n\
         [[host]]\nname = \"e\"\nports = 2\n\
         [[link]]\na = \"c:0\"\nb = \"d\"\n\
         [[pvc]]\nname = \"cd\"\npath = [\"c\", \"d\"]\n\
         [[flow]]\npvc = \"m0\"\nsdu = 100\ncount = 1\ninterval = \"1ms\"\n\
         [[stripe]]\nname = \"s\"\nfrom = \"c\"\nto = \"c\"\npvcs = [\"m1\", \"cd\", \"zz\"]\nsdu = 100\n"
    );
    let p = aurora_topo::compile(&text).err().expect("refused");
    let msgs: Vec<&str> = p.0.iter().map(|x| x.msg.as_str()).collect();
    for want in [
        "host \"e\" has 2 ports; only the ends of striped VCs",
        "flow on PVC \"m0\", a member of stripe \"s\"",
        "stripe \"s\" is defined twice",
        "stripe \"s\": from and to are both \"c\"",
        "stripe \"s\" lists PVC \"m1\" twice",
        "stripe \"s\": PVC \"cd\" goes from \"c\" to \"d\", not from \"c\" to \"c\"",
        "stripe \"s\" names PVC \"zz\", which is not defined",
    ] {
        assert!(
            msgs.iter().any(|m| m.starts_with(want)),
            "wanted {want}, got:\n{p}"
        );
    }
}
