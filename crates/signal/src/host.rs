//! A VuNet host whose applications open and close their own VCs: the
//! signalling host node, sans-I/O.
//!
//! Each application ([`App`]) names a path across relaying links and a
//! schedule. At its opening time the host runs an [`Opener`] for it (the
//! VCIs from the network's shared table, then each relay written and read
//! back); once the VC is open the host sends the application's AAL5 PDUs
//! on it, built and tagged as the traffic host builds them
//! ([`aurora_net::traffic`]), so the receiver checks every byte and the
//! run's ledger can charge every lost cell to its PDU. While the VC is
//! open a refresh daemon reads each relay's entry back every refresh
//! period ([`Refresher`]) and writes again any a restarted relay lost;
//! its reads also keep the entries alive at relays that expire what is
//! not refreshed, and it renews the table's leases. At its closing time
//! the host runs a [`Closer`] and frees the VCIs. Opening, closing and
//! each refresh round are events with their start, end and outcome.
//!
//! The same node receives: a data cell on a VCI the host has not seen
//! starts a receiving session for the flow its tag names (the VCI was
//! written into the last relay by the sender, under its key), checked as
//! a traffic host checks a PVC's flow. A VCI taken later by another
//! application's flow starts a new session, so each application's books
//! are its own. Sessions are bounded ([`MAX_SESSIONS`]); cells beyond
//! that, and untagged cells on VCIs the host does not know, are dropped
//! and counted as `unknown_vc`.
//!
//! Applications come from the host's builder ([`SignalHost::add_app`]) or,
//! while it runs, from commands through its inbox
//! ([`SignalHost::control_handle`], [`crate::control`]): an open there
//! becomes an application like any other, opened at once on the path its
//! [`Directory`] gives to the host named.

use std::collections::BTreeSet;
use std::sync::Arc;

use aurora_net::tag::Tag;
use aurora_net::traffic::{Flow, RxFlow, TrafficHost};
use aurora_net::vunet::VCI_LINK_CONTROL;
use aurora_net::{Node, Outbox, PortId};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, Header, VcId};
use aurora_wire::hec::{HecReceiver, HecVerdict};
use aurora_wire::CellBytes;

use crate::conn::{Closer, Opener, Path, Refresher, Seq, Timing, Vc};
use crate::control::{
    Answer, Arrival, ControlHandle, Directory, OpenRequest, Request, VcState, VcStatus, INBOX_POLL,
    MAX_COUNT, MAX_LIVE_VCS,
};
use crate::table::{Owner, VciTable};

/// Receiving sessions a host keeps at most.
pub const MAX_SESSIONS: usize = 1024;

/// Applications a host runs at most.
pub const MAX_APPS: usize = 4096;

/// Events an application records at most (refresh rounds beyond this are
/// counted, not listed).
pub const MAX_EVENTS: usize = 64;

/// Closed or failed VCs a list shows at most (the most recent).
pub const LIST_FINISHED: usize = 64;

/// A table shared by the hosts of a network.
pub type SharedTable = Arc<dyn VciTable + Send + Sync>;

/// What an application does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppSpec {
    /// Its name, for reports.
    pub name: String,
    /// The host it sends to, for reports.
    pub to: String,
    /// The flow number its PDUs' tags carry (unique in the network).
    pub flow: u16,
    /// Its VC's path.
    pub path: Path,
    /// When it opens its VC.
    pub open_at: Instant,
    /// When it closes it (never, if `None`).
    pub close_at: Option<Instant>,
    /// Bytes in each PDU it sends (8 to 65535).
    pub sdu: usize,
    /// PDUs it sends at most while open.
    pub count: u64,
    /// Time between PDUs.
    pub interval: Duration,
    /// How often the refresh daemon reads its entries back (never, if
    /// `None`).
    pub refresh: Option<Duration>,
}

/// What kind of event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The VC was opened (or the open failed).
    Open,
    /// A refresh round.
    Refresh,
    /// The VC was closed.
    Close,
}

