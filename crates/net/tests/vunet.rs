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
        ..Control::default()
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

/// A host reaches the third relay of a path through the two before it:
/// they pass its control cells on (and the reply back) by the route the
/// cell carries, changing nothing; only the third writes its table, and
/// only a cell with the key's tag over the route does so.
#[test]
fn control_cells_reach_a_relay_beyond_the_first_and_the_reply_comes_back() {
    // host - s0 - r1 - s1 - r2 - s2 - r3 - s3
    // Each switch: port 0 towards the host side, port 1 away from it, the
    // host itself on s0's port 2.
    let key = b"a host's key".to_vec();
    let mut switches: Vec<VunetSwitch> = (0..4).map(|_| VunetSwitch::new(3)).collect();
    let mut relays: Vec<VunetLink> = (0..3)
        .map(|_| VunetLink::new([false, false], Some(key.clone())))
        .collect();
    // Out: the switch after r1 and after r2 send on to port 1; the reply:
    // r3 replies into s2 (to port 0, towards r2), s1 to port 0, s0 to the
    // host on port 2.
    for (k, r) in relays.iter_mut().enumerate() {
        r.set_id(k as u16);
    }
    let route = aurora_net::vunet::Route::to_relay(2, &[1, 1], &[0, 0, 2]).unwrap();
    let req = Control {
        cmd: CMD_WRITE,
        table: 0,
        vci: 500,
        new_vci: 600,
        port_bits: 2,
        seq: 1,
        route,
        ..Control::default()
    };
    // Out through s0 (arriving from the host on port 2, routed to port 1).
    let mut cell = req.cell_routed(0, 1, Some(&key));
    let mut at = 0; // the relay reached next
    let mut port_in = 2u16;
    loop {
        let out = feed(&mut switches[at], port_in, &[cell]);
        assert_eq!(out.len(), 1);
        if at == 3 {
            unreachable!("nothing goes beyond r3");
        }
        let (p, c) = out[0];
        assert_eq!(p, 1, "away from the host");
        let out = feed(&mut relays[at], 0, &[c]);
        assert_eq!(out.len(), 1, "relay {at}");
        let (side, c) = out[0];
        cell = c;
        if at == 2 {
            // The target answered back out of its arrival side.
            assert_eq!(side, 0);
            break;
        }
        assert_eq!(side, 1, "passed on");
        port_in = 0;
        at += 1;
    }
    assert_eq!(relays[2].entry(0, 500), Some((600, 2)));
    assert_eq!(relays[0].entry(0, 500), None);
    assert_eq!(relays[1].entry(0, 500), None);
    assert_eq!(
        (
            relays[0].counters().control_passed,
            relays[1].counters().control_passed
        ),
        (1, 1)
    );
    // Back: s2 (from r3's side, port 1) to port 0, r2 passes it (arriving
    // on its side 1), s1, r1, s0 to the host's port 2.
    for k in (0..3).rev() {
        let out = feed(&mut switches[k], 1, &[cell]);
        assert_eq!(out.len(), 1);
        let (p, c) = out[0];
        if k == 0 {
            assert_eq!(p, 2, "to the host");
            cell = c;
            break;
        }
        assert_eq!(p, 0, "towards the host");
        let out = feed(&mut relays[k - 1], 1, &[c]);
        assert_eq!(out.len(), 1, "relay {} passes the reply", k - 1);
        assert_eq!(out[0].0, 0);
        cell = out[0].1;
    }
    let reply = Control::decode(&cell[5..].try_into().unwrap());
    assert_eq!(
        (reply.cmd, reply.status, reply.new_vci, reply.port_bits),
        (CMD_REPLY, 0, 600, 2)
    );
    assert_eq!(reply.route.hops, 0);
    assert_eq!(relays[0].counters().control_passed, 2);
    // A route changed after tagging (to send the reply elsewhere): the
    // target refuses it.
    let mut direct = Control { seq: 3, ..req };
    direct.route = aurora_net::vunet::Route::default();
    let mut bytes = direct.encode(Some(&key));
    bytes[40] = 0x77;
    let mut c = req.cell_routed(0, 1, None);
    c[5..].copy_from_slice(&bytes);
    assert!(feed(&mut relays[0], 0, &[c]).is_empty());
    assert_eq!(relays[0].counters().refused_tag, 1);
    assert_eq!(relays[0].entry(0, 500), None);
}

