//! VuNet's way of switching: the switch routes each cell on header bits
//! alone, and a separate two-port **relaying link** between switches does
//! the ATM work: for each VCI arriving on one side, a table gives the new
//! VCI and the 4 bits of output port the next switch will route on.
//!
//! The link's tables are managed by **control cells** on a reserved VCI
//! that write entries and read them back. VuNet trusted every host; Aurora
//! accepts a control cell only from a port configured for management, or
//! with an HMAC-SHA256 tag under a configured key and a sequence number
//! above the last one accepted (so a recorded cell cannot be replayed).
//! Every other control cell changes nothing and is counted.
//!
//! Routing bits: Aurora carries the 4 output-port bits in the GFC field of
//! the UNI header (the VuNet switch clears them as it forwards).
//!
//! Control cell payload (48 bytes):
//!
//! ```text
//!  0       command: 1 write entry, 2 read entry, 3 reply (from the link),
//!          4 clear entry, 5 identify ("who are you")
//!  1       table: 0 cells arriving on port 0, 1 cells arriving on port 1
//!          (the reply to an identify: the port the request came in on)
//!  2..4    VCI the entry is for (big-endian)
//!  4..6    new VCI (write; reply)
//!  6       output port bits, 0-15 (write; reply)
//!  7       in a request: the key id (which host's key tags it); in a
//!          reply: 0 done, 1 no entry, 2 not yours (another key holds
//!          the entry), 3 refused (an AVlink's WAN VCI outside its pool
//!          or held by management)
//!  8..16   sequence number (big-endian)
//!  16..32  HMAC-SHA256 of bytes 0..16, 33 and 35..48 (route and target)
//!          under the key, first 16 bytes
//!  32      hops: relays still to pass before the target
//!  33      back: relays the target's reply passes on its way back
//!  34      next: the route nibble the next switch routes on
//!  35..46  route: 22 nibbles (high nibble first), see below
//!  46..48  the target relay's id (big-endian): a relay acts on a tagged
//!          request only if it is its own, so a request for one relay
//!          cannot be made to act at another on its way (an identify
//!          excepted: it acts on nothing); in the reply to an identify,
//!          the answering relay's own id
//! ```
//!
//! Identify (5) is how a host learns what lies behind a switch port
//! without knowing it: any relay the request reaches with `hops` 0 that
//! takes it (key, tag and sequence number checked as for any request)
//! answers whatever target it names, changing no entry, with its own id
//! in bytes 46..48 and the side it was asked on in byte 1, both covered by
//! the reply's tag.
//!
//! A relay takes every cell on the control VCI. One whose `hops` is not 0
//! is only passed on: the relay takes one off `hops`, sets the routing
//! bits to route nibble `next`, adds one to `next` and sends it out of its
//! other side, changing nothing else (so the tag, which does not cover
//! `hops` and `next`, still holds). The relay where `hops` is 0 is the
//! target: it checks the cell and acts, and its reply leaves by the side
//! the request came in on with `hops` = `back`, routed on nibble `next`
//! and `next` one on, so the relays between relay it back the same way.
//! A host reaching the relay `d` relays beyond the first thus writes the
//! bits of the switch after each relay it passes, then the `d + 1` bits
//! the reply needs (the first for the switch the target replies into, the
//! last for the host's own switch); a route of zeros is the first relay,
//! replying on bits 0.
//!
//! Ownership and soft state: a relay holds keys by id (one per host, say;
//! [`VunetLink::new`]'s key is id 0) and a sequence number per key, so one
//! host's numbers do not stall another's. An entry written by a tagged
//! control cell belongs to its key: another key may not rewrite or clear
//! it (status 2, counted). With a lifetime set ([`VunetLink::set_lifetime`]),
//! such an entry lasts that long after its owner last wrote or read it,
//! then goes (counted), so an application that died leaks nothing. Entries
//! loaded by management ([`VunetLink::set_entry`], or a trusted port) have
//! no owner and do not expire. [`VunetLink::restart`] loses everything
//! written by control cells, as a power-cycled link card would.

