//! Output ports that pull: a node's frames for a port wait in the port's
//! queue, and the link takes the next one when its line is free. The queue
//! and the rule that decides what waits, what goes next and what is dropped
//! (the port's discipline) belong to the sending node's port, not to the
//! link; the link only serialises, delays and impairs.
//!
//! The discipline here is FIFO with a bounded buffer. The buffer counts the
//! frame on the line too, as a switch's output FIFO does: a port of buffer
//! B holds B − 1 waiting frames while one is being sent. Ports of
//! variable-length frames may bound the bytes waiting as well
//! ([`ByteFifo`]).
//!
//! A receiving node may hold an input port
//! ([`aurora_net::Outbox::hold_input`], for a node whose
//! [`aurora_net::Node::holds_input`] says it may): the line feeding it
//! then starts no frame that would arrive before the hold ends (it starts
//! one crossing, the least frame time plus the delay, before), so frames
//! wait in the sending port and are dropped there by its rule when it is
//! full (with nothing on the line, a FIFO of buffer B holds B waiting
//! frames), counted like any port drop. Frames already on the wire still
//! arrive. A hold only lengthens. Lines into such a node are never
//! computed in closed form, and the planner ([`crate::plan`]) never cuts
//! them: a hold reaches only a line run on the receiver's own worker, and
//! not an external one.

use std::collections::VecDeque;

use aurora_net::Frame;
use aurora_time::Instant;

/// Why a port refused a frame.
pub const TAIL_DROP: &str = "tail_drop";

/// Why a frame a node sent out of a port with no link was dropped.
pub const UNCONNECTED: &str = "unconnected";

/// A sending port's queue under a discipline: frames go in with
/// [`Port::enqueue`] when the node sends them and come out with
/// [`Port::dequeue`] when the line is free.
pub trait Port<F>: std::any::Any + Send {
    /// Takes `frame`, sent at `now` while `on_line` frames (0 or 1) are
    /// being sent, or hands it back with the reason it was dropped.
    fn enqueue(&mut self, frame: F, now: Instant, on_line: usize) -> Result<(), (F, &'static str)>;
    /// Offered `frame` at `now` while the line is idle and nothing waits:
    /// the frame to put on the line now (`Some`), or `None` if the
    /// discipline keeps it waiting, or the frame dropped with its reason.
    fn pass(&mut self, frame: F, now: Instant) -> Result<Option<F>, (F, &'static str)> {
        self.enqueue(frame, now, 0)?;
        Ok(self.dequeue(now))
    }
    /// The frame to send next, if any waits.
    fn dequeue(&mut self, now: Instant) -> Option<F>;
    /// Frames waiting (not counting one on the line).
    fn len(&self) -> usize;
    /// Shows `f` every frame waiting, in no particular order (for the
    /// books at the end of a run, not the data path).
    fn for_each(&self, f: &mut dyn FnMut(&F));
    /// Whether the bytes waiting take half of a byte bound, for a
    /// discipline with one (a host adapter then takes nothing more from
    /// its host, as it does when half its frames are taken).
    fn bytes_half_full(&self) -> bool {
        false
    }
    /// No frame waits.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// First in, first out, at most `buffer` frames including the one on the
/// line; a frame that finds it full is a tail drop.
#[derive(Debug)]
pub struct Fifo<F> {
    queue: VecDeque<F>,
    buffer: usize,
}

impl<F> Fifo<F> {
    /// A FIFO holding `buffer` frames (at least 1: the one on the line).
    pub fn new(buffer: usize) -> Self {
        Fifo {
            queue: VecDeque::new(),
            buffer: buffer.max(1),
        }
    }
}

impl<F: Send + 'static> Port<F> for Fifo<F> {
    #[inline]
    fn enqueue(
        &mut self,
        frame: F,
        _now: Instant,
        on_line: usize,
    ) -> Result<(), (F, &'static str)> {
        if self.queue.len() + on_line >= self.buffer {
            return Err((frame, TAIL_DROP));
        }
        self.queue.push_back(frame);
        Ok(())
    }

    #[inline]
    fn dequeue(&mut self, _now: Instant) -> Option<F> {
        self.queue.pop_front()
    }

    #[inline]
    fn pass(&mut self, frame: F, _now: Instant) -> Result<Option<F>, (F, &'static str)> {
        // An idle line and an empty FIFO: the frame goes straight on.
        debug_assert!(self.queue.is_empty());
        Ok(Some(frame))
    }

    fn len(&self) -> usize {
        self.queue.len()
    }

    fn for_each(&self, f: &mut dyn FnMut(&F)) {
        self.queue.iter().for_each(f);
    }
}

/// A [`Fifo`] that also bounds the bytes of the frames waiting (not the
/// one on the line): memory for frames of any length, as a host's or a
/// node's buffer has. A frame that would pass either bound is a tail drop,
/// except that an empty port takes one frame of any length (so a bound
/// below the longest frame still lets a host adapter wait for room rather
/// than lose every frame that finds the line busy).
#[derive(Debug)]
pub struct ByteFifo<F> {
    fifo: Fifo<F>,
    bytes: usize,
    held: usize,
}

impl<F> ByteFifo<F> {
    /// A FIFO of at most `buffer` frames (the one on the line included)
    /// and `bytes` bytes waiting.
    pub fn new(buffer: usize, bytes: usize) -> Self {
        ByteFifo {
            fifo: Fifo::new(buffer),
            bytes,
            held: 0,
        }
    }
}

impl<F: Frame> Port<F> for ByteFifo<F> {
    fn enqueue(&mut self, frame: F, now: Instant, on_line: usize) -> Result<(), (F, &'static str)> {
        let len = frame.bytes().len();
        if self.held > 0 && len > self.bytes.saturating_sub(self.held) {
            return Err((frame, TAIL_DROP));
        }
        self.fifo.enqueue(frame, now, on_line)?;
        self.held += len;
        Ok(())
    }

