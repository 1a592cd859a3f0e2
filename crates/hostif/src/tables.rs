//! Penn's interface tables in software: the reassembly buffer as linked
//! lists of cell slots, and the POLL table ordered by next poll time.

use std::collections::BTreeSet;

use aurora_time::{Duration, Instant};
use aurora_wire::PAYLOAD_LEN;

const NIL: u32 = u32::MAX;

/// A fixed pool of 48-byte cell slots handed out as per-VC linked lists
/// (the board's dual-port reassembly buffer and its list manager). Memory is
/// allocated once; running out is the caller's counted drop.
#[derive(Debug)]
pub struct SlotBuffer {
    slots: Vec<[u8; PAYLOAD_LEN]>,
    next: Vec<u32>,
    free_head: u32,
    free: usize,
}

/// One VC's (or datagram's) list of slots, oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotList {
    head: u32,
    tail: u32,
    len: u32,
}

impl Default for SlotList {
    fn default() -> Self {
        SlotList {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

impl SlotList {
    /// Slots in the list.
    pub fn len(&self) -> usize {
        self.len as usize
    }
    /// True when the list holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl SlotBuffer {
    /// A buffer of `slots` cell slots (at most 2^32 − 1).
    pub fn new(slots: usize) -> Self {
        let n = slots.min(NIL as usize - 1);
        SlotBuffer {
            slots: vec![[0; PAYLOAD_LEN]; n],
            next: (1..=n as u32)
                .map(|i| if i as usize == n { NIL } else { i })
                .collect(),
            free_head: if n == 0 { NIL } else { 0 },
            free: n,
        }
    }

    /// Slots in the buffer.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Slots not in any list.
    pub fn free(&self) -> usize {
        self.free
    }

    /// Appends a payload to `list`; false when no slot is free.
    #[inline]
    pub fn push(&mut self, list: &mut SlotList, payload: &[u8; PAYLOAD_LEN]) -> bool {
        let s = self.free_head;
        if s == NIL {
            return false;
        }
        self.free_head = self.next[s as usize];
        self.free -= 1;
        self.slots[s as usize] = *payload;
        self.next[s as usize] = NIL;
        if list.tail == NIL {
            list.head = s;
        } else {
            self.next[list.tail as usize] = s;
        }
        list.tail = s;
        list.len += 1;
        true
    }

    /// Visits the list's payloads in order, then frees its slots.
    pub fn drain(&mut self, list: &mut SlotList, mut visit: impl FnMut(&[u8; PAYLOAD_LEN])) {
        let mut s = list.head;
        while s != NIL {
            visit(&self.slots[s as usize]);
            let n = self.next[s as usize];
            self.next[s as usize] = self.free_head;
            self.free_head = s;
            self.free += 1;
            s = n;
        }
        *list = SlotList::default();
    }

    /// Frees the list's slots without reading them (a flush).
    pub fn release(&mut self, list: &mut SlotList) {
        self.drain(list, |_| {});
    }
}

/// The POLL table: VCs ordered by when they are next due to be polled, so
/// the first entry gives the next deadline.
#[derive(Debug, Default)]
pub struct PollTable {
    order: BTreeSet<(Instant, u32)>,
    entries: Vec<Option<(Instant, Duration)>>,
}

impl PollTable {
    /// Adds (or re-rates) VC `index`, polled every `period`, first at `now + period`.
    pub fn set(&mut self, index: u32, period: Duration, now: Instant) {
        self.remove(index);
        let i = index as usize;
        if self.entries.len() <= i {
            self.entries.resize(i + 1, None);
        }
        let at = now + period;
        self.entries[i] = Some((at, period));
        self.order.insert((at, index));
    }

    /// Stops polling VC `index`.
    pub fn remove(&mut self, index: u32) {
        if let Some(Some((at, _))) = self.entries.get(index as usize) {
            self.order.remove(&(*at, index));
            self.entries[index as usize] = None;
        }
    }

    /// When the next poll is due.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.order.first().map(|e| e.0)
    }

    /// Takes every VC due by `now`, rescheduling each one period later (from
    /// its old deadline, so the rate holds, but never in the past).
    pub fn take_due(&mut self, now: Instant, mut f: impl FnMut(u32)) {
        while let Some(&(at, index)) = self.order.first() {
            if at > now {
                break;
            }
            self.order.pop_first();
            let period = self.entries[index as usize].map_or(Duration::ZERO, |e| e.1);
            let mut next = at + period;
            if next <= now {
                next = now + period;
            }
            self.entries[index as usize] = Some((next, period));
            self.order.insert((next, index));
            f(index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_lists_share_a_bounded_pool() {
        let mut b = SlotBuffer::new(4);
        let (mut a, mut c) = (SlotList::default(), SlotList::default());
        assert!(b.push(&mut a, &[1; 48]));
        assert!(b.push(&mut c, &[2; 48]));
        assert!(b.push(&mut a, &[3; 48]));
        assert!(b.push(&mut c, &[4; 48]));
        assert!(!b.push(&mut a, &[5; 48]), "pool exhausted");
        let mut seen = Vec::new();
        b.drain(&mut a, |p| seen.push(p[0]));
        assert_eq!(seen, [1, 3]);
        assert_eq!(b.free(), 2);
        assert!(b.push(&mut a, &[6; 48]));
        b.release(&mut c);
        assert_eq!(b.free(), 3);
    }

    #[test]
    fn poll_table_orders_by_deadline() {
        let mut p = PollTable::default();
        let t0 = Instant::ZERO;
        p.set(1, Duration::from_millis(10), t0);
        p.set(2, Duration::from_millis(3), t0);
        assert_eq!(p.next_deadline(), Some(Instant::from_millis(3)));
        let mut due = Vec::new();
        p.take_due(Instant::from_millis(4), |i| due.push(i));
        assert_eq!(due, [2]);
        assert_eq!(p.next_deadline(), Some(Instant::from_millis(6)));
        // Polls missed while the host was busy collapse into one.
        p.take_due(Instant::from_millis(20), |i| due.push(i));
        assert_eq!(due, [2, 2, 1]);
        assert_eq!(p.next_deadline(), Some(Instant::from_millis(23)));
        p.remove(2);
        assert_eq!(p.next_deadline(), Some(Instant::from_millis(30)));
    }
}