use std::collections::{BTreeMap, BTreeSet};

use aurora_time::{Duration, Instant};
use aurora_wire::cell::{build_cell, Format, Header};
use aurora_wire::hec::{HecReceiver, HecVerdict};
use aurora_wire::{CellBytes, HEADER_LEN};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::{Node, Outbox, PortId, PortSummary};

/// The VCI reserved for relaying-link control cells.
pub const VCI_LINK_CONTROL: u16 = 30;

/// Control commands.
pub const CMD_WRITE: u8 = 1;
/// Read an entry back.
pub const CMD_READ: u8 = 2;
/// The link's answer.
pub const CMD_REPLY: u8 = 3;
/// Remove an entry (its reply says done, the entry now absent).
pub const CMD_CLEAR: u8 = 4;
/// Who are you: any relay answers with its id and the side it was asked
/// on, and changes nothing (see the module docs).
pub const CMD_IDENT: u8 = 5;

/// Most restarts a relay keeps scheduled ([`VunetLink::restart_at`]).
pub const MAX_RESTARTS: usize = 1024;

/// Nibbles a control cell's route holds.
pub const ROUTE_NIBBLES: usize = 22;

/// Where a control cell goes beyond the first relay, and how its reply
/// comes back (see the module docs). The default reaches the first relay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Route {
    /// Relays still to pass before the target.
    pub hops: u8,
    /// Relays the reply passes on its way back.
    pub back: u8,
    /// The nibble the next switch routes on.
    pub next: u8,
    /// Routing bits, one nibble (0-15) each.
    pub bits: [u8; ROUTE_NIBBLES],
    /// The id of the relay the cell is for ([`VunetLink::set_id`]).
    pub target: u16,
}

impl Route {
    /// The route to relay `target` (its id), `out.len()` relays beyond the
    /// first: `out[k]` the routing bits of the switch after the `k`-th
    /// relay passed, `back` the `out.len() + 1` bits the reply needs, the
    /// switch the target replies into first and the host's own last.
    /// `None` if they do not fit, do not match, or are not 4-bit values.
    pub fn to_relay(target: u16, out: &[u8], back: &[u8]) -> Option<Route> {
        if back.len() != out.len() + 1
            || out.len() + back.len() > ROUTE_NIBBLES
            || out.iter().chain(back).any(|&b| b > 0x0F)
        {
            return None;
        }
        let mut bits = [0u8; ROUTE_NIBBLES];
        for (i, &b) in out.iter().chain(back).enumerate() {
            bits[i] = b;
        }
        Some(Route {
            hops: out.len() as u8,
            back: out.len() as u8,
            next: 0,
            bits,
            target,
        })
    }

    /// Nibble `i`, if the route has it.
    fn nibble(&self, i: u8) -> Option<u8> {
        self.bits.get(usize::from(i)).copied()
    }
}

/// A control request or reply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Control {
    /// Command.
    pub cmd: u8,
    /// Which table (the arriving port it applies to).
    pub table: u8,
    /// The VCI the entry is for.
    pub vci: u16,
    /// New VCI.
    pub new_vci: u16,
    /// Output port bits.
    pub port_bits: u8,
    /// Reply status (byte 7 of a reply).
    pub status: u8,
    /// Which key tags a request (byte 7 of a request).
    pub key_id: u8,
    /// Sequence number.
    pub seq: u64,
    /// How it reaches a relay beyond the first, and its reply back.
    pub route: Route,
}

/// The bytes of a payload its tag covers: all the sender set that no
/// relay on the way changes (not `hops` and `next`).
fn tagged(p: &[u8; 48]) -> [u8; 30] {
    let mut t = [0u8; 30];
    t[..16].copy_from_slice(&p[..16]);
    t[16] = p[33];
    t[17..].copy_from_slice(&p[35..48]);
    t
}