    fn pass(&mut self, frame: F, _now: Instant) -> Result<Option<F>, (F, &'static str)> {
        // An idle line and nothing waiting: the frame goes straight on.
        debug_assert!(self.fifo.is_empty());
        Ok(Some(frame))
    }

    fn dequeue(&mut self, now: Instant) -> Option<F> {
        let f = self.fifo.dequeue(now)?;
        self.held -= f.bytes().len();
        Some(f)
    }

    fn len(&self) -> usize {
        self.fifo.len()
    }

    fn for_each(&self, f: &mut dyn FnMut(&F)) {
        self.fifo.for_each(f);
    }

    fn bytes_half_full(&self) -> bool {
        self.held.saturating_mul(2) >= self.bytes
    }
}

/// A port's discipline as a link direction holds it: FIFO (the common
/// case, called without a virtual call so the compiler can inline it), or
/// any other.
pub enum AnyPort<F> {
    /// First in, first out.
    Fifo(Fifo<F>),
    /// Any other discipline.
    Other(Box<dyn Port<F>>),
}

impl<F: Send + 'static> Port<F> for AnyPort<F> {
    #[inline]
    fn enqueue(&mut self, frame: F, now: Instant, on_line: usize) -> Result<(), (F, &'static str)> {
        match self {
            AnyPort::Fifo(p) => p.enqueue(frame, now, on_line),
            AnyPort::Other(p) => p.enqueue(frame, now, on_line),
        }
    }

    #[inline]
    fn pass(&mut self, frame: F, now: Instant) -> Result<Option<F>, (F, &'static str)> {
        match self {
            AnyPort::Fifo(p) => p.pass(frame, now),
            AnyPort::Other(p) => p.pass(frame, now),
        }
    }

