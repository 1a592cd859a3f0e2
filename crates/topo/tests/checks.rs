//! Nothing lost silently: topology files that would lose or mislabel
//! traffic are refused at load time, each problem with its place; numbers
//! have ranges; names are printable; files have a size limit.

use aurora_net::traffic::TrafficHost;
use aurora_time::Instant;

/// Two hosts on two switches joined by one trunk.
const BASE: &str = r#"
[[switch]]
name = "s1"
ports = 4

[[switch]]
name = "s2"
ports = 4

[[host]]
name = "h1"

[[host]]
name = "h2"

[[link]]
a = "h1"
b = "s1:0"

[[link]]
a = "h2"
b = "s2:0"

[[link]]
a = "s1:1"
b = "s2:1"
"#;

/// `BASE` and `more`; the problems, as text, or "" if it loads.
fn problems(more: &str) -> String {
    match aurora_topo::load(&format!("{BASE}{more}"), 1) {
        Ok(_) => String::new(),
        Err(p) => p.to_string(),
    }
}

/// The line of `needle` in `BASE` followed by `more` (1-based).
fn line_of(more: &str, needle: &str) -> usize {
    let text = format!("{BASE}{more}");
    let at = text.find(needle).expect("needle in text");
    text[..at].matches('\n').count() + 1
}

const PVC: &str = "\n[[pvc]]\nname = \"p\"\npath = [\"h1\", \"s1\", \"s2\", \"h2\"]\n";

#[test]
fn reserved_vcis_are_refused_at_their_line() {
    for vc in ["0.3", "0.4", "0.0", "0.5", "0.16", "0.31", "7.3", "7.4"] {
        for which in ["from_vc", "to_vc"] {
            let more = format!("{PVC}{which} = \"{vc}\"\n");
            let t = problems(&more);
            let line = line_of(&more, "[[pvc]]");
            assert!(
                t.starts_with(&format!("{line}:1: PVC \"p\": {which} {vc} is reserved")),
                "{which} {vc}: {t}"
            );
        }
    }
    // The first user VCI is fine.
    assert_eq!(problems(&format!("{PVC}from_vc = \"0.32\"\n")), "");
}

#[test]
fn vcs_aurora_chooses_are_never_reserved() {
    let mut more = String::new();
    for i in 0..40 {
        more += &format!("\n[[pvc]]\nname = \"p{i}\"\npath = [\"h1\", \"s1\", \"s2\", \"h2\"]\n");
    }
    let net = aurora_topo::load(&format!("{BASE}{more}"), 1).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for p in &net.pvcs {
        assert!(!aurora_topo::is_reserved_vc(p.from_vc), "{}", p.from_vc);
        assert!(!aurora_topo::is_reserved_vc(p.to_vc), "{}", p.to_vc);
        assert!(seen.insert(p.to_vc), "{} twice", p.to_vc);
    }
}

#[test]
fn two_flows_on_one_pvc_are_refused_naming_both() {
    let flow = "\n[[flow]]\npvc = \"p\"\nsdu = 100\ncount = 10\ninterval = \"1ms\"\n";
    let more = format!("{PVC}{flow}{flow}");
    let first = line_of(&more, "[[flow]]");
    let second = first + flow.matches('\n').count();
    let t = problems(&more);
    assert!(
        t.starts_with(&format!(
            "{second}:1: the flows at lines {first} and {second} are both on PVC \"p\""
        )),
        "{t}"
    );
    assert!(t.contains("sequence numbers"), "{t}");
    // One flow and a ping on the same PVC are fine.
    let ping = "\n[[ping]]\npvc = \"p\"\ncount = 3\ninterval = \"1ms\"\n";
    assert_eq!(problems(&format!("{PVC}{flow}{ping}")), "");
}