fn tag(key: &[u8], body: &[u8]) -> [u8; 16] {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(body);
    let full = mac.finalize().into_bytes();
    let mut t = [0u8; 16];
    t.copy_from_slice(&full[..16]);
    t
}

impl Control {
    /// The 48-byte payload, tagged under `key` if given.
    pub fn encode(&self, key: Option<&[u8]>) -> [u8; 48] {
        let mut p = [0u8; 48];
        p[0] = self.cmd;
        p[1] = self.table;
        p[2..4].copy_from_slice(&self.vci.to_be_bytes());
        p[4..6].copy_from_slice(&self.new_vci.to_be_bytes());
        p[6] = self.port_bits & 0x0F;
        p[7] = if self.cmd == CMD_REPLY {
            self.status
        } else {
            self.key_id
        };
        p[8..16].copy_from_slice(&self.seq.to_be_bytes());
        p[32] = self.route.hops;
        p[33] = self.route.back;
        p[34] = self.route.next;
        for (i, pair) in self.route.bits.chunks(2).enumerate() {
            p[35 + i] = (pair[0] & 0x0F) << 4 | (pair[1] & 0x0F);
        }
        p[46..48].copy_from_slice(&self.route.target.to_be_bytes());
        if let Some(k) = key {
            let t = tag(k, &tagged(&p));
            p[16..32].copy_from_slice(&t);
        }
        p
    }

    /// Whether payload `p` carries the tag of `key` (compared in constant
    /// time), as a host checks a relay's reply.
    pub fn verify(p: &[u8; 48], key: &[u8]) -> bool {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("any key length");
        mac.update(&tagged(p));
        mac.verify_truncated_left(&p[16..32]).is_ok()
    }

    /// Reads a payload (no tag check).
    pub fn decode(p: &[u8; 48]) -> Control {
        Control {
            cmd: p[0],
            table: p[1],
            vci: u16::from_be_bytes([p[2], p[3]]),
            new_vci: u16::from_be_bytes([p[4], p[5]]),
            port_bits: p[6] & 0x0F,
            status: if p[0] == CMD_REPLY { p[7] } else { 0 },
            key_id: if p[0] == CMD_REPLY { 0 } else { p[7] },
            seq: u64::from_be_bytes(p[8..16].try_into().expect("8 bytes")),
            route: Route {
                hops: p[32],
                back: p[33],
                next: p[34],
                bits: std::array::from_fn(|i| {
                    let b = p[35 + i / 2];
                    if i % 2 == 0 {
                        b >> 4
                    } else {
                        b & 0x0F
                    }
                }),
                target: u16::from_be_bytes([p[46], p[47]]),
            },
        }
    }

    /// A control cell on `vpi` carrying this request, routed on `gfc`
    /// (0-15) by the switch it meets first.
    pub fn cell_routed(&self, vpi: u16, gfc: u8, key: Option<&[u8]>) -> CellBytes {
        let h = Header {
            gfc: gfc & 0x0F,
            ..Header::data(aurora_wire::cell::VcId::new(vpi, VCI_LINK_CONTROL))
        };
        build_cell(&h, &self.encode(key)).expect("VPI of a UNI header")
    }

    /// A control cell on `vpi` carrying this request, routing bits 0.
    pub fn cell(&self, vpi: u16, key: Option<&[u8]>) -> CellBytes {
        self.cell_routed(vpi, 0, key)
    }
}