    #[inline]
    fn dequeue(&mut self, now: Instant) -> Option<F> {
        match self {
            AnyPort::Fifo(p) => p.dequeue(now),
            AnyPort::Other(p) => p.dequeue(now),
        }
    }

    fn len(&self) -> usize {
        match self {
            AnyPort::Fifo(p) => p.len(),
            AnyPort::Other(p) => p.len(),
        }
    }

    fn for_each(&self, f: &mut dyn FnMut(&F)) {
        match self {
            AnyPort::Fifo(p) => p.for_each(f),
            AnyPort::Other(p) => p.for_each(f),
        }
    }

    fn bytes_half_full(&self) -> bool {
        match self {
            AnyPort::Fifo(_) => false,
            AnyPort::Other(p) => p.bytes_half_full(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_counts_the_frame_on_the_line_and_keeps_order() {
        let t = Instant::ZERO;
        let mut p = Fifo::new(3);
        assert!(p.enqueue(1, t, 1).is_ok());
        assert!(p.enqueue(2, t, 1).is_ok());
        assert_eq!(p.enqueue(3, t, 1), Err((3, TAIL_DROP)));
        assert_eq!(p.dequeue(t), Some(1));
        assert!(p.enqueue(4, t, 1).is_ok());
        assert_eq!(p.dequeue(t), Some(2));
        assert_eq!(p.dequeue(t), Some(4));
        assert_eq!(p.dequeue(t), None);
        // Buffer 1 and an idle line: the frame goes straight to the line.
        let mut one = Fifo::new(0);
        assert!(one.enqueue(9, t, 0).is_ok());
        assert_eq!(one.enqueue(8, t, 1), Err((8, TAIL_DROP)));
    }

    #[test]
    fn a_byte_fifo_bounds_frames_and_the_bytes_waiting() {
        let t = Instant::ZERO;
        let f = |n: usize, b: u8| vec![b; n];
        let mut p = ByteFifo::new(4, 100);
        // Bytes first: 60 + 40 fit, one more byte does not.
        assert!(p.enqueue(f(49, 1), t, 1).is_ok());
        assert!(!p.bytes_half_full());
        p.dequeue(t);
        assert!(p.enqueue(f(60, 1), t, 1).is_ok());
        assert!(p.bytes_half_full());
        assert!(p.enqueue(f(40, 2), t, 1).is_ok());
        assert_eq!(p.enqueue(f(1, 3), t, 1), Err((f(1, 3), TAIL_DROP)));
        // Taking one out makes room for its bytes, in order.
        assert_eq!(p.dequeue(t), Some(f(60, 1)));
        assert!(p.enqueue(f(30, 4), t, 1).is_ok());
        assert!(p.enqueue(f(30, 5), t, 1).is_ok());
        assert_eq!(p.len(), 3);
        // Then frames: with one on the line, 4 frames fill the buffer.
        assert_eq!(p.enqueue(f(0, 6), t, 1), Err((f(0, 6), TAIL_DROP)));
        assert_eq!(p.dequeue(t), Some(f(40, 2)));
        assert_eq!(p.dequeue(t), Some(f(30, 4)));
        assert_eq!(p.dequeue(t), Some(f(30, 5)));
        assert_eq!(p.dequeue(t), None);
        // Empty again: every byte is free. A frame longer than the bound
        // may wait alone (the port is then full), and an idle line takes
        // one at once.
        assert!(p.enqueue(f(100, 7), t, 1).is_ok());
        assert_eq!(p.dequeue(t), Some(f(100, 7)));
        assert!(p.enqueue(f(101, 8), t, 1).is_ok());
        assert!(p.bytes_half_full());
        assert_eq!(p.enqueue(f(1, 9), t, 1), Err((f(1, 9), TAIL_DROP)));
        assert_eq!(p.dequeue(t), Some(f(101, 8)));
        assert!(!p.bytes_half_full());
        assert_eq!(p.pass(f(101, 8), t), Ok(Some(f(101, 8))));
    }
}
