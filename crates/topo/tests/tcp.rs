//! `[[tcp]]`: TCP transfers between IP hosts. Every mistake is refused at
//! load time with the entry's line, all at once; a good file makes TCP
//! hosts (no TUN interfaces for them), leaves a netns host's side to
//! Linux, and its transfer runs.

use aurora_ip::node::IpNode;
use aurora_tcp::conn::Variant;
use aurora_tcp::host::{Amount, Role, TcpHost};
use aurora_time::Instant;
use aurora_topo::Blueprint;

/// A switch and five hosts: h1 and h2 IP hosts (h2 with an MTU of 1500),
/// h3 without ip, h4 and h5 IP hosts in network namespaces; PVCs from h1
/// to each other IP host.
const NET: &str = r#"
[[switch]]
name = "sw"
ports = 5

[[host]]
name = "h1"
ip = "10.1.0.1/24"

[[host]]
name = "h2"
ip = "10.1.0.2/24"
mtu = 1500

[[host]]
name = "h3"

[[host]]
name = "h4"
ip = "10.1.0.4/24"
netns = "ns4"

[[host]]
name = "h5"
ip = "10.1.0.5/24"
netns = "ns5"

[[link]]
a = "h1"
b = "sw:0"
delay = "1ms"

[[link]]
a = "h2"
b = "sw:1"
delay = "1ms"

[[link]]
a = "h3"
b = "sw:2"

[[link]]
a = "h4"
b = "sw:3"

[[link]]
a = "h5"
b = "sw:4"

[[pvc]]
name = "h1-h2"
path = ["h1", "sw", "h2"]

[[pvc]]
name = "h1-h4"
path = ["h1", "sw", "h4"]

[[pvc]]
name = "h1-h5"
path = ["h1", "sw", "h5"]
"#;

/// `NET` with `entries` (each the body of one `[[tcp]]`) after it, and
/// the line of each entry's `[[tcp]]` (where its problems are placed).
fn with_entries(entries: &[&str]) -> (String, Vec<usize>) {
    let mut text = NET.to_string();
    let mut lines = Vec::new();
    for e in entries {
        text += "\n[[tcp]]\n";
        lines.push(text.lines().count());
        text += e;
        text += "\n";
    }
    (text, lines)
}

fn compile(text: &str) -> Blueprint {
    aurora_topo::compile(text).unwrap_or_else(|p| panic!("{p}"))
}