/// Counters of a relaying link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkNodeCounters {
    /// Cells relayed.
    pub relayed: u64,
    /// Cells dropped: no entry for their VCI.
    pub unmapped: u64,
    /// Cells dropped: header failed the HEC check.
    pub hec_discarded: u64,
    /// Control cells carried out.
    pub control_accepted: u64,
    /// Control cells for a relay further on, passed to the other side.
    pub control_passed: u64,
    /// Control cells refused: not from a management port and no key set.
    pub refused_port: u64,
    /// Control cells refused: the tag did not match the key.
    pub refused_tag: u64,
    /// Control cells refused: sequence number not above the last accepted.
    pub refused_replay: u64,
    /// Control cells refused: unknown command or table.
    pub refused_malformed: u64,
    /// Writes or clears refused: another key holds the entry.
    pub refused_owner: u64,
    /// Tagged requests for another relay (the target id is not this one's).
    pub refused_target: u64,
    /// Entries dropped because their owner did not refresh them in time.
    pub expired: u64,
    /// Restarts (each losing every entry control cells wrote).
    pub restarts: u64,
    /// Writes refused (status 3) by a relay whose far side is a WAN: the
    /// WAN VCI named is outside its pool, or held by a management entry.
    pub refused_pool: u64,
}

/// What control cells may write at a relay whose side 1 is a WAN rather
/// than a VuNet (an AVlink, [`crate::avlink`]): a side-0 entry's new VCI,
/// and a side-1 entry's own VCI, are WAN VCIs and must lie in the pool of
/// VCs the WAN cross-connects, and not be one management entries hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct WanPool {
    /// The pool: VCIs `first` to `first + count - 1`.
    pub(crate) first: u16,
    /// How many.
    pub(crate) count: u16,
    /// Pool VCIs management entries hold.
    pub(crate) held: BTreeSet<u16>,
}

impl WanPool {
    /// True if `vci` is one of the pool's.
    pub(crate) fn contains(&self, vci: u16) -> bool {
        vci >= self.first && u32::from(vci) < u32::from(self.first) + u32::from(self.count)
    }

    /// True if a control cell may write entry `vci` of `table` mapping to
    /// `new_vci`: the WAN VCI in the pool, and not management's unless the
    /// cell comes from a management port (`trusted`).
    fn allows(&self, table: u8, vci: u16, new_vci: u16, trusted: bool) -> bool {
        let wan = if table == 0 { new_vci } else { vci };
        self.contains(wan) && (trusted || !self.held.contains(&wan))
    }
}

const VALID: u32 = 1 << 31;

/// The relaying link.
pub struct VunetLink {
    tables: [Vec<u32>; 2],
    mgmt: [bool; 2],
    /// Keys by id.
    keys: BTreeMap<u8, Vec<u8>>,
    /// The last sequence number accepted, per key id.
    last_seq: BTreeMap<u8, u64>,
    /// Entries written by tagged control cells: (table, VCI) → (key id,
    /// when it expires, if a lifetime is set).
    owned: BTreeMap<(u8, u16), (u8, Option<Instant>)>,
    /// Expiry times, earliest first, one per owned entry with a lifetime.
    expiries: BTreeSet<(Instant, u8, u16)>,
    lifetime: Option<Duration>,
    /// Times the card is to be power-cycled ([`VunetLink::restart_at`]).
    restarts: BTreeSet<Instant>,
    /// This relay's id, which tagged requests must name.
    id: u16,
    /// For an AVlink: what its WAN side's entries may name.
    pub(crate) pool: Option<WanPool>,
    hec: [HecReceiver; 2],
    counters: LinkNodeCounters,
    ports: [PortSummary; 2],
}

impl VunetLink {
    /// A link with empty tables. `mgmt[p]` trusts control cells arriving on
    /// port `p`; `key` lets control cells from anywhere in if they carry
    /// its tag.
    pub fn new(mgmt: [bool; 2], key: Option<Vec<u8>>) -> Self {
        VunetLink {
            tables: [vec![0; 65536], vec![0; 65536]],
            mgmt,
            keys: key.map(|k| (0, k)).into_iter().collect(),
            last_seq: BTreeMap::new(),
            owned: BTreeMap::new(),
            expiries: BTreeSet::new(),
            lifetime: None,
            restarts: BTreeSet::new(),
            id: 0,
            pool: None,
            hec: [HecReceiver::new(), HecReceiver::new()],
            counters: LinkNodeCounters::default(),
            ports: [PortSummary::default(); 2],
        }
    }

