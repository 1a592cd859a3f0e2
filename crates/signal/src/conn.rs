//! Opening and closing a VC from a host, hop by hop, with control cells:
//! the connection library, sans-I/O.
//!
//! A path is the relaying links a VC crosses, in order from the host, with
//! the routing bits its switches need ([`Path`]). Opening takes one VCI
//! per segment from the network's table (the segment into each relay, and
//! the last one into the destination), then, relay by relay from the
//! nearest, writes the relay's entry (arriving VCI → next VCI and the next
//! switch's bits) and reads it back, each a control cell that passes the
//! relays already done ([`aurora_net::vunet::Route`]) and a reply that
//! comes back the same way. Data can follow as soon as the last entry is
//! confirmed: the set-up runs ahead of it. A step not answered within the
//! timeout is sent again, up to the retries; then, or on a wrong answer,
//! the open fails with its reason, and what it wrote is cleared and the
//! table's entries released. Closing clears every entry, farthest first,
//! and releases the VCIs. (Control cells pass relays on their own VCI, so
//! the entries already written or cleared never stand in their way.)
//!
//! The host drives an [`Opener`] or [`Closer`]: it sends the cells they
//! return, hands them the control replies it receives, and calls
//! [`Opener::poll`] at [`Opener::poll_at`].

use aurora_net::vunet::{
    Control, Route, CMD_CLEAR, CMD_READ, CMD_REPLY, CMD_WRITE, VCI_LINK_CONTROL,
};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, Header};
use aurora_wire::{CellBytes, HEADER_LEN};

use crate::table::{Link, Owner, TableError, VciTable};

/// One relay of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    /// The relay's id, which its requests name (the tag covers it, so a
    /// request cannot be made to act at another relay).
    pub relay: u16,
    /// The segment into this relay, for the VCI table.
    pub link: Link,
    /// The relay's table for cells arriving from the host's side (its
    /// port on that side).
    pub side: u8,
    /// Routing bits of the switch after this relay, away from the host.
    pub bits_on: u8,
    /// Routing bits of the switch before this relay, towards the host (the
    /// switch this relay's replies enter).
    pub bits_back: u8,
}

/// A VC's way from a host to a destination across VuNet relays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path {
    /// Routing bits of the host's own switch towards the first relay.
    pub first_bits: u8,
    /// The relays, nearest first.
    pub hops: Vec<Hop>,
    /// The last segment, from the last relay into the destination.
    pub last_link: Link,
}

/// Most relays a path may cross: a control cell's route holds the bits
/// out and back (2 × relays − 1 nibbles of 22).
pub const MAX_RELAYS: usize = 11;

/// Why an open failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// The path crosses no relay or more than [`MAX_RELAYS`], or has bits
    /// above 15.
    #[error("no route: {0}")]
    NoRoute(String),
    /// The table had no free VCI on a segment (or could not be used).
    #[error("no VCI: {0}")]
    NoVci(TableError),
    /// A relay refused or answered something else than was written.
    #[error("relay {relay} refused: {why}")]
    Refused {
        /// Which relay (0 the nearest).
        relay: usize,
        /// What it said.
        why: String,
    },
    /// A relay did not answer within the timeout, after every retry.
    #[error("relay {0} did not answer")]
    NoAnswer(usize),
}

/// How long to wait for each answer, and how often to ask again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// Wait for a reply this long before asking again.
    pub timeout: Duration,
    /// Ask again this many times before giving up.
    pub retries: u32,
    /// Lease of the table's entries (renewed by the refresh daemon).
    pub lease: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            timeout: Duration::from_millis(10),
            retries: 3,
            lease: Duration::from_secs(60),
        }
    }
}

/// An open VC: its VCIs, segment by segment (the first is the one the host
/// sends on, the last the one the destination receives on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vc {
    /// The path.
    pub path: Path,
    /// VCI per segment: one per relay (into it), then the last segment's.
    pub vcis: Vec<u16>,
    /// When the open started and when its last entry was confirmed.
    pub opened: (Instant, Instant),
}