impl EventKind {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Open => "open",
            EventKind::Refresh => "refresh",
            EventKind::Close => "close",
        }
    }
}

/// One set-up, refresh round or tear-down.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// What.
    pub kind: EventKind,
    /// When it started.
    pub started: Instant,
    /// When it finished.
    pub ended: Instant,
    /// Entries written again (refresh rounds).
    pub rewritten: u64,
    /// Why it failed, if it did.
    pub failure: Option<String>,
}

impl Event {
    /// How long it took.
    pub fn latency(&self) -> Duration {
        self.ended.since(self.started)
    }
}

/// Where an application is.
#[derive(Debug)]
enum Phase {
    Waiting,
    Opening(Opener),
    Open {
        vc: Vc,
        refresher: Option<(Refresher, Instant)>,
        next_refresh: Option<Instant>,
    },
    Closing(Closer, Instant),
    Closed,
    Failed,
}

/// One application and what it did.
#[derive(Debug)]
pub struct App {
    spec: AppSpec,
    phase: Phase,
    events: Vec<Event>,
    /// The VC it opened (kept after closing, for reports).
    vc: Option<Vc>,
    /// Its flow's index in the host's sender, once it sends.
    flow_index: Option<usize>,
    refreshes: u64,
    refresh_failures: u64,
    rewritten: u64,
    /// Events not listed (over [`MAX_EVENTS`]).
    events_dropped: u64,
    /// Whether it came through the host's inbox.
    from_inbox: bool,
}

impl App {
    /// Its specification.
    pub fn spec(&self) -> &AppSpec {
        &self.spec
    }

    /// Its events, in order (at most [`MAX_EVENTS`]).
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The VC it opened, if it did (kept after closing).
    pub fn vc(&self) -> Option<&Vc> {
        self.vc.as_ref()
    }

    /// Refresh rounds finished, those that failed, and entries written
    /// again.
    pub fn refreshes(&self) -> (u64, u64, u64) {
        (self.refreshes, self.refresh_failures, self.rewritten)
    }

    /// Whether its VC is open now.
    pub fn is_open(&self) -> bool {
        matches!(self.phase, Phase::Open { .. })
    }

    /// Whether it closed its VC.
    pub fn is_closed(&self) -> bool {
        matches!(self.phase, Phase::Closed)
    }

    /// Where its VC is.
    pub fn state(&self) -> VcState {
        match self.phase {
            Phase::Waiting => VcState::Waiting,
            Phase::Opening(_) => VcState::Opening,
            Phase::Open { .. } => VcState::Open,
            Phase::Closing(..) => VcState::Closing,
            Phase::Closed => VcState::Closed,
            Phase::Failed => VcState::Failed,
        }
    }

    fn record(&mut self, e: Event) {
        if self.events.len() < MAX_EVENTS {
            self.events.push(e);
        } else {
            self.events_dropped += 1;
        }
    }
}

/// A receiving session: one flow on one VCI.
#[derive(Debug)]
struct Session {
    vci: u16,
    flow: u16,
    rx: TrafficHost,
    /// Whether it is the VCI's current session.
    current: bool,
}

/// How a signalling host signs and times its control cells.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// Its owner number in the table.
    pub owner: Owner,
    /// Its key id at the relays, and the key (`None`: no tag, for relays
    /// that trust the host's port).
    pub key: Option<(u8, Vec<u8>)>,
    /// Timeouts, retries and leases.
    pub timing: Timing,
    /// The VPI its VCs use.
    pub vpi: u16,
}