    /// Writes an entry directly, as a management plane loading a table
    /// before the network starts: cells arriving on port `table` with
    /// `vci` leave by the other port with `new_vci` and routing bits
    /// `port_bits` (0-15). `table` above 1 is ignored.
    pub fn set_entry(&mut self, table: usize, vci: u16, new_vci: u16, port_bits: u8) {
        if let Some(t) = self.tables.get_mut(table) {
            t[usize::from(vci)] = VALID | (u32::from(port_bits & 0x0F) << 16) | u32::from(new_vci);
            // Management's now: no host's, and it does not expire.
            let key = (table as u8, vci);
            if let Some((_, Some(old))) = self.owned.remove(&key) {
                self.expiries.remove(&(old, key.0, vci));
            }
        }
    }

    /// The counters so far.
    pub fn counters(&self) -> LinkNodeCounters {
        self.counters
    }

    /// Sets the id tagged requests must name to be carried out here (0
    /// unless set; give each relay of a network its own).
    pub fn set_id(&mut self, id: u16) {
        self.id = id;
    }

    /// This relay's id.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// Adds (or replaces) key `id`: control cells carrying `id` and its
    /// tag are let in, and the entries they write are that key's.
    pub fn add_key(&mut self, id: u8, key: Vec<u8>) {
        self.keys.insert(id, key);
    }

    /// Entries written by control cells last `lifetime` after their owner
    /// last wrote or read them (`None`: for ever, the default).
    pub fn set_lifetime(&mut self, lifetime: Option<Duration>) {
        self.lifetime = lifetime;
    }

    /// The link card power-cycled: every entry control cells wrote is lost
    /// (entries loaded by management come back with the card's
    /// configuration), and so is what it knew of sequence numbers.
    pub fn restart(&mut self) {
        self.counters.restarts += 1;
        for &(t, vci) in self.owned.keys() {
            self.tables[usize::from(t)][usize::from(vci)] = 0;
        }
        self.owned.clear();
        self.expiries.clear();
        self.last_seq.clear();
    }

    /// Restarts the card at `at` (as [`VunetLink::restart`]), in either
    /// driver: the time is kept and acted on when the node is polled.
    /// At most [`MAX_RESTARTS`] are kept; more are ignored.
    pub fn restart_at(&mut self, at: Instant) {
        if self.restarts.len() < MAX_RESTARTS {
            self.restarts.insert(at);
        }
    }

    /// Carries out what is due by `now`: restarts, then expiries.
    pub(crate) fn catch_up(&mut self, now: Instant) {
        self.restarts_due(now);
        self.expire(now);
    }

    /// Carries out the restarts due by `now`.
    fn restarts_due(&mut self, now: Instant) {
        while self.restarts.first().is_some_and(|&t| t <= now) {
            self.restarts.pop_first();
            self.restart();
        }
    }

    /// Who holds entry `vci` of `table` (a key id), if a control cell
    /// wrote it.
    pub fn owner(&self, table: u8, vci: u16) -> Option<u8> {
        self.owned.get(&(table, vci)).map(|o| o.0)
    }

    /// Sets the expiry of entry (`t`, `vci`), `owner`'s, to `now` + the
    /// lifetime.
    fn refresh(&mut self, t: u8, vci: u16, owner: u8, now: Instant) {
        let expires = self.lifetime.map(|l| now + l);
        if let Some((_, Some(old))) = self.owned.insert((t, vci), (owner, expires)) {
            self.expiries.remove(&(old, t, vci));
        }
        if let Some(e) = expires {
            self.expiries.insert((e, t, vci));
        }
    }

    /// Drops the entries whose lifetime ended by `now`.
    fn expire(&mut self, now: Instant) {
        while let Some(&(at, t, vci)) = self.expiries.first() {
            if at > now {
                break;
            }
            self.expiries.pop_first();
            if self.owned.get(&(t, vci)).is_some_and(|o| o.1 == Some(at)) {
                self.owned.remove(&(t, vci));
                self.tables[usize::from(t)][usize::from(vci)] = 0;
                self.counters.expired += 1;
            }
        }
    }

