//! Networks that carry ATM cells and variable-length frames at once.
//!
//! Every node speaks one frame type: cell nodes (switches, VuNet links,
//! ATM hosts) exchange [`CellBytes`], ATOMIC nodes exchange frames
//! (`Vec<u8>`). A network holding both runs on an engine whose frame type
//! is [`Unit`], either one; each node is adopted into it through
//! [`Carries::adopt`], which wraps it in [`Carried`] (a node that unwraps
//! what arrives and wraps what leaves) unless the engine already speaks
//! the node's type, so a network of one kind pays nothing for the other.
//! A node that speaks both (an IP router with an ATM side and an ATOMIC
//! side) implements `Node<Unit>` itself.

use std::any::Any;

use aurora_net::{Frame, Node, Outbox, PacketPort, PortId, PortSummary};
use aurora_time::Instant;
use aurora_wire::CellBytes;

use aurora_link::{LinkCounters, LinkError};

use crate::io::{ExternalSink, ExternalSource};
use crate::EngineNode;

/// What crosses a link of a network that carries cells and frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unit {
    /// An ATM cell.
    Cell(CellBytes),
    /// A variable-length frame (ATOMIC).
    Frame(Vec<u8>),
}

impl Frame for Unit {
    fn bytes(&self) -> &[u8] {
        match self {
            Unit::Cell(c) => c,
            Unit::Frame(f) => f,
        }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Unit::Cell(c) => c,
            Unit::Frame(f) => f,
        }
    }
}

/// An engine frame type that can carry frames of type `T`.
pub trait Carries<T: Frame>: Frame {
    /// `t`, as this frame type.
    fn wrap(t: T) -> Self;
    /// This frame as a `T`, if it is one.
    fn peek(&self) -> Option<&T>;
    /// A node speaking `T`, made to run on an engine of this frame type.
    fn adopt(node: Box<dyn EngineNode<T>>) -> Box<dyn EngineNode<Self>>;
}

/// Every frame type carries itself.
impl<T: Frame> Carries<T> for T {
    fn wrap(t: T) -> Self {
        t
    }
    fn peek(&self) -> Option<&T> {
        Some(self)
    }
    fn adopt(node: Box<dyn EngineNode<T>>) -> Box<dyn EngineNode<T>> {
        node
    }
}

impl Carries<CellBytes> for Unit {
    fn wrap(t: CellBytes) -> Self {
        Unit::Cell(t)
    }
    fn peek(&self) -> Option<&CellBytes> {
        match self {
            Unit::Cell(c) => Some(c),
            Unit::Frame(f) => f.as_slice().try_into().ok(),
        }
    }
    fn adopt(node: Box<dyn EngineNode<CellBytes>>) -> Box<dyn EngineNode<Unit>> {
        Box::new(Carried::new(node))
    }
}

impl Carries<Vec<u8>> for Unit {
    fn wrap(t: Vec<u8>) -> Self {
        Unit::Frame(t)
    }
    fn peek(&self) -> Option<&Vec<u8>> {
        match self {
            Unit::Frame(f) => Some(f),
            Unit::Cell(_) => None,
        }
    }
    fn adopt(node: Box<dyn EngineNode<Vec<u8>>>) -> Box<dyn EngineNode<Unit>> {
        Box::new(Carried::new(node))
    }
}

/// Why [`Carried`] drops a frame: it is of the other kind (a cell on an
/// ATOMIC node's port). A checked topology never links the two kinds, so
/// this counts a peer that sent the wrong thing over an external link.
pub const WRONG_KIND: &str = "wrong_kind";

/// A node speaking `T`, running on an engine of a wider frame type.
pub struct Carried<T: Frame> {
    inner: Box<dyn EngineNode<T>>,
    batch: Vec<T>,
    out: Outbox<T>,
    to_host: usize,
    wrong_kind: u64,
}

impl<T: Frame> Carried<T> {
    /// `inner`, adapted.
    pub fn new(inner: Box<dyn EngineNode<T>>) -> Self {
        Carried {
            inner,
            batch: Vec::new(),
            out: Outbox::default(),
            to_host: 0,
            wrong_kind: 0,
        }
    }