impl Vc {
    /// The VCI the host sends on.
    pub fn send_vci(&self) -> u16 {
        self.vcis[0]
    }

    /// The VCI the destination receives on.
    pub fn receive_vci(&self) -> u16 {
        *self.vcis.last().expect("a VC has segments")
    }

    /// The table entries it holds.
    pub fn grants(&self) -> Vec<(Link, u16)> {
        self.path
            .hops
            .iter()
            .map(|h| h.link)
            .chain([self.path.last_link])
            .zip(self.vcis.iter().copied())
            .collect()
    }

    /// How long the open took.
    pub fn setup_latency(&self) -> Duration {
        self.opened.1.since(self.opened.0)
    }
}

/// The control cell to relay `k` of `path` carrying `c` (its route set).
fn cell_to(path: &Path, k: usize, mut c: Control, vpi: u16, key: Option<&[u8]>) -> CellBytes {
    let out: Vec<u8> = path.hops[..k].iter().map(|h| h.bits_on).collect();
    let back: Vec<u8> = path.hops[..=k].iter().rev().map(|h| h.bits_back).collect();
    c.route = Route::to_relay(path.hops[k].relay, &out, &back).expect("path checked");
    c.table = path.hops[k].side;
    c.cell_routed(vpi, path.first_bits, key)
}

/// The reply in `cell`, if it is a control reply tagged under `key` (any
/// reply when the host has no key: it trusts its management port). Shared
/// with the topology daemon ([`crate::discover`]).
pub fn reply_of(cell: &CellBytes, key: Option<&[u8]>) -> Option<Control> {
    let h = Header::parse(&[cell[0], cell[1], cell[2], cell[3]], Format::Uni);
    if h.vci != VCI_LINK_CONTROL {
        return None;
    }
    let p: &[u8; 48] = cell[HEADER_LEN..].try_into().ok()?;
    if key.is_some_and(|k| !Control::verify(p, k)) {
        return None;
    }
    let c = Control::decode(p);
    (c.cmd == CMD_REPLY).then_some(c)
}

fn check(path: &Path) -> Result<(), OpenError> {
    if path.hops.is_empty() || path.hops.len() > MAX_RELAYS {
        return Err(OpenError::NoRoute(format!(
            "{} relays (1 to {MAX_RELAYS})",
            path.hops.len()
        )));
    }
    let bits = path
        .hops
        .iter()
        .flat_map(|h| [h.bits_on, h.bits_back, h.side]);
    if path.first_bits > 15 || bits.clone().any(|b| b > 15) {
        return Err(OpenError::NoRoute("routing bits above 15".into()));
    }
    if path.hops.iter().any(|h| h.side > 1) {
        return Err(OpenError::NoRoute("a relay has two sides, 0 and 1".into()));
    }
    Ok(())
}

/// Where an [`Opener`] is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    /// Written relay `k`'s entry; waiting for its reply.
    Write(usize),
    /// Reading relay `k`'s entry back.
    Read(usize),
    /// Clearing relay `k` after a failure (going back to 0).
    Undo(usize, OpenError),
    /// Finished.
    Done(Result<(), OpenError>),
}

/// Control-cell sequence numbers a host uses: each cell one above the
/// last, from a start the host chooses (above any it used before).
#[derive(Clone, Copy, Debug)]
pub struct Seq(pub u64);

impl Seq {
    fn take(&mut self) -> u64 {
        self.0 += 1;
        self.0
    }
}

