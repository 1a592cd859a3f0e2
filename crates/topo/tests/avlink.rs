//! AVlinks in topology files: the Figure 13 example carries its PVCs across
//! the WAN on the pair's pool, the WAN switches hold the cross-connects the
//! compiler made, and mistakes are reported at their lines.

use aurora_net::avlink::{Avlink, WanPlan};
use aurora_net::switch::AtmSwitch;
use aurora_net::traffic::TrafficHost;
use aurora_time::Instant;
use aurora_wire::cell::VcId;

const FIGURE13: &str = include_str!("../../../examples/figure13.toml");

fn id(net: &aurora_topo::Network, name: &str) -> aurora_engine::NodeId {
    net.switches
        .iter()
        .find(|s| s.0 == name)
        .map(|s| s.1)
        .unwrap()
}

#[test]
fn figure13_carries_every_pdu_across_the_wan_on_pool_vcs() {
    let mut net = aurora_topo::load(FIGURE13, 5).unwrap();
    net.sim.run_until(Instant::from_millis(1200));
    for p in &net.pvcs {
        let src = net.sim.node::<TrafficHost>(p.from).unwrap();
        let dst = net.sim.node::<TrafficHost>(p.to).unwrap();
        let sent: u64 = p.flows.iter().map(|&i| src.sent(i)).sum();
        let r = dst.received(p.to_vc);
        assert!(sent > 0, "{}", p.name);
        assert_eq!(
            (r.delivered, r.missing, r.corrupted),
            (sent, 0, 0),
            "{}",
            p.name
        );
    }
    // Relay ids: the relay first, then the AVlinks in file order.
    let mit = net.sim.node::<Avlink>(id(&net, "av-mit")).unwrap();
    let bc = net.sim.node::<Avlink>(id(&net, "av-bc")).unwrap();
    assert_eq!((mit.id(), bc.id()), (1, 2));
    // The PVCs took the pool's top VCs, 1.63 and then 1.62 (pool = 32).
    let across = &net.pvcs[0];
    let wan_vcs: Vec<VcId> = across
        .hops
        .iter()
        .map(|h| h.vc)
        .filter(|v| v.vpi == 1)
        .collect();
    assert_eq!(wan_vcs, vec![VcId::new(1, 63); 3]);
    assert_eq!(mit.entry(0, across.hops[3].vc.vci), Some((63, 0)));
    // Every pool VC and the control VC cross-connected both ways.
    let plan = WanPlan {
        count: 32,
        ..WanPlan::default()
    };
    for sw in ["sunshine-mit", "sunshine-bc"] {
        let s = net.sim.node::<AtmSwitch>(id(&net, sw)).unwrap();
        for p in 0..2 {
            assert_eq!(s.counters(p).unwrap().dropped_total(), 0, "{sw}");
        }
    }
    let k = mit.counters();
    assert_eq!(k.unmapped, [0, 0]);
    assert!(k.to_wan > 0 && k.to_vunet > 0);
    assert!(plan.check().is_ok());
}

/// The file with one line replaced.
fn with(from: &str, to: &str) -> String {
    assert!(FIGURE13.contains(from), "{from}");
    FIGURE13.replacen(from, to, 1)
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn mistakes_are_reported_at_their_lines() {
    // A peer that is not an AVlink, and a pool that is empty.
    let text = with("peer = \"av-bc\"", "peer = \"vs-bc\"").replacen(
        "name = \"av-bc\"\nkey = \"figure-13-key\"\npool = 32",
        "name = \"av-bc\"\nkey = \"figure-13-key\"\npool = 0",
        1,
    );
    let e = aurora_topo::compile(&text).err().unwrap();
    let msgs: Vec<String> =
        e.0.iter()
            .map(|p| format!("{}: {}", p.line, p.msg))
            .collect();
    let first = line_of(&text, "name = \"av-mit\"") - 1;
    let second = line_of(&text, "name = \"av-bc\"") - 1;
    assert!(
        msgs.iter()
            .any(|m| m.starts_with(&format!("{first}: "))
                && m.contains("\"vs-bc\" is not an AVlink")),
        "{msgs:?}"
    );
    assert!(
        msgs.iter()
            .any(|m| m.starts_with(&format!("{second}: ")) && m.contains("no VCs")),
        "{msgs:?}"
    );
    // A WAN switch that is a VuNet switch, and an AVlink's VuNet side on
    // an ATM switch.
    let text = with(
        "wan = [\"sunshine-mit\", \"sunshine-bc\"]",
        "wan = [\"vs-bc\"]",
    );
    let e = aurora_topo::compile(&text).err().unwrap().to_string();
    assert!(e.contains("WAN node \"vs-bc\" is not an ATM switch"), "{e}");
    let text = with(
        "a = \"sunshine-bc:0\"\nb = \"av-bc:1\"",
        "a = \"sunshine-bc:0\"\nb = \"av-bc:0\"",
    );
    let e = aurora_topo::compile(&text).err().unwrap().to_string();
    assert!(
        e.contains("AVlink \"av-bc\": port 0 must link to a VuNet switch"),
        "{e}"
    );
    // A PVC that enters the WAN and does not reach the other AVlink.
    let text = with("name = \"sunshine-bc\"\nports = 2", "name = \"sunshine-bc\"\nports = 3")
        + "\n[[host]]\nname = \"wan-host\"\n\n[[link]]\na = \"sunshine-bc:2\"\nb = \"wan-host\"\n\n\
           [[pvc]]\nname = \"stray\"\npath = [\"bc-src\", \"vs-bc\", \"av-bc\", \"sunshine-bc\", \"wan-host\"]\n";
    let e = aurora_topo::compile(&text).err().unwrap();
    let stray = line_of(&text, "name = \"stray\"") - 1;
    assert!(
        e.0.iter()
            .any(|p| p.line == stray && p.msg.contains("does not reach another AVlink")),
        "{e}"
    );
}