    /// Frames of the other kind that arrived, and were dropped.
    pub fn wrong_kind(&self) -> u64 {
        self.wrong_kind
    }

    /// Hands what the inner node sent (and dropped) on, wrapped, and the
    /// holds it put on its inputs.
    fn flush<F: Carries<T>>(&mut self, out: &mut Outbox<F>) {
        for (p, t) in self.out.drain() {
            out.push(p, F::wrap(t));
        }
        for (p, t, why) in self.out.drain_drops() {
            out.dropped(p, &F::wrap(t), why);
        }
        for (p, until) in self.out.drain_holds() {
            out.hold_input(p, until);
        }
        self.to_host = self.inner.packet_port().map_or(0, |p| p.to_host_len());
    }
}

impl<T: Frame, F: Carries<T>> Node<F> for Carried<T> {
    fn ports(&self) -> usize {
        self.inner.ports()
    }

    fn receive(&mut self, now: Instant, port: PortId, frames: &[F], out: &mut Outbox<F>) {
        self.batch.clear();
        for f in frames {
            match f.peek() {
                Some(t) => self.batch.push(t.clone()),
                None => {
                    self.wrong_kind += 1;
                    out.dropped(port, f, WRONG_KIND);
                }
            }
        }
        self.out.track_drops(out.tracking_drops());
        if !self.batch.is_empty() {
            self.inner.receive(now, port, &self.batch, &mut self.out);
        }
        self.flush(out);
    }

    fn poll(&mut self, now: Instant, out: &mut Outbox<F>) {
        self.out.track_drops(out.tracking_drops());
        self.inner.poll(now, &mut self.out);
        self.flush(out);
    }

    fn poll_at(&self) -> Option<Instant> {
        self.inner.poll_at()
    }

    fn holds_input(&self) -> bool {
        self.inner.holds_input()
    }

    fn port_summary(&self, port: PortId) -> Option<PortSummary> {
        self.inner.port_summary(port)
    }

    fn packet_port(&mut self) -> Option<&mut dyn PacketPort<F>> {
        self.inner.packet_port()?;
        Some(self)
    }

    fn inner(&self) -> Option<&dyn Any> {
        let n: &dyn EngineNode<T> = self.inner.as_ref();
        Some(n)
    }

    fn inner_mut(&mut self) -> Option<&mut dyn Any> {
        let n: &mut dyn EngineNode<T> = self.inner.as_mut();
        Some(n)
    }

    fn innermost(&self) -> Option<&dyn Any> {
        let n: &dyn EngineNode<T> = self.inner.as_ref();
        n.innermost().or(Some(n))
    }
}

impl<T: Frame, F: Carries<T>> PacketPort<F> for Carried<T> {
    fn host_sent(&mut self, now: Instant, pkt: &[u8], out: &mut Outbox<F>) {
        if let Some(p) = self.inner.packet_port() {
            p.host_sent(now, pkt, &mut self.out);
        }
        self.flush(out);
    }

    fn drain_to_host(&mut self, f: &mut dyn FnMut(&[u8])) {
        if let Some(p) = self.inner.packet_port() {
            p.drain_to_host(f);
        }
        self.to_host = 0;
    }

    fn to_host_len(&self) -> usize {
        self.to_host
    }
}

/// An external sink of `T`s (a cell link to another process, say) on an
/// engine of a wider frame type: frames of the other kind are not taken,
/// so the engine counts them refused.
pub struct SinkOf<T> {
    inner: Box<dyn ExternalSink<T>>,
    buf: Vec<T>,
}

impl<T> SinkOf<T> {
    /// `inner`, taking the engine's frames.
    pub fn new(inner: Box<dyn ExternalSink<T>>) -> Self {
        SinkOf {
            inner,
            buf: Vec::new(),
        }
    }
}

impl<T: Frame, F: Carries<T>> ExternalSink<F> for SinkOf<T> {
    fn send(&mut self, frames: &[F]) -> Result<usize, LinkError> {
        self.buf.clear();
        self.buf
            .extend(frames.iter().filter_map(|f| f.peek()).cloned());
        self.inner.send(&self.buf)
    }
    fn flush(&mut self) -> Result<bool, LinkError> {
        self.inner.flush()
    }
    fn counters(&self) -> LinkCounters {
        self.inner.counters()
    }
    fn waiting(&self) -> Option<(usize, usize)> {
        // Only `T`s reach the inner sink, so its units are the engine's.
        self.inner.waiting()
    }
}

