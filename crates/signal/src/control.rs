//! Commands to a running signalling host from another thread: open a VC
//! to a named host, close one, list them.
//!
//! A [`SignalHost`](crate::host::SignalHost) stays sans-I/O: it owns an
//! [`Inbox`] (shared through a [`ControlHandle`]) that other threads put
//! [`Request`]s into, each with the channel its [`Answer`] goes back on.
//! The host takes the requests out whenever it is polled, acts on them at
//! that instant of its own clock, and answers at once. While a host has an
//! inbox it asks to be polled at least every [`INBOX_POLL`], so in real
//! time a command waits at most about that long. The inbox holds at most
//! [`INBOX_CAP`] requests; a caller finding it full is told so rather than
//! queued.
//!
//! An open is answered as soon as the host has taken it on (with the VC's
//! id) or refused it (with one sentence why); whether the VC then opened
//! is in the next [`Request::List`]. A close likewise answers when the
//! close has begun. Callers wait for the outcome by listing.
//!
//! Which hosts a host can open to, and by which path, is its
//! [`Directory`], made by whoever built the host (the topology compiler,
//! from the same route search `[[app]]` entries use).

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use aurora_time::Duration;
use serde::Deserialize;

use crate::conn::Path;
use crate::host::Event;

/// Requests an inbox holds at most.
pub const INBOX_CAP: usize = 64;

/// How long a host with an inbox lets pass at most between polls.
pub const INBOX_POLL: Duration = Duration::from_millis(1);

/// VCs opened through the inbox that a host holds at most at once (not yet
/// closed or failed).
pub const MAX_LIVE_VCS: usize = 64;

/// A PDU count an open may ask for at most.
pub const MAX_COUNT: u64 = 1_000_000_000;

/// What a host can reach: its own name, a path to each other signalling
/// host (`None` where no route crosses 1 to 11 relays), the relays' names
/// by id, and the flow numbers its opens may use (unique in the network).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Directory {
    /// The host's own name (VC ids are `NAME/N`).
    pub name: String,
    /// Every other signalling host and the path to it, if there is one.
    pub routes: Vec<(String, Option<Path>)>,
    /// Relay names by id, for lists.
    pub relays: Vec<(u16, String)>,
    /// Flow numbers for the VCs it opens; used in turn.
    pub flows: Range<u16>,
}

impl Directory {
    /// The name of relay `id`, or its number.
    pub fn relay_name(&self, id: u16) -> String {
        self.relays
            .iter()
            .find(|(i, _)| *i == id)
            .map_or_else(|| format!("relay {id}"), |(_, n)| n.clone())
    }
}

/// What an open asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenRequest {
    /// The destination host's name.
    pub to: String,
    /// Bytes in each PDU (8 to 65535).
    pub sdu: usize,
    /// PDUs to send at most (0 to [`MAX_COUNT`]).
    pub count: u64,
    /// Time between PDUs (1 ns to 60 s).
    pub interval: Duration,
    /// Close this long after the open starts (never, if `None`).
    pub close_after: Option<Duration>,
    /// How often the refresh daemon reads the entries back (never, if
    /// `None`).
    pub refresh: Option<Duration>,
}

/// A command to a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Open a VC.
    Open(OpenRequest),
    /// Close the VC with this id (one opened through the inbox, or an
    /// `[[app]]` by name).
    Close(String),
    /// Every VC of the host and what arrived at it.
    List,
}

/// Where a VC is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VcState {
    /// Not started yet.
    Waiting,
    /// Its relays are being written.
    Opening,
    /// Carrying data (or ready to).
    Open,
    /// Its entries are being cleared.
    Closing,
    /// Closed (its last event says whether cleanly).
    Closed,
    /// The open, or a step after it, failed.
    Failed,
}

impl VcState {
    /// Its name in lists.
    pub fn name(self) -> &'static str {
        match self {
            VcState::Waiting => "waiting",
            VcState::Opening => "opening",
            VcState::Open => "open",
            VcState::Closing => "closing",
            VcState::Closed => "closed",
            VcState::Failed => "failed",
        }
    }
}