    /// The entry for `vci` in `table`: (new VCI, port bits).
    pub fn entry(&self, table: usize, vci: u16) -> Option<(u16, u8)> {
        let e = *self.tables.get(table)?.get(usize::from(vci))?;
        (e & VALID != 0).then_some((e as u16, ((e >> 16) & 0x0F) as u8))
    }

    /// Carries out the control cell `payload` that arrived on `port` with
    /// its hop count 0 (checks, then the command), pushing its reply out of
    /// `port` on `vpi`.
    pub(crate) fn control(
        &mut self,
        now: Instant,
        port: PortId,
        payload: &[u8; 48],
        out: &mut Outbox,
        vpi: u16,
    ) {
        let c = Control::decode(payload);
        let trusted = self.mgmt.get(usize::from(port)).copied().unwrap_or(false);
        if !trusted {
            let Some(key) = self.keys.get(&c.key_id) else {
                self.counters.refused_port += 1;
                return;
            };
            // Constant-time comparison of the tag.
            let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("any key length");
            mac.update(&tagged(payload));
            if mac.verify_truncated_left(&payload[16..32]).is_err() {
                self.counters.refused_tag += 1;
                return;
            }
            if c.seq <= self.last_seq.get(&c.key_id).copied().unwrap_or(0) {
                self.counters.refused_replay += 1;
                return;
            }
            // An identify acts on nothing, so it may be carried out by
            // whichever relay it reaches.
            if c.route.target != self.id && c.cmd != CMD_IDENT {
                self.counters.refused_target += 1;
                return;
            }
        }
        if c.table > 1 || !matches!(c.cmd, CMD_WRITE | CMD_READ | CMD_CLEAR | CMD_IDENT) {
            self.counters.refused_malformed += 1;
            return;
        }
        if !trusted {
            self.last_seq.insert(c.key_id, c.seq);
        }
        if c.cmd == CMD_IDENT {
            self.counters.control_accepted += 1;
            let answer = Control {
                table: (port & 1) as u8,
                new_vci: 0,
                port_bits: 0,
                status: 0,
                route: Route {
                    target: self.id,
                    ..c.route
                },
                ..c
            };
            self.reply(port, answer, out, vpi);
            return;
        }
        let t = usize::from(c.table);
        let key = (c.table, c.vci);
        let exists = self.entry(t, c.vci).is_some();
        // A keyed host may change an entry no one holds, or its own; a
        // management entry (held by no key, but present) is not its to
        // change either.
        let holder = self.owned.get(&key).map(|o| o.0);
        let mine = trusted || holder == Some(c.key_id) || (holder.is_none() && !exists);
        let mut refused = None;
        // Towards a WAN the pool's VCs are shared by every key: one another
        // key's entry already sends on is not this one's to take.
        let taken = || {
            c.table == 0
                && !trusted
                && self.owned.iter().any(|(&(t, v), o)| {
                    t == 0
                        && v != c.vci
                        && o.0 != c.key_id
                        && self.entry(0, v).is_some_and(|(w, _)| w == c.new_vci)
                })
        };
        let pool_ok = self
            .pool
            .as_ref()
            .is_none_or(|p| p.allows(c.table, c.vci, c.new_vci, trusted))
            && (self.pool.is_none() || !taken());
        match c.cmd {
            CMD_WRITE | CMD_CLEAR if !mine => {
                self.counters.refused_owner += 1;
                refused = Some(2);
            }
            CMD_WRITE if !pool_ok => {
                self.counters.refused_pool += 1;
                refused = Some(3);
            }
            CMD_WRITE => {
                self.tables[t][usize::from(c.vci)] =
                    VALID | (u32::from(c.port_bits & 0x0F) << 16) | u32::from(c.new_vci);
                if trusted {
                    if let Some((_, Some(old))) = self.owned.remove(&key) {
                        self.expiries.remove(&(old, c.table, c.vci));
                    }
                } else {
                    self.refresh(c.table, c.vci, c.key_id, now);
                }
            }
            CMD_CLEAR => {
                self.tables[t][usize::from(c.vci)] = 0;
                if let Some((_, Some(old))) = self.owned.remove(&key) {
                    self.expiries.remove(&(old, c.table, c.vci));
                }
            }
            // A read by the owner keeps the entry alive.
            _ if !trusted && holder == Some(c.key_id) => {
                self.refresh(c.table, c.vci, c.key_id, now)
            }
            _ => {}
        }
        if refused.is_none() {
            self.counters.control_accepted += 1;
        }
        let (new_vci, port_bits, status) = match (refused, self.entry(t, c.vci), c.cmd) {
            (Some(s), _, _) => (0, 0, s),
            (None, Some((v, b)), _) => (v, b, 0),
            (None, None, CMD_CLEAR) => (0, 0, 0),
            (None, None, _) => (0, 0, 1),
        };
        let answer = Control {
            new_vci,
            port_bits,
            status,
            ..c
        };
        self.reply(port, answer, out, vpi);
    }