/// An external source of `T`s on an engine of a wider frame type.
pub struct SourceOf<T> {
    inner: Box<dyn ExternalSource<T>>,
    buf: Vec<T>,
}

impl<T> SourceOf<T> {
    /// `inner`, giving the engine's frames.
    pub fn new(inner: Box<dyn ExternalSource<T>>) -> Self {
        SourceOf {
            inner,
            buf: Vec::new(),
        }
    }
}

impl<T: Frame, F: Carries<T>> ExternalSource<F> for SourceOf<T> {
    fn recv(&mut self, out: &mut Vec<F>, max: usize) -> Result<usize, LinkError> {
        self.buf.clear();
        let n = self.inner.recv(&mut self.buf, max)?;
        out.extend(self.buf.drain(..).map(F::wrap));
        Ok(n)
    }
    fn take_discarded(&mut self, f: &mut dyn FnMut(&F)) {
        self.inner.take_discarded(&mut |t| f(&F::wrap(t.clone())));
    }
    fn counters(&self) -> LinkCounters {
        self.inner.counters()
    }
    fn waited(&self) -> Option<std::time::Duration> {
        self.inner.waited()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Engine, LinkSpec};
    use aurora_time::Duration;

    /// Echoes every frame back out of the port it came in on.
    struct Echo;
    impl<F: Frame> Node<F> for Echo {
        fn ports(&self) -> usize {
            1
        }
        fn receive(&mut self, _: Instant, port: PortId, frames: &[F], out: &mut Outbox<F>) {
            for f in frames {
                out.push(port, f.clone());
            }
        }
        fn poll(&mut self, _: Instant, _: &mut Outbox<F>) {}
        fn poll_at(&self) -> Option<Instant> {
            None
        }
    }

    /// Sends one frame at time zero, counts what comes back.
    struct Once<T> {
        send: Option<T>,
        got: Vec<T>,
    }
    impl<T: Frame> Node<T> for Once<T> {
        fn ports(&self) -> usize {
            1
        }
        fn receive(&mut self, _: Instant, _: PortId, frames: &[T], _: &mut Outbox<T>) {
            self.got.extend_from_slice(frames);
        }
        fn poll(&mut self, _: Instant, out: &mut Outbox<T>) {
            if let Some(t) = self.send.take() {
                out.push(0, t);
            }
        }
        fn poll_at(&self) -> Option<Instant> {
            self.send.as_ref().map(|_| Instant::ZERO)
        }
    }

    fn adopt<T: Frame>(n: impl EngineNode<T>) -> Box<dyn EngineNode<Unit>>
    where
        Unit: Carries<T>,
    {
        <Unit as Carries<T>>::adopt(Box::new(n))
    }

    #[test]
    fn cells_and_frames_cross_one_engine_and_nodes_are_found_by_their_own_type() {
        let mut e: Engine<Unit> = Engine::with_frames(1);
        let cell = [7u8; 53];
        let frame = vec![1u8, 2, 3];
        let a = e.add_boxed(adopt(Once {
            send: Some(cell),
            got: Vec::new(),
        }));
        let b = e.add_boxed(adopt::<CellBytes>(Echo));
        let c = e.add_boxed(adopt(Once {
            send: Some(frame.clone()),
            got: Vec::new(),
        }));
        let d = e.add_boxed(adopt::<Vec<u8>>(Echo));
        let spec = LinkSpec::clean(1e6, Duration::from_micros(5), 16);
        e.connect((a, 0), (b, 0), spec).unwrap();
        e.connect((c, 0), (d, 0), spec).unwrap();
        e.run_until(Instant::ZERO + Duration::from_millis(1));
        assert_eq!(e.node::<Once<CellBytes>>(a).unwrap().got, vec![cell]);
        assert_eq!(e.node::<Once<Vec<u8>>>(c).unwrap().got, vec![frame]);
        e.node_mut::<Once<CellBytes>>(a).unwrap().got.clear();
        assert!(e.node::<Once<CellBytes>>(a).unwrap().got.is_empty());
    }

