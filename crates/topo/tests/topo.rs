//! Topology files: every problem at once, with its place; good files compile
//! into working networks.

use aurora_net::traffic::TrafficHost;
use aurora_time::Instant;

const GOOD: &str = include_str!("../../../examples/dan.toml");

/// The first flow `src` sends (the only one, in these tests).
fn first_flow(src: std::net::Ipv4Addr) -> aurora_atomic::flow::FlowId {
    aurora_atomic::flow::FlowId { src, flow: 0 }
}

#[test]
fn the_example_compiles_and_runs_clean() {
    let mut net = aurora_topo::load(GOOD, 1).unwrap();
    assert_eq!(net.hosts.len(), 3);
    assert_eq!(net.switches.len(), 2);
    assert_eq!(net.pvcs.len(), 3);
    net.sim.run_until(Instant::from_millis(300));
    for p in &net.pvcs {
        let dst = net.sim.node::<TrafficHost>(p.to).unwrap();
        let src = net.sim.node::<TrafficHost>(p.from).unwrap();
        let r = dst.received(p.to_vc);
        let sent: u64 = p.flows.iter().map(|&i| src.sent(i)).sum();
        assert!(sent > 0);
        assert_eq!(
            (r.delivered, r.missing, r.corrupted),
            (sent, 0, 0),
            "{}",
            p.name
        );
    }
}

#[test]
fn the_same_seed_replays_exactly() {
    let lossy = GOOD.replace("delay = \"50us\"", "delay = \"50us\"\nloss = 0.001");
    let run = |seed| {
        let mut n = aurora_topo::load(&lossy, seed).unwrap();
        n.sim.run_until(Instant::from_millis(100));
        n.sim.trace_hash()
    };
    assert_eq!(run(5), run(5));
    assert_ne!(run(5), run(6));
}

