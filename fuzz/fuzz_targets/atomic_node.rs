//! A Mosaic node and a host (running an AC) fed arbitrary packets on every
//! port: no panic, and every packet in is forwarded, delivered or a
//! counted drop.
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
    let mut now = Instant::ZERO;
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
    }
    let c = node.counters();
    assert!(c.forwarded + c.stored + c.to_host + c.flood_in + c.dropped_total() >= c.received);
});
