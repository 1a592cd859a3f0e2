//! Commands to a running signalling host through its inbox, in virtual
//! time on a chain of real VuNet switches and relaying links: an open to a
//! named host is answered within one inbox period, sets up with the
//! modelled latency on the path the host's directory gives, and carries
//! its PDUs; a close through the inbox stops the sending, clears every
//! relay entry and frees every VCI; unknown hosts, hosts with no route,
//! bad numbers, unknown or finished VCs and one VC too many are each
//! refused with a sentence; a full inbox refuses the caller.

use std::sync::mpsc::Receiver;
use std::sync::Arc;

use aurora_engine::{Engine, NodeId};
use aurora_net::vunet::VunetLink;
use aurora_signal::control::{
    Answer, ControlHandle, Directory, OpenRequest, Request, VcState, VcStatus, INBOX_CAP,
    INBOX_POLL, MAX_LIVE_VCS,
};
use aurora_signal::host::{EventKind, SignalHost};
use aurora_signal::table::{MemTable, VciTable};
use aurora_time::{Duration, Instant};

mod common;
use common::{chain_path, host_config, setup_latency, wire, KEY};

struct Net {
    sim: Engine,
    src: NodeId,
    dst: NodeId,
    relays: Vec<NodeId>,
    table: Arc<MemTable>,
    ctl: ControlHandle,
}

/// host - s0 - r0 - ... - r(n-1) - sn - dest; the host has no apps, only
/// an inbox and a directory naming "dest" (reached through the chain),
/// "island" (no route) and the relays.
fn chain(n: usize) -> Net {
    let mut sim = Engine::new(1);
    let table = Arc::new(MemTable::new(Default::default()));
    let cfg = host_config;
    let mut host = SignalHost::new(cfg(1), table.clone());
    host.set_directory(Directory {
        name: "src".into(),
        routes: vec![
            ("dest".into(), Some(chain_path(n))),
            ("island".into(), None),
        ],
        relays: (0..n as u16).map(|k| (k, format!("r{k}"))).collect(),
        flows: 100..200,
    });
    let ctl = host.control_handle();
    let src = sim.add_node(host);
    let dst = sim.add_node(SignalHost::new(cfg(2), table.clone()));
    let relays = wire(&mut sim, src, dst, n, |_| {
        let mut relay = VunetLink::new([false, false], None);
        relay.add_key(1, KEY.to_vec());
        relay
    });
    Net {
        sim,
        src,
        dst,
        relays,
        table,
        ctl,
    }
}

fn open(to: &str, count: u64) -> OpenRequest {
    OpenRequest {
        to: to.into(),
        sdu: 1000,
        count,
        interval: Duration::from_micros(100),
        close_after: None,
        refresh: None,
    }
}

impl Net {
    /// Sends `req`, runs one inbox period and takes the answer (which
    /// must have come by then).
    fn ask(&mut self, req: Request) -> Answer {
        let rx: Receiver<Answer> = self.ctl.send(req).expect("room in the inbox");
        let t = self.sim.now() + INBOX_POLL;
        self.sim.run_until(t);
        rx.try_recv().expect("answered within one inbox period")
    }

    fn list(&mut self) -> Vec<VcStatus> {
        match self.ask(Request::List) {
            Answer::List(v, _) => v,
            a => panic!("{a:?}"),
        }
    }

    fn refused(&mut self, req: Request) -> String {
        match self.ask(req) {
            Answer::Refused(why) => why,
            a => panic!("{a:?}"),
        }
    }
}