/// Opening one VC (see the module docs).
#[derive(Debug)]
pub struct Opener {
    vc: Vc,
    step: Step,
    timing: Timing,
    vpi: u16,
    key: Option<(u8, Vec<u8>)>,
    /// When the current step gives up waiting.
    deadline: Instant,
    tries: u32,
    /// The cell the current step sent last, and the sequence number of
    /// its first try (each retry takes a new number).
    pending: Option<(CellBytes, u64)>,
    /// The sequence number sent last.
    last_seq: u64,
    /// Control cells sent, replies taken, replies not for this opener.
    pub sent: u64,
    /// Replies taken.
    pub answered: u64,
    /// Cells handed in that were not this opener's replies.
    pub ignored: u64,
    /// Refreshing an open VC rather than opening one: an entry read back
    /// missing or wrong is written again, and a failure undoes nothing.
    refresh: bool,
    /// Entries a refresh found missing or wrong and wrote again.
    rewritten: u64,
    /// The relay this refresh round last rewrote: a second wrong read of
    /// it ends the round rather than rewrite it for ever.
    rewrote: Option<usize>,
    /// The farthest relay that did not answer a clear, if one did not.
    uncleared: Option<usize>,
}

impl Opener {
    /// Starts opening `path` for `owner` at `now`: takes the VCIs from
    /// `table` and returns the opener and the first cell to send. `seq`
    /// numbers the host's control cells; `key` (its id at the relays, and
    /// the key) tags them.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        path: Path,
        owner: Owner,
        table: &dyn VciTable,
        timing: Timing,
        vpi: u16,
        key: Option<(u8, &[u8])>,
        seq: &mut Seq,
        now: Instant,
    ) -> Result<(Opener, CellBytes), OpenError> {
        check(&path)?;
        let links: Vec<Link> = path
            .hops
            .iter()
            .map(|h| h.link)
            .chain([path.last_link])
            .collect();
        let t = now.as_nanos().max(0) as u64;
        let lease = timing.lease.as_nanos().max(0) as u64;
        let vcis = table
            .allocate(owner, &links, t, lease)
            .map_err(OpenError::NoVci)?;
        let vc = Vc {
            path,
            vcis,
            opened: (now, now),
        };
        let mut o = Opener::new(vc, Step::Write(0), timing, vpi, key, now);
        let c = o.send_step(now, seq);
        Ok((o, c))
    }

    /// An opener of `vc` at `step`, nothing sent yet.
    fn new(
        vc: Vc,
        step: Step,
        timing: Timing,
        vpi: u16,
        key: Option<(u8, &[u8])>,
        now: Instant,
    ) -> Self {
        Opener {
            vc,
            step,
            timing,
            vpi,
            key: key.map(|(id, k)| (id, k.to_vec())),
            deadline: now,
            tries: 0,
            pending: None,
            last_seq: 0,
            sent: 0,
            answered: 0,
            ignored: 0,
            refresh: false,
            rewritten: 0,
            rewrote: None,
            uncleared: None,
        }
    }

    /// The request of the current step.
    fn request(&self) -> Control {
        let (cmd, k) = match self.step {
            Step::Write(k) => (CMD_WRITE, k),
            Step::Read(k) => (CMD_READ, k),
            Step::Undo(k, _) => (CMD_CLEAR, k),
            Step::Done(_) => unreachable!("no request once done"),
        };
        Control {
            cmd,
            vci: self.vc.vcis[k],
            new_vci: self.vc.vcis[k + 1],
            port_bits: self.vc.path.hops[k].bits_on,
            ..Control::default()
        }
    }

    fn relay(&self) -> usize {
        match self.step {
            Step::Write(k) | Step::Read(k) | Step::Undo(k, _) => k,
            Step::Done(_) => 0,
        }
    }

    /// Sends the current step's request (fresh sequence number).
    fn send_step(&mut self, now: Instant, seq: &mut Seq) -> CellBytes {
        let mut c = self.request();
        c.seq = seq.take();
        c.key_id = self.key.as_ref().map_or(0, |k| k.0);
        let key = self.key.as_ref().map(|k| k.1.as_slice());
        let cell = cell_to(&self.vc.path, self.relay(), c, self.vpi, key);
        // The step's first try's number, kept over retries.
        let first = match self.pending {
            Some((_, f)) if self.tries > 0 => f,
            _ => c.seq,
        };
        self.pending = Some((cell, first));
        self.last_seq = c.seq;
        self.deadline = now + self.timing.timeout;
        self.sent += 1;
        cell
    }

    /// Moves to `step` and sends its request, or finishes.
    fn go(&mut self, step: Step, now: Instant, seq: &mut Seq) -> Option<CellBytes> {
        self.step = step;
        self.tries = 0;
        if matches!(self.step, Step::Done(_)) {
            self.pending = None;
            return None;
        }
        Some(self.send_step(now, seq))
    }

    /// Gives up: clears what was written (relays before `k`, and `k` if
    /// its write may have landed), then fails with `e`.
    fn fail(&mut self, e: OpenError, now: Instant, seq: &mut Seq) -> Option<CellBytes> {
        if self.refresh {
            // A refresh leaves the VC as it found it: the next one tries
            // again, and the relays' lifetimes end what nobody keeps.
            return self.go(Step::Done(Err(e)), now, seq);
        }
        let k = self.relay();
        self.go(Step::Undo(k, e), now, seq)
    }

    /// A control reply arrived at `now`: the next cell to send, if any.
    pub fn on_cell(&mut self, cell: &CellBytes, now: Instant, seq: &mut Seq) -> Option<CellBytes> {
        let key = self.key.as_ref().map(|k| k.1.as_slice());
        let (Some(r), Some((_, first))) = (reply_of(cell, key), self.pending) else {
            self.ignored += 1;
            return None;
        };
        // An answer to any try of the current step will do (a late one to
        // an earlier try as well as to the last).
        if r.seq < first || r.seq > self.last_seq {
            self.ignored += 1;
            return None;
        }
        self.answered += 1;
        let k = self.relay();
        let last = self.vc.path.hops.len() - 1;
        let expect = (self.vc.vcis[k + 1], self.vc.path.hops[k].bits_on);
        let wrong = r.status != 0 || (r.new_vci, r.port_bits) != expect;
        match self.step.clone() {
            // A refresh that reads an entry missing (a restarted relay) or
            // wrong writes it again; one another key holds is refused.
            Step::Read(_) if self.refresh && wrong && r.status != 2 && self.rewrote != Some(k) => {
                self.rewritten += 1;
                self.rewrote = Some(k);
                self.go(Step::Write(k), now, seq)
            }
            Step::Read(_) if self.refresh && !wrong && k < last => {
                self.go(Step::Read(k + 1), now, seq)
            }
            Step::Write(_) | Step::Read(_) if wrong => {
                let why = if r.status != 0 {
                    format!("status {}", r.status)
                } else {
                    format!(
                        "entry reads VCI {} bits {}, not VCI {} bits {}",
                        r.new_vci, r.port_bits, expect.0, expect.1
                    )
                };
                self.fail(OpenError::Refused { relay: k, why }, now, seq)
            }
            Step::Write(_) => self.go(Step::Read(k), now, seq),
            Step::Read(_) if k == last => {
                if !self.refresh {
                    self.vc.opened.1 = now;
                }
                self.go(Step::Done(Ok(())), now, seq)
            }
            Step::Read(_) => self.go(Step::Write(k + 1), now, seq),
            Step::Undo(0, e) => self.go(Step::Done(Err(e)), now, seq),
            Step::Undo(_, e) => self.go(Step::Undo(k - 1, e), now, seq),
            Step::Done(_) => None,
        }
    }

    /// When [`Opener::poll`] must run (a reply's deadline), if waiting.
    pub fn poll_at(&self) -> Option<Instant> {
        self.pending.map(|_| self.deadline)
    }

    /// Time passed: on a deadline, the request again or the failure.
    pub fn poll(&mut self, now: Instant, seq: &mut Seq) -> Option<CellBytes> {
        if self.pending.is_none() || now < self.deadline {
            return None;
        }
        if self.tries < self.timing.retries {
            self.tries += 1;
            return Some(self.send_step(now, seq));
        }
        match self.step.clone() {
            // A relay that does not answer a clear: go on clearing the
            // ones before it, and fail as decided.
            Step::Undo(0, e) => {
                self.uncleared.get_or_insert(0);
                self.go(Step::Done(Err(e)), now, seq)
            }
            Step::Undo(k, e) => {
                self.uncleared.get_or_insert(k);
                self.go(Step::Undo(k - 1, e), now, seq)
            }
            _ => {
                let k = self.relay();
                self.fail(OpenError::NoAnswer(k), now, seq)
            }
        }
    }

    /// The outcome once finished: the VC, or why not (its VCIs then
    /// released from `table` by the caller with [`Opener::release`]).
    pub fn outcome(&self) -> Option<Result<&Vc, &OpenError>> {
        match &self.step {
            Step::Done(Ok(())) => Some(Ok(&self.vc)),
            Step::Done(Err(e)) => Some(Err(e)),
            _ => None,
        }
    }

    /// Releases the table entries of a failed open.
    pub fn release(
        &self,
        owner: Owner,
        table: &dyn VciTable,
        now: Instant,
    ) -> Result<u64, TableError> {
        table.release(owner, &self.vc.grants(), now.as_nanos().max(0) as u64)
    }
}

