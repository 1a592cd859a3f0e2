//! An IP router between ATM and ATOMIC: Classical IP on its ATM ports
//! (an [`IpNode`] that forwards), and on each ATOMIC LAN it joins, an
//! [`AtomicHost`] with the router's address there, found by that LAN's
//! Address Consultant like any other host.
//!
//! The router's ATOMIC interfaces are the IP node's packet interfaces:
//! a packet the IP node routes to one goes to that LAN's host, which
//! sends it along a route from the AC to its next hop; a packet that
//! host receives (every IP packet addressed through the router, whatever
//! its destination) goes back to the IP node as arriving on that
//! interface, to be forwarded or answered. The node runs on an engine
//! carrying [`Unit`]s: its ports are the IP node's ATM ports, then one
//! port per LAN, each linked to the Mosaic host-interface node of its
//! cable.

use aurora_engine::carry::{Unit, WRONG_KIND};
use aurora_ip::node::IpNode;
use aurora_net::{Node, Outbox, PortId, PortSummary};
use aurora_time::Instant;
use aurora_wire::CellBytes;

use crate::host::AtomicHost;

/// Rounds of handing packets between the IP node and the LANs per call:
/// a packet crosses at most twice (in, then an ICMP answer back out), so
/// this bound is never reached by a packet that means well.
const MAX_ROUNDS: usize = 4;

/// The router.
pub struct Gateway {
    ip: IpNode,
    lans: Vec<AtomicHost>,
    cells: Vec<CellBytes>,
    frames: Vec<Vec<u8>>,
    up: Vec<Vec<u8>>,
    cell_out: Outbox<CellBytes>,
    frame_out: Outbox<Vec<u8>>,
    wrong_kind: u64,
}

impl Gateway {
    /// A router from an IP node whose packet interfaces are `lans`, in
    /// order (its configuration has one packet interface per LAN host, with
    /// that host's address).
    pub fn new(ip: IpNode, lans: Vec<AtomicHost>) -> Result<Self, String> {
        let ifaces = &ip.config().packet_interfaces;
        if ifaces.len() != lans.len() {
            return Err(format!(
                "the router has {} packet interfaces but {} ATOMIC hosts",
                ifaces.len(),
                lans.len()
            ));
        }
        for (i, h) in ifaces.iter().zip(&lans) {
            if i.addr != h.addr() {
                return Err(format!(
                    "packet interface {} and its ATOMIC host {} differ",
                    i.addr,
                    h.addr()
                ));
            }
        }
        Ok(Gateway {
            ip,
            lans,
            cells: Vec::new(),
            frames: Vec::new(),
            up: Vec::new(),
            cell_out: Outbox::default(),
            frame_out: Outbox::default(),
            wrong_kind: 0,
        })
    }

    /// The IP side.
    pub fn ip(&self) -> &IpNode {
        &self.ip
    }

    /// The IP side, to change it.
    pub fn ip_mut(&mut self) -> &mut IpNode {
        &mut self.ip
    }

    /// The host on each ATOMIC LAN.
    pub fn lans(&self) -> &[AtomicHost] {
        &self.lans
    }

    /// The host on ATOMIC LAN `k`, to change it.
    pub fn lan_mut(&mut self, k: usize) -> Option<&mut AtomicHost> {
        self.lans.get_mut(k)
    }

    /// Frames of the wrong kind that arrived (a cell on an ATOMIC port, a
    /// frame on an ATM port), dropped.
    pub fn wrong_kind(&self) -> u64 {
        self.wrong_kind
    }

    /// The engine port of LAN `k`.
    fn lan_port(&self, k: usize) -> PortId {
        (self.ip.ports() + k) as PortId
    }