#[test]
fn duplicate_ip_addresses_are_refused() {
    let ip = |a: &str, b: &str| {
        format!(
            "[[switch]]\nname = \"s\"\nports = 3\n\n\
             [[host]]\nname = \"a\"\nip = \"{a}\"\n\n\
             [[host]]\nname = \"b\"\nip = \"{b}\"\n\n\
             [[router]]\nname = \"r\"\nports = 2\nip = [\"10.2.0.1/24\", \"10.3.0.1/24\"]\n\n\
             [[link]]\na = \"a\"\nb = \"s:0\"\n\n[[link]]\na = \"b\"\nb = \"s:1\"\n\n\
             [[switch]]\nname = \"t\"\nports = 1\n\n\
             [[link]]\na = \"r:0\"\nb = \"s:2\"\n\n[[link]]\na = \"r:1\"\nb = \"t:0\"\n"
        )
    };
    assert!(aurora_topo::compile(&ip("10.1.0.1/24", "10.1.0.2/24")).is_ok());
    let t = aurora_topo::compile(&ip("10.1.0.1/24", "10.1.0.1/24"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        t.starts_with("9:1: \"b\" has address 10.1.0.1, which \"a\" (line 5) has too"),
        "{t}"
    );
    // A host with a router port's address, and a router with one address
    // on two ports.
    let t = aurora_topo::compile(&ip("10.2.0.1/24", "10.1.0.2/24"))
        .err()
        .unwrap()
        .to_string();
    assert!(t.contains("\"r\" has address 10.2.0.1, which \"a\""), "{t}");
    let same = ip("10.1.0.1/24", "10.1.0.2/24").replace("10.3.0.1/24", "10.2.0.1/24");
    let t = aurora_topo::compile(&same).err().unwrap().to_string();
    assert!(
        t.contains("\"r\" has address 10.2.0.1, which another port of \"r\" has too"),
        "{t}"
    );
}

#[test]
fn a_pvc_crossing_a_link_twice_is_refused() {
    let more = "\n[[pvc]]\nname = \"loop\"\npath = [\"h1\", \"s1\", \"s2\", \"s1\", \"h2\"]\n";
    let t = problems(more);
    assert!(
        t.contains("PVC \"loop\" crosses the link between \"s2\" and \"s1\" twice"),
        "{t}"
    );
    // A host's only link, out and back.
    let t = problems("\n[[pvc]]\nname = \"back\"\npath = [\"h1\", \"s1\", \"h1\"]\n");
    assert!(
        t.contains("crosses the link between \"s1\" and \"h1\" twice"),
        "{t}"
    );
}

/// `BASE` with a second trunk between s1 and s2, two PVCs from h1 to h2
/// with a flow each, and `extra`.
fn parallel(extra: &str) -> String {
    let mut t = format!("{BASE}\n[[link]]\na = \"s1:2\"\nb = \"s2:2\"\n{extra}");
    for i in 0..2 {
        t += &format!(
            "\n[[pvc]]\nname = \"p{i}\"\npath = [\"h1\", \"s1\", \"s2\", \"h2\"]\n\n\
             [[flow]]\npvc = \"p{i}\"\nsdu = 1000\ncount = 50\ninterval = \"100us\"\n"
        );
    }
    t
}

#[test]
fn parallel_links_carry_pvcs_the_least_used_first() {
    let mut net = aurora_topo::load(&parallel(""), 1).unwrap();
    net.sim.run_until(Instant::from_millis(50));
    for p in &net.pvcs {
        let dst = net.sim.node::<TrafficHost>(p.to).unwrap();
        let r = dst.received(p.to_vc);
        assert_eq!(
            (r.delivered, r.missing, r.corrupted),
            (50, 0, 0),
            "{}",
            p.name
        );
    }
    // One PVC on each trunk: each carried one flow's cells (1000 bytes and
    // the trailer: 21 cells a PDU).
    let s1 = net.switches.iter().find(|s| s.0 == "s1").unwrap().1;
    for port in [1, 2] {
        let c = net.sim.link(s1, port).unwrap();
        assert_eq!(c.delivered, 50 * 21, "port {port}");
    }
}

#[test]
fn parallel_links_to_a_router_are_refused() {
    let t = "[[switch]]\nname = \"s\"\nports = 2\n\n\
             [[router]]\nname = \"r\"\nports = 2\nip = [\"10.2.0.1/24\", \"10.3.0.1/24\"]\n\n\
             [[link]]\na = \"r:0\"\nb = \"s:0\"\n\n[[link]]\na = \"r:1\"\nb = \"s:1\"\n";
    let e = aurora_topo::compile(t).err().unwrap().to_string();
    assert!(
        e.starts_with("14:1: router \"r\" is joined to \"s\" by this link and the one at line 10"),
        "{e}"
    );
}

#[test]
fn control_characters_in_names_are_refused_and_never_echoed_raw() {
    let t = problems(
        "\n[[pvc]]\nname = \"p\\u0000\\u001b[2J\"\npath = [\"h1\", \"s1\", \"s2\", \"h2\"]\n",
    );
    assert!(
        t.contains("the PVC name \"p\\u{0}\\u{1b}[2J\" must be"),
        "{t}"
    );
    assert!(!t.contains('\0'), "{t}");
    assert!(!t.contains('\u{1b}'), "{t}");
    // Node names and link ends: refused before, now also escaped.
    let t =
        problems("\n[[host]]\nname = \"h\\u0000\"\n\n[[link]]\na = \"x\\u0007\"\nb = \"s1:2\"\n");
    assert!(t.contains("\"h\\u{0}\""), "{t}");
    assert!(t.contains("\"x\\u{7}\""), "{t}");
    for p in aurora_topo::compile(&format!(
        "{BASE}\n[[host]]\nname = \"h\\u0000\"\n[[pvc]]\nname = \"\\n\"\npath = [\"h1\"]\n"
    ))
    .err()
    .unwrap()
    .0
    {
        assert!(!p.msg.chars().any(char::is_control), "{:?}", p.msg);
    }
    assert_eq!(aurora_topo::escape("a\u{0}b\u{1b}\n"), "a\\u{0}b\\u{1b}\\n");
    assert_eq!(aurora_topo::escape("plain é"), "plain é");
}

#[test]
fn link_numbers_have_ranges() {
    let link = |field: &str| {
        format!("{BASE}\n[[host]]\nname = \"h3\"\n\n[[link]]\na = \"h3\"\nb = \"s1:2\"\n{field}\n")
    };
    let check = |field: &str, want: &str| {
        let t = match aurora_topo::compile(&link(field)) {
            Ok(_) => String::new(),
            Err(p) => p.to_string(),
        };
        assert!(t.contains(want), "{field}: {t}");
    };
    check(
        "rate = \"1e308\"",
        "rate \"1e308\" is outside 1 to 1e9 cells per second",
    );
    check("rate = \"0.5\"", "is outside 1 to 1e9 cells per second");
    check("delay = \"11s\"", "delay \"11s\" is outside 0 to 10 s");
    check("delay = \"infs\"", "delay: duration \"infs\" is longer");
    check("delay = \"-1us\"", "delay: duration \"-1us\" is negative");
    check("delay = \"nanms\"", "is not a duration");
    check("buffer = 0", "buffer must hold at least one cell");
    check(
        "buffer = 100000000",
        "buffer 100000000 is outside 1 to 1048576 cells",
    );
    check("loss = nan", "loss NaN is not a probability");
    check("bit_error = 1.5", "bit_error 1.5 is not a probability");
    check("loss = -0.1", "loss -0.1 is not a probability");
    // The ends of each range are fine.
    for ok in [
        "rate = \"1\"",
        "rate = \"1e9\"",
        "delay = \"10s\"",
        "buffer = 1048576",
        "loss = 1.0",
    ] {
        assert!(aurora_topo::compile(&link(ok)).is_ok(), "{ok}");
    }
}

#[test]
fn traffic_numbers_have_ranges() {
    let flow = |fields: &str| format!("{PVC}\n[[flow]]\npvc = \"p\"\n{fields}\n");
    let check = |fields: &str, want: &str| {
        let t = problems(&flow(fields));
        assert!(t.contains(want), "{fields}: {t}");
    };
    check(
        "sdu = 100\ncount = 0\ninterval = \"1ms\"",
        "flow count 0 is outside 1 to 1000000000",
    );
    check(
        "sdu = 100\ncount = 2000000000\ninterval = \"1ms\"",
        "flow count 2000000000 is outside",
    );
    check(
        "sdu = 100\ncount = 1\ninterval = \"7200s\"",
        "flow interval \"7200s\" is outside 1 ns to 1 hour",
    );
    check(
        "sdu = 100\ncount = 1\ninterval = \"1ms\"\nstart = \"100000s\"",
        "flow start \"100000s\" is outside 0 to 24 hours",
    );
    check(
        "sdu = 7\ncount = 1\ninterval = \"1ms\"",
        "flow SDU of 7 bytes is outside 8 to 65535",
    );
    let ping = |fields: &str| problems(&format!("{PVC}\n[[ping]]\npvc = \"p\"\n{fields}\n"));
    let t = ping("count = 2000000\ninterval = \"1ms\"");
    assert!(
        t.contains("ping count 2000000 is outside 1 to 1000000"),
        "{t}"
    );
    let t = ping("count = 5\ninterval = \"0\"");
    assert!(t.contains("ping interval must be more than 0"), "{t}");
    assert_eq!(
        ping("count = 1000000\ninterval = \"3600s\"\nstart = \"86400s\""),
        ""
    );
}

#[test]
fn port_counts_have_ranges() {
    let t = aurora_topo::compile("[[switch]]\nname = \"s\"\nports = 60000\n")
        .err()
        .unwrap()
        .to_string();
    assert!(
        t.contains("switch \"s\" has 60000 ports; a switch has 1 to 4096"),
        "{t}"
    );
    assert!(aurora_topo::compile("[[switch]]\nname = \"s\"\nports = 4096\n").is_ok());
}

#[test]
fn atomic_flow_numbers_have_ranges() {
    let text = include_str!("../../../examples/atomic.toml");
    assert!(aurora_topo::compile(text).is_ok());
    let i = text.find("[[atomic_flow]]").unwrap();
    let at = text[..i].matches('\n').count() + 1;
    let bad = format!(
        "{}[[atomic_flow]]\nfrom = \"a\"\nto = \"b\"\nsize = 100\ncount = 0\ninterval = \"7200s\"\nkbps = 4000000000\n{}",
        &text[..i],
        &text[i..]
    );
    let t = aurora_topo::compile(&bad).err().unwrap().to_string();
    assert!(
        t.contains(&format!("{at}:1: flow count 0 is outside")),
        "{t}"
    );
    assert!(t.contains("flow interval \"7200s\" is outside"), "{t}");
    assert!(
        t.contains("flow kbps 4000000000 is outside 0 to 100000000"),
        "{t}"
    );
}

#[test]
fn an_atomic_flow_goes_to_another_host_and_a_host_names_each_of_its_flows() {
    let text = include_str!("../../../examples/atomic.toml");
    let flow = |from: &str, to: &str| {
        format!("\n[[atomic_flow]]\nfrom = \"{from}\"\nto = \"{to}\"\nsize = 100\ncount = 1\ninterval = \"1ms\"\n")
    };
    let t = aurora_topo::compile(&format!("{text}{}", flow("a", "a")))
        .err()
        .unwrap()
        .to_string();
    assert!(
        t.contains("flow from \"a\" to itself: a flow goes to another host"),
        "{t}"
    );
    // A flow stays on its LAN: not through its sender's gateway.
    let iw = include_str!("../../../examples/interwork.toml");
    let far = "\n[[atomic_host]]\nname = \"z\"\nip = \"10.6.0.9/24\"\n";
    let t = aurora_topo::compile(&format!("{iw}{far}{}", flow("ac", "z")))
        .err()
        .unwrap()
        .to_string();
    assert!(
        t.contains(
            "flow from \"ac\" to \"z\" leaves 10.5.0.1/24 through its gateway: a flow stays on one LAN"
        ),
        "{t}"
    );
    assert!(aurora_topo::compile(&format!("{iw}{}", flow("ac", "r-lan"))).is_ok());
    // A flow is named by its UDP source port, from 49152: 16,384 a host.
    // (atomic.toml has one flow from a already.)
    let most = flow("a", "b").repeat(16_383);
    assert!(aurora_topo::compile(&format!("{text}{most}")).is_ok());
    let t = aurora_topo::compile(&format!("{text}{most}{}", flow("a", "c")))
        .err()
        .unwrap()
        .to_string();
    assert!(t.contains("host \"a\" sends more than 16384 flows"), "{t}");
}

#[test]
fn problems_far_into_a_big_file_have_the_right_line() {
    let mut more = String::new();
    for i in 0..3000 {
        more += &format!("\n[[pvc]]\nname = \"p{i}\"\npath = [\"h1\", \"s1\", \"s2\", \"h2\"]\n");
    }
    more += "\n[[pvc]]\nname = \"bad\"\npath = [\"h1\", \"s1\", \"s2\", \"h2\"]\nto_vc = \"0.4\"\n";
    let line = line_of(&more, "name = \"bad\"") - 1;
    let t = problems(&more);
    assert!(
        t.starts_with(&format!("{line}:1: PVC \"bad\": to_vc 0.4")),
        "{t}"
    );
}

/// A file in a fresh temporary folder.
fn temp_file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("aurora-topo-checks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn reading_refuses_files_over_the_limit() {
    let p = temp_file("big.toml", &[b'#'; 101]);
    let e = aurora_topo::read_topology_capped(&p, 100).unwrap_err();
    assert!(e.contains("is larger than 100 bytes"), "{e}");
    assert!(e.contains("AURORA_MAX_TOPOLOGY_BYTES"), "{e}");
    assert_eq!(
        aurora_topo::read_topology_capped(&p, 101).unwrap().len(),
        101
    );
    // A device that never ends is read only up to the limit.
    let e =
        aurora_topo::read_topology_capped(std::path::Path::new("/dev/zero"), 1 << 20).unwrap_err();
    assert!(e.contains("/dev/zero is larger than 1048576 bytes"), "{e}");
}

#[test]
fn reading_reports_the_line_and_column_of_a_byte_that_is_not_utf8() {
    let p = temp_file("latin1.toml", b"[[host]]\nname = \"caf\xe9\"\n");
    let e = aurora_topo::read_topology_capped(&p, 1000).unwrap_err();
    assert!(
        e.ends_with("latin1.toml:2:12: byte 0xe9 is not UTF-8 text; a topology file must be UTF-8"),
        "{e}"
    );
    let e =
        aurora_topo::read_topology_capped(std::path::Path::new("/no/such/file"), 10).unwrap_err();
    assert!(e.starts_with("cannot read /no/such/file: "), "{e}");
}