/// Several hosts, each with its own key: each holds the entries it wrote
/// (another may not rewrite or clear them), each has its own sequence
/// numbers, an entry not refreshed within the lifetime goes, and a
/// restart loses what control cells wrote but not what management loaded.
#[test]
fn entries_belong_to_their_writer_expire_unrefreshed_and_a_restart_loses_them() {
    use aurora_net::vunet::CMD_CLEAR;
    use aurora_time::Duration;
    let (ka, kb) = (b"host a".to_vec(), b"host b".to_vec());
    let mut link = VunetLink::new([false, false], None);
    link.add_key(1, ka.clone());
    link.add_key(2, kb.clone());
    link.set_lifetime(Some(Duration::from_millis(100)));
    link.set_entry(0, 9, 90, 1);
    let at = |ms: i64| Instant::from_millis(ms);
    let send = |link: &mut VunetLink, now: Instant, c: Control, k: &[u8]| -> Control {
        let mut out = Outbox::default();
        link.receive(now, 0, &[c.cell(0, Some(k))], &mut out);
        let got: Vec<_> = out.drain().collect();
        assert_eq!(got.len(), 1, "{c:?}");
        Control::decode(&got[0].1[5..].try_into().unwrap())
    };
    let a = |seq, cmd, vci, new_vci| Control {
        cmd,
        vci,
        new_vci,
        key_id: 1,
        seq,
        ..Control::default()
    };
    let b = |seq, cmd, vci, new_vci| Control {
        key_id: 2,
        ..a(seq, cmd, vci, new_vci)
    };
    // A writes 100; B (its own numbers, from 1) may not rewrite or clear it.
    assert_eq!(
        send(&mut link, at(0), a(5, CMD_WRITE, 100, 200), &ka).status,
        0
    );
    assert_eq!(link.owner(0, 100), Some(1));
    assert_eq!(
        send(&mut link, at(1), b(1, CMD_WRITE, 100, 666), &kb).status,
        2
    );
    assert_eq!(
        send(&mut link, at(2), b(2, CMD_CLEAR, 100, 0), &kb).status,
        2
    );
    assert_eq!(link.counters().refused_owner, 2);
    assert_eq!(link.entry(0, 100), Some((200, 0)));
    // Nor a management entry.
    assert_eq!(send(&mut link, at(3), b(3, CMD_WRITE, 9, 1), &kb).status, 2);
    assert_eq!(link.entry(0, 9), Some((90, 1)));
    // B writes its own; A's replayed number is refused, B's next is not.
    assert_eq!(
        send(&mut link, at(4), b(4, CMD_WRITE, 101, 201), &kb).status,
        0
    );
    let mut out = Outbox::default();
    link.receive(
        at(5),
        0,
        &[a(5, CMD_READ, 100, 0).cell(0, Some(&ka))],
        &mut out,
    );
    assert!(out.is_empty());
    assert_eq!(link.counters().refused_replay, 1);
    // A reads its entry at 60 ms (refreshed to 160); B's, last written at
    // 4 ms, goes at 104 ms.
    assert_eq!(
        send(&mut link, at(60), a(6, CMD_READ, 100, 0), &ka).new_vci,
        200
    );
    assert_eq!(link.poll_at(), Some(at(104)));
    link.poll(at(104), &mut Outbox::default());
    assert_eq!(link.entry(0, 101), None);
    assert_eq!(link.entry(0, 100), Some((200, 0)));
    assert_eq!(link.counters().expired, 1);
    link.poll(at(160), &mut Outbox::default());
    assert_eq!(link.entry(0, 100), None, "not refreshed since 60 ms");
    assert_eq!(link.counters().expired, 2);
    assert_eq!(link.entry(0, 9), Some((90, 1)), "management entries stay");
    // A writes again; a restart loses it (and the sequence numbers).
    assert_eq!(
        send(&mut link, at(200), a(7, CMD_WRITE, 100, 300), &ka).status,
        0
    );
    link.restart();
    assert_eq!(link.entry(0, 100), None);
    assert_eq!(link.entry(0, 9), Some((90, 1)));
    assert_eq!(link.poll_at(), None);
    assert_eq!(
        send(&mut link, at(201), a(1, CMD_WRITE, 100, 300), &ka).status,
        0
    );
}

