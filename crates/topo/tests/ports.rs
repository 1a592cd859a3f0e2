//! `[[port]]`: output ports under a discipline. Bad entries are refused at
//! load time with their place; good ones run: weights share a congested
//! port, priority levels are served in order, early packet discard
//! delivers more whole PDUs than tail drop, and every cell offered to a
//! port is served or dropped by a named reason.

use aurora_engine::cell_port::CellPort;
use aurora_time::Instant;

/// Hosts a and b into switch port s:2, which leads to host c over a line
/// a quarter as fast as theirs; a flow of 9180-byte PDUs from each, each
/// 90 % of the slow line.
const NET: &str = r#"
[[switch]]
name = "s"
ports = 3

[[host]]
name = "a"

[[host]]
name = "b"

[[host]]
name = "c"

[[link]]
a = "a"
b = "s:0"
rate = "oc12"
delay = "2us"

[[link]]
a = "b"
b = "s:1"
rate = "oc12"
delay = "2us"

[[link]]
a = "s:2"
b = "c"
rate = "oc3"
delay = "2us"

[[flow]]
pvc = "a-c"
sdu = 9180
count = 1000000
interval = "600us"

[[flow]]
pvc = "b-c"
sdu = 9180
count = 1000000
interval = "600us"
"#;

fn pvcs(a: &str, b: &str) -> String {
    format!(
        "\n[[pvc]]\nname = \"a-c\"\npath = [\"a\", \"s\", \"c\"]\n{a}\n\
         \n[[pvc]]\nname = \"b-c\"\npath = [\"b\", \"s\", \"c\"]\n{b}\n"
    )
}

fn problems(more: &str) -> String {
    match aurora_topo::load(&format!("{NET}{}{more}", pvcs("", "")), 1) {
        Ok(_) => String::new(),
        Err(p) => p.to_string(),
    }
}

#[test]
fn bad_ports_are_refused_with_their_place() {
    let cases = [
        ("at = \"s:9\"", "switch \"s\" has ports 0 to 2, not 9"),
        (
            "at = \"s:2\"\ndiscipline = \"lottery\"",
            "discipline \"lottery\" is not",
        ),
        (
            "at = \"s:2\"\nepd = 10",
            "need discard = \"ppd\" or \"epd\"",
        ),
        ("at = \"s:2\"\ndiscard = \"epd\"", "needs an epd threshold"),
        (
            "at = \"s:2\"\ndiscard = \"epd\"\nepd = 9000",
            "outside 1 to the buffer",
        ),
        (
            "at = \"s:2\"\ndiscard = \"early\"",
            "is not tail, ppd or epd",
        ),
        ("at = \"s:2\"\nbuffer = 0", "buffer 0 is outside"),
        ("at = \"s:2\"\nbin = \"2s\"", "outside 1us to 1s"),
        ("at = \"nobody:1\"", "names no host, switch"),
    ];
    for (port, want) in cases {
        let more = format!("\n[[port]]\n{port}\n");
        let t = problems(&more);
        let line = format!("{NET}{}", pvcs("", "")).lines().count() + 2;
        assert!(t.contains(want), "{port}: {t}");
        assert!(t.starts_with(&format!("{line}:1: ")), "{port}: {t}");
    }
    let twice = "\n[[port]]\nat = \"s:2\"\n\n[[port]]\nat = \"s:2\"\n";
    assert!(problems(twice).contains("two [[port]] entries"));
    let weight = format!(
        "{NET}{}\n[[port]]\nat = \"s:2\"\ndiscipline = \"drr\"\n",
        pvcs("weight = 0", "")
    );
    let t = aurora_topo::load(&weight, 1).err().unwrap().to_string();
    assert!(t.contains("weight 0 is outside 1 to 1000000"), "{t}");
}

/// Runs `port` (a `[[port]]` body) with PVC settings `a` and `b` for
/// `ms` of virtual time; per queue (a-c, b-c) the cells served, and per
/// PVC the PDUs delivered whole.
fn run(port: &str, a: &str, b: &str, ms: i64) -> ([u64; 2], [u64; 2]) {
    let text = format!("{NET}{}\n[[port]]\nat = \"s:2\"\n{port}\n", pvcs(a, b));
    measure(&mut aurora_topo::load(&text, 1).unwrap(), ms)
}

