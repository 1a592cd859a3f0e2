//! Figure 13 in virtual time: two VuNets joined by two AVlinks across two
//! standard ATM switches and a 5 ms OC-3c WAN path. A host in VuNet A
//! opens a VC to a host in VuNet B with the connection library's one call,
//! through a relay, both AVlinks and another relay; the control cells
//! cross the WAN on its reserved control VC. AAL5 PDUs then cross and are
//! checked, the set-up takes exactly the modelled round trips, and closing
//! clears every entry and frees every VCI.
//!
//! ```text
//! src - a0 - r0 - a1 - avA ==(w0)== 5 ms ==(w1)== avB - b0 - r1 - b1 - dst
//! ```

use std::sync::Arc;

use aurora_engine::{Engine, LinkSpec, NodeId};
use aurora_net::avlink::{Avlink, WanPlan, PORT_VUNET, PORT_WAN};
use aurora_net::switch::AtmSwitch;
use aurora_net::vunet::{VunetLink, VunetSwitch};
use aurora_net::{Node, Outbox, PortId};
use aurora_sar::{Aal5Rx, Aal5Tx, PduOptions, RxConfig, Status, VcConfig};
use aurora_signal::conn::{Closer, Hop, OpenError, Opener, Path, Seq, Timing, Vc};
use aurora_signal::table::{Link, MemTable, Owner, VciTable};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, Header, VcId};
use aurora_wire::CellBytes;

const KEY: &[u8] = b"figure 13";
/// The second host's key, id 1 at every relay and AVlink.
const KEY2: &[u8] = b"figure 13, second host";
const OC3: f64 = 353_207.5;
const WAN_DELAY: Duration = Duration::from_millis(5);
const LAN_DELAY: Duration = Duration::from_micros(2);
const ACCESS_DELAY: Duration = Duration::from_micros(20);
const PDUS: usize = 8;

/// The PDU number `i` a source sends: its length and bytes vary with `i`.
fn pdu(i: usize) -> Vec<u8> {
    (0..100 + 397 * i).map(|j| (j * 7 + i) as u8).collect()
}

/// What the source host is doing.
enum State {
    Waiting,
    Opening(Opener),
    Open(Vc),
    Closing(Closer),
    Closed,
    Failed(OpenError),
}