#[test]
fn every_mistake_is_refused_with_its_line() {
    let cases: &[(&str, &str)] = &[
        (
            "name = \"e1\"\nfrom = \"h9\"\nto = \"h2\"\nbytes = 1000",
            "tcp \"e1\": from \"h9\" is not a host in this file",
        ),
        (
            "name = \"e2\"\nfrom = \"sw\"\nto = \"h2\"\nbytes = 1000",
            "tcp \"e2\": from \"sw\" is a switch, not a host",
        ),
        (
            "name = \"e3\"\nfrom = \"h1\"\nto = \"h3\"\nbytes = 1000",
            "tcp \"e3\": to host \"h3\" has no ip; TCP runs between IP hosts",
        ),
        (
            "name = \"e4\"\nfrom = \"h1\"\nto = \"h1\"\nbytes = 1000",
            "tcp \"e4\": from and to are both \"h1\"; a transfer needs two hosts",
        ),
        (
            "name = \"e5\"\nfrom = \"h4\"\nto = \"h5\"\nbytes = 1000",
            "tcp \"e5\": from \"h4\" and to \"h5\" both have a netns",
        ),
        (
            "name = \"e6\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = 1000\nduration = \"1s\"",
            "tcp \"e6\": give bytes or duration, not both",
        ),
        (
            "name = \"e7\"\nfrom = \"h1\"\nto = \"h2\"",
            "tcp \"e7\": give bytes (how much the source sends) or duration (for how long)",
        ),
        (
            "name = \"e8\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = 1000\nvariant = \"vegas\"",
            "tcp \"e8\": no TCP variant \"vegas\" (tahoe, reno, newreno or sack)",
        ),
        (
            "name = \"e9\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = \"10XB\"",
            "tcp \"e9\": bytes: \"10XB\" is not a size",
        ),
        (
            "name = \"e10\"\nfrom = \"h1\"\nto = \"h2\"\nduration = \"5 parsecs\"",
            "tcp \"e10\": duration: \"5 parsecs\" is not a duration",
        ),
        (
            "name = \"e11\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = 1000\nport = 0",
            "tcp \"e11\": port 0 is outside 1 to 65535",
        ),
        (
            "name = \"e1\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = 1000\nport = 7000",
            "tcp \"e1\" is defined twice (first at line",
        ),
        (
            "name = \"e13\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = 1000\nmss = 20",
            "tcp \"e13\": mss 20 is outside 64 to 65495",
        ),
        (
            "name = \"e14\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = 1000\nmss = 9000\nport = 7001",
            "tcp \"e14\": mss 9000 is more than host \"h2\"'s MTU (1500) less 40 bytes of IP and TCP headers (1460)",
        ),
        (
            "name = \"e15\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = 1000\nport = 7002",
            "",
        ),
        (
            "name = \"e16\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = 1000\nport = 7002\nbuffer = \"64KiB\"\ndelayed_ack = \"off\"",
            "tcp \"e16\" shares the sink at \"h2\" port 7002 with tcp \"e15\" (line",
        ),
        (
            "name = \"e17\"\nfrom = \"h4\"\nto = \"h1\"\ndrop = [3]",
            "tcp \"e17\": drop needs Aurora's TCP as the source, but \"h4\" has a netns",
        ),
        (
            "name = \"e18\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = -5",
            "tcp \"e18\": bytes: -5 bytes is negative",
        ),
        (
            "name = \"e19\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = 1000\ndelayed_ack = \"soon\"",
            "tcp \"e19\": delayed_ack (a duration or \"off\"): \"soon\" is not a duration",
        ),
        (
            "name = \"e20\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = 1000\nmaxburst = 0\ninitial_window = 5000",
            "tcp \"e20\": maxburst 0 is outside 1 to 65535",
        ),
        (
            "name = \"e21\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = 1000\nbuffer = 100",
            "tcp \"e21\": buffer of 100 bytes is outside 1KiB to 1GiB",
        ),
        (
            "name = \"e22\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = 1000\nbuffer = \"1KiB\"\nport = 7003",
            "tcp \"e22\": buffer of 1024 bytes is less than the MSS (1460 bytes)",
        ),
        (
            "name = \"e 23\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = 1000\nport = 7004",
            "tcp \"e 23\": a name must be letters, digits",
        ),
        (
            "name = \"e24\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = 1000\nrto_min = \"0\"\ntick = \"20s\"\ndrop = [0]",
            "tcp \"e24\": rto_min must be more than 0",
        ),
        (
            "name = \"e25\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = 1000\nport = 7005\ndecrease = 1.5",
            "tcp \"e25\": decrease 1.5 is outside 0.1 to 0.95",
        ),
    ];
    let bodies: Vec<&str> = cases.iter().map(|c| c.0).collect();
    let (text, lines) = with_entries(&bodies);
    let p = aurora_topo::compile(&text).err().expect("problems");
    let all = p.to_string();
    for (k, (_, want)) in cases.iter().enumerate() {
        if want.is_empty() {
            assert!(
                !p.0.iter().any(|x| x.line == lines[k]),
                "entry {k} is good:\n{all}"
            );
            continue;
        }
        let found = p.0.iter().find(|x| x.msg.starts_with(want));
        let found = found.unwrap_or_else(|| panic!("missing {want:?} in:\n{all}"));
        assert_eq!(found.line, lines[k], "{want:?} in:\n{all}");
    }
    // Everything wrong with an entry is reported, not only the first.
    for more in [
        "tcp \"e20\": initial_window 5000 is outside 1 to 1000",
        "tcp \"e24\": tick \"20s\" is outside 1us to 10s",
        "tcp \"e24\": drop segment 0 is outside 1 to",
        "tcp \"e16\" shares the sink at \"h2\" port 7002 with tcp \"e15\" (line",
    ] {
        assert!(all.contains(more), "missing {more:?} in:\n{all}");
    }
    let shared =
        p.0.iter()
            .find(|x| x.msg.contains("shares the sink"))
            .unwrap();
    assert!(
        shared.msg.ends_with(
            "but their buffer, delayed_ack differ; give them the same receiving settings or different ports"
        ),
        "{}",
        shared.msg
    );
    // Problems come in file order.
    assert!(p.0.windows(2).all(|w| w[0].line <= w[1].line), "{all}");
}

#[test]
fn an_unknown_field_is_refused_with_its_place() {
    let (text, lines) =
        with_entries(&["name = \"t\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = 1000\nwindow = 5"]);
    let p = aurora_topo::compile(&text).err().expect("problems");
    assert_eq!(p.0.len(), 1, "{p}");
    assert!(p.0[0].msg.contains("unknown field `window`"), "{p}");
    assert_eq!(p.0[0].line, lines[0] + 5);
    let (text, _) = with_entries(&["name = \"t\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = true"]);
    let p = aurora_topo::compile(&text).err().expect("problems");
    assert!(
        p.0[0]
            .msg
            .contains("a number of bytes or a size such as \"10MB\""),
        "{p}"
    );
}