/// [`run`]'s figures from a network built, run for `ms` of virtual time.
fn measure<F: aurora_engine::carry::Carries<aurora_wire::CellBytes>>(
    net: &mut aurora_topo::Network<F>,
    ms: i64,
) -> ([u64; 2], [u64; 2]) {
    let (s, c) = (net.switches[0].1, net.hosts[2].1);
    net.sim.run_until(Instant::from_millis(ms));
    let p = net
        .sim
        .port::<CellPort>(s, 2)
        .expect("the port has its discipline");
    let st = p.stats();
    // Every cell offered to the port was served, is waiting or on the
    // line, or was dropped by a named reason.
    let link = net.sim.link(s, 2).unwrap();
    let dropped: u64 = st.iter().map(|q| q.dropped_total()).sum();
    let served: u64 = st.iter().map(|q| q.served).sum();
    assert_eq!(link.overflow, dropped);
    let waiting = net.sim.queued(s, 2).unwrap() as u64;
    assert_eq!(link.offered, served + waiting + dropped);
    let host = net.sim.node::<aurora_net::traffic::TrafficHost>(c).unwrap();
    let whole = net.pvcs.iter().map(|p| host.received(p.to_vc).delivered);
    let whole: Vec<u64> = whole.collect();
    ([st[0].served, st[1].served], [whole[0], whole[1]])
}

#[test]
fn weights_share_a_congested_port() {
    for d in ["drr", "wfq", "wf2q+"] {
        let port = format!("discipline = \"{d}\"\nbuffer = 2000\nqueue_buffer = 1000");
        let (served, _) = run(&port, "weight = 3", "weight = 1", 100);
        let share = served[0] as f64 / (served[0] + served[1]) as f64;
        assert!((share - 0.75).abs() < 0.01, "{d}: {served:?}");
    }
    // FIFO shares by arrival, whatever the weights: the two equal flows
    // get about half each.
    let (served, _) = run("buffer = 2000", "weight = 3", "weight = 1", 100);
    let share = served[0] as f64 / (served[0] + served[1]) as f64;
    assert!((share - 0.5).abs() < 0.1, "fifo: {served:?}");
}

/// Beside an ATOMIC LAN (so on an engine that carries cells and frames
/// alike) a port's discipline runs as it does in a network of cells: the
/// same cells served and delivered, in the same shares, and the same books.
#[test]
fn a_port_discipline_runs_beside_an_atomic_lan() {
    // The example LAN, its hosts renamed apart from the cell hosts.
    let mut lan = include_str!("../../../examples/atomic.toml").to_string();
    for h in ["a", "b", "c", "d"] {
        for (from, to) in [("\"{h}\"", "\"lan-{h}\""), ("\"{h}:", "\"lan-{h}:")] {
            lan = lan.replace(&from.replace("{h}", h), &to.replace("{h}", h));
        }
    }
    let port = "discipline = \"wf2q+\"\nbuffer = 2000\nqueue_buffer = 1000";
    let cells = format!(
        "{NET}{}\n[[port]]\nat = \"s:2\"\n{port}\n",
        pvcs("weight = 3", "weight = 1")
    );
    let alone = measure(&mut aurora_topo::load(&cells, 1).unwrap(), 100);
    let bp = aurora_topo::compile(&format!("{cells}\n{lan}")).unwrap();
    let mut net = bp.into_mixed(1).unwrap();
    assert_eq!(net.ports.len(), 1);
    let mixed = measure(&mut net, 100);
    assert_eq!(mixed, alone);
    let share = mixed.0[0] as f64 / (mixed.0[0] + mixed.0[1]) as f64;
    assert!((share - 0.75).abs() < 0.01, "{mixed:?}");
}

#[test]
fn a_higher_priority_level_is_served_first() {
    // Each level has room of its own, so the low level cannot fill the
    // buffer the high one needs.
    let port = "discipline = \"priority\"\nbuffer = 2000\nqueue_buffer = 500";
    let (served, whole) = run(port, "priority = 0", "priority = 1", 100);
    // a alone fits the line (90 %); b gets what a leaves.
    assert!(whole[0] > 0 && served[1] > 0, "{served:?} {whole:?}");
    let line = 353_207.0 * 0.1; // cells per 100 ms at OC-3
    assert!(served[0] as f64 > 0.85 * line, "{served:?}");
    assert!((served[0] + served[1]) as f64 > 0.97 * line, "{served:?}");
}

#[test]
fn early_packet_discard_delivers_more_whole_pdus_than_tail_drop() {
    let (_, tail) = run("buffer = 1000", "", "", 200);
    let (_, ppd) = run("buffer = 1000\ndiscard = \"ppd\"", "", "", 200);
    let (_, epd) = run("buffer = 1000\ndiscard = \"epd\"\nepd = 600", "", "", 200);
    let sum = |v: [u64; 2]| v[0] + v[1];
    // The line carries about 38 PDUs in 200 ms.
    assert!(sum(epd) >= 30, "epd {epd:?}");
    assert!(sum(epd) > 2 * sum(tail), "epd {epd:?}, tail {tail:?}");
    assert!(sum(ppd) >= sum(tail), "ppd {ppd:?}, tail {tail:?}");
}

