//! An IP router and host given arbitrary cells and host packets: no panic,
//! and whatever they send is well-formed cells.
#![no_main]
use aurora_ip::node::{Interface, IpConfig, IpNode, StaticRoute};
use aurora_net::{Node, Outbox, PacketPort};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::VcId;
use libfuzzer_sys::fuzz_target;

fn nodes() -> (IpNode, IpNode) {
    let i = |a: [u8; 4], p| {
        Some(Interface {
            addr: a.into(),
            prefix: p,
        })
    };
    let mut r = IpNode::new(IpConfig {
        interfaces: vec![i([10, 1, 0, 254], 24), i([10, 2, 0, 254], 24)],
        forwarding: true,
        ..IpConfig::default()
    })
    .unwrap();
    r.add_pvc(0, VcId::new(0, 32), None).unwrap();
    r.add_pvc(1, VcId::new(0, 32), None).unwrap();
    let mut h = IpNode::new(IpConfig {
        interfaces: vec![i([10, 1, 0, 1], 24)],
        routes: vec![StaticRoute {
            dst: [0, 0, 0, 0].into(),
            prefix: 0,
            gateway: [10, 1, 0, 254].into(),
        }],
        ..IpConfig::default()
    })
    .unwrap();
    h.add_pvc(0, VcId::new(0, 32), None).unwrap();
    (r, h)
}

fuzz_target!(|data: &[u8]| {
    let (mut r, mut h) = nodes();
    let mut out = Outbox::default();
    let mut now = Instant::ZERO;
    // Records: 1 byte tag, then a cell (53 bytes) or a packet (length byte).
    let mut rest = data;
    while let Some((&tag, tail)) = rest.split_first() {
        now += Duration::from_millis(u64::from(tag & 0x0F) as i64 * 100);
        match tag >> 6 {
            0 | 1 => {
                let Some(c) = tail.get(..53) else { break };
                let cell: [u8; 53] = c.try_into().unwrap();
                let node = if tag >> 6 == 0 { &mut r } else { &mut h };
                node.receive(now, u16::from(tag >> 4 & 1), &[cell], &mut out);
                rest = &tail[53..];
            }
            _ => {
                let Some((&len, tail)) = tail.split_first() else {
                    break;
                };
                let Some(p) = tail.get(..usize::from(len)) else {
                    break;
                };
                h.host_sent(now, p, &mut out);
                rest = &tail[usize::from(len)..];
            }
        }
        if r.poll_at().is_some_and(|t| t <= now) {
            r.poll(now, &mut out);
        }
        if h.poll_at().is_some_and(|t| t <= now) {
            h.poll(now, &mut out);
        }
        for (_, c) in out.drain() {
            assert_eq!(aurora_wire::crc::hec(&[c[0], c[1], c[2], c[3]]), c[4]);
        }
        h.drain_to_host(&mut |p| assert!(!p.is_empty()));
    }
});
