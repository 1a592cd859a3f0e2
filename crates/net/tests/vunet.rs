//! VuNet's relaying link and header-routed switch, and who may change the
//! link's tables.

use aurora_net::vunet::{Control, VunetLink, VunetSwitch, CMD_READ, CMD_REPLY, CMD_WRITE};
use aurora_net::{Node, Outbox};
use aurora_time::Instant;
use aurora_wire::cell::{build_cell, Format, Header, VcId};
use aurora_wire::CellBytes;

fn data(vci: u16, gfc: u8) -> CellBytes {
    build_cell(
        &Header {
            gfc,
            ..Header::data(VcId::new(0, vci))
        },
        &[0x42; 48],
    )
    .unwrap()
}

fn hdr(c: &CellBytes) -> Header {
    Header::parse(&[c[0], c[1], c[2], c[3]], Format::Uni)
}

fn write(vci: u16, new_vci: u16, bits: u8, seq: u64) -> Control {
    Control {
        cmd: CMD_WRITE,
        table: 0,
        vci,
        new_vci,
        port_bits: bits,
        status: 0,
        seq,
    }
}

fn feed(n: &mut impl Node, port: u16, cells: &[CellBytes]) -> Vec<(u16, CellBytes)> {
    let mut out = Outbox::default();
    n.receive(Instant::ZERO, port, cells, &mut out);
    out.drain().collect()
}

#[test]
fn a_management_port_programs_the_link_and_cells_are_relayed() {
    let mut link = VunetLink::new([true, false], None);
    // Before: unmapped, dropped and counted.
    assert!(feed(&mut link, 0, &[data(100, 0)]).is_empty());
    assert_eq!(link.counters().unmapped, 1);
    let out = feed(&mut link, 0, &[write(100, 200, 3, 0).cell(0, None)]);
    let reply = Control::decode(&out[0].1[5..].try_into().unwrap());
    assert_eq!(
        (out[0].0, reply.cmd, reply.status, reply.new_vci),
        (0, CMD_REPLY, 0, 200)
    );
    let out = feed(&mut link, 0, &[data(100, 0)]);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 1, "relayed to the other side");
    assert_eq!((hdr(&out[0].1).vci, hdr(&out[0].1).gfc), (200, 3));
    assert!(aurora_wire::cell::Cell::new_checked(&out[0].1[..])
        .unwrap()
        .hec_ok());
    // Read it back.
    let read = Control {
        cmd: CMD_READ,
        ..write(100, 0, 0, 0)
    };
    let out = feed(&mut link, 0, &[read.cell(0, None)]);
    let r = Control::decode(&out[0].1[5..].try_into().unwrap());
    assert_eq!((r.new_vci, r.port_bits, r.status), (200, 3, 0));
}

#[test]
fn control_cells_from_elsewhere_change_nothing_and_are_counted() {
    let mut link = VunetLink::new([true, false], None);
    feed(&mut link, 0, &[write(7, 8, 1, 0).cell(0, None)]);
    // From port 1 (not management) with no key configured: refused.
    assert!(feed(&mut link, 1, &[write(7, 999, 9, 1).cell(0, None)]).is_empty());
    assert_eq!(link.counters().refused_port, 1);
    assert_eq!(link.entry(0, 7), Some((8, 1)), "unchanged");
}

#[test]
fn a_keyed_link_takes_tagged_fresh_cells_only() {
    let key = b"aurora demo key".to_vec();
    let mut link = VunetLink::new([false, false], Some(key.clone()));
    let good = write(50, 60, 2, 1).cell(0, Some(&key));
    assert_eq!(feed(&mut link, 1, &[good]).len(), 1);
    assert_eq!(link.entry(0, 50), Some((60, 2)));
    // The same cell again is a replay.
    assert!(feed(&mut link, 1, &[good]).is_empty());
    assert_eq!(link.counters().refused_replay, 1);
    // A wrong key, or no tag at all.
    assert!(feed(&mut link, 1, &[write(50, 61, 2, 2).cell(0, Some(b"wrong"))]).is_empty());
    assert!(feed(&mut link, 1, &[write(50, 61, 2, 2).cell(0, None)]).is_empty());
    assert_eq!(link.counters().refused_tag, 2);
    // A flipped bit in a tagged cell's body breaks its tag.
    let mut bent = write(50, 61, 2, 2).cell(0, Some(&key));
    bent[5 + 4] ^= 1;
    assert!(feed(&mut link, 1, &[bent]).is_empty());
    assert_eq!(link.counters().refused_tag, 3);
    assert_eq!(
        link.entry(0, 50),
        Some((60, 2)),
        "unchanged by every refused cell"
    );
    // Fresh and tagged: accepted.
    assert_eq!(
        feed(&mut link, 1, &[write(50, 61, 2, 2).cell(0, Some(&key))]).len(),
        1
    );
    assert_eq!(link.entry(0, 50), Some((61, 2)));
    assert_eq!(link.counters().control_accepted, 2);
}

#[test]
fn the_vunet_switch_routes_on_header_bits() {
    let mut sw = VunetSwitch::new(4);
    let out = feed(&mut sw, 0, &[data(5, 2), data(6, 9)]);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 2);
    assert_eq!(hdr(&out[0].1).gfc, 0, "routing bits are consumed");
    assert_eq!(sw.no_such_port, 1);
}