fn tcp_host(bp: &Blueprint, name: &str) -> Option<usize> {
    let id = bp.hosts.iter().find(|(n, _)| n == name)?.1;
    let node: &dyn std::any::Any = bp.nodes[id.0 as usize].as_ref();
    node.downcast_ref::<TcpHost>().map(|_| id.0 as usize)
}

#[test]
fn a_good_file_makes_tcp_hosts_without_tun_interfaces() {
    let (text, _) = with_entries(&[
        // Aurora to Aurora, and a second transfer to the same sink.
        "name = \"a\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = \"1MB\"\nvariant = \"reno\"",
        "name = \"b\"\nfrom = \"h1\"\nto = \"h2\"\nduration = \"1s\"\nvariant = \"newreno\"",
        // Aurora to Linux (h4), and Linux (h5) to Aurora.
        "name = \"c\"\nfrom = \"h1\"\nto = \"h4\"\nbytes = 1000\nport = 6000",
        "name = \"d\"\nfrom = \"h5\"\nto = \"h1\"\nport = 6001\ncheck = false",
    ]);
    let bp = compile(&text);
    assert!(tcp_host(&bp, "h1").is_some() && tcp_host(&bp, "h2").is_some());
    assert!(tcp_host(&bp, "h4").is_none() && tcp_host(&bp, "h5").is_none());
    // Only the netns hosts keep their TUN interfaces.
    let mut tun_hosts: Vec<&str> = bp
        .tuns
        .iter()
        .map(|(id, _)| bp.hosts.iter().find(|(_, h)| h == id).unwrap().0.as_str())
        .collect();
    tun_hosts.sort_unstable();
    assert_eq!(tun_hosts, ["h4", "h5"]);
    // What reports need.
    let hosts = bp.hosts.clone();
    let id = |n: &str| hosts.iter().find(|(h, _)| h == n).unwrap().1;
    let t = &bp.tcp;
    assert_eq!(t.len(), 4);
    assert_eq!((t[0].name.as_str(), t[0].variant), ("a", Variant::Reno));
    assert_eq!(
        (t[0].from_node, t[0].to_node),
        (Some(id("h1")), Some(id("h2")))
    );
    assert_eq!((t[0].port, t[0].local_port), (5001, 40_000));
    assert_eq!(t[0].amount, Some(Amount::Bytes(1_000_000)));
    assert_eq!(t[1].local_port, 40_001);
    assert_eq!((t[2].from_node, t[2].to_node), (Some(id("h1")), None));
    assert_eq!((t[3].from_node, t[3].to_node), (None, Some(id("h1"))));
    assert_eq!(t[3].amount, None);
    assert_eq!(t[2].to_addr, std::net::Ipv4Addr::new(10, 1, 0, 4));
    // The IP node is still found inside the TCP host.
    let mut net = bp.into_sim(1).unwrap_or_else(|p| panic!("{p}"));
    assert!(net.sim.node::<IpNode>(id("h1")).is_some());
    // Sources a, b and c at h1 (b for 1 s), one shared sink at h2.
    net.sim.run_until(Instant::from_millis(1_500));
    let h1: &TcpHost = net.sim.node(id("h1")).unwrap();
    let h2: &TcpHost = net.sim.node(id("h2")).unwrap();
    let names: Vec<&str> = h1.flows().iter().map(|f| f.name()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    let sinks: Vec<&str> = h2.flows().iter().map(|f| f.name()).collect();
    assert_eq!(sinks.len(), 2, "{sinks:?}");
    assert!(sinks.contains(&"h2:5001<-10.1.0.1:40000"), "{sinks:?}");
    let a = h2
        .flows()
        .iter()
        .find(|f| f.name().ends_with(":40000"))
        .unwrap();
    assert_eq!(a.role(), Role::Sink);
    assert_eq!(a.app_bytes(), 1_000_000, "every byte of a arrived");
    assert_eq!(a.pattern_errors(), 0);
    let b = &h1.flows()[1];
    assert!(b.done().is_some(), "b sent for 1 s and closed");
    for h in [h1, h2] {
        assert!(h.counters().balanced(), "{:?}", h.counters());
    }
}

#[test]
fn the_run_seed_decides_the_initial_sequence_numbers() {
    let (text, _) = with_entries(&["name = \"a\"\nfrom = \"h1\"\nto = \"h2\"\nbytes = 1000"]);
    let iss = |seed: u64| {
        let mut net = aurora_topo::load(&text, seed).unwrap();
        net.sim.run_until(Instant::from_millis(50));
        let id = net.hosts.iter().find(|(h, _)| h == "h1").unwrap().1;
        let h: &TcpHost = net.sim.node(id).unwrap();
        h.flows()[0].iss()
    };
    assert_eq!(iss(1), iss(1));
    assert_ne!(iss(1), iss(2));
}