    /// Sends the reply `c` (the request with the answer's fields filled
    /// in) back the way the request came, routed on the route's next
    /// nibble (0 for a request to the first relay).
    fn reply(&mut self, port: PortId, c: Control, out: &mut Outbox, vpi: u16) {
        let gfc = c.route.nibble(c.route.next).unwrap_or(0);
        let reply = Control {
            cmd: CMD_REPLY,
            route: Route {
                hops: c.route.back,
                next: c.route.next.saturating_add(1),
                ..c.route
            },
            ..c
        };
        self.ports[usize::from(port) & 1].cells_out += 1;
        // Replies are tagged under the requester's key.
        let key = self.keys.get(&c.key_id).map(Vec::as_slice);
        out.push(port, reply.cell_routed(vpi, gfc, key));
    }
}

impl Node for VunetLink {
    fn ports(&self) -> usize {
        2
    }

    fn receive(&mut self, now: Instant, port: PortId, cells: &[CellBytes], out: &mut Outbox) {
        let p = usize::from(port);
        if p > 1 {
            return;
        }
        self.catch_up(now);
        self.ports[p].cells_in += cells.len() as u64;
        for cell in cells {
            let mut c = *cell;
            if self.hec[p].check_cell(&mut c) == HecVerdict::Discarded {
                self.counters.hec_discarded += 1;
                self.ports[p].dropped += 1;
                out.dropped(port, cell, "hec_uncorrectable");
                continue;
            }
            let h = Header::parse(&[c[0], c[1], c[2], c[3]], Format::Uni);
            if h.vci == VCI_LINK_CONTROL && c[HEADER_LEN + 32] > 0 {
                // For a relay further on: pass it.
                if !pass_on(&mut c, &h) {
                    self.counters.refused_malformed += 1;
                    self.ports[p].dropped += 1;
                    continue;
                }
                self.counters.control_passed += 1;
                self.ports[1 - p].cells_out += 1;
                out.push(1 - port, c);
                continue;
            }
            if h.vci == VCI_LINK_CONTROL {
                let payload: [u8; 48] = c[HEADER_LEN..].try_into().expect("48 bytes");
                let before = self.counters.control_accepted;
                self.control(now, port, &payload, out, h.vpi);
                if self.counters.control_accepted == before {
                    self.ports[p].dropped += 1;
                }
                continue;
            }
            let Some((vci, bits)) = self.entry(p, h.vci) else {
                self.counters.unmapped += 1;
                self.ports[p].dropped += 1;
                out.dropped(port, cell, "unknown_vc");
                continue;
            };
            let nh = Header {
                gfc: bits,
                vci,
                ..h
            };
            if nh.emit(&mut c).is_ok() {
                self.counters.relayed += 1;
                self.ports[1 - p].cells_out += 1;
                out.push(1 - port, c);
            }
        }
    }

