//! The real-time driver for networks of variable-length frames (ATOMIC):
//! each node on its own thread, every one-way link a bounded FIFO between
//! two threads, released at the time the link's model says the frame has
//! crossed it (serialisation by [`aurora_engine::frame_time`], then the
//! propagation delay). A frame that finds the link's buffer full is a
//! counted overflow.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration as StdDuration, Instant as WallClock};

use aurora_engine::{frame_time, LinkSpec, NodeId};
use aurora_link::frame_udp::{FrameUdp, FrameUdpCounters};
use aurora_net::{Frame, Node, Outbox, PortId};
use aurora_time::Instant;

use crate::{DeviceCounters, PacketDevice, RtError};

/// A node this driver can run.
pub trait FrameNode<F: Frame>: Node<F> + Any + Send {}
impl<F: Frame, T: Node<F> + Any + Send> FrameNode<F> for T {}

/// A one-way link from a node's output port to a node's input port.
#[derive(Clone, Copy, Debug)]
pub struct OneWay {
    /// Sending node and port.
    pub from: (NodeId, PortId),
    /// Receiving node and port.
    pub to: (NodeId, PortId),
    /// Its model.
    pub spec: LinkSpec,
}

/// What one link did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameLinkCounters {
    /// Frames the sender offered.
    pub offered: u64,
    /// Frames dropped: the buffer was full.
    pub overflow: u64,
    /// Frames the receiver took.
    pub delivered: u64,
}

struct Link<F> {
    q: Mutex<VecDeque<(Instant, F)>>,
    offered: AtomicU64,
    overflow: AtomicU64,
    delivered: AtomicU64,
}

struct Output<F> {
    link: Arc<Link<F>>,
    spec: LinkSpec,
    busy_until: Instant,
}

enum Out<F> {
    Queue(Output<F>),
    /// Index into the worker's UDP ports.
    Udp(usize),
}

/// A node's port joined to another process over UDP: frames leaving
/// `out_port` are sent (paced by `spec`), frames arriving go in at
/// `in_port`.
pub struct UdpEnd {
    /// The node.
    pub node: NodeId,
    /// Its output port that sends here, if any (a one-way cable may only
    /// receive).
    pub out_port: Option<PortId>,
    /// Its input port fed from here, if any.
    pub in_port: Option<PortId>,
    /// The socket.
    pub link: FrameUdp,
    /// The model of the sending direction.
    pub spec: LinkSpec,
}

struct UdpPort {
    end: UdpEnd,
    busy_until: Instant,
    pending: VecDeque<(Instant, Vec<u8>)>,
    overflow: u64,
}

/// What a run hands back.
pub struct FramesFinished<F: Frame> {
    /// The nodes, by id.
    pub nodes: Vec<Box<dyn FrameNode<F>>>,
    /// Each link's counters, in the order given.
    pub links: Vec<FrameLinkCounters>,
    /// Each UDP end's counters, in the order given, and its frames dropped
    /// at a full sending buffer.
    pub udp: Vec<(FrameUdpCounters, u64)>,
    /// Each packet device's counters, in the order given.
    pub devices: Vec<DeviceCounters>,
    /// How far behind real time each node ran: timers, frames taken from
    /// links and sent on UDP cables (each against the time the link's model
    /// says it was due), and idle wake-ups.
    pub lateness: crate::lateness::Lateness,
}

impl<F: Frame> FramesFinished<F> {
    /// A node by its concrete type.
    pub fn node<T: Node<F> + Any>(&self, id: NodeId) -> Option<&T> {
        let n: &dyn Any = self.nodes.get(id.0 as usize)?.as_ref();
        n.downcast_ref::<T>()
    }
}

struct FrameWorker<F: Frame> {
    node: Box<dyn FrameNode<F>>,
    inputs: Vec<(PortId, Arc<Link<F>>)>,
    outputs: Vec<Option<Out<F>>>,
    udp: Vec<UdpPort>,
    device: Option<(Box<dyn PacketDevice>, DeviceCounters)>,
    batch: Vec<F>,
    lateness: crate::lateness::NodeLateness,
}

