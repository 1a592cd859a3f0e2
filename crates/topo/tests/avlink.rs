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

fn host_id(net: &aurora_topo::Network, name: &str) -> aurora_engine::NodeId {
    net.hosts.iter().find(|h| h.0 == name).map(|h| h.1).unwrap()
}

/// The example's apps find their routes through the relay and both
/// AVlinks, the WAN one step between them: the near AVlink routes on with
/// no VuNet nibble, the far one is entered from its WAN side with none
/// back; the WAN segment's VCI comes from the pool's bottom, below the
/// PVCs' VCs at its top; each VC opens, carries its PDUs and closes.
#[test]
fn figure13s_apps_open_across_the_wan_in_band() {
    use aurora_signal::host::SignalHost;
    let mut net = aurora_topo::load(FIGURE13, 5).unwrap();
    net.sim.run_until(Instant::from_millis(400));
    let h = net
        .sim
        .node::<SignalHost>(host_id(&net, "mit-app"))
        .unwrap();
    let app = &h.apps()[0];
    let vc = app.vc().unwrap();
    let hops: Vec<(u16, u8, u8, u8)> = vc
        .path
        .hops
        .iter()
        .map(|x| (x.relay, x.side, x.bits_on, x.bits_back))
        .collect();
    // ring-mit (0), entered on side 0: on out of vs-mit2's port 3 (to
    // av-mit), back out of vs-mit1's port 2 (to the host); av-mit (1) from
    // the VuNet on to the WAN, back out of vs-mit2's port 0 (to ring-mit);
    // av-bc (2) from the WAN on out of vs-bc's port 2 (to the app's host).
    assert_eq!(hops, [(0, 0, 3, 2), (1, 0, 0, 0), (2, 1, 2, 0)]);
    assert_eq!(vc.vcis[2], 32, "the WAN segment takes the pool's bottom");
    assert!(app.is_closed());
    let to = net.sim.node::<SignalHost>(host_id(&net, "bc-app")).unwrap();
    let (flow, _) = to.received(app.spec().flow).unwrap();
    assert_eq!(flow.delivered, 100);
    assert_eq!(h.table().entries(400_000_000).unwrap(), []);
}

/// An explicit path names the WAN switches between two AVlinks, in order;
/// one that leaves them out, or names them wrong, is refused at its line.
#[test]
fn an_apps_explicit_path_names_the_wan_switches() {
    let app = "[[app]]\nname = \"mit-camera\"\nhost = \"mit-app\"\nto = \"bc-app\"";
    let path = "[[app]]\nname = \"mit-camera\"\nhost = \"mit-app\"\npath = [\"mit-app\", \"vs-mit1\", \"ring-mit\", \"vs-mit2\", \"av-mit\", \"sunshine-mit\", \"sunshine-bc\", \"av-bc\", \"vs-bc\", \"bc-app\"]";
    let path_of = |text: &str| {
        let net = aurora_topo::load(text, 5).unwrap();
        let h = net
            .sim
            .node::<aurora_signal::host::SignalHost>(host_id(&net, "mit-app"))
            .unwrap();
        h.apps()[0].spec().path.clone()
    };
    assert_eq!(path_of(&with(app, path)), path_of(FIGURE13));
    for wrong in [
        "\"av-mit\", \"av-bc\"",
        "\"av-mit\", \"sunshine-bc\", \"sunshine-mit\", \"av-bc\"",
    ] {
        let bad = path.replace(
            "\"av-mit\", \"sunshine-mit\", \"sunshine-bc\", \"av-bc\"",
            wrong,
        );
        let text = with(app, &bad);
        let e = aurora_topo::compile(&text).err().unwrap();
        let line = line_of(&text, "name = \"mit-camera\"") - 1;
        assert!(
            e.0.iter()
                .any(|p| p.line == line && p.msg.contains("path cannot go from \"av-mit\"")),
            "{e}"
        );
    }
}

/// An AVlink restarted mid-run loses what control cells wrote in it; the
/// camera app's refresh rewrites its entry within one refresh period, and
/// the cells that met the empty table are counted at the AVlink.
#[test]
fn an_avlink_restarted_mid_run_is_rewritten_by_the_refresh() {
    use aurora_signal::host::SignalHost;
    let text = FIGURE13.to_string() + "\n[[restart]]\nnode = \"av-bc\"\nat = \"100ms\"\n";
    let mut net = aurora_topo::load(&text, 5).unwrap();
    net.sim.run_until(Instant::from_millis(400));
    let av = net.sim.node::<Avlink>(id(&net, "av-bc")).unwrap();
    assert_eq!(av.relay_counters().restarts, 1);
    let lost = av.counters().unmapped[1];
    let h = net
        .sim
        .node::<SignalHost>(host_id(&net, "mit-app"))
        .unwrap();
    let app = &h.apps()[0];
    let (_, _, rewritten) = app.refreshes();
    assert!(rewritten >= 1, "{:?}", app.refreshes());
    let to = net.sim.node::<SignalHost>(host_id(&net, "bc-app")).unwrap();
    let (flow, _) = to.received(app.spec().flow).unwrap();
    // PDUs every 2 ms, a refresh every 50 ms: at most 25 PDUs meet the
    // empty table, and each cell of theirs is counted there.
    let missed = h.sent(0) - flow.delivered;
    assert!((1..=26).contains(&missed), "{missed}");
    assert!(lost >= missed, "{lost} cells for {missed} PDUs");
    assert!(app.is_closed());
}

/// `[signal] hosts` gives a host a directory with a route to every other
/// signalling host, AVlinks counted like relays: a host beside the MIT
/// AVlink reaches Bellcore through the two AVlinks and no relaying link.
#[test]
fn a_signalling_hosts_directory_reaches_across_the_wan_through_avlinks_alone() {
    use aurora_signal::host::SignalHost;
    let text = with(
        "timeout = \"40ms\"",
        "timeout = \"40ms\"\nhosts = [\"mit2-host\"]",
    )
        + "\n[[host]]\nname = \"mit2-host\"\n\n[[link]]\na = \"mit2-host\"\nb = \"vs-mit2:1\"\n";
    let net = aurora_topo::load(&text, 5).unwrap();
    let h = net
        .sim
        .node::<SignalHost>(host_id(&net, "mit2-host"))
        .unwrap();
    let (_, path) = h
        .directory()
        .routes
        .iter()
        .find(|(n, _)| n == "bc-app")
        .expect("bc-app in the directory");
    let hops: Vec<(u16, u8)> = path
        .as_ref()
        .expect("a route")
        .hops
        .iter()
        .map(|x| (x.relay, x.side))
        .collect();
    assert_eq!(
        hops,
        [(1, 0), (2, 1)],
        "av-mit from its VuNet, av-bc from the WAN"
    );
}
