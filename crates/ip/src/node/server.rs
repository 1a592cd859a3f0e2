//! The ATMARP server and its clients (RFC 2225), in a network of PVCs.
//!
//! A client registers by sending the server an ATMARP request for its own
//! address (source and target the same), and again before the server's
//! entry would age out. The server records, from every request, the
//! sender's IP and ATM addresses, and answers a request for a target it
//! knows with the target's ATM address, or with a NAK.
//!
//! With no signalling to open a VC to an ATM address, a client maps the
//! answer to one of its PVCs whose far end has that ATM address (given in
//! the topology, or learned from InATMARP); if none does, the packet waits
//! until it times out like any other unresolved one. A NAK ends the wait at
//! once: the waiting packets get their ICMP host unreachable.

use std::net::Ipv4Addr;

use aurora_time::{Duration, Instant};
use aurora_wire::atmarp::{AtmAddr, AtmarpRepr, Op};
use aurora_wire::ipv4;
use rustc_hash::FxHashMap;

use super::{Core, ARP_CAPACITY};
use crate::arp::SERVER_AGEING;
use crate::forward::DropReason;
use aurora_net::Outbox;

#[derive(Clone, Copy, Debug)]
struct Registered {
    atm: AtmAddr,
    learned: Instant,
}

/// A server's table and a client's registration.
#[derive(Debug, Default)]
pub(super) struct ServerState {
    /// As a server: who registered or asked.
    table: FxHashMap<Ipv4Addr, Registered>,
    /// As a client: when the server last confirmed our registration.
    registered: Option<Instant>,
    /// As a client: when we last sent a registration.
    last_register: Option<Instant>,
    /// As a client: when we last asked about each address still waiting.
    asked: FxHashMap<Ipv4Addr, Instant>,
    /// As a server: when the table was last swept of stale entries.
    swept: Instant,
}

/// How often a server sweeps stale entries from its table.
const SWEEP: Duration = Duration::from_secs(60);

impl Core {
    /// This node's address on the server's port, and that VC's index.
    fn server_vc(&self) -> Option<(usize, Ipv4Addr)> {
        let (port, vc) = self.cfg.server_vc?;
        let i = *self.by_vc.get(&(port, vc))?;
        Some((i, self.iface(port)?.addr))
    }

    /// Asks the server for `ip`, unless asked within the retry time.
    pub(super) fn ask_server(&mut self, now: Instant, ip: Ipv4Addr, out: &mut Outbox) {
        let Some((i, me)) = self.server_vc() else {
            return;
        };
        let retry = self.cfg.inarp_retry;
        if self.server.asked.get(&ip).is_some_and(|&t| now < t + retry) {
            return;
        }
        // Bounded: only addresses with packets waiting are remembered.
        if self.server.asked.len() >= super::MAX_PENDING {
            self.server.asked.clear();
        }
        self.server.asked.insert(ip, now);
        self.request(i, me, ip, out);
    }

    /// Sends the server, on VC `i`, a request from `me` for `target` (a
    /// registration when the two are the same).
    fn request(&mut self, i: usize, me: Ipv4Addr, target: Ipv4Addr, out: &mut Outbox) {
        let req = AtmarpRepr {
            op: Op::Request,
            sha: self.cfg.atm,
            ssa: AtmAddr::EMPTY,
            spa: Some(me),
            tha: AtmAddr::EMPTY,
            tsa: AtmAddr::EMPTY,
            tpa: Some(target),
        };
        self.send_atmarp(i, &req, out);
        self.counters.atmarp_requests += 1;
    }