impl<F: Frame> FrameWorker<F> {
    fn route(&mut self, now: Instant, out: &mut Outbox<F>) {
        for (port, f) in out.drain() {
            let o = match self.outputs.get_mut(usize::from(port)) {
                Some(Some(Out::Queue(o))) => o,
                Some(Some(Out::Udp(i))) => {
                    let u = &mut self.udp[*i];
                    if u.pending.len() >= u.end.spec.buffer.max(1) {
                        u.overflow += 1;
                        continue;
                    }
                    let start = u.busy_until.max(now);
                    u.busy_until = start + frame_time(&u.end.spec, f.bytes().len());
                    u.pending
                        .push_back((u.busy_until + u.end.spec.delay, f.bytes().to_vec()));
                    continue;
                }
                _ => continue,
            };
            o.link.offered.fetch_add(1, Ordering::Relaxed);
            let mut q = o.link.q.lock().unwrap_or_else(|e| e.into_inner());
            if q.len() >= o.spec.buffer.max(1) {
                o.link.overflow.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let start = o.busy_until.max(now);
            o.busy_until = start + frame_time(&o.spec, f.bytes().len());
            q.push_back((o.busy_until + o.spec.delay, f));
        }
    }

    /// Moves packets between the local host's stack and the node.
    fn device_turn(&mut self, now: Instant, out: &mut Outbox<F>) -> bool {
        let Some((dev, c)) = self.device.as_mut() else {
            return false;
        };
        let Some(port) = self.node.packet_port() else {
            return false;
        };
        let mut moved = false;
        let mut buf = vec![0u8; 65_536];
        for _ in 0..crate::DEVICE_BATCH {
            match dev.recv(&mut buf) {
                Ok(Some(n)) => {
                    c.from_device += 1;
                    port.host_sent(now, &buf[..n], out);
                    moved = true;
                }
                Ok(None) => break,
                Err(_) => {
                    c.errors += 1;
                    break;
                }
            }
        }
        if port.to_host_len() > 0 {
            moved = true;
            port.drain_to_host(&mut |p| match dev.send(p) {
                Ok(true) => c.to_device += 1,
                Ok(false) => c.device_full += 1,
                Err(_) => c.errors += 1,
            });
        }
        moved
    }

    fn run(mut self, start: WallClock, stop: &AtomicBool) -> Self {
        let mut out = Outbox::default();
        let since = |start: WallClock| {
            let t = start.elapsed();
            (t, Instant::from_nanos(t.as_nanos() as i64))
        };
        while !stop.load(Ordering::Relaxed) {
            let (t, now) = since(start);
            self.lateness.turn(t);
            let mut busy = false;
            let mut next: Option<Instant> = None;
            for i in 0..self.inputs.len() {
                let (port, link) = (self.inputs[i].0, self.inputs[i].1.clone());
                {
                    let mut q = link.q.lock().unwrap_or_else(|e| e.into_inner());
                    let taken = since(start).1;
                    while q.front().is_some_and(|(t, _)| *t <= now) && self.batch.len() < 256 {
                        if let Some((due, f)) = q.pop_front() {
                            self.lateness.input(due, taken);
                            self.batch.push(f);
                        }
                    }
                    if let Some((t, _)) = q.front() {
                        next = Some(next.map_or(*t, |n: Instant| n.min(*t)));
                    }
                }
                if !self.batch.is_empty() {
                    busy = true;
                    link.delivered
                        .fetch_add(self.batch.len() as u64, Ordering::Relaxed);
                    let batch = std::mem::take(&mut self.batch);
                    self.node.receive(now, port, &batch, &mut out);
                    self.batch = batch;
                    self.batch.clear();
                    self.route(now, &mut out);
                }
            }
            for i in 0..self.udp.len() {
                let u = &mut self.udp[i];
                while u.pending.front().is_some_and(|(t, _)| *t <= now) {
                    if let Some((due, b)) = u.pending.pop_front() {
                        self.lateness.input(due, since(start).1);
                        u.end.link.send(&b);
                        busy = true;
                    }
                }
                if let Some((t, _)) = u.pending.front() {
                    next = Some(next.map_or(*t, |n: Instant| n.min(*t)));
                }
                let Some(port) = u.end.in_port else { continue };
                while self.batch.len() < 256 {
                    let Some(b) = u.end.link.recv() else { break };
                    if let Some(f) = F::from_bytes(&b) {
                        self.batch.push(f);
                    }
                }
                if !self.batch.is_empty() {
                    busy = true;
                    let batch = std::mem::take(&mut self.batch);
                    self.node.receive(now, port, &batch, &mut out);
                    self.batch = batch;
                    self.batch.clear();
                    self.route(now, &mut out);
                }
            }
            if let Some(due) = self.node.poll_at().filter(|t| *t <= now) {
                self.lateness.timer(due, since(start).1);
                self.node.poll(now, &mut out);
                self.route(now, &mut out);
                busy = true;
            }
            if self.device_turn(now, &mut out) {
                self.route(now, &mut out);
                busy = true;
            }
            if !busy {
                let due = [next, self.node.poll_at()].into_iter().flatten().min();
                let wait = due
                    .map(|t| StdDuration::from_nanos((t - now).as_nanos().max(0) as u64))
                    .unwrap_or(StdDuration::from_micros(100));
                let asked = wait.min(StdDuration::from_micros(50));
                let before = start.elapsed();
                std::thread::sleep(asked);
                self.lateness
                    .woke(asked, start.elapsed().saturating_sub(before));
            }
        }
        let (t, now) = since(start);
        self.lateness.stop(now, t, self.node.poll_at());
        self
    }
}

/// Runs `nodes` joined by `links`, and to other processes by `udp`, with
/// the packet devices (TUN interfaces) of `devices` joined to their nodes'
/// packet ports, until `stop` is set.
pub fn run_frames_until<F: Frame>(
    nodes: Vec<Box<dyn FrameNode<F>>>,
    links: &[OneWay],
    udp: Vec<UdpEnd>,
    devices: Vec<(NodeId, Box<dyn PacketDevice>)>,
    stop: &Arc<AtomicBool>,
) -> Result<FramesFinished<F>, RtError> {
    let mut workers: Vec<FrameWorker<F>> = nodes
        .into_iter()
        .map(|node| {
            let ports = node.ports();
            FrameWorker {
                node,
                inputs: Vec::new(),
                outputs: (0..ports).map(|_| None).collect(),
                udp: Vec::new(),
                device: None,
                batch: Vec::new(),
                lateness: crate::lateness::NodeLateness::default(),
            }
        })
        .collect();
    let mut made = Vec::new();
    for l in links {
        if !(l.spec.rate > 0.0 && l.spec.rate.is_finite()) {
            return Err(RtError(format!(
                "link rate {} is not a positive number of frames per second",
                l.spec.rate
            )));
        }
        if workers
            .get(l.to.0 .0 as usize)
            .is_none_or(|w| usize::from(l.to.1) >= w.outputs.len())
        {
            return Err(RtError(format!(
                "node {} has no port {}",
                l.to.0 .0, l.to.1
            )));
        }
        let link = Arc::new(Link {
            q: Mutex::new(VecDeque::new()),
            offered: AtomicU64::new(0),
            overflow: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
        });
        let slot = workers
            .get_mut(l.from.0 .0 as usize)
            .and_then(|w| w.outputs.get_mut(usize::from(l.from.1)))
            .ok_or_else(|| RtError(format!("node {} has no port {}", l.from.0 .0, l.from.1)))?;
        if slot.is_some() {
            return Err(RtError(format!(
                "port {} of node {} is already connected",
                l.from.1, l.from.0 .0
            )));
        }
        *slot = Some(Out::Queue(Output {
            link: link.clone(),
            spec: l.spec,
            busy_until: Instant::ZERO,
        }));
        workers[l.to.0 .0 as usize]
            .inputs
            .push((l.to.1, link.clone()));
        made.push(link);
    }
    let mut udp_order = Vec::new();
    for end in udp {
        let w = workers
            .get_mut(end.node.0 as usize)
            .ok_or_else(|| RtError(format!("no node {}", end.node.0)))?;
        let i = w.udp.len();
        if let Some(p) = end.out_port {
            let slot = w
                .outputs
                .get_mut(usize::from(p))
                .ok_or_else(|| RtError(format!("node {} has no port {p}", end.node.0)))?;
            if slot.is_some() {
                return Err(RtError(format!(
                    "port {p} of node {} is already connected",
                    end.node.0
                )));
            }
            *slot = Some(Out::Udp(i));
        }
        udp_order.push((end.node.0 as usize, i));
        w.udp.push(UdpPort {
            end,
            busy_until: Instant::ZERO,
            pending: VecDeque::new(),
            overflow: 0,
        });
    }
    let mut device_order = Vec::new();
    for (node, dev) in devices {
        let w = workers
            .get_mut(node.0 as usize)
            .ok_or_else(|| RtError(format!("no node {}", node.0)))?;
        if w.device.is_some() {
            return Err(RtError(format!("node {} has two devices", node.0)));
        }
        w.device = Some((dev, DeviceCounters::default()));
        device_order.push(node.0 as usize);
    }
    let start = WallClock::now();
    let handles: Vec<_> = workers
        .into_iter()
        .map(|w| {
            let stop = stop.clone();
            std::thread::spawn(move || w.run(start, &stop))
        })
        .collect();
    let mut workers = Vec::new();
    for h in handles {
        workers.push(
            h.join()
                .map_err(|_| RtError("a node's thread panicked".into()))?,
        );
    }
    let udp = udp_order
        .iter()
        .map(|&(n, i)| {
            let u = &workers[n].udp[i];
            (u.end.link.counters(), u.overflow)
        })
        .collect();
    let devices = device_order
        .iter()
        .filter_map(|&n| workers[n].device.as_ref().map(|d| d.1))
        .collect();
    let lateness = crate::lateness::Lateness {
        nodes: workers.iter().map(|w| w.lateness.clone()).collect(),
        asked: None,
        stop_at: None,
        workers: workers.len(),
    };
    let nodes = workers.into_iter().map(|w| w.node).collect();
    let links = made
        .iter()
        .map(|l| FrameLinkCounters {
            offered: l.offered.load(Ordering::Relaxed),
            overflow: l.overflow.load(Ordering::Relaxed),
            delivered: l.delivered.load(Ordering::Relaxed),
        })
        .collect();
    Ok(FramesFinished {
        nodes,
        links,
        udp,
        devices,
        lateness,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aurora_time::Duration;

    /// Sends `n` frames of `len` bytes out of port 0 at start; counts what
    /// arrives.
    struct Src {
        n: u64,
        len: usize,
        sent: bool,
        got: u64,
    }

    impl Node<Vec<u8>> for Src {
        fn ports(&self) -> usize {
            1
        }
        fn receive(&mut self, _: Instant, _: PortId, f: &[Vec<u8>], _: &mut Outbox<Vec<u8>>) {
            self.got += f.len() as u64;
        }
        fn poll(&mut self, _: Instant, out: &mut Outbox<Vec<u8>>) {
            for _ in 0..self.n {
                out.push(0, vec![7; self.len]);
            }
            self.sent = true;
        }
        fn poll_at(&self) -> Option<Instant> {
            (!self.sent).then_some(Instant::ZERO)
        }
    }

    #[test]
    fn frames_cross_one_way_links_and_overflow_is_counted() {
        let a = Src {
            n: 50,
            len: 100,
            sent: false,
            got: 0,
        };
        let b = Src {
            n: 0,
            len: 0,
            sent: true,
            got: 0,
        };
        let spec = LinkSpec {
            buffer: 40,
            ..LinkSpec::clean(1e6, Duration::from_micros(10), 40)
        };
        let nodes: Vec<Box<dyn FrameNode<Vec<u8>>>> = vec![Box::new(a), Box::new(b)];
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let timer = std::thread::spawn(move || {
            std::thread::sleep(StdDuration::from_millis(200));
            s.store(true, Ordering::Relaxed);
        });
        let links = [OneWay {
            from: (NodeId(0), 0),
            to: (NodeId(1), 0),
            spec,
        }];
        let done = run_frames_until(nodes, &links, Vec::new(), Vec::new(), &stop).unwrap();
        timer.join().unwrap();
        let got = done.node::<Src>(NodeId(1)).unwrap().got;
        let c = done.links[0];
        assert_eq!((c.offered, c.overflow, c.delivered), (50, 10, 40));
        assert_eq!(got, 40);
        // The sender's one timer and the receiver's 40 frames, each
        // handled at or after it was due.
        let l = &done.lateness;
        assert_eq!(l.nodes[0].events.count(), 1);
        assert_eq!(l.nodes[1].events.count(), 40);
        assert!(l.nodes.iter().all(|n| n.stopped.is_some()));
    }
}