/// The source: opens at `open_at` with [`Opener::start`], sends `PDUS`
/// AAL5 PDUs once open, closes at `close_at`.
struct Source {
    path: Path,
    table: Arc<MemTable>,
    open_at: Instant,
    close_at: Instant,
    state: State,
    seq: Seq,
    sent: bool,
    /// The VC once open.
    opened: Option<Vc>,
    /// Who it is in the VCI table, and its key (id and bytes).
    owner: Owner,
    key: (u8, &'static [u8]),
}

impl Source {
    fn step(&mut self, now: Instant, reply: Option<&CellBytes>, out: &mut Outbox) {
        let timing = Timing {
            timeout: Duration::from_millis(40),
            retries: 2,
            lease: Duration::from_secs(30),
        };
        let key = Some(self.key);
        let next = match (&mut self.state, reply) {
            (State::Waiting, None) if now >= self.open_at => {
                let (o, c) = Opener::start(
                    self.path.clone(),
                    self.owner,
                    self.table.as_ref(),
                    timing,
                    0,
                    key,
                    &mut self.seq,
                    now,
                )
                .expect("VCIs free");
                self.state = State::Opening(o);
                Some(c)
            }
            (State::Opening(o), Some(c)) => o.on_cell(c, now, &mut self.seq),
            (State::Opening(o), None) => o.poll(now, &mut self.seq),
            (State::Open(vc), None) if now >= self.close_at => {
                let (cl, c) =
                    Closer::start(vc.clone(), timing, 0, key, &mut self.seq, now).unwrap();
                self.state = State::Closing(cl);
                Some(c)
            }
            (State::Closing(cl), Some(c)) => cl.on_cell(c, now, &mut self.seq),
            (State::Closing(cl), None) => cl.poll(now, &mut self.seq),
            _ => None,
        };
        if let Some(c) = next {
            out.push(0, c);
        }
        // Finished opening: send the data; finished closing: free the VCIs.
        if let State::Opening(o) = &self.state {
            match o.outcome() {
                Some(Ok(vc)) => {
                    self.opened = Some(vc.clone());
                    self.state = State::Open(vc.clone());
                }
                Some(Err(e)) => {
                    o.release(self.owner, self.table.as_ref(), now).unwrap();
                    self.state = State::Failed(e.clone());
                }
                None => {}
            }
        }
        if let State::Closing(cl) = &self.state {
            if cl.is_done() {
                cl.release(self.owner, self.table.as_ref(), now).unwrap();
                self.state = State::Closed;
            }
        }
        if let (State::Open(vc), false) = (&self.state, self.sent) {
            let mut tx = Aal5Tx::new(VcId::new(0, vc.send_vci()), Format::Uni).unwrap();
            for i in 0..PDUS {
                let sdu = pdu(i);
                let mut cells = vec![[0u8; 53]; aurora_wire::aal5::cells_for(sdu.len())];
                tx.segment_into(&sdu, PduOptions::default(), &mut cells)
                    .unwrap();
                for mut c in cells {
                    let h = Header::parse(&[c[0], c[1], c[2], c[3]], Format::Uni);
                    Header {
                        gfc: self.path.first_bits,
                        ..h
                    }
                    .emit(&mut c)
                    .unwrap();
                    out.push(0, c);
                }
            }
            self.sent = true;
        }
    }
}

impl Node for Source {
    fn ports(&self) -> usize {
        1
    }
    fn receive(&mut self, now: Instant, _: PortId, cells: &[CellBytes], out: &mut Outbox) {
        for c in cells {
            self.step(now, Some(c), out);
        }
    }
    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        self.step(now, None, out);
    }
    fn poll_at(&self) -> Option<Instant> {
        match &self.state {
            State::Waiting => Some(self.open_at),
            State::Opening(o) => o.poll_at(),
            State::Open(_) => Some(self.close_at),
            State::Closing(c) => c.poll_at(),
            State::Closed | State::Failed(_) => None,
        }
    }
}

/// The destination: reassembles AAL5 PDUs on whatever VC they come.
struct Sink {
    rx: Aal5Rx,
    got: Vec<(VcId, Vec<u8>)>,
    corrupted: usize,
}

impl Node for Sink {
    fn ports(&self) -> usize {
        1
    }
    fn receive(&mut self, now: Instant, _: PortId, cells: &[CellBytes], _: &mut Outbox) {
        for c in cells {
            let vc = Header::parse(&[c[0], c[1], c[2], c[3]], Format::Uni).vc();
            // Opening a VC that is open already changes nothing.
            let _ = self.rx.open_vc(vc, VcConfig::default());
            let (got, bad) = (&mut self.got, &mut self.corrupted);
            self.rx.push(now, std::slice::from_ref(c), &mut |d| {
                if d.status == Status::Intact {
                    got.push((d.vc, d.sdu().to_vec()));
                } else {
                    *bad += 1;
                }
            });
        }
    }
    fn poll(&mut self, _: Instant, _: &mut Outbox) {}
    fn poll_at(&self) -> Option<Instant> {
        None
    }
}

struct Net {
    sim: Engine,
    src: NodeId,
    dst: NodeId,
    src2: NodeId,
    dst2: NodeId,
    relays: [NodeId; 2],
    avlinks: [NodeId; 2],
    wan: [NodeId; 2],
    table: Arc<MemTable>,
}

/// The WAN switches' cross-connects, made out of band: the control VC and
/// every pool VC, both ways, the same VC on every WAN link.
fn cross_connect(sw: &mut AtmSwitch, plan: &WanPlan) {
    for vc in plan.pool().chain([plan.control]) {
        sw.add_vc(0, vc, 1, vc).unwrap();
        sw.add_vc(1, vc, 0, vc).unwrap();
    }
}