/// The signalling host (see the module docs).
pub struct SignalHost {
    cfg: HostConfig,
    table: SharedTable,
    apps: Vec<App>,
    seq: Seq,
    tx: TrafficHost,
    sessions: Vec<Session>,
    /// Flows added to `tx` so far.
    flows: usize,
    hec: HecReceiver,
    /// Cells dropped on arrival: header failed the HEC check.
    hec_dropped: u64,
    /// Data cells on a VCI with no session that could not start one.
    unknown: u64,
    /// Table operations that failed (releases and renewals).
    table_errors: u64,
    /// What the host can open to through its inbox.
    directory: Directory,
    /// Its inbox, once asked for.
    inbox: Option<ControlHandle>,
    /// When it was last polled.
    last_poll: Instant,
    /// VCs opened through the inbox so far.
    opened: u64,
}

impl std::fmt::Debug for SignalHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignalHost")
            .field("owner", &self.cfg.owner)
            .field("apps", &self.apps.len())
            .field("sessions", &self.sessions.len())
            .finish()
    }
}

impl SignalHost {
    /// A host with no applications, allocating from `table`.
    pub fn new(cfg: HostConfig, table: SharedTable) -> Self {
        SignalHost {
            cfg,
            table,
            apps: Vec::new(),
            seq: Seq(0),
            tx: TrafficHost::new(Format::Uni),
            sessions: Vec::new(),
            flows: 0,
            hec: HecReceiver::new(),
            hec_dropped: 0,
            unknown: 0,
            table_errors: 0,
            directory: Directory::default(),
            inbox: None,
            last_poll: Instant::ZERO,
            opened: 0,
        }
    }

    /// Sets what the host can open to through its inbox.
    pub fn set_directory(&mut self, d: Directory) {
        self.directory = d;
    }

    /// What the host can open to through its inbox.
    pub fn directory(&self) -> &Directory {
        &self.directory
    }

    /// A handle on the host's inbox (made on the first call). From then on
    /// the host asks to be polled at least every
    /// [`INBOX_POLL`].
    pub fn control_handle(&mut self) -> ControlHandle {
        self.inbox.get_or_insert_with(ControlHandle::new).clone()
    }

    /// Answers every request waiting in the inbox, as of `now`.
    fn serve(&mut self, now: Instant) {
        let Some(inbox) = &self.inbox else { return };
        for (req, reply, deadline) in inbox.take() {
            if deadline.is_some_and(|d| std::time::Instant::now() > d) {
                // Its caller was told there was no answer: carry nothing
                // out that it does not know of.
                let _ = reply.send(Answer::Refused("the request waited too long".into()));
                continue;
            }
            let answer = self.command(now, req);
            // A caller that stopped waiting is no concern of the host's.
            let _ = reply.send(answer);
        }
    }

    /// Carries out one request at `now`.
    fn command(&mut self, now: Instant, req: Request) -> Answer {
        match req {
            Request::Open(o) => match self.open_now(now, o) {
                Ok(id) => Answer::Opening(id),
                Err(why) => Answer::Refused(why),
            },
            Request::Close(id) => match self.close_now(now, &id) {
                Ok(()) => Answer::Closing(id),
                Err(why) => Answer::Refused(why),
            },
            Request::List => Answer::List(self.vc_list(), self.arrivals()),
        }
    }