/// A tagged request names its relay: sent (or rewritten on the way) so that
/// another relay is where it arrives with no hops left, it is refused
/// there and changes nothing.
#[test]
fn a_request_for_one_relay_is_refused_at_another() {
    let key = b"k".to_vec();
    let mut near = VunetLink::new([false, false], Some(key.clone()));
    near.set_id(1);
    let route = aurora_net::vunet::Route::to_relay(2, &[], &[0]).unwrap();
    let req = Control {
        cmd: CMD_WRITE,
        vci: 40,
        new_vci: 41,
        seq: 1,
        route,
        ..Control::default()
    };
    assert!(feed(&mut near, 0, &[req.cell(0, Some(&key))]).is_empty());
    assert_eq!(near.counters().refused_target, 1);
    assert_eq!(near.entry(0, 40), None);
    // Its own id: carried out.
    let route = aurora_net::vunet::Route::to_relay(1, &[], &[0]).unwrap();
    let ok = Control {
        route,
        seq: 2,
        ..req
    };
    assert_eq!(feed(&mut near, 0, &[ok.cell(0, Some(&key))]).len(), 1);
    assert_eq!(near.entry(0, 40), Some((41, 0)));
}

/// Identify: a relay answers whatever target the request names, with its
/// own id and the side it was asked on under the requester's tag, and
/// changes no entry; the key, tag and sequence number are checked as for
/// any request.
#[test]
fn any_relay_identifies_itself_and_the_side_it_was_asked_on() {
    use aurora_net::vunet::{Route, CMD_IDENT};
    let key = b"daemon key".to_vec();
    let mut relay = VunetLink::new([false, false], None);
    relay.add_key(3, key.clone());
    relay.set_id(42);
    relay.set_entry(1, 40, 41, 2);
    let ask = |seq: u64, k: Option<&[u8]>| {
        Control {
            cmd: CMD_IDENT,
            key_id: 3,
            vci: 40,
            seq,
            // Names relay 7, not this one: an identify is answered anyway.
            route: Route::to_relay(7, &[], &[5]).unwrap(),
            ..Control::default()
        }
        .cell(0, k)
    };
    let out = feed(&mut relay, 1, &[ask(1, Some(&key))]);
    assert_eq!(out.len(), 1);
    let (port, cell) = out[0];
    assert_eq!(port, 1, "answered on the side asked");
    assert_eq!(hdr(&cell).gfc, 5, "routed on the reply's first nibble");
    let p: [u8; 48] = cell[5..].try_into().unwrap();
    assert!(Control::verify(&p, &key));
    let r = Control::decode(&p);
    assert_eq!(
        (r.cmd, r.status, r.table, r.route.target, r.seq),
        (CMD_REPLY, 0, 1, 42, 1)
    );
    assert_eq!(relay.entry(1, 40), Some((41, 2)), "nothing changed");
    // Replayed, untagged or under another key id: no answer.
    assert!(feed(&mut relay, 1, &[ask(1, Some(&key))]).is_empty());
    assert!(feed(&mut relay, 1, &[ask(2, None)]).is_empty());
    assert!(feed(&mut relay, 1, &[ask(2, Some(b"forged"))]).is_empty());
    let c = relay.counters();
    assert_eq!(
        (c.refused_replay, c.refused_tag, c.control_accepted),
        (1, 2, 1)
    );
    // Unknown key id: refused as from an untrusted port.
    let mut other = Control::decode(&ask(3, Some(&key))[5..].try_into().unwrap());
    other.key_id = 9;
    assert!(feed(&mut relay, 0, &[other.cell(0, Some(&key))]).is_empty());
    assert_eq!(relay.counters().refused_port, 1);
}