/// Port numbers: every VuNet switch has 4 ports; port 0 faces the source's
/// side, port 1 the destination's, port 2 a host.
fn figure13(open_at: Instant, close_at: Instant, second_at: Option<Instant>) -> Net {
    let mut sim = Engine::new(13);
    let table = Arc::new(MemTable::new(Default::default()));
    let plan = WanPlan::default();
    // Relay ids as a topology file numbers them: relays first (0, 1),
    // then AVlinks (2, 3).
    let path = Path {
        first_bits: 1,
        hops: vec![
            Hop {
                relay: 0,
                link: Link(0),
                side: 0,
                bits_on: 1,
                bits_back: 2,
            },
            // Towards the WAN no VuNet switch follows: its nibble is 0.
            Hop {
                relay: 2,
                link: Link(1),
                side: 0,
                bits_on: 0,
                bits_back: 0,
            },
            // The far AVlink is entered from its WAN side (table 1).
            Hop {
                relay: 3,
                link: Link(2),
                side: 1,
                bits_on: 1,
                bits_back: 0,
            },
            Hop {
                relay: 1,
                link: Link(3),
                side: 0,
                bits_on: 2,
                bits_back: 0,
            },
        ],
        last_link: Link(4),
    };
    // The second host: on port 3 of a0, to a sink on port 3 of b1.
    let mut path2 = path.clone();
    path2.hops[0].bits_back = 3;
    path2.hops[3].bits_on = 3;
    let mut source = |path: Path, at: Instant, owner: u32, key: (u8, &'static [u8])| {
        sim.add_node(Source {
            path,
            table: table.clone(),
            open_at: at,
            close_at,
            state: State::Waiting,
            seq: Seq(0),
            sent: false,
            opened: None,
            owner: Owner(owner),
            key,
        })
    };
    let src = source(path, open_at, 7, (0, KEY));
    let src2 = source(
        path2,
        second_at.unwrap_or(Instant::from_millis(1_000_000)),
        8,
        (1, KEY2),
    );
    let mut sink = || {
        sim.add_node(Sink {
            rx: Aal5Rx::new(RxConfig::default()),
            got: Vec::new(),
            corrupted: 0,
        })
    };
    let dst = sink();
    let dst2 = sink();
    let [a0, a1, b0, b1] = [0; 4].map(|_| sim.add_node(VunetSwitch::new(4)));
    let relays = [0u16, 1].map(|id| {
        let mut r = VunetLink::new([false, false], Some(KEY.to_vec()));
        r.set_id(id);
        r.add_key(1, KEY2.to_vec());
        sim.add_node(r)
    });
    let avlinks = [2u16, 3].map(|id| {
        let mut a = Avlink::new(id, plan, false, Some(KEY.to_vec())).unwrap();
        a.add_key(1, KEY2.to_vec());
        sim.add_node(a)
    });
    let wan = [0; 2].map(|_| {
        let mut sw = AtmSwitch::new(2, Format::Uni);
        cross_connect(&mut sw, &plan);
        sim.add_node(sw)
    });
    let lan = LinkSpec::clean(OC3 * 4.0, LAN_DELAY, 256);
    let access = LinkSpec::clean(OC3, ACCESS_DELAY, 4096);
    let long = LinkSpec::clean(OC3, WAN_DELAY, 4096);
    for (a, b, spec) in [
        ((src, 0), (a0, 2), lan),
        ((a0, 1), (relays[0], 0), lan),
        ((relays[0], 1), (a1, 0), lan),
        ((a1, 1), (avlinks[0], PORT_VUNET), lan),
        ((avlinks[0], PORT_WAN), (wan[0], 0), access),
        ((wan[0], 1), (wan[1], 0), long),
        ((wan[1], 1), (avlinks[1], PORT_WAN), access),
        ((avlinks[1], PORT_VUNET), (b0, 0), lan),
        ((b0, 1), (relays[1], 0), lan),
        ((relays[1], 1), (b1, 0), lan),
        ((b1, 2), (dst, 0), lan),
        ((src2, 0), (a0, 3), lan),
        ((b1, 3), (dst2, 0), lan),
    ] {
        sim.connect(a, b, spec).unwrap();
    }
    Net {
        sim,
        src,
        dst,
        src2,
        dst2,
        relays,
        avlinks,
        wan,
        table,
    }
}

/// One cell's time on a link of `rate` cells a second, as the engine
/// rounds it.
fn cell_time(rate: f64) -> Duration {
    Duration::from_nanos((1e9 / rate).round() as i64)
}

/// `d` times `n`.
fn times(d: Duration, n: i64) -> Duration {
    Duration::from_nanos(d.as_nanos() * n)
}

