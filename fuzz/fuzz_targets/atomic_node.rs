//! A Mosaic node and a host (running an AC) fed arbitrary packets on every
//! port: no panic, and every packet in is forwarded, delivered or a
//! counted drop; every drop made with a packet in hand is shown to the
//! driver, and reading a flow packet from it never panics.
#![no_main]
use aurora_atomic::ac::AcConfig;
use aurora_atomic::host::{AcRole, AtomicHost, HostConfig};
use aurora_atomic::mosaic::MosaicNode;
use aurora_net::{Node, Outbox};
use aurora_time::{Duration, Instant};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut node = MosaicNode::new(7, true, [true, true, false, true]);
    let mut host = AtomicHost::new(
        HostConfig {
            role: AcRole::Always,
            ac: AcConfig::default(),
            ..HostConfig::new([10, 0, 0, 1].into(), 9)
        },
        Instant::ZERO,
    );
    let mut out = Outbox::default();
    out.track_drops(true);
    let mut now = Instant::ZERO;
    let mut shown = 0u64;
    // Records: port byte, length byte, then that many bytes.
    let mut rest = data;
    while let [port, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let pkt = tail[..n].to_vec();
        rest = &tail[n..];
        now += Duration::from_micros(i64::from(*port >> 3));
        if port & 0x7 == 5 {
            host.receive(now, 0, &[pkt], &mut out);
        } else {
            node.receive(now, u16::from(port % 5), &[pkt], &mut out);
        }
        for n in [&mut node as &mut dyn Node<Vec<u8>>, &mut host] {
            if n.poll_at().is_some_and(|t| t <= now) {
                n.poll(now, &mut out);
            }
        }
        out.drain().for_each(drop);
        for (_, frame, why) in out.drain_drops() {
            assert!(!why.is_empty());
            shown += 1;
            let _ = aurora_atomic::flow::in_frame(&frame, aurora_atomic::flow::Layout::Whole);
        }
    }
    let c = node.counters();
    assert!(c.forwarded + c.stored + c.to_host + c.flood_in + c.dropped_total() >= c.received);
    // Every drop made with a packet in hand is shown: all the node's but
    // its flood bookkeeping's, and the host's.
    use aurora_atomic::mosaic::Drop;
    let unshown: u64 = [
        Drop::BadMessage,
        Drop::FloodDuplicate,
        Drop::TooManyHops,
        Drop::FloodTableFull,
    ]
    .iter()
    .map(|d| c.dropped(*d))
    .sum();
    let h = host.counters();
    assert_eq!(
        shown,
        c.dropped_total() - unshown + h.no_route + h.pending_full
    );
});