    /// Checks open request `o` and adds its application, opening at `now`;
    /// its id, or why not.
    fn open_now(&mut self, now: Instant, o: OpenRequest) -> Result<String, String> {
        let me = &self.directory.name;
        let path = match self.directory.routes.iter().find(|(n, _)| *n == o.to) {
            Some((_, Some(p))) => p.clone(),
            Some((_, None)) => {
                return Err(format!(
                    "no route from \"{me}\" to \"{}\" through VuNet switches and 1 to {} relaying links or AVlinks",
                    o.to,
                    crate::conn::MAX_RELAYS
                ))
            }
            None if o.to == *me => return Err(format!("\"{me}\" cannot open a VC to itself")),
            None => {
                let known: Vec<&str> = self
                    .directory
                    .routes
                    .iter()
                    .take(8)
                    .map(|(n, _)| n.as_str())
                    .collect();
                let more = if self.directory.routes.len() > known.len() {
                    ", ..."
                } else {
                    ""
                };
                return Err(format!(
                    "unknown host \"{}\": \"{me}\" can open to {}{more}",
                    o.to.chars().take(64).collect::<String>(),
                    if known.is_empty() {
                        "no host".to_string()
                    } else {
                        known.join(", ")
                    }
                ));
            }
        };
        if !(aurora_net::tag::TAG_LEN..=65535).contains(&o.sdu) {
            return Err(format!("sdu {} is outside 8 to 65535 bytes", o.sdu));
        }
        if o.count > MAX_COUNT {
            return Err(format!("count {} is outside 0 to {MAX_COUNT}", o.count));
        }
        let minute = Duration::from_secs(60);
        if o.interval <= Duration::ZERO || o.interval > minute {
            return Err("interval is outside 1 ns to 60 s".into());
        }
        let day = Duration::from_secs(24 * 3600);
        if o.close_after
            .is_some_and(|d| d <= Duration::ZERO || d > day)
        {
            return Err("close_after is outside 1 ns to 24 hours".into());
        }
        let hour = Duration::from_secs(3600);
        if o.refresh
            .is_some_and(|d| d < Duration::from_micros(1) || d > hour)
        {
            return Err("refresh is outside 1 us to 1 hour".into());
        }
        let live = self
            .apps
            .iter()
            .filter(|a| a.from_inbox && !matches!(a.phase, Phase::Closed | Phase::Failed))
            .count();
        if live >= MAX_LIVE_VCS {
            return Err(format!(
                "\"{me}\" has {MAX_LIVE_VCS} VCs open or opening, as many as it holds; close one first"
            ));
        }
        if self.apps.len() >= MAX_APPS {
            return Err(format!(
                "\"{me}\" has run {MAX_APPS} VCs, as many as it keeps; no more can be opened"
            ));
        }
        let flows = &self.directory.flows;
        let span = u64::from(flows.end.saturating_sub(flows.start));
        if span == 0 {
            return Err(format!("no flow numbers are left for \"{me}\"'s VCs"));
        }
        // The next flow number in turn that no VC of this host not yet
        // closed or failed uses (a receiver keeps books per flow).
        let busy: BTreeSet<u16> = self
            .apps
            .iter()
            .filter(|a| !matches!(a.phase, Phase::Closed | Phase::Failed))
            .map(|a| a.spec.flow)
            .collect();
        let Some(flow) = (0..span)
            .map(|k| flows.start + ((self.opened + k) % span) as u16)
            .find(|f| !busy.contains(f))
        else {
            return Err(format!(
                "\"{me}\" has no flow number left for another VC ({span} are in use); close one first"
            ));
        };
        let id = format!("{me}/{}", self.opened + 1);
        let spec = AppSpec {
            name: id.clone(),
            to: o.to,
            flow,
            path,
            open_at: now,
            close_at: o.close_after.map(|d| now + d),
            sdu: o.sdu,
            count: o.count,
            interval: o.interval,
            refresh: o.refresh,
        };
        if !self.add_app(spec) {
            return Err("the host refused the VC".into());
        }
        if let Some(a) = self.apps.last_mut() {
            a.from_inbox = true;
        }
        self.opened += 1;
        Ok(id)
    }

    /// Begins closing VC `id` at `now`, or says why not.
    fn close_now(&mut self, now: Instant, id: &str) -> Result<(), String> {
        let Some(a) = self.apps.iter_mut().rev().find(|a| a.spec.name == id) else {
            return Err(format!(
                "no VC \"{}\" at \"{}\"",
                id.chars().take(64).collect::<String>(),
                self.directory.name
            ));
        };
        match a.phase {
            // Not begun: it never will be.
            Phase::Waiting => {
                a.phase = Phase::Closed;
                Ok(())
            }
            Phase::Opening(_) | Phase::Open { .. } => {
                a.spec.close_at = Some(a.spec.close_at.map_or(now, |t| t.min(now)));
                // No PDU starts after the close begins.
                if let Some(f) = a.flow_index {
                    self.tx.end_flow(f);
                }
                Ok(())
            }
            Phase::Closing(..) => Err(format!("VC \"{id}\" is closing already")),
            Phase::Closed => Err(format!("VC \"{id}\" is closed already")),
            Phase::Failed => Err(format!("VC \"{id}\" failed; there is nothing to close")),
        }
    }