#[test]
fn a_vc_opened_and_closed_through_the_inbox_carries_data_and_leaves_nothing() {
    let mut net = chain(3);
    net.sim.run_until(Instant::from_millis(1));
    let id = match net.ask(Request::Open(open("dest", 50))) {
        Answer::Opening(id) => id,
        a => panic!("{a:?}"),
    };
    assert_eq!(id, "src/1");
    net.sim.run_until(Instant::from_millis(20));
    let vcs = net.list();
    let vc = &vcs[0];
    assert_eq!((vc.id.as_str(), vc.to.as_str()), ("src/1", "dest"));
    assert_eq!(vc.state, VcState::Open);
    assert_eq!(vc.relays, ["r0", "r1", "r2"]);
    assert_eq!(vc.vcis.len(), 4);
    assert_eq!(vc.flow, 100);
    assert_eq!(vc.events[0].kind, EventKind::Open);
    assert_eq!(vc.events[0].latency(), setup_latency(3));
    assert_eq!(vc.sent, 50);
    // Every PDU arrived intact, on the VC's last VCI.
    let d = net.sim.node::<SignalHost>(net.dst).unwrap();
    let got = d.arrivals();
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].flow, got[0].vci, got[0].delivered, got[0].missing),
        (100, vc.vcis[3], 50, 0)
    );
    assert_eq!(got[0].corrupted, 0);
    for (k, &r) in net.relays.iter().enumerate() {
        let l = net.sim.node::<VunetLink>(r).unwrap();
        assert_eq!(l.owner(0, vc.vcis[k]), Some(1), "relay {k}");
    }
    let vcis = vc.vcis.clone();
    assert_eq!(
        net.ask(Request::Close(id.clone())),
        Answer::Closing(id.clone())
    );
    net.sim.run_until(Instant::from_millis(40));
    let vc = &net.list()[0];
    assert_eq!(vc.state, VcState::Closed);
    let close = vc.events.last().unwrap();
    assert_eq!(close.kind, EventKind::Close);
    assert_eq!(close.failure, None);
    for (k, &r) in net.relays.iter().enumerate() {
        let l = net.sim.node::<VunetLink>(r).unwrap();
        assert_eq!(l.entry(0, vcis[k]), None, "relay {k}");
        assert_eq!(l.owner(0, vcis[k]), None, "relay {k}");
    }
    assert!(net.table.entries(40_000_000).unwrap().is_empty());
    // A second close, and a close of no VC, are refused.
    assert!(net
        .refused(Request::Close(id))
        .contains("is closed already"));
    assert!(net
        .refused(Request::Close("src/9".into()))
        .contains("no VC \"src/9\""));
}

#[test]
fn a_close_stops_the_sending_at_once() {
    let mut net = chain(1);
    let id = match net.ask(Request::Open(open("dest", 1_000_000))) {
        Answer::Opening(id) => id,
        a => panic!("{a:?}"),
    };
    net.sim.run_until(Instant::from_millis(10));
    assert_eq!(net.ask(Request::Close(id)), Answer::Closing("src/1".into()));
    net.sim.run_until(Instant::from_millis(30));
    let vc = &net.list()[0];
    assert_eq!(vc.state, VcState::Closed, "{vc:?}");
    // No PDU started once the close had begun: what was sent arrived.
    let sent = vc.sent;
    assert!(sent > 0 && sent < 200, "{sent}");
    let d = net.sim.node::<SignalHost>(net.dst).unwrap();
    assert_eq!(d.arrivals()[0].delivered, sent);
    assert!(net.table.entries(30_000_000).unwrap().is_empty());
    let s = net.sim.node::<SignalHost>(net.src).unwrap();
    assert_eq!(s.drops(), (0, 0, 0));
}

#[test]
fn bad_commands_are_refused_with_a_sentence() {
    let mut net = chain(1);
    let why = net.refused(Request::Open(open("nowhere", 1)));
    assert!(why.starts_with("unknown host \"nowhere\""), "{why}");
    assert!(why.contains("dest"), "{why}");
    let why = net.refused(Request::Open(open("island", 1)));
    assert!(
        why.starts_with("no route from \"src\" to \"island\""),
        "{why}"
    );
    let why = net.refused(Request::Open(open("src", 1)));
    assert!(why.contains("cannot open a VC to itself"), "{why}");
    let why = net.refused(Request::Open(OpenRequest {
        sdu: 3,
        ..open("dest", 1)
    }));
    assert!(why.contains("sdu 3"), "{why}");
    let why = net.refused(Request::Open(OpenRequest {
        interval: Duration::ZERO,
        ..open("dest", 1)
    }));
    assert!(why.contains("interval"), "{why}");
    let why = net.refused(Request::Open(OpenRequest {
        count: u64::MAX,
        ..open("dest", 1)
    }));
    assert!(why.contains("count"), "{why}");
    // Nothing was taken on.
    assert!(net.list().is_empty());
}