/// One VC a host sends on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VcStatus {
    /// Its id (an `[[app]]`'s name, or `HOST/N`).
    pub id: String,
    /// Its destination.
    pub to: String,
    /// Where it is.
    pub state: VcState,
    /// The relays it crosses, nearest first, by name.
    pub relays: Vec<String>,
    /// Its VCI on each segment (into each relay, then into the
    /// destination); empty until it opened.
    pub vcis: Vec<u16>,
    /// Its set-up, refresh and tear-down events.
    pub events: Vec<Event>,
    /// PDUs sent.
    pub sent: u64,
    /// The flow number its PDUs carry.
    pub flow: u16,
}

/// One flow that arrived at a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// The flow number.
    pub flow: u16,
    /// The VCI it came on.
    pub vci: u16,
    /// PDUs delivered intact.
    pub delivered: u64,
    /// PDUs missing from the sequence.
    pub missing: u64,
    /// PDUs damaged or out of order.
    pub corrupted: u64,
}

/// A host's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The open was taken on; the VC's id.
    Opening(String),
    /// The close was begun.
    Closing(String),
    /// The host's VCs and what arrived at it.
    List(Vec<VcStatus>, Vec<Arrival>),
    /// Refused: why, in one sentence.
    Refused(String),
}

/// A request, where its answer goes, and the wall-clock time after which
/// its caller no longer waits (then it is refused, not carried out).
pub(crate) type Pending = (Request, mpsc::Sender<Answer>, Option<std::time::Instant>);

/// The requests waiting for a host (see the module docs).
#[derive(Debug, Default)]
pub struct Inbox {
    pending: Mutex<VecDeque<Pending>>,
}

/// A handle other threads use to reach a host's inbox.
#[derive(Clone, Debug, Default)]
pub struct ControlHandle(Arc<Inbox>);

impl ControlHandle {
    /// A handle on a new, empty inbox.
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts `req` in the inbox; the receiver its answer will arrive on, or
    /// why it could not be put there (the inbox is full).
    pub fn send(&self, req: Request) -> Result<mpsc::Receiver<Answer>, String> {
        self.send_by(req, None)
    }

    /// As [`ControlHandle::send`], but a request the host has not taken by
    /// `deadline` (wall clock) is refused unanswered-for, not carried out.
    fn send_by(
        &self,
        req: Request,
        deadline: Option<std::time::Instant>,
    ) -> Result<mpsc::Receiver<Answer>, String> {
        let (tx, rx) = mpsc::channel();
        // A poisoned lock means a thread panicked holding it; the queue
        // itself is still whole.
        let mut q = self.0.pending.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() >= INBOX_CAP {
            return Err(format!(
                "the host has {INBOX_CAP} commands waiting already; try again"
            ));
        }
        q.push_back((req, tx, deadline));
        Ok(rx)
    }

    /// Puts `req` in the inbox and waits up to `timeout` for the answer;
    /// a refusal if the inbox is full or no answer came in time. A request
    /// the host has not taken by then is never carried out, so a caller
    /// told "no answer" has not opened or closed anything.
    pub fn call(&self, req: Request, timeout: std::time::Duration) -> Answer {
        let deadline = std::time::Instant::now().checked_add(timeout);
        match self.send_by(req, deadline) {
            Err(e) => Answer::Refused(e),
            Ok(rx) => rx.recv_timeout(timeout).unwrap_or_else(|_| {
                Answer::Refused("the host did not answer in time (is its process running?)".into())
            }),
        }
    }

    /// Takes every waiting request out, oldest first.
    pub(crate) fn take(&self) -> Vec<Pending> {
        let mut q = self.0.pending.lock().unwrap_or_else(|e| e.into_inner());
        q.drain(..).collect()
    }
}

/// Bytes a request line may hold at most (see [`parse_request`]).
pub const MAX_REQUEST: usize = 4096;