    /// Every application not yet closed or failed, and the
    /// [`LIST_FINISHED`] that finished last, as VC statuses (so a list stays
    /// small enough for one answer line however long the host runs).
    pub fn vc_list(&self) -> Vec<VcStatus> {
        let finished = |a: &App| matches!(a.phase, Phase::Closed | Phase::Failed);
        let done = self.apps.iter().filter(|a| finished(a)).count();
        let skip = done.saturating_sub(LIST_FINISHED);
        let mut seen = 0;
        self.apps
            .iter()
            .enumerate()
            .filter(|(_, a)| {
                if !finished(a) {
                    return true;
                }
                seen += 1;
                seen > skip
            })
            .map(|(i, a)| VcStatus {
                id: a.spec.name.clone(),
                to: a.spec.to.clone(),
                state: a.state(),
                relays: a
                    .spec
                    .path
                    .hops
                    .iter()
                    .map(|h| self.directory.relay_name(h.relay))
                    .collect(),
                vcis: a.vc.as_ref().map(|v| v.vcis.clone()).unwrap_or_default(),
                events: a.events.clone(),
                sent: self.sent(i),
                flow: a.spec.flow,
            })
            .collect()
    }

    /// What arrived at the host, flow by flow.
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.sessions()
            .map(|(flow, vci, rx)| Arrival {
                flow,
                vci,
                delivered: rx.delivered,
                missing: rx.missing,
                corrupted: rx.corrupted + rx.out_of_order,
            })
            .collect()
    }

    /// Adds an application; refused (false) past [`MAX_APPS`] or with a
    /// PDU size a flow cannot have.
    pub fn add_app(&mut self, spec: AppSpec) -> bool {
        if self.apps.len() >= MAX_APPS || !(aurora_net::tag::TAG_LEN..=65535).contains(&spec.sdu) {
            return false;
        }
        self.apps.push(App {
            spec,
            phase: Phase::Waiting,
            events: Vec::new(),
            vc: None,
            flow_index: None,
            refreshes: 0,
            refresh_failures: 0,
            rewritten: 0,
            events_dropped: 0,
            from_inbox: false,
        });
        true
    }

    /// Starts no PDU from `t` on (the end of a run's sending time).
    pub fn stop_sending_at(&mut self, t: Instant) {
        self.tx.stop_sending_at(t);
    }

    /// The applications.
    pub fn apps(&self) -> &[App] {
        &self.apps
    }

    /// The table the host allocates from.
    pub fn table(&self) -> &SharedTable {
        &self.table
    }

    /// The host's owner number in the table.
    pub fn owner(&self) -> Owner {
        self.cfg.owner
    }

    /// The key id its control cells name (which owns what it writes at
    /// the relays), if it tags them.
    pub fn key_id(&self) -> Option<u8> {
        self.cfg.key.as_ref().map(|k| k.0)
    }

    /// PDUs application `i` sent.
    pub fn sent(&self, i: usize) -> u64 {
        self.apps
            .get(i)
            .and_then(|a| a.flow_index)
            .map_or(0, |f| self.tx.sent(f))
    }

    /// What arrived of flow `flow`: its figures and books, and the VC it
    /// came on (its latest session, if several).
    pub fn received(&self, flow: u16) -> Option<(RxFlow, &aurora_net::accounting::RxBook)> {
        let s = self.sessions.iter().rev().find(|s| s.flow == flow)?;
        let vc = VcId::new(self.cfg.vpi, s.vci);
        Some((s.rx.received(vc), s.rx.book(vc)?))
    }

    /// Every receiving session: the flow, the VCI it came on, and what
    /// arrived of it.
    pub fn sessions(&self) -> impl Iterator<Item = (u16, u16, RxFlow)> + '_ {
        self.sessions.iter().map(|s| {
            let vc = VcId::new(self.cfg.vpi, s.vci);
            (s.flow, s.vci, s.rx.received(vc))
        })
    }

    /// (cells that failed the HEC check, data cells on unknown VCIs,
    /// table operations that failed).
    pub fn drops(&self) -> (u64, u64, u64) {
        (self.hec_dropped, self.unknown, self.table_errors)
    }

    /// A data cell `c` on `vci`: to its session, or a new one.
    fn data(&mut self, now: Instant, c: &CellBytes, vci: u16, out: &mut Outbox) {
        let tag = aurora_net::accounting::is_user(c)
            .then(|| Tag::of_cell(c))
            .flatten();
        let cur = self.sessions.iter().position(|s| s.current && s.vci == vci);
        // A flow this VCI carried before (a stray or damaged tag in
        // between does not split its books): that session again.
        let known = tag.and_then(|t| {
            self.sessions
                .iter()
                .rposition(|s| s.vci == vci && s.flow == t.flow)
        });
        let idx = match (cur, tag) {
            (Some(i), None) => Some(i),
            (Some(i), Some(t)) if self.sessions[i].flow == t.flow => Some(i),
            (_, Some(_)) if known.is_some() => {
                if let Some(i) = cur {
                    self.sessions[i].current = false;
                }
                let k = known.expect("checked");
                self.sessions[k].current = true;
                Some(k)
            }
            (_, Some(t)) if self.sessions.len() < MAX_SESSIONS => {
                // A new flow on this VCI: the one before it has ended.
                if let Some(i) = cur {
                    self.sessions[i].current = false;
                }
                let mut rx = TrafficHost::new(Format::Uni);
                rx.expect(VcId::new(self.cfg.vpi, vci));
                self.sessions.push(Session {
                    vci,
                    flow: t.flow,
                    rx,
                    current: true,
                });
                Some(self.sessions.len() - 1)
            }
            _ => None,
        };
        match idx {
            Some(i) => self.sessions[i]
                .rx
                .receive(now, 0, std::slice::from_ref(c), out),
            None => {
                self.unknown += 1;
                out.dropped(0, c, "unknown_vc");
            }
        }
    }

    /// A control reply: to the applications with a step waiting (each
    /// takes only answers to its own step's numbers).
    fn control(&mut self, now: Instant, c: &CellBytes, out: &mut Outbox) {
        let seq = &mut self.seq;
        for a in &mut self.apps {
            let next = match &mut a.phase {
                Phase::Opening(o) => o.on_cell(c, now, seq),
                Phase::Closing(cl, _) => cl.on_cell(c, now, seq),
                Phase::Open {
                    refresher: Some((r, _)),
                    ..
                } => r.on_cell(c, now, seq),
                _ => None,
            };
            if let Some(cell) = next {
                out.push(0, cell);
            }
        }
        self.settle(now);
    }

    /// Moves on the applications whose open, refresh or close finished.
    fn settle(&mut self, now: Instant) {
        let table = self.table.clone();
        let owner = self.cfg.owner;
        for i in 0..self.apps.len() {
            let a = &mut self.apps[i];
            match &mut a.phase {
                Phase::Opening(o) => match o.outcome() {
                    Some(Ok(vc)) => {
                        let vc = vc.clone();
                        a.record(Event {
                            kind: EventKind::Open,
                            started: vc.opened.0,
                            ended: vc.opened.1,
                            rewritten: 0,
                            failure: None,
                        });
                        a.flow_index = start_flow(
                            &mut self.tx,
                            &mut self.flows,
                            &a.spec,
                            &vc,
                            self.cfg.vpi,
                            now,
                        );
                        a.vc = Some(vc.clone());
                        a.phase = Phase::Open {
                            vc,
                            refresher: None,
                            next_refresh: a.spec.refresh.map(|p| now + p),
                        };
                    }
                    Some(Err(e)) => {
                        let e = e.to_string();
                        if o.release(owner, table.as_ref(), now).is_err() {
                            self.table_errors += 1;
                        }
                        a.record(Event {
                            kind: EventKind::Open,
                            started: a.spec.open_at,
                            ended: now,
                            rewritten: 0,
                            failure: Some(e),
                        });
                        a.phase = Phase::Failed;
                    }
                    None => {}
                },
                Phase::Open { refresher, .. } => {
                    let Some((r, started)) = refresher else {
                        continue;
                    };
                    let Some(outcome) = r.outcome() else {
                        continue;
                    };
                    let failure = outcome.err().map(|e| e.to_string());
                    if r.renew(owner, table.as_ref(), now).is_err() {
                        self.table_errors += 1;
                    }
                    a.refreshes += 1;
                    a.refresh_failures += u64::from(failure.is_some());
                    a.rewritten += r.rewritten();
                    let e = Event {
                        kind: EventKind::Refresh,
                        started: *started,
                        ended: now,
                        rewritten: r.rewritten(),
                        failure,
                    };
                    *refresher = None;
                    // Quiet rounds are counted, not listed.
                    if e.rewritten > 0 || e.failure.is_some() {
                        a.record(e);
                    }
                }
                Phase::Closing(c, started) if c.is_done() => {
                    let (started, failure) = (*started, c.failure().map(|e| e.to_string()));
                    if c.release(owner, table.as_ref(), now).is_err() {
                        self.table_errors += 1;
                    }
                    a.record(Event {
                        kind: EventKind::Close,
                        started,
                        ended: now,
                        rewritten: 0,
                        failure,
                    });
                    a.phase = Phase::Closed;
                }
                _ => {}
            }
        }
    }

    /// Time-driven steps of application `i` at `now`.
    fn step(&mut self, i: usize, now: Instant, out: &mut Outbox) {
        let (timing, vpi) = (self.cfg.timing, self.cfg.vpi);
        let key = self.cfg.key.as_ref().map(|(id, k)| (*id, k.as_slice()));
        let seq = &mut self.seq;
        let a = &mut self.apps[i];
        let cell = match &mut a.phase {
            Phase::Waiting if now >= a.spec.open_at => {
                match Opener::start(
                    a.spec.path.clone(),
                    self.cfg.owner,
                    self.table.as_ref(),
                    timing,
                    vpi,
                    key,
                    seq,
                    now,
                ) {
                    Ok((o, c)) => {
                        a.phase = Phase::Opening(o);
                        Some(c)
                    }
                    Err(e) => {
                        a.record(Event {
                            kind: EventKind::Open,
                            started: now,
                            ended: now,
                            rewritten: 0,
                            failure: Some(e.to_string()),
                        });
                        a.phase = Phase::Failed;
                        None
                    }
                }
            }
            Phase::Opening(o) => o.poll(now, seq),
            Phase::Closing(c, _) => c.poll(now, seq),
            Phase::Open { vc, .. } if a.spec.close_at.is_some_and(|t| now >= t) => {
                // A refresh round under way is dropped: its late replies
                // fall outside the closer's numbers and are ignored.
                match Closer::start(vc.clone(), timing, vpi, key, seq, now) {
                    Ok((c, cell)) => {
                        a.phase = Phase::Closing(c, now);
                        Some(cell)
                    }
                    Err(e) => {
                        a.record(Event {
                            kind: EventKind::Close,
                            started: now,
                            ended: now,
                            rewritten: 0,
                            failure: Some(e.to_string()),
                        });
                        a.phase = Phase::Failed;
                        None
                    }
                }
            }
            Phase::Open {
                vc,
                refresher,
                next_refresh,
            } => match refresher {
                Some((r, _)) => r.poll(now, seq),
                None if next_refresh.is_some_and(|t| now >= t) => {
                    *next_refresh = a.spec.refresh.map(|p| now + p);
                    match Refresher::start(vc.clone(), timing, vpi, key, seq, now) {
                        Ok((r, c)) => {
                            *refresher = Some((r, now));
                            Some(c)
                        }
                        Err(_) => {
                            a.refresh_failures += 1;
                            None
                        }
                    }
                }
                None => None,
            },
            _ => None,
        };
        if let Some(c) = cell {
            out.push(0, c);
        }
    }
}