    #[test]
    fn a_frame_node_drops_a_cell_and_counts_it() {
        let mut n = Carried::new(Box::new(Once::<Vec<u8>> {
            send: None,
            got: Vec::new(),
        }) as Box<dyn EngineNode<Vec<u8>>>);
        let mut out: Outbox<Unit> = Outbox::default();
        out.track_drops(true);
        Node::<Unit>::receive(
            &mut n,
            Instant::ZERO,
            0,
            &[Unit::Cell([0; 53]), Unit::Frame(vec![9])],
            &mut out,
        );
        assert_eq!(n.wrong_kind(), 1);
        let drops: Vec<_> = out.drain_drops().collect();
        assert_eq!(drops.len(), 1);
        assert_eq!(drops[0].2, WRONG_KIND);
        // A 53-byte frame from a byte link is a cell to a cell node.
        assert_eq!(
            <Unit as Carries<CellBytes>>::peek(&Unit::Frame(vec![5; 53])),
            Some(&[5u8; 53])
        );
    }

    /// Holds its one input until 1 ms past whatever arrives.
    struct Slow;
    impl Node<CellBytes> for Slow {
        fn ports(&self) -> usize {
            1
        }
        fn receive(&mut self, now: Instant, _: PortId, _: &[CellBytes], out: &mut Outbox) {
            out.hold_input(0, now + aurora_time::Duration::from_millis(1));
        }
        fn poll(&mut self, _: Instant, _: &mut Outbox) {}
        fn poll_at(&self) -> Option<Instant> {
            None
        }
        fn holds_input(&self) -> bool {
            true
        }
    }

    /// A node that holds its input still does inside a mixed network: the
    /// wrapper says so and hands its holds on (one per port, the latest).
    #[test]
    fn a_wrapped_node_holds_its_input_through_the_wrapper() {
        let mut n = Carried::new(Box::new(Slow) as Box<dyn EngineNode<CellBytes>>);
        assert!(Node::<Unit>::holds_input(&n));
        let mut out: Outbox<Unit> = Outbox::default();
        for t in [0, 5, 3] {
            let now = Instant::from_millis(t);
            Node::<Unit>::receive(&mut n, now, 0, &[Unit::Cell([0; 53])], &mut out);
        }
        let holds: Vec<_> = out.drain_holds().collect();
        assert_eq!(holds, [(0, Instant::from_millis(6))]);
    }

    /// Keeps what it is sent; gives back what it is given.
    #[derive(Default)]
    struct Pipe(Vec<CellBytes>);
    impl ExternalSink<CellBytes> for Pipe {
        fn send(&mut self, frames: &[CellBytes]) -> Result<usize, LinkError> {
            self.0.extend_from_slice(frames);
            Ok(frames.len())
        }
    }
    impl ExternalSource<CellBytes> for Pipe {
        fn recv(&mut self, out: &mut Vec<CellBytes>, max: usize) -> Result<usize, LinkError> {
            let n = self.0.len().min(max);
            out.extend(self.0.drain(..n));
            Ok(n)
        }
    }

    #[test]
    fn external_cell_links_carry_units_and_refuse_frames() {
        let mut sink = SinkOf::new(Box::new(Pipe::default()) as Box<dyn ExternalSink<CellBytes>>);
        let sent = [
            Unit::Cell([1; 53]),
            Unit::Frame(vec![2; 9]),
            Unit::Cell([3; 53]),
        ];
        assert_eq!(ExternalSink::<Unit>::send(&mut sink, &sent).unwrap(), 2);
        let mut src = SourceOf::new(
            Box::new(Pipe(vec![[4; 53], [5; 53]])) as Box<dyn ExternalSource<CellBytes>>
        );
        let mut out: Vec<Unit> = Vec::new();
        assert_eq!(src.recv(&mut out, 8).unwrap(), 2);
        assert_eq!(out, vec![Unit::Cell([4; 53]), Unit::Cell([5; 53])]);
    }
}