    /// Hands packets between the IP node and the LANs until none move.
    fn pump(&mut self, now: Instant, out: &mut Outbox<Unit>) {
        for _ in 0..MAX_ROUNDS {
            let mut moved = false;
            while let Some((k, hop, pkt)) = self.ip.take_packet() {
                moved = true;
                if let Some(h) = self.lans.get_mut(k) {
                    h.forward(now, hop, pkt, &mut self.frame_out);
                    self.flush_lan(k, out);
                }
            }
            for k in 0..self.lans.len() {
                let up = &mut self.up;
                aurora_net::PacketPort::drain_to_host(&mut self.lans[k], &mut |p| {
                    up.push(p.to_vec())
                });
                for mut p in self.up.drain(..) {
                    moved = true;
                    self.ip.packet_in(now, k, &mut p, &mut self.cell_out);
                }
            }
            self.flush_cells(out);
            if !moved {
                break;
            }
        }
    }

    fn flush_cells(&mut self, out: &mut Outbox<Unit>) {
        for (p, c) in self.cell_out.drain() {
            out.push(p, Unit::Cell(c));
        }
        for (p, c, why) in self.cell_out.drain_drops() {
            out.dropped(p, &Unit::Cell(c), why);
        }
    }

    fn flush_lan(&mut self, k: usize, out: &mut Outbox<Unit>) {
        let port = self.lan_port(k);
        for (_, f) in self.frame_out.drain() {
            out.push(port, Unit::Frame(f));
        }
        for (_, f, why) in self.frame_out.drain_drops() {
            out.dropped(port, &Unit::Frame(f), why);
        }
    }
}

impl Node<Unit> for Gateway {
    fn ports(&self) -> usize {
        self.ip.ports() + self.lans.len()
    }

    fn receive(&mut self, now: Instant, port: PortId, units: &[Unit], out: &mut Outbox<Unit>) {
        self.cell_out.track_drops(out.tracking_drops());
        self.frame_out.track_drops(out.tracking_drops());
        let atm = self.ip.ports();
        match usize::from(port).checked_sub(atm) {
            None => {
                self.cells.clear();
                for u in units {
                    match u {
                        Unit::Cell(c) => self.cells.push(*c),
                        Unit::Frame(f) => match CellBytes::try_from(f.as_slice()) {
                            Ok(c) => self.cells.push(c),
                            Err(_) => {
                                self.wrong_kind += 1;
                                out.dropped(port, u, WRONG_KIND);
                            }
                        },
                    }
                }
                self.ip.receive(now, port, &self.cells, &mut self.cell_out);
                self.flush_cells(out);
            }
            Some(k) if k < self.lans.len() => {
                self.frames.clear();
                for u in units {
                    match u {
                        Unit::Frame(f) => self.frames.push(f.clone()),
                        Unit::Cell(_) => {
                            self.wrong_kind += 1;
                            out.dropped(port, u, WRONG_KIND);
                        }
                    }
                }
                self.lans[k].receive(now, 0, &self.frames, &mut self.frame_out);
                self.flush_lan(k, out);
            }
            Some(_) => {}
        }
        self.pump(now, out);
    }

    fn poll(&mut self, now: Instant, out: &mut Outbox<Unit>) {
        self.cell_out.track_drops(out.tracking_drops());
        self.frame_out.track_drops(out.tracking_drops());
        if self.ip.poll_at().is_some_and(|t| t <= now) {
            self.ip.poll(now, &mut self.cell_out);
            self.flush_cells(out);
        }
        for k in 0..self.lans.len() {
            if self.lans[k].poll_at().is_some_and(|t| t <= now) {
                self.lans[k].poll(now, &mut self.frame_out);
                self.flush_lan(k, out);
            }
        }
        self.pump(now, out);
    }

    fn poll_at(&self) -> Option<Instant> {
        let lans = self.lans.iter().filter_map(AtomicHost::poll_at).min();
        [self.ip.poll_at(), lans].into_iter().flatten().min()
    }

    fn port_summary(&self, port: PortId) -> Option<PortSummary> {
        self.ip.port_summary(port)
    }

    fn inner(&self) -> Option<&dyn std::any::Any> {
        Some(&self.ip)
    }

    fn inner_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(&mut self.ip)
    }
}