#[test]
fn a_source_ten_per_cent_over_its_contract_gets_its_excess_tagged_unless_it_shapes() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/contract.toml"
    ))
    .unwrap();
    let mut net = aurora_topo::load(&text, 1).unwrap();
    net.sim.run_until(Instant::from_millis(1000));
    let sw = net.switches[0].1;
    let s = net.sim.node::<aurora_net::switch::AtmSwitch>(sw).unwrap();
    let counts: Vec<_> = net
        .pvcs
        .iter()
        .map(|p| {
            let (_, port, vc) = p.policed_at.unwrap();
            s.police_counters(port, vc).unwrap()
        })
        .collect();
    // Unshaped: 110,000 cells a second against 100,000 conforming.
    let all = counts[0].conforming + counts[0].tagged;
    let tagged = counts[0].tagged as f64 / all as f64;
    assert!((tagged - 1.0 / 11.0).abs() < 0.001, "{counts:?}");
    assert_eq!(counts[0].dropped_nonconforming, 0);
    // Shaped: every cell conforms.
    assert_eq!((counts[1].tagged, counts[1].dropped_nonconforming), (0, 0));
    assert!(counts[1].conforming >= 99_000, "{counts:?}");
}

#[test]
fn bad_contracts_are_refused_with_their_place() {
    for (pvc, want) in [
        ("contract = \"cbr:pcr=fast\"", "QoS"),
        ("police = \"tag\"", "shape and police need a contract"),
        (
            "contract = \"ubr\"\npolice = \"fine\"",
            "police \"fine\" is not tag, drop or none",
        ),
    ] {
        let text = format!("{NET}{}", pvcs(pvc, ""));
        let t = aurora_topo::load(&text, 1)
            .err()
            .map(|p| p.to_string())
            .unwrap_or_default();
        assert!(t.contains(want), "{pvc}: {t}");
        assert!(t.contains("PVC \"a-c\""), "{pvc}: {t}");
    }
}

#[test]
fn bad_class_trees_are_refused_with_their_place() {
    let tree = |classes: &str, a: &str| {
        let text = format!(
            "{NET}{}\n[[port]]\nat = \"s:2\"\ndiscipline = \"hwfq\"\n{classes}",
            pvcs(a, "class = \"y\"")
        );
        aurora_topo::load(&text, 1)
            .err()
            .map(|p| p.to_string())
            .unwrap_or_default()
    };
    let class = |name: &str, parent: &str, share: f64| {
        let parent = if parent.is_empty() {
            String::new()
        } else {
            format!("parent = \"{parent}\"\n")
        };
        format!("\n[[port.class]]\nname = \"{name}\"\n{parent}share = {share}\n")
    };
    let good = format!("{}{}", class("x", "", 0.5), class("y", "", 0.5));
    assert_eq!(tree(&good, "class = \"x\""), "");
    // Shares above the whole.
    let over = format!("{}{}", class("x", "", 0.7), class("y", "", 0.5));
    let t = tree(&over, "class = \"x\"");
    assert!(t.contains("port \"s:2\"") && t.contains("link"), "{t}");
    // A PVC in no class, or in a class that is not a leaf.
    let t = tree(&good, "");
    assert!(
        t.contains("PVC \"a-c\" leaves by port \"s:2\" but names no leaf class"),
        "{t}"
    );
    let nested = format!(
        "{}{}{}",
        class("x", "", 0.5),
        class("y", "", 0.5),
        class("z", "x", 1.0)
    );
    let t = tree(&nested, "class = \"x\"");
    assert!(t.contains("(\"x\" is not one)"), "{t}");
    // Shares are fractions; flat ports take an update period, hwfq ports
    // do not; a tree needs classes.
    assert!(tree(
        &format!("{}{}", class("x", "", 1.5), class("y", "", 0.5)),
        "class = \"x\""
    )
    .contains("at most 1"));
    assert!(
        tree(&format!("update_period = \"1ms\"\n{good}"), "class = \"x\"")
            .contains("for flat ports")
    );
    assert!(tree("", "class = \"x\"").contains("needs [[port.class]] entries"));
    let line = format!("{NET}{}", pvcs("", "")).lines().count() + 2;
    assert!(tree(&over, "class = \"x\"").starts_with(&format!("{line}:1: ")));
}