    fn poll(&mut self, now: Instant, _out: &mut Outbox) {
        self.catch_up(now);
    }

    fn poll_at(&self) -> Option<Instant> {
        let expiry = self.expiries.first().map(|e| e.0);
        let restart = self.restarts.first().copied();
        expiry.into_iter().chain(restart).min()
    }

    fn port_summary(&self, port: PortId) -> Option<PortSummary> {
        self.ports.get(usize::from(port)).copied()
    }
}

/// Passes on control cell `c` (header `h`, hop count not 0) as a relay
/// does for a relay further on: one hop off its count, the routing bits
/// set from its route's next nibble, the nibble moved on. False, and `c`
/// unchanged, if the route has no nibble left.
pub(crate) fn pass_on(c: &mut CellBytes, h: &Header) -> bool {
    let next = c[HEADER_LEN + 34];
    let Some(&pair) = c.get(HEADER_LEN + 35 + usize::from(next) / 2) else {
        return false;
    };
    if usize::from(next) >= ROUTE_NIBBLES {
        return false;
    }
    let bits = if next.is_multiple_of(2) {
        pair >> 4
    } else {
        pair & 0x0F
    };
    let mut d = *c;
    d[HEADER_LEN + 32] -= 1;
    d[HEADER_LEN + 34] = next + 1;
    if (Header { gfc: bits, ..*h }).emit(&mut d).is_err() {
        return false;
    }
    *c = d;
    true
}

/// The VuNet switch: each cell leaves on the port its GFC bits name, with
/// those bits cleared; nothing else is looked up.
pub struct VunetSwitch {
    ports: usize,
    hec: Vec<HecReceiver>,
    per_port: Vec<PortSummary>,
    /// Cells forwarded.
    pub forwarded: u64,
    /// Cells dropped: the routing bits named a port the switch lacks.
    pub no_such_port: u64,
    /// Cells dropped: header failed the HEC check.
    pub hec_discarded: u64,
}

impl VunetSwitch {
    /// A switch with `ports` ports (at most 16: four routing bits).
    pub fn new(ports: usize) -> Self {
        let ports = ports.min(16);
        VunetSwitch {
            ports,
            hec: (0..ports).map(|_| HecReceiver::new()).collect(),
            per_port: vec![PortSummary::default(); ports],
            forwarded: 0,
            no_such_port: 0,
            hec_discarded: 0,
        }
    }
}

impl Node for VunetSwitch {
    fn ports(&self) -> usize {
        self.ports
    }

    fn receive(&mut self, _now: Instant, port: PortId, cells: &[CellBytes], out: &mut Outbox) {
        let p = usize::from(port);
        let Some(hec) = self.hec.get_mut(p) else {
            return;
        };
        self.per_port[p].cells_in += cells.len() as u64;
        for cell in cells {
            let mut c = *cell;
            if hec.check_cell(&mut c) == HecVerdict::Discarded {
                self.hec_discarded += 1;
                self.per_port[p].dropped += 1;
                out.dropped(port, cell, "hec_uncorrectable");
                continue;
            }
            let h = Header::parse(&[c[0], c[1], c[2], c[3]], Format::Uni);
            let to = u16::from(h.gfc);
            if usize::from(to) >= self.ports {
                self.no_such_port += 1;
                self.per_port[p].dropped += 1;
                out.dropped(port, cell, "bad_port");
                continue;
            }
            if (Header { gfc: 0, ..h }).emit(&mut c).is_ok() {
                self.forwarded += 1;
                self.per_port[usize::from(to)].cells_out += 1;
                out.push(to, c);
            }
        }
    }

    fn poll(&mut self, _now: Instant, _out: &mut Outbox) {}

    fn poll_at(&self) -> Option<Instant> {
        None
    }

    fn port_summary(&self, port: PortId) -> Option<PortSummary> {
        self.per_port.get(usize::from(port)).copied()
    }
}