/// A VC whose path could not have been opened (see
/// [`OpenError::NoRoute`]), or whose VCIs do not fit its path, is refused.
fn check_vc(vc: &Vc) -> Result<(), OpenError> {
    check(&vc.path)?;
    if vc.vcis.len() != vc.path.hops.len() + 1 {
        return Err(OpenError::NoRoute(format!(
            "{} VCIs for {} segments",
            vc.vcis.len(),
            vc.path.hops.len() + 1
        )));
    }
    Ok(())
}

/// Closing one VC: clears each relay's entry, farthest first, then frees
/// its VCIs.
#[derive(Debug)]
pub struct Closer {
    inner: Opener,
}

impl Closer {
    /// Starts closing `vc` at `now`; the first cell to send. A VC whose
    /// path could not have been opened (see [`OpenError::NoRoute`]) is
    /// refused.
    pub fn start(
        vc: Vc,
        timing: Timing,
        vpi: u16,
        key: Option<(u8, &[u8])>,
        seq: &mut Seq,
        now: Instant,
    ) -> Result<(Closer, CellBytes), OpenError> {
        check_vc(&vc)?;
        // The opener's undo clears from a relay back to the nearest.
        let last = vc.path.hops.len() - 1;
        let step = Step::Undo(last, OpenError::NoRoute(String::new()));
        let mut inner = Opener::new(vc, step, timing, vpi, key, now);
        let c = inner.send_step(now, seq);
        Ok((Closer { inner }, c))
    }