    /// As a server: a request on VC `i`.
    pub(super) fn serve(&mut self, now: Instant, i: usize, a: &AtmarpRepr, out: &mut Outbox) {
        let t = &mut self.server.table;
        if let Some(spa) = a.spa {
            if t.len() < ARP_CAPACITY || t.contains_key(&spa) {
                t.insert(
                    spa,
                    Registered {
                        atm: a.sha,
                        learned: now,
                    },
                );
            }
        }
        let Some(tpa) = a.tpa else {
            self.counters.drops.add(DropReason::BadAtmarp);
            return;
        };
        let known = if self.fwd.is_local(tpa) {
            Some(self.cfg.atm)
        } else {
            t.get(&tpa)
                .filter(|r| now < r.learned + SERVER_AGEING)
                .map(|r| r.atm)
        };
        let answer = match known {
            Some(atm) => {
                self.counters.served[0] += 1;
                AtmarpRepr {
                    op: Op::Reply,
                    sha: atm,
                    ssa: AtmAddr::EMPTY,
                    spa: Some(tpa),
                    tha: a.sha,
                    tsa: a.ssa,
                    tpa: a.spa,
                }
            }
            None => {
                self.counters.served[1] += 1;
                AtmarpRepr { op: Op::Nak, ..*a }
            }
        };
        self.send_atmarp(i, &answer, out);
    }

    /// As a client: the server's reply or NAK.
    pub(super) fn server_answer(&mut self, now: Instant, a: &AtmarpRepr, out: &mut Outbox) {
        self.counters.atmarp_answers += 1;
        let me = self.server_vc().map(|(_, me)| me);
        match a.op {
            Op::Reply => {
                let Some(ip) = a.spa else { return };
                if Some(ip) == me {
                    self.server.registered = Some(now);
                    return;
                }
                self.server.asked.remove(&ip);
                let vc = self
                    .vcs
                    .iter()
                    .find(|v| !a.sha.is_empty() && v.far_atm == Some(a.sha))
                    .map(|v| (v.port, v.vc));
                if let Some((port, vc)) = vc {
                    self.arp.learn(now, ip, port, vc);
                    self.flush_pending(now, ip, out);
                }
            }
            Op::Nak => {
                let Some(ip) = a.tpa else { return };
                self.server.asked.remove(&ip);
                // Nothing will resolve it: the waiting packets fail now.
                let (dead, keep): (Vec<_>, Vec<_>) =
                    self.pending.drain(..).partition(|p| p.next_hop == ip);
                self.pending = keep.into();
                for p in dead {
                    self.counters.drops.add(DropReason::Unresolved);
                    self.last_unresolved = Some(p.next_hop);
                    self.icmp_error(now, p.port, &p.pkt, ipv4::ICMP_UNREACHABLE, 1, out);
                }
            }
            _ => {}
        }
    }

    /// When the next registration is due (at start, on retry until the
    /// server confirms, then halfway through the entry's life).
    pub(super) fn server_due(&self) -> Option<Instant> {
        let sweep = self.cfg.atmarp_server.then(|| self.server.swept + SWEEP);
        let Some(register) = self.registration_due() else {
            return sweep;
        };
        Some(sweep.map_or(register, |s| s.min(register)))
    }

    fn registration_due(&self) -> Option<Instant> {
        self.server_vc()?;
        let refresh = self.server.registered.map_or(Instant::ZERO, |t| {
            t + Duration::from_nanos(self.cfg.arp_ageing.as_nanos() / 2)
        });
        let retry = self
            .server
            .last_register
            .map_or(Instant::ZERO, |t| t + self.cfg.inarp_retry);
        Some(refresh.max(retry))
    }

    /// Registers, if due; ages the server's table.
    pub(super) fn server_poll(&mut self, now: Instant, out: &mut Outbox) {
        if self.cfg.atmarp_server && now >= self.server.swept + SWEEP {
            self.server.swept = now;
            self.server
                .table
                .retain(|_, r| now < r.learned + SERVER_AGEING);
        }
        if self.registration_due().is_none_or(|t| t > now) {
            return;
        }
        let Some((i, me)) = self.server_vc() else {
            return;
        };
        self.server.last_register = Some(now);
        self.request(i, me, me, out);
    }

    /// As a server: registered addresses and their ATM addresses.
    pub(super) fn server_table(&self) -> impl Iterator<Item = (Ipv4Addr, AtmAddr)> + '_ {
        self.server.table.iter().map(|(ip, r)| (*ip, r.atm))
    }

    /// As a client: when the server last confirmed the registration.
    pub(super) fn registered(&self) -> Option<Instant> {
        self.server.registered
    }
}