/// Starts `spec`'s flow on `vc`, opened at `now`, in sender `tx` (which
/// holds `flows` flows so far): every PDU it sends starts before the
/// closing time. Its index in `tx`, or `None` if no PDU fits.
fn start_flow(
    tx: &mut TrafficHost,
    flows: &mut usize,
    spec: &AppSpec,
    vc: &Vc,
    vpi: u16,
    now: Instant,
) -> Option<usize> {
    let iv = spec.interval.as_nanos().max(1);
    let fits = match spec.close_at {
        Some(t) if t <= now => 0,
        Some(t) => ((t.since(now).as_nanos() - 1) / iv + 1) as u64,
        None => spec.count,
    };
    let count = spec.count.min(fits);
    if count == 0 {
        return None;
    }
    let v = VcId::new(vpi, vc.send_vci());
    tx.set_route_bits(v, vc.path.first_bits);
    tx.add_flow(Flow {
        id: spec.flow,
        vc: v,
        sdu_len: spec.sdu,
        count,
        start: now,
        interval: spec.interval,
    })
    .ok()?;
    *flows += 1;
    Some(*flows - 1)
}

impl Node for SignalHost {
    fn ports(&self) -> usize {
        1
    }

    fn receive(&mut self, now: Instant, _port: PortId, cells: &[CellBytes], out: &mut Outbox) {
        for cell in cells {
            let mut c = *cell;
            if self.hec.check_cell(&mut c) == HecVerdict::Discarded {
                self.hec_dropped += 1;
                out.dropped(0, cell, "hec_uncorrectable");
                continue;
            }
            let h = Header::parse(&[c[0], c[1], c[2], c[3]], Format::Uni);
            if h.vci == VCI_LINK_CONTROL {
                self.control(now, &c, out);
            } else {
                self.data(now, &c, h.vci, out);
            }
        }
    }

    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        self.last_poll = now;
        self.serve(now);
        self.tx.poll(now, out);
        for s in &mut self.sessions {
            if s.rx.poll_at().is_some_and(|t| t <= now) {
                s.rx.poll(now, out);
            }
        }
        for i in 0..self.apps.len() {
            self.step(i, now, out);
        }
        self.settle(now);
        // An app that opened in this poll sends its first PDU now.
        self.tx.poll(now, out);
    }

    fn poll_at(&self) -> Option<Instant> {
        let apps = self.apps.iter().filter_map(|a| match &a.phase {
            Phase::Waiting => Some(a.spec.open_at),
            Phase::Opening(o) => o.poll_at(),
            Phase::Closing(c, _) => c.poll_at(),
            Phase::Open {
                refresher,
                next_refresh,
                ..
            } => {
                let r = match refresher {
                    Some((r, _)) => r.poll_at(),
                    None => *next_refresh,
                };
                r.into_iter().chain(a.spec.close_at).min()
            }
            Phase::Closed | Phase::Failed => None,
        });
        let rx = self.sessions.iter().filter_map(|s| s.rx.poll_at());
        // With an inbox, commands are looked at every INBOX_POLL.
        let inbox = self.inbox.as_ref().map(|_| self.last_poll + INBOX_POLL);
        apps.chain(rx).chain(self.tx.poll_at()).chain(inbox).min()
    }
}
