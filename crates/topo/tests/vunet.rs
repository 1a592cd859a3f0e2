//! VuNet nodes in topology files: header-routed switches and relaying links
//! carry PVCs end to end, and the compiled relay tables are the ones the
//! control plane reads back.

use aurora_net::traffic::TrafficHost;
use aurora_net::vunet::{Control, VunetLink, CMD_READ, CMD_REPLY, VCI_LINK_CONTROL};
use aurora_net::{Node, Outbox};
use aurora_time::Instant;
use aurora_wire::cell::{Format, Header};

const VUNET: &str = include_str!("../../../examples/vunet.toml");

#[test]
fn the_vunet_example_delivers_every_pdu_and_answers_pings() {
    let mut net = aurora_topo::load(VUNET, 3).unwrap();
    assert_eq!(net.switches.len(), 3, "two VuNet switches and a relay");
    net.sim.run_until(Instant::from_millis(500));
    for p in &net.pvcs {
        let src = net.sim.node::<TrafficHost>(p.from).unwrap();
        let dst = net.sim.node::<TrafficHost>(p.to).unwrap();
        let sent: u64 = p.flows.iter().map(|&i| src.sent(i)).sum();
        let r = dst.received(p.to_vc);
        assert!(sent > 0, "{}", p.name);
        assert_eq!(
            (r.delivered, r.missing, r.corrupted, r.out_of_order),
            (sent, 0, 0, 0),
            "{}",
            p.name
        );
        for &(i, _) in &p.pings {
            let s = src.ping(i).unwrap();
            assert_eq!((s.sent, s.answered), (20, 20), "{}", p.name);
        }
    }
    // Nothing was dropped anywhere, and every cell in left again.
    for (name, id, ports) in &net.switches {
        let node = net.sim.node_dyn(*id).unwrap();
        let (mut cin, mut cout) = (0, 0);
        for port in 0..*ports {
            let s = node.port_summary(port).unwrap();
            assert_eq!(s.dropped, 0, "{name}:{port}");
            cin += s.cells_in;
            cout += s.cells_out;
        }
        assert!(cin > 0, "{name}");
        assert_eq!(cin, cout, "{name}");
    }
}

#[test]
fn compiled_relay_entries_read_back_through_control_cells() {
    let bp = aurora_topo::compile(VUNET).unwrap();
    let (_, id, _) = bp.switches.iter().find(|(n, _, _)| n == "trunk").unwrap();
    let pvc = bp
        .pvcs
        .iter()
        .find(|p| p.name == "camera-to-display")
        .unwrap();
    assert_eq!((pvc.from_vc.vci, pvc.to_vc.vci), (100, 200));
    let mut nodes = bp.nodes;
    let any: &mut dyn std::any::Any = nodes[id.0 as usize].as_mut();
    let relay = any.downcast_mut::<VunetLink>().unwrap();
    // Cells from vs1 (port 0) on VCI 100 leave toward vs2 as VCI 200, with
    // bits for vs2's port 0 (the display).
    assert_eq!(relay.entry(0, 100), Some((200, 0)));
    // And back: answers on VCI 200 return as VCI 100, bits for vs1's port 0
    // (the camera).
    assert_eq!(relay.entry(1, 200), Some((100, 0)));

    let read = Control {
        cmd: CMD_READ,
        table: 0,
        vci: 100,
        new_vci: 0,
        port_bits: 0,
        status: 0,
        seq: 1,
        ..Control::default()
    };
    let mut out = Outbox::default();
    // Port 1 is the example's management port.
    relay.receive(Instant::ZERO, 1, &[read.cell(0, None)], &mut out);
    let replies: Vec<_> = out.drain().collect();
    assert_eq!(replies.len(), 1);
    let (port, cell) = replies[0];
    assert_eq!(port, 1);
    let h = Header::parse(&[cell[0], cell[1], cell[2], cell[3]], Format::Uni);
    assert_eq!(h.vci, VCI_LINK_CONTROL);
    let reply = Control::decode(cell[5..].try_into().unwrap());
    assert_eq!(
        (reply.cmd, reply.new_vci, reply.port_bits, reply.status),
        (CMD_REPLY, 200, 0, 0)
    );
    // From port 0 without the key's tag it is refused and counted.
    relay.receive(Instant::ZERO, 0, &[read.cell(0, None)], &mut out);
    assert!(out.is_empty());
    assert_eq!(relay.counters().refused_tag, 1);
    assert_eq!(relay.port_summary(0).unwrap().dropped, 1);
}