    /// A control reply arrived.
    pub fn on_cell(&mut self, cell: &CellBytes, now: Instant, seq: &mut Seq) -> Option<CellBytes> {
        self.inner.on_cell(cell, now, seq)
    }

    /// See [`Opener::poll_at`].
    pub fn poll_at(&self) -> Option<Instant> {
        self.inner.poll_at()
    }

    /// See [`Opener::poll`].
    pub fn poll(&mut self, now: Instant, seq: &mut Seq) -> Option<CellBytes> {
        self.inner.poll(now, seq)
    }

    /// Finished: every relay cleared (or not answering after every retry).
    pub fn is_done(&self) -> bool {
        matches!(self.inner.step, Step::Done(_))
    }

    /// Once done: the farthest relay that did not answer its clear (its
    /// entry may still be there, until its lifetime ends it), if any.
    pub fn failure(&self) -> Option<OpenError> {
        self.inner.uncleared.map(OpenError::NoAnswer)
    }

    /// Frees the VC's table entries.
    pub fn release(
        &self,
        owner: Owner,
        table: &dyn VciTable,
        now: Instant,
    ) -> Result<u64, TableError> {
        self.inner.release(owner, table, now)
    }
}

/// Refreshing one open VC, the refresh daemon's round: reads each relay's
/// entry back, nearest first; an entry missing (the relay restarted) or
/// wrong is written again and read back before going on. Each read by
/// the entry's owner also restarts its lifetime at the relay. A relay
/// that does not answer, or refuses, ends the round with the reason and
/// nothing undone: the VC is left for the next round.
#[derive(Debug)]
pub struct Refresher {
    inner: Opener,
}