#[test]
fn one_vc_too_many_is_refused_and_a_full_inbox_refuses_the_caller() {
    let mut net = chain(1);
    for k in 0..MAX_LIVE_VCS {
        assert_eq!(
            net.ask(Request::Open(open("dest", 0))),
            Answer::Opening(format!("src/{}", k + 1))
        );
    }
    let why = net.refused(Request::Open(open("dest", 0)));
    assert!(why.contains("as many as it holds"), "{why}");
    net.sim.run_until(Instant::from_millis(50));
    let vcs = net.list();
    assert_eq!(vcs.len(), MAX_LIVE_VCS);
    assert!(vcs.iter().all(|v| v.state == VcState::Open), "{vcs:?}");
    // Distinct VCIs on the shared segments.
    let mut first: Vec<u16> = vcs.iter().map(|v| v.vcis[0]).collect();
    first.sort_unstable();
    first.dedup();
    assert_eq!(first.len(), MAX_LIVE_VCS);
    // Closing one makes room for another.
    assert_eq!(
        net.ask(Request::Close("src/1".into())),
        Answer::Closing("src/1".into())
    );
    net.sim.run_until(Instant::from_millis(80));
    assert_eq!(
        net.ask(Request::Open(open("dest", 0))),
        Answer::Opening(format!("src/{}", MAX_LIVE_VCS + 1))
    );
    // A caller finding the inbox full is told so; the others are answered.
    let waiting: Vec<_> = (0..INBOX_CAP)
        .map(|_| net.ctl.send(Request::List).unwrap())
        .collect();
    let full = net.ctl.send(Request::List).unwrap_err();
    assert!(full.contains("waiting already"), "{full}");
    let t = net.sim.now() + INBOX_POLL;
    net.sim.run_until(t);
    for rx in waiting {
        assert!(matches!(rx.try_recv(), Ok(Answer::List(..))));
    }
}

#[test]
fn closing_an_app_that_has_not_begun_cancels_it() {
    let mut net = chain(1);
    // A file's app, due later.
    let spec = aurora_signal::host::AppSpec {
        name: "later".into(),
        to: "dest".into(),
        flow: 7,
        path: chain_path(1),
        open_at: Instant::from_millis(50),
        close_at: None,
        sdu: 1000,
        count: 10,
        interval: Duration::from_micros(100),
        refresh: None,
    };
    assert!(net
        .sim
        .node_mut::<SignalHost>(net.src)
        .unwrap()
        .add_app(spec));
    net.sim.touch(net.src);
    assert_eq!(
        net.ask(Request::Close("later".into())),
        Answer::Closing("later".into())
    );
    net.sim.run_until(Instant::from_millis(80));
    let vc = &net.list()[0];
    assert_eq!(vc.state, VcState::Closed);
    assert!(vc.events.is_empty() && vc.vcis.is_empty(), "{vc:?}");
    assert!(net.table.entries(80_000_000).unwrap().is_empty());
}

/// Flow numbers are taken in turn, skipping those of VCs still open: a
/// host with two numbers holds two VCs, refuses a third, and after a
/// close reuses the freed number, never one a live VC has.
#[test]
fn a_flow_number_is_never_shared_by_two_live_vcs() {
    let mut net = chain(1);
    {
        let h = net.sim.node_mut::<SignalHost>(net.src).unwrap();
        let mut d = h.directory().clone();
        d.flows = 100..102;
        h.set_directory(d);
    }
    for k in 1..=2 {
        assert_eq!(
            net.ask(Request::Open(open("dest", 0))),
            Answer::Opening(format!("src/{k}"))
        );
    }
    let why = net.refused(Request::Open(open("dest", 0)));
    assert!(why.contains("no flow number left"), "{why}");
    net.sim.run_until(Instant::from_millis(30));
    assert_eq!(
        net.ask(Request::Close("src/2".into())),
        Answer::Closing("src/2".into())
    );
    net.sim.run_until(Instant::from_millis(60));
    assert_eq!(
        net.ask(Request::Open(open("dest", 0))),
        Answer::Opening("src/3".into())
    );
    let flows: Vec<(String, u16)> = net.list().into_iter().map(|v| (v.id, v.flow)).collect();
    assert_eq!(
        flows,
        [
            ("src/1".to_string(), 100),
            ("src/2".to_string(), 101),
            ("src/3".to_string(), 101)
        ]
    );
}

/// A caller that stopped waiting (no answer within its timeout) has not
/// opened anything: the host, polled later, refuses the stale request
/// instead of carrying it out.
#[test]
fn a_request_whose_caller_gave_up_is_not_carried_out() {
    let mut net = chain(1);
    let a = net.ctl.call(
        Request::Open(open("dest", 10)),
        std::time::Duration::from_millis(1),
    );
    assert!(
        matches!(&a, Answer::Refused(w) if w.contains("did not answer")),
        "{a:?}"
    );
    net.sim.run_until(Instant::from_millis(30));
    assert!(net.list().is_empty());
}
