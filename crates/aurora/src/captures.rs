//! Captures of a run or a node process: the folder, the engine tap that
//! feeds it, and what was written. Ports that receive cells get ERF (or
//! SUNATM) files; ports that receive ATOMIC frames get files of frames
//! (see `aurora_capture`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aurora_capture::{
    CaptureDir, FrameLink, Seen, Written, LINKTYPE_ATOMIC_FROM_HOST, LINKTYPE_ATOMIC_ROUTED,
    LINKTYPE_ERF,
};
use aurora_engine::carry::Carries;
use aurora_engine::{Engine, NodeId};
use aurora_net::Frame;
use aurora_topo::AtomicPart;
use aurora_wire::CellBytes;

/// Where captures go, and in what format.
#[derive(Clone, Debug)]
pub struct CaptureArg {
    /// The folder (created if missing).
    pub dir: std::path::PathBuf,
    /// The cell files' format.
    pub format: aurora_capture::CaptureFormat,
}

/// The nodes that receive ATOMIC frames, by id.
pub(crate) type FramePorts = BTreeMap<u32, FrameNode>;

/// A node that receives ATOMIC frames.
#[derive(Clone, Copy, Debug)]
pub(crate) enum FrameNode {
    /// A Mosaic node: packets from other nodes, and from its host.
    Mosaic,
    /// A host: payloads from its node.
    Host,
    /// An IP router: payloads from its nodes, on its ports from `first`
    /// (its cell ports come before).
    Router { first: u16 },
}

impl FrameNode {
    /// What the frames arriving at `port` look like, if it takes frames.
    fn link(self, port: u16) -> Option<FrameLink> {
        match self {
            FrameNode::Mosaic if port == aurora_atomic::mosaic::HOST_PORT => {
                Some(FrameLink::FromHost)
            }
            FrameNode::Mosaic => Some(FrameLink::Routed),
            FrameNode::Host => Some(FrameLink::Payload),
            FrameNode::Router { first } => (port >= first).then_some(FrameLink::Payload),
        }
    }
}

/// The nodes of the ATOMIC part `a` of engine `e` (ids the engine's).
pub(crate) fn frame_ports<F: Frame>(a: Option<&AtomicPart>, e: &Engine<F>) -> FramePorts {
    let Some(a) = a else {
        return FramePorts::new();
    };
    let router = |id: NodeId| {
        let g = e.node::<aurora_atomic::gateway::Gateway>(id)?;
        let first = u16::try_from(aurora_net::Node::ports(g.ip())).ok()?;
        Some((id.0, FrameNode::Router { first }))
    };
    a.mosaic
        .iter()
        .map(|(_, id)| (id.0, FrameNode::Mosaic))
        .chain(a.hosts.iter().map(|h| (h.2 .0, FrameNode::Host)))
        .chain(a.gateways.iter().filter_map(|g| router(g.2)))
        .collect()
}

/// Creates the capture folder and taps `engine` into it: each cell or
/// frame a node receives is recorded in the file of its node (named
/// `names[id]`) and port. Frames go to the files of `frames`' ports; a
/// frame at any other port is left out (its node drops it as the wrong
/// kind). `background`: written on a thread of its own, so the engine never
/// waits for the disk (real time). The engine holds the tap until
/// [`Engine::clear_tap`]; then [`finish`] closes the files.
pub(crate) fn tap<F: Carries<CellBytes>>(
    engine: &mut Engine<F>,
    cap: &CaptureArg,
    names: Vec<String>,
    frames: FramePorts,
    background: bool,
) -> Result<Arc<Mutex<CaptureDir>>, String> {
    let dir = cap.dir.as_path();
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create the capture folder {}: {e}", dir.display()))?;
    let names = (0u32..).zip(names).collect();
    let mut d = CaptureDir::new(dir, names, cap.format);
    if background {
        d = d.in_background();
    }
    let d = Arc::new(Mutex::new(d));
    let tap = d.clone();
    engine.set_tap(Box::new(move |t, node, port, f: &F| {
        let seen = match frames.get(&node.0).and_then(|n| n.link(port)) {
            Some(link) => Seen::Frame(link, f.bytes()),
            None => match f.peek() {
                Some(cell) => Seen::Cells(std::slice::from_ref(cell)),
                None => return,
            },
        };
        // Poisoned only if a tap panicked, which ends the run anyway.
        if let Ok(mut d) = tap.lock() {
            d.seen(t, node.0, port, seen);
        }
    }));
    Ok(d)
}

/// Closes the captures (once the engine's tap, which shares them, is
/// cleared) and says what was written.
pub(crate) fn finish(c: Option<Arc<Mutex<CaptureDir>>>) -> Result<Vec<Written>, String> {
    match c {
        Some(c) => Arc::try_unwrap(c)
            .map_err(|_| "the capture is still in use".to_string())?
            .into_inner()
            .map_err(|_| "the capture was left half-written".to_string())?
            .finish(),
        None => Ok(Vec::new()),
    }
}

/// The capture files written, as text: what each holds, what it could not
/// keep up with, and anything it left out.
pub(crate) fn text(written: &[Written]) -> String {
    written
        .iter()
        .map(|w| {
            let c = &w.counters;
            let frames = (LINKTYPE_ATOMIC_ROUTED..=LINKTYPE_ATOMIC_FROM_HOST).contains(&w.linktype);
            let mut s = format!("captured {}: ", w.file);
            s += &match (frames, w.linktype) {
                (true, _) => format!("{} ATOMIC frames", c.frames),
                (false, LINKTYPE_ERF) => format!("{} cells, {} AAL5 PDUs", c.cells, c.pdus),
                (false, _) => format!("{} AAL5 SDUs", c.pdus),
            };
            s += &format!(", {} dropped by the capture", c.dropped);
            let left_out = [
                (c.not_llc, "SDUs without an LLC/SNAP header"),
                (c.bad_pdus, "PDUs whose trailer failed"),
                (c.abandoned, "PDUs too long or on too many VCs"),
                (c.wrong_kind, "frames at a port of cells"),
            ];
            for (n, what) in left_out.into_iter().filter(|(n, _)| *n > 0) {
                s += &format!(", {n} {what} left out");
            }
            s + "\n"
        })
        .collect()
}