impl Refresher {
    /// Starts a round over `vc` at `now`; the first cell to send. A VC
    /// that could not have been opened is refused.
    pub fn start(
        vc: Vc,
        timing: Timing,
        vpi: u16,
        key: Option<(u8, &[u8])>,
        seq: &mut Seq,
        now: Instant,
    ) -> Result<(Refresher, CellBytes), OpenError> {
        check_vc(&vc)?;
        let mut inner = Opener::new(vc, Step::Read(0), timing, vpi, key, now);
        inner.refresh = true;
        let c = inner.send_step(now, seq);
        Ok((Refresher { inner }, c))
    }

    /// A control reply arrived.
    pub fn on_cell(&mut self, cell: &CellBytes, now: Instant, seq: &mut Seq) -> Option<CellBytes> {
        self.inner.on_cell(cell, now, seq)
    }

    /// See [`Opener::poll_at`].
    pub fn poll_at(&self) -> Option<Instant> {
        self.inner.poll_at()
    }

    /// See [`Opener::poll`].
    pub fn poll(&mut self, now: Instant, seq: &mut Seq) -> Option<CellBytes> {
        self.inner.poll(now, seq)
    }

    /// The round's outcome once finished.
    pub fn outcome(&self) -> Option<Result<(), &OpenError>> {
        match &self.inner.step {
            Step::Done(Ok(())) => Some(Ok(())),
            Step::Done(Err(e)) => Some(Err(e)),
            _ => None,
        }
    }

    /// Entries found missing or wrong and written again so far.
    pub fn rewritten(&self) -> u64 {
        self.inner.rewritten
    }

    /// Extends the VC's table leases to `now` plus the lease.
    pub fn renew(
        &self,
        owner: Owner,
        table: &dyn VciTable,
        now: Instant,
    ) -> Result<u64, TableError> {
        let t = now.as_nanos().max(0) as u64;
        let lease = self.inner.timing.lease.as_nanos().max(0) as u64;
        table.renew(owner, &self.inner.vc.grants(), t, lease)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::MemTable;

    /// A reply is believed only under the host's key, and an answer to an
    /// earlier try of the step counts.
    #[test]
    fn replies_without_the_key_are_ignored_and_late_ones_count() {
        let key: &[u8] = b"k";
        let path = Path {
            first_bits: 1,
            hops: vec![Hop {
                relay: 0,
                link: Link(0),
                side: 0,
                bits_on: 2,
                bits_back: 3,
            }],
            last_link: Link(1),
        };
        let table = MemTable::new(Default::default());
        let mut seq = Seq(10);
        let t0 = Instant::from_millis(1);
        let timing = Timing::default();
        let (mut o, _) = Opener::start(
            path,
            Owner(1),
            &table,
            timing,
            0,
            Some((0, key)),
            &mut seq,
            t0,
        )
        .unwrap();
        // A retry after the timeout: two tries of the write, 11 and 12.
        assert!(o.poll(t0 + timing.timeout, &mut seq).is_some());
        let reply = |seq: u64, k: Option<&[u8]>| {
            Control {
                cmd: CMD_REPLY,
                new_vci: 32,
                port_bits: 2,
                seq,
                ..Control::default()
            }
            .cell(0, k)
        };
        // Forged (no tag, or another key's): ignored.
        assert!(o.on_cell(&reply(11, None), t0, &mut seq).is_none());
        assert!(o
            .on_cell(&reply(11, Some(b"other")), t0, &mut seq)
            .is_none());
        assert_eq!(o.ignored, 2);
        // The first try's answer, late, under the key: on to the read.
        let next = o.on_cell(&reply(11, Some(key)), t0, &mut seq).unwrap();
        let c = Control::decode(next[HEADER_LEN..].try_into().unwrap());
        assert_eq!((c.cmd, c.seq), (CMD_READ, 13));
        assert_eq!(o.answered, 1);
    }
}