#[test]
fn every_problem_is_reported_with_its_line() {
    let bad = r#"
[[switch]]
name = "sw"
ports = 2

[[host]]
name = "a"

[[host]]
name = "a"

[[link]]
a = "a"
b = "sw:5"

[[link]]
a = "ghost"
b = "sw:0"
rate = "fast"
loss = 2.0

[[pvc]]
name = "p"
path = ["a", "sw", "nowhere"]

[[flow]]
pvc = "missing"
sdu = 100
count = 1
interval = "soon"
"#;
    let p = aurora_topo::load(bad, 1).err().expect("problems");
    let text = p.to_string();
    for want in [
        "\"a\" is used twice",
        "ports 0 to 1, not 5",
        "\"ghost\" names no host, switch or relaying link",
        "rate \"fast\"",
        "loss 2 is not a probability",
        "\"nowhere\", which is not defined",
        "PVC \"missing\", which is not defined",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(p.0.len() >= 7, "{text}");
    assert!(text.contains("\"soon\" is not a duration"), "{text}");
    // Each problem names the line of the item it is about.
    let line = |needle: &str| p.0.iter().find(|x| x.msg.contains(needle)).unwrap().line;
    assert_eq!(line("used twice"), 9);
    assert_eq!(line("not 5"), 12);
    assert_eq!(line("ghost"), 16);
    assert_eq!(line("loss 2"), 16);
    assert_eq!(line("nowhere"), 22);
    assert_eq!(line("soon"), 26);
}

#[test]
fn syntax_errors_and_unknown_keys_are_located() {
    let p = aurora_topo::load("[[switch]]\nname = \"s\"\nports = 2\ncolour = \"red\"\n", 1)
        .err()
        .unwrap();
    assert_eq!(p.0.len(), 1);
    assert!(p.0[0].msg.contains("colour"), "{}", p);
    assert_eq!(p.0[0].line, 4, "{}", p);
    let p = aurora_topo::load("[[switch]\n", 1).err().unwrap();
    assert_eq!(p.0[0].line, 1);
}

#[test]
fn a_switch_without_ports_is_reported_not_a_panic() {
    // Found by the topology fuzz target.
    let text = GOOD.replace("name = \"sw2\"\nports = 4", "name = \"sw2\"\nports = 0");
    let p = aurora_topo::load(&text, 1).err().expect("problems");
    let t = p.to_string();
    assert!(t.contains("switch \"sw2\" has no ports"), "{t}");
}

#[test]
fn a_zero_interval_is_refused() {
    let zero = GOOD.replace("interval = \"250us\"", "interval = \"0\"");
    let p = aurora_topo::load(&zero, 1).err().expect("refused");
    assert!(
        p.to_string().contains("interval must be more than 0"),
        "{p}"
    );
}

#[test]
fn explicit_vcs_may_not_collide() {
    let clash = GOOD.replace(
        "name = \"workstation-to-display\"\npath = [\"workstation\", \"sw1\", \"sw2\", \"display\"]",
        "name = \"workstation-to-display\"\npath = [\"workstation\", \"sw1\", \"sw2\", \"display\"]\nto_vc = \"0.300\"",
    );
    let p = aurora_topo::load(&clash, 1).err().expect("clash");
    assert!(p.to_string().contains("VC 0.300 is already used"), "{p}");
}

#[test]
fn udp_addresses_are_checked_and_needed_for_a_node_process() {
    let bad = r#"
[[switch]]
name = "sw"
ports = 2
[[host]]
name = "a"
[[host]]
name = "b"
[[link]]
a = "a"
b = "sw:0"
udp_a = "127.0.0.1:7001"
[[link]]
a = "b"
b = "sw:1"
udp_a = "localhost"
udp_b = "127.0.0.1:7004"
shm = "/dev/shm/x"
"#;
    let text = aurora_topo::load(bad, 1)
        .err()
        .expect("problems")
        .to_string();
    assert!(text.contains("give both udp_a and udp_b"), "{text}");
    assert!(
        text.contains("udp_a \"localhost\" is not an address"),
        "{text}"
    );

    // The example has no UDP addresses: it cannot be split into processes.
    let bp = aurora_topo::compile(GOOD).unwrap();
    let e = bp
        .node_process(&["sw1".into()], 1)
        .err()
        .expect("no addresses");
    assert!(e.contains("has neither udp_a and udp_b nor shm"), "{e}");
    let e = aurora_topo::compile(GOOD)
        .unwrap()
        .node_process(&["nobody".into()], 1)
        .err()
        .expect("no such node");
    assert!(e.contains("no node called \"nobody\""), "{e}");
    let ok = include_str!("../../../examples/processes.toml");
    assert!(aurora_topo::compile(ok).is_ok());
}

#[test]
fn ip_hosts_register_with_the_atmarp_server_named_in_the_file() {
    let mut net = aurora_topo::load(include_str!("../../../examples/lis.toml"), 1).unwrap();
    net.sim.run_until(Instant::from_millis(10));
    let id = |n: &str| net.hosts.iter().find(|(h, _)| h == n).unwrap().1;
    let server = net
        .sim
        .node::<aurora_ip::node::IpNode>(id("server"))
        .unwrap();
    let table = server.atmarp_table();
    let ips: Vec<String> = table.iter().map(|(ip, _)| ip.to_string()).collect();
    assert_eq!(ips, ["10.3.0.1", "10.3.0.2"]);
    // c2's address is the one its file gives; c1's is made from its name.
    assert_eq!(
        table[1].1,
        aurora_topo::parse_atm("47000580ffe1000000f2151a020020481500020 0").unwrap()
    );
    assert_eq!(table[0].1, aurora_topo::default_atm("c1"));
    for c in ["c1", "c2"] {
        let n = net.sim.node::<aurora_ip::node::IpNode>(id(c)).unwrap();
        assert!(n.registered().is_some(), "{c}");
        assert_eq!(n.counters().inarp_requests, 0, "{c}");
    }
}

#[test]
fn ip_mistakes_are_reported() {
    let bad = r#"
[[host]]
name = "h"
ip = "10.0.0.1"

[[host]]
name = "g"
routes = ["default via 10.0.0.254"]

[[host]]
name = "k"
ip = "10.0.0.2/24"
routes = ["default via 192.168.0.1"]
atmarp = "nope"
atm = "4"

[[router]]
name = "r"
ports = 2
ip = ["10.0.0.254/24"]
"#;
    let p = aurora_topo::compile(bad)
        .err()
        .expect("problems")
        .to_string();
    for want in [
        "\"10.0.0.1\" is not an IPv4 address with a prefix length",
        "host \"g\" has IP settings",
        "the gateway 192.168.0.1 of route 0.0.0.0/0 is on none of the node's subnets",
        "atmarp names PVC \"nope\"",
        "ATM address \"4\"",
        "router \"r\" has 2 ports but 1 addresses",
    ] {
        assert!(p.contains(want), "missing {want:?} in:\n{p}");
    }
}

#[test]
fn the_atomic_example_compiles_maps_and_carries_its_flows() {
    let text = include_str!("../../../examples/atomic.toml");
    // The reader takes it whole: an ATOMIC part and no cell nodes. The
    // drivers of cell networks refuse it.
    let bp = aurora_topo::compile(text).unwrap();
    assert!(bp.nodes.is_empty() && bp.atomic.is_some());
    assert!(
        aurora_topo::compile_cells(text).is_err(),
        "not a cell network"
    );
    let net = bp.atomic.unwrap();
    assert_eq!(net.layout.nodes.len(), 18 + 4);
    let mut b = net.plan(1).into_sim(1).unwrap();
    b.sim.run_until(Instant::from_millis(500));
    let a: std::net::Ipv4Addr = "10.5.0.1".parse().unwrap();
    let ac = b.host(a).unwrap().ac().unwrap();
    let (edges, hosts) = net.layout.truth_from(net.hosts[0].2);
    assert_eq!(ac.map().edges(), edges);
    assert_eq!(ac.map().hosts(), hosts);
    let d: std::net::Ipv4Addr = "10.5.0.4".parse().unwrap();
    assert_eq!(b.host(d).unwrap().received(first_flow(a)).delivered, 2000);
}

/// A host's `memory` bounds the bytes its port to its interface, and the
/// interface's port to it, hold; other hosts keep 1 MiB, channels 64 MiB.
#[test]
fn an_atomic_hosts_memory_bounds_its_interface_ports() {
    let text = include_str!("../../../examples/atomic.toml").replacen(
        "name = \"b\"\n",
        "name = \"b\"\nmemory = \"32KiB\"\n",
        1,
    );
    assert!(text.contains("memory = \"32KiB\""));
    let net = aurora_topo::compile(&text).unwrap().atomic.unwrap();
    let plan = net.plan(1);
    let hosts = plan.mosaic.len();
    let b: std::net::Ipv4Addr = "10.5.0.2".parse().unwrap();
    let k = hosts + plan.hosts.iter().position(|h| h.0 == b).unwrap();
    let mut seen = 0;
    for (from, to, spec) in &plan.links {
        let want = if from.0 == k || to.0 == k {
            seen += 1;
            32 * 1024
        } else if from.0 >= hosts || to.0 >= hosts {
            aurora_atomic::layout::HOST_BYTES
        } else {
            aurora_atomic::layout::CHANNEL_BYTES
        };
        assert_eq!(spec.buffer_bytes, Some(want), "{from:?} -> {to:?}");
    }
    assert_eq!(seen, 2);
    // A router's side on a LAN: its port to the interface takes its
    // host's memory too.
    let iw = include_str!("../../../examples/interwork.toml").replacen(
        "name = \"r-lan\"\n",
        "name = \"r-lan\"\nmemory = \"32KiB\"\n",
        1,
    );
    let net = aurora_topo::compile(&iw).unwrap().into_mixed(1).unwrap();
    let &(_, r, ports) = net.routers.iter().find(|r| r.0 == "r").unwrap();
    let lan: Vec<Option<usize>> = (0..=ports)
        .filter_map(|p| net.sim.link_spec(r, p))
        .map(|s| s.buffer_bytes)
        .collect();
    assert!(lan.contains(&Some(32 * 1024)), "{lan:?}");
    for (bad, says) in [
        ("0", "memory of 0 bytes is outside 1 byte to 1GiB"),
        (
            "\"2GiB\"",
            "memory of 2147483648 bytes is outside 1 byte to 1GiB",
        ),
        ("\"lots\"", "memory: \"lots\" is not a size"),
    ] {
        let t = include_str!("../../../examples/atomic.toml").replacen(
            "name = \"b\"\n",
            &format!("name = \"b\"\nmemory = {bad}\n"),
            1,
        );
        let e = aurora_topo::compile(&t).err().unwrap().to_string();
        assert!(e.contains(says), "{e}");
    }
}

#[test]
fn atomic_mistakes_are_reported_with_their_lines() {
    let bad = r#"
[[mesh]]
name = "m"
size = 0

[[atomic_host]]
name = "h"
ip = "10.0.0.300"
ac = "sometimes"

[[cable]]
a = "h:up"
b = "nowhere:west"

[[atomic_flow]]
from = "h"
to = "ghost"
size = 10
count = 1
interval = "1ms"
"#;
    let p = aurora_topo::compile(bad)
        .err()
        .expect("problems")
        .to_string();
    for want in [
        "mesh \"m\" has size 0",
        "\"10.0.0.300\" of host \"h\" is not an IPv4 address",
        "ac \"sometimes\"",
        "\"up\" in \"h:up\" is not east, west, north or south",
        "\"nowhere:west\" names no node",
        "flow to \"ghost\"",
        "flow size 10",
    ] {
        assert!(p.contains(want), "missing {want:?} in:\n{p}");
    }
}

#[test]
fn a_file_with_cell_and_atomic_parts_compiles_into_one_blueprint() {
    let cells = GOOD;
    let atomic = include_str!("../../../examples/atomic.toml");
    let both = format!("{cells}\n{atomic}");
    let bp = aurora_topo::compile(&both).unwrap();
    let alone = aurora_topo::compile(cells).unwrap();
    assert!(alone.atomic.is_none());
    assert_eq!(bp.nodes.len(), alone.nodes.len());
    assert_eq!(bp.hosts, alone.hosts);
    assert_eq!(bp.switches, alone.switches);
    assert_eq!(bp.links, alone.links);
    assert_eq!(bp.pvcs.len(), alone.pvcs.len());
    let net = bp.atomic.expect("the ATOMIC part");
    let only = aurora_topo::compile(atomic).unwrap().atomic.unwrap();
    assert_eq!(net.layout, only.layout);
    assert_eq!(net.names, only.names);
    assert_eq!(net.flows, only.flows);
    // What runs cell networks only refuses it.
    let cells_only = aurora_topo::compile_cells(&both).err().unwrap().to_string();
    assert!(
        cells_only.contains("describes an ATOMIC network"),
        "{cells_only}"
    );
}

#[test]
fn a_name_shared_by_the_cell_and_atomic_parts_is_refused() {
    let cells = r#"[[switch]]
name = "a"
ports = 2

[[host]]
name = "m.1.0"

[[host]]
name = "m"
"#;
    let atomic = r#"
[[mesh]]
name = "m"
size = 2

[[atomic_host]]
name = "a"
ip = "10.0.0.1"
"#;
    // Each part alone is fine.
    assert!(aurora_topo::compile(cells).is_ok());
    assert!(aurora_topo::compile(atomic).is_ok());
    let p = aurora_topo::compile(&format!("{cells}{atomic}"))
        .err()
        .expect("problems");
    let at = |line: usize| {
        p.0.iter()
            .filter(|x| x.line == line)
            .map(|x| x.msg.as_str())
            .collect::<Vec<_>>()
    };
    let shared = "the cell and ATOMIC parts of a file share one set of names, so give each its own";
    assert_eq!(
        at(11),
        [
            format!("mesh \"m\" has the name of host \"m\" (line 8); {shared}"),
            format!("mesh node \"m.1.0\" has the name of host \"m.1.0\" (line 5); {shared}"),
        ],
        "{p}"
    );
    assert_eq!(
        at(15),
        [format!(
            "ATOMIC host \"a\" has the name of switch \"a\" (line 1); {shared}"
        )],
        "{p}"
    );
    assert_eq!(p.0.len(), 3, "{p}");
}

#[test]
fn a_router_joins_the_atomic_lan_and_its_mistakes_are_named() {
    let text = include_str!("../../../examples/interwork.toml");
    let bp = aurora_topo::compile(text).unwrap();
    let lan = bp.atomic.as_ref().expect("an ATOMIC part");
    assert_eq!(lan.routers, vec![("r-lan".into(), "r".into(), 24)]);
    // The LAN host's TUN routes everything off the LAN through the router.
    let (_, tun) = lan.tuns.iter().find(|t| t.0 == "b").unwrap();
    assert_eq!(tun.netns.as_deref(), Some("aur-lan"));
    assert_eq!(tun.routes.len(), 1);
    assert_eq!(
        tun.routes[0].gateway,
        "10.5.0.254".parse::<std::net::Ipv4Addr>().unwrap()
    );
    let net = bp.into_mixed(1).unwrap();
    let part = net.atomic.as_ref().unwrap();
    assert_eq!(part.gateways.len(), 1);
    assert_eq!(part.hosts.len(), 2);
    assert_eq!(net.tuns.len(), 2);

    let problems = |from: &str, to: &str| {
        aurora_topo::compile(&text.replace(from, to))
            .err()
            .map(|p| p.to_string())
            .unwrap_or_default()
    };
    let p = problems("router = \"r\"", "router = \"sw\"");
    assert!(
        p.contains("router \"sw\", which is not a [[router]]"),
        "{p}"
    );
    let p = problems(
        "gateway = \"10.5.0.254\"\ntun",
        "gateway = \"10.6.0.254\"\ntun",
    );
    assert!(
        p.contains("is not another address on its LAN 10.5.0.2/24"),
        "{p}"
    );
    let p = problems("router = \"r\"", "router = \"r\"\ntun = \"x\"");
    assert!(p.contains("has no tun, netns or gateway of its own"), "{p}");
    let p = problems(
        "tun = \"aur-b\"\nnetns = \"aur-lan\"",
        "netns = \"aur-lan\"",
    );
    assert!(p.contains("has a netns but no tun"), "{p}");
    for bad in ["netns = \"aur-lan\"", "netns = \"aur-atm\""] {
        let p = problems(bad, "netns = \"../etc\"");
        assert!(p.contains("netns \"../etc\" of host"), "{p}");
    }
    let twice = format!(
        "{text}\n[[atomic_host]]\nname = \"r-lan2\"\nip = \"10.5.0.253/24\"\nrouter = \"r\"\n"
    );
    let p = aurora_topo::compile(&twice).err().unwrap().to_string();
    assert!(
        p.contains("more than one interface on the ATOMIC LAN"),
        "{p}"
    );
}

/// `text` with every `127.0.0.1:PORT` made `127.0.0.1:0` (any free port),
/// so these tests never meet a run of the examples on the machine.
fn any_ports(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("127.0.0.1:") {
        let (head, tail) = rest.split_at(i + "127.0.0.1:".len());
        out += head;
        out.push('0');
        rest = tail.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out + rest
}

#[test]
fn a_partition_keeps_its_inner_links_and_opens_the_rest() {
    let text = any_ports(include_str!("../../../examples/processes.toml"));
    let names = ["h1".to_string(), "sw".to_string()];
    let (p, info) = aurora_topo::compile(&text)
        .unwrap()
        .node_process(&names, 1)
        .unwrap();
    assert_eq!(p.names, names);
    assert_eq!(p.members.len(), 2);
    assert_eq!(p.engine.node_count(), 2);
    // h1 <-> sw is inside, one direction each way; sw:1 reaches h2.
    let mut inner: Vec<&str> = p.links.iter().map(|l| l.name.as_str()).collect();
    inner.sort_unstable();
    assert_eq!(inner, ["h1:0 -> sw:0", "sw:0 -> h1:0"]);
    assert_eq!(p.ports.len(), 1);
    let port = &p.ports[0];
    assert_eq!((port.here.as_str(), port.peer.as_str()), ("sw:1", "h2:0"));
    assert!(port.sends && port.hears);
    assert_eq!(info.pvcs.len(), 1);

    // Names are checked: unknown, or given twice.
    let e = aurora_topo::compile(&text)
        .unwrap()
        .node_process(&["h1".into(), "h1".into()], 1)
        .err()
        .unwrap();
    assert!(e.contains("\"h1\" is named twice"), "{e}");
}

#[test]
fn an_atomic_partition_keeps_its_cables_inside() {
    let text = any_ports(include_str!("../../../examples/atomic-processes.toml"));
    let bp = || aurora_topo::compile(&text).unwrap();
    let a = bp().mixed_process(&["m".into(), "b".into()], 1).unwrap();
    // The mesh's 4 nodes, b's interface node, and b.
    assert_eq!(a.atomic.mosaic.len(), 5);
    assert_eq!(a.atomic.hosts.len(), 1);
    assert_eq!(a.process.engine.node_count(), 6);
    // 8 directions inside the mesh, 2 on the cable to b, 2 between b and
    // its interface node; the cable to a leaves the process.
    assert_eq!(a.process.links.len(), 12);
    assert_eq!(a.process.ports.len(), 1);
    let port = &a.process.ports[0];
    assert_eq!(
        (port.here.as_str(), port.peer.as_str()),
        ("m.0.0:West", "a:East")
    );
    let e = bp()
        .mixed_process(&["m".into(), "zz".into()], 1)
        .err()
        .unwrap();
    assert!(
        e.contains("no node, mesh or ATOMIC host called \"zz\""),
        "{e}"
    );
}