#[test]
fn a_vunet_host_opens_across_the_wan_in_band_and_aal5_crosses() {
    let open_at = Instant::from_millis(1);
    let close_at = Instant::from_millis(200);
    let mut net = figure13(open_at, close_at, None);
    net.sim.run_until(Instant::from_millis(150));
    let src = net.sim.node::<Source>(net.src).unwrap();
    let State::Open(vc) = &src.state else {
        panic!("not open");
    };
    let vc = vc.clone();
    // The lowest free VCI on every segment; the WAN's is pool VC 1.32.
    assert_eq!(vc.vcis, vec![32; 5]);
    // Each entry as the opener wrote it.
    let relay = |i: usize| net.sim.node::<VunetLink>(net.relays[i]).unwrap();
    let av = |i: usize| net.sim.node::<Avlink>(net.avlinks[i]).unwrap();
    assert_eq!(relay(0).entry(0, 32), Some((32, 1)));
    assert_eq!(
        av(0).entry(0, 32),
        Some((32, 0)),
        "VuNet VCI 32 onto WAN 1.32"
    );
    assert_eq!(av(1).entry(1, 32), Some((32, 1)), "WAN 1.32 into VuNet B");
    assert_eq!(relay(1).entry(0, 32), Some((32, 2)));
    // The control cells crossed the WAN on its control VC, both ways:
    // the far AVlink's write and read and the far relay's went over; the
    // far AVlink's own replies and the far relay's came back.
    assert_eq!(av(0).counters().control_to_wan, 4);
    assert_eq!(av(1).counters().control_from_wan, 4);
    assert_eq!(av(1).counters().replies_to_wan, 2);
    assert_eq!(av(1).counters().control_to_wan, 2);
    assert_eq!(av(0).counters().control_from_wan, 4);
    // Set-up latency: each step is a round trip to its relay, over the
    // links between, each its delay and one cell time; a write and a read
    // per relay.
    let lan = LAN_DELAY + cell_time(OC3 * 4.0);
    let wan = times(ACCESS_DELAY + cell_time(OC3), 2) + WAN_DELAY + cell_time(OC3);
    let one_way = [
        times(lan, 2),
        times(lan, 4),
        times(lan, 4) + wan,
        times(lan, 6) + wan,
    ];
    let expected = one_way
        .iter()
        .fold(Duration::ZERO, |sum, &d| sum + times(d, 4));
    assert_eq!(vc.setup_latency(), expected);
    // The data crossed: every PDU, intact, in order, on the destination's
    // VCI.
    let sink = net.sim.node::<Sink>(net.dst).unwrap();
    assert_eq!(sink.corrupted, 0);
    let want: Vec<(VcId, Vec<u8>)> = (0..PDUS).map(|i| (VcId::new(0, 32), pdu(i))).collect();
    assert_eq!(sink.got, want);
    let k0 = av(0).counters();
    let k1 = av(1).counters();
    assert_eq!(k0.to_wan, k1.to_vunet);
    assert_eq!(k0.unmapped, [0, 0]);
    assert_eq!(k1.unmapped, [0, 0]);
    // Nothing dropped in the WAN switches.
    for &w in &net.wan {
        let sw = net.sim.node::<AtmSwitch>(w).unwrap();
        for p in 0..2 {
            assert_eq!(sw.counters(p).unwrap().dropped_total(), 0);
        }
    }
    assert_eq!(net.table.entries(0).unwrap().len(), 5);

    // Close: every entry cleared (the AVlinks' too), every VCI free.
    net.sim.run_until(Instant::from_millis(400));
    let src = net.sim.node::<Source>(net.src).unwrap();
    assert!(matches!(src.state, State::Closed), "not closed");
    let relay = |i: usize| net.sim.node::<VunetLink>(net.relays[i]).unwrap();
    let av = |i: usize| net.sim.node::<Avlink>(net.avlinks[i]).unwrap();
    assert_eq!(relay(0).entry(0, 32), None);
    assert_eq!(av(0).entry(0, 32), None);
    assert_eq!(av(1).entry(1, 32), None);
    assert_eq!(relay(1).entry(0, 32), None);
    assert!(net.table.entries(0).unwrap().is_empty());
    for i in 0..2 {
        let c = av(i).relay_counters();
        assert_eq!(
            c.refused_tag
                + c.refused_replay
                + c.refused_malformed
                + c.refused_port
                + c.refused_pool,
            0,
            "AVlink {i}"
        );
        assert_eq!(av(i).counters().control_refused, 0);
    }
}