/// A request as a line of JSON carries it (the control socket's form).
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
enum WireRequest {
    Open {
        #[serde(default)]
        host: Option<String>,
        to: String,
        #[serde(default)]
        sdu: Option<usize>,
        #[serde(default)]
        count: Option<u64>,
        #[serde(default)]
        interval_ns: Option<i64>,
        #[serde(default)]
        close_after_ns: Option<i64>,
        #[serde(default)]
        refresh_ns: Option<i64>,
    },
    Close {
        #[serde(default)]
        host: Option<String>,
        id: String,
    },
    List {
        #[serde(default)]
        host: Option<String>,
    },
}

/// Nanoseconds as a duration, if given; `what` names it in a refusal.
fn nanos(v: Option<i64>, what: &str) -> Result<Option<Duration>, String> {
    match v {
        None => Ok(None),
        Some(n) if n > 0 => Ok(Some(Duration::from_nanos(n))),
        Some(n) => Err(format!("{what} {n} ns is not more than 0")),
    }
}

/// Reads one request line of the control socket's protocol (JSON:
/// `{"op":"open","host":"a","to":"b","sdu":1000,"count":100,
/// "interval_ns":1000000,"close_after_ns":null,"refresh_ns":1000000000}`,
/// `{"op":"close","host":"a","id":"a/1"}`, `{"op":"list","host":"a"}`;
/// `host` optional, every field of `open` but `to` defaulted to 1000, 0,
/// 1 ms, never and 1 s; `refresh_ns` 0 for no refresh): the host it names, if any, and the request; or
/// one sentence saying what is wrong with it. Whether the numbers are in
/// range is the host's to say when it takes the request.
pub fn parse_request(line: &str) -> Result<(Option<String>, Request), String> {
    if line.len() > MAX_REQUEST {
        return Err(format!("the request is longer than {MAX_REQUEST} bytes"));
    }
    let req: WireRequest =
        serde_json::from_str(line).map_err(|e| format!("the request is not understood: {e}"))?;
    Ok(match req {
        WireRequest::Open {
            host,
            to,
            sdu,
            count,
            interval_ns,
            close_after_ns,
            refresh_ns,
        } => (
            host,
            Request::Open(OpenRequest {
                to,
                sdu: sdu.unwrap_or(1000),
                count: count.unwrap_or(0),
                interval: nanos(interval_ns, "interval")?.unwrap_or(Duration::from_millis(1)),
                close_after: nanos(close_after_ns, "close_after")?,
                // 0: no refresh daemon for this VC.
                refresh: match refresh_ns {
                    Some(0) => None,
                    r => nanos(r, "refresh")?.or(Some(Duration::from_secs(1))),
                },
            }),
        ),
        WireRequest::Close { host, id } => (host, Request::Close(id)),
        WireRequest::List { host } => (host, Request::List),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines_are_read_with_their_defaults_or_refused_in_a_sentence() {
        let (host, req) = parse_request(r#"{"op":"open","to":"b"}"#).unwrap();
        assert_eq!(host, None);
        assert_eq!(
            req,
            Request::Open(OpenRequest {
                to: "b".into(),
                sdu: 1000,
                count: 0,
                interval: Duration::from_millis(1),
                close_after: None,
                refresh: Some(Duration::from_secs(1)),
            })
        );
        assert_eq!(
            parse_request(r#"{"op":"close","host":"a","id":"a/1"}"#).unwrap(),
            (Some("a".into()), Request::Close("a/1".into()))
        );
        assert_eq!(
            parse_request(r#"{"op":"list"}"#).unwrap(),
            (None, Request::List)
        );
        for (bad, says) in [
            (
                r#"{"op":"open","to":"b","interval_ns":-5}"#,
                "interval -5 ns",
            ),
            (r#"{"op":"open","to":"b","colour":1}"#, "not understood"),
            (r#"{"op":"jump"}"#, "not understood"),
            ("not json", "not understood"),
        ] {
            let e = parse_request(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let long = format!(r#"{{"op":"list","host":"{}"}}"#, "x".repeat(MAX_REQUEST));
        assert!(parse_request(&long).unwrap_err().contains("longer than"));
    }
}