fn problems(text: &str) -> Vec<String> {
    match aurora_topo::compile(text) {
        Ok(_) => Vec::new(),
        Err(p) => p.0.into_iter().map(|p| p.msg).collect(),
    }
}

const BASE: &str = r#"
[[switch]]
name = "vs"
ports = 4
kind = "vunet"

[[switch]]
name = "atm"
ports = 4

[[relay]]
name = "r"

[[host]]
name = "a"

[[host]]
name = "b"

[[link]]
a = "a"
b = "vs:0"

[[link]]
a = "b"
b = "atm:0"

[[link]]
a = "vs:1"
b = "atm:1"

[[link]]
a = "vs:2"
b = "r:0"

[[link]]
a = "r:1"
b = "atm:2"
"#;

#[test]
fn a_vunet_switch_next_to_an_atm_switch_is_refused() {
    let text = format!("{BASE}\n[[pvc]]\nname = \"p\"\npath = [\"a\", \"vs\", \"atm\", \"b\"]\n");
    let p = problems(&text);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].contains("VuNet switch \"vs\"") && p[0].contains("\"atm\" is a switch"),
        "{p:?}"
    );
    // Through a relay instead, it compiles and delivers.
    let good = format!(
        "{BASE}\n[[pvc]]\nname = \"p\"\npath = [\"a\", \"vs\", \"r\", \"atm\", \"b\"]\n\
         [[flow]]\npvc = \"p\"\nsdu = 2000\ncount = 50\ninterval = \"100us\"\n\
         [[ping]]\npvc = \"p\"\ncount = 5\ninterval = \"1ms\"\n"
    );
    let mut net = aurora_topo::load(&good, 1).unwrap();
    net.sim.run_until(Instant::from_millis(20));
    let p = &net.pvcs[0];
    let r = net.sim.node::<TrafficHost>(p.to).unwrap().received(p.to_vc);
    assert_eq!((r.delivered, r.corrupted), (50, 0));
    let s = net
        .sim
        .node::<TrafficHost>(p.from)
        .unwrap()
        .ping(0)
        .unwrap();
    assert_eq!(s.answered, 5);
}

#[test]
fn vunet_mistakes_are_each_reported() {
    let text = format!(
        "{BASE}\n[[pvc]]\nname = \"p\"\npath = [\"a\", \"vs\", \"r\", \"atm\", \"b\"]\n\
         [[pvc]]\nname = \"q\"\npath = [\"a\", \"vs\", \"r\", \"atm\", \"b\"]\n\
         [[ping]]\npvc = \"p\"\ncount = 1\ninterval = \"1ms\"\nsegment = true\n\
         [[switch]]\nname = \"big\"\nports = 17\nkind = \"vunet\"\n\
         [[switch]]\nname = \"odd\"\nports = 2\nkind = \"fddi\"\n\
         [[relay]]\nname = \"r2\"\nmgmt_ports = [2]\n"
    );
    let p = problems(&text);
    let want = [
        "needs an ATM switch as the first node",
        "\"big\" has 17 ports",
        "kind \"fddi\"",
        "no management port 2",
    ];
    for w in want {
        assert!(p.iter().any(|m| m.contains(w)), "missing {w:?} in {p:?}");
    }
    // Two hosts joined by a VuNet switch alone share one VC, so different
    // from_vc and to_vc cannot both hold.
    let text = format!(
        "{BASE}\n[[host]]\nname = \"c\"\n[[link]]\na = \"c\"\nb = \"vs:3\"\n\
         [[pvc]]\nname = \"p\"\npath = [\"a\", \"vs\", \"c\"]\nfrom_vc = \"0.40\"\nto_vc = \"0.41\"\n"
    );
    let p = problems(&text);
    assert!(p.iter().any(|m| m.contains("must be equal")), "{p:?}");
}