/// The far AVlink refuses a WAN VCI outside its pool: the open fails
/// there, by name, and what was written before is cleared.
#[test]
fn a_wan_vci_outside_the_pool_fails_the_open_at_the_avlink() {
    let mut net = figure13(Instant::from_millis(1), Instant::from_millis(10_000), None);
    // Take every pool VCI on the WAN segment, so the table hands out one
    // beyond the pool.
    let plan = WanPlan::default();
    for _ in 0..plan.count {
        net.table
            .allocate(Owner(99), &[Link(2)], 0, u64::MAX / 4)
            .unwrap();
    }
    net.sim.run_until(Instant::from_millis(300));
    let src = net.sim.node::<Source>(net.src).unwrap();
    let State::Failed(e) = &src.state else {
        panic!("the open did not fail");
    };
    // The near AVlink (hop 1) was asked to map onto WAN VCI 96.
    assert_eq!(
        *e,
        OpenError::Refused {
            relay: 1,
            why: "status 3".into()
        }
    );
    let av = net.sim.node::<Avlink>(net.avlinks[0]).unwrap();
    assert_eq!(av.relay_counters().refused_pool, 1);
    assert_eq!(av.entry(0, 32), None);
    let r0 = net.sim.node::<VunetLink>(net.relays[0]).unwrap();
    assert_eq!(r0.entry(0, 32), None, "the first relay's entry undone");
    // Only the grabbed pool entries are left in the table.
    assert_eq!(net.table.entries(0).unwrap().len(), usize::from(plan.count));
}

/// Two hosts of VuNet A open at once to two hosts of VuNet B: each VC
/// gets its own VCI on every shared segment and its own pool VC across
/// the WAN, and each sink gets only its source's PDUs.
#[test]
fn two_hosts_opening_at_once_get_their_own_pool_vcs() {
    let at = Instant::from_millis(1);
    let mut net = figure13(at, Instant::from_millis(200), Some(at));
    net.sim.run_until(Instant::from_millis(150));
    let vcis = |id: NodeId| {
        let State::Open(vc) = &net.sim.node::<Source>(id).unwrap().state else {
            panic!("not open");
        };
        vc.vcis.clone()
    };
    let (one, two) = (vcis(net.src), vcis(net.src2));
    assert_eq!(one, vec![32; 5]);
    assert_eq!(two, vec![33; 5]);
    let av = net.sim.node::<Avlink>(net.avlinks[0]).unwrap();
    assert_eq!(av.entry(0, 32), Some((32, 0)));
    assert_eq!(av.entry(0, 33), Some((33, 0)));
    for (dst, vci) in [(net.dst, 32), (net.dst2, 33)] {
        let sink = net.sim.node::<Sink>(dst).unwrap();
        let want: Vec<(VcId, Vec<u8>)> = (0..PDUS).map(|i| (VcId::new(0, vci), pdu(i))).collect();
        let got: Vec<(VcId, usize)> = sink.got.iter().map(|(v, p)| (*v, p.len())).collect();
        let lens: Vec<(VcId, usize)> = want.iter().map(|(v, p)| (*v, p.len())).collect();
        assert_eq!(got, lens, "sink of VCI {vci}");
        assert!(sink.got == want, "sink of VCI {vci}: other bytes");
        assert_eq!(sink.corrupted, 0);
    }
    net.sim.run_until(Instant::from_millis(400));
    for src in [net.src, net.src2] {
        assert!(matches!(
            net.sim.node::<Source>(src).unwrap().state,
            State::Closed
        ));
    }
    assert!(net.table.entries(0).unwrap().is_empty());
    for i in 0..2 {
        let c = net
            .sim
            .node::<Avlink>(net.avlinks[i])
            .unwrap()
            .relay_counters();
        assert_eq!(c.refused_replay + c.refused_tag + c.refused_owner, 0);
    }
}
