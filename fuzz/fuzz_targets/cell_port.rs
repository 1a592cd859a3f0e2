//! An output port under each discipline, with PDU discard, given arbitrary
//! cells, dequeues and time steps: no panic, no more cells held than its
//! limits, and every cell offered is served, held or refused with a
//! reason.
#![no_main]
use aurora_engine::cell_port::{vc_key, CellPort};
use aurora_engine::port::Port;
use aurora_sched::{
    ClassSpec, ClassTree, Discipline, Drr, Fifo, FlatApprox, FlatConfig, Hwfq, Limits, Priority,
    Share, Wf2qPlus, Wfq,
};
use aurora_time::{Duration, Instant};
use aurora_tm::discard::BufferLimits;
use aurora_wire::CellBytes;
use libfuzzer_sys::fuzz_target;

fn discipline(which: u8, limits: Limits) -> Box<dyn Discipline<(Instant, CellBytes)>> {
    let tree = || {
        ClassTree::new([
            ClassSpec::new("link", None, Share::Fraction(1.0), None),
            ClassSpec::new("a", Some("link"), Share::Fraction(0.6), None),
            ClassSpec::new("b", Some("link"), Share::Fraction(0.4), Some(2)),
            ClassSpec::new("a1", Some("a"), Share::Fraction(0.5), Some(0)),
            ClassSpec::new("a2", Some("a"), Share::Fraction(0.5), Some(1)),
        ])
        .expect("a valid tree")
    };
    match which % 7 {
        0 => Box::new(Fifo::new(3, limits)),
        1 => Box::new(Priority::new(3, limits)),
        2 => Box::new(Drr::new(&[1, 2, 3], limits)),
        3 => Box::new(Wfq::new(&[1, 2, 3], 353_207, limits)),
        4 => Box::new(Wf2qPlus::new(&[1, 2, 3], limits)),
        5 => Box::new(Hwfq::new(&tree(), limits)),
        _ => Box::new(FlatApprox::new(
            &tree(),
            limits,
            FlatConfig::new(Duration::from_micros(30)),
        )),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&how, data)) = data.split_first() else {
        return;
    };
    let limits = Limits { port: 12, queue: 6 };
    let discard = (how & 8 != 0).then_some(BufferLimits {
        size: 12,
        epd: 8,
        clp1: 10,
    });
    // VCIs 32 and 33 have queues 0 and 1 (and PDU state); any other VC goes
    // to queue 2 (the tree's leaf b) with no PDU state.
    let mut vcs = rustc_hash::FxHashMap::default();
    for (i, vci) in [32u16, 33].into_iter().enumerate() {
        let h = aurora_wire::cell::Header::data(aurora_wire::cell::VcId::new(0, vci));
        vcs.insert(vc_key(&h.to_bytes4().unwrap()), (i as u32, i));
    }
    let mut p = CellPort::new(
        discipline(how, limits),
        3,
        6,
        vcs,
        Some(2),
        discard,
        Duration::from_micros(50),
    );
    let (mut offered, mut refused, mut served) = (0u64, 0u64, 0u64);
    let mut now = Instant::ZERO;
    for chunk in data.chunks(6) {
        let Some((&op, rest)) = chunk.split_first() else {
            break;
        };
        now += Duration::from_nanos(i64::from(op >> 2) * 700);
        if op & 1 == 0 {
            let mut cell = [0u8; 53];
            // Header bytes from the input, but mostly on the two VCs.
            let vci: u16 = if rest.first().is_some_and(|b| b & 1 == 0) {
                32
            } else {
                33
            };
            let h = aurora_wire::cell::Header::data(aurora_wire::cell::VcId::new(0, vci));
            cell[..4].copy_from_slice(&h.to_bytes4().unwrap());
            // The payload type and CLP from the input: user cells that
            // end PDUs or not, OAM and RM cells, either priority.
            cell[3] |= rest.get(1).map_or(0, |b| b & 0x0f);
            offered += 1;
            if p.enqueue(cell, now, usize::from(op & 2 != 0)).is_err() {
                refused += 1;
            }
        } else if Port::<CellBytes>::dequeue(&mut p, now).is_some() {
            served += 1;
        }
        assert!(p.len() <= limits.port);
        assert_eq!(offered, served + refused + p.len() as u64);
    }
    let st = p.stats();
    assert_eq!(st.iter().map(|s| s.served).sum::<u64>(), served);
    assert_eq!(st.iter().map(|s| s.dropped_total()).sum::<u64>(), refused);
});
