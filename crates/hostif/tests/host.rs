//! The host interface's data paths, tables and accounting.

use aurora_hostif::{DataPath, HostConfig, HostInterface, PvcAddr, Qos, SyncMode};
use aurora_time::{Duration, Instant};
use aurora_wire::CellBytes;

const T0: Instant = Instant::ZERO;

fn addr(s: &str) -> PvcAddr {
    s.parse().unwrap()
}

fn pair(path: DataPath, sync: SyncMode, slots: usize) -> (HostInterface, HostInterface) {
    let cfg = HostConfig {
        path,
        sync,
        reassembly_slots: slots,
        ..HostConfig::default()
    };
    (HostInterface::new(cfg), HostInterface::new(cfg))
}

fn sdu(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|k| (i * 131 + k * 7) as u8).collect()
}

/// Sends through `a` and returns the cells it made.
fn wire(a: &mut HostInterface, h: aurora_hostif::VcHandle, data: &[u8]) -> Vec<CellBytes> {
    let mut pdu = a.send(h, data).unwrap();
    let mut cells = vec![[0u8; 53]; 2000];
    let mut n = 0;
    while !pdu.is_done() {
        n += pdu.fill(&mut cells[n..]);
    }
    cells.truncate(n);
    cells
}

#[test]
fn single_copy_and_copy_paths_deliver_every_byte() {
    for path in [DataPath::SingleCopy, DataPath::Copy] {
        let (mut a, mut b) = pair(path, SyncMode::Event, 8192);
        let q: Qos = "ubr,aal5:max_sdu=65535".parse().unwrap();
        let ha = a.open(addr("0.42"), q, T0).unwrap();
        let hb = b.open(addr("0.42"), q, T0).unwrap();
        for (i, len) in [0usize, 1, 40, 41, 1500, 9180, 65535]
            .into_iter()
            .enumerate()
        {
            b.post_buffer(hb, vec![0; 65568]).unwrap();
            let data = sdu(i, len);
            let cells = wire(&mut a, ha, &data);
            b.receive(T0, &cells);
            let r = b.recv(hb).expect("delivered");
            assert_eq!(r.sdu(), &data[..], "{path:?} {len}");
            assert_eq!(r.posted, path == DataPath::SingleCopy);
        }
        let c = b.counters(hb).unwrap();
        assert_eq!((c.rx, c.rx_err, c.rx_drop), (7, 0, 0), "{path:?}");
        assert_eq!(a.counters(ha).unwrap().tx, 7);
    }
}

#[test]
fn single_copy_without_a_posted_buffer_counts_a_miss() {
    let (mut a, mut b) = pair(DataPath::SingleCopy, SyncMode::Event, 16);
    let ha = a.open(addr("0.50"), Qos::default(), T0).unwrap();
    let hb = b.open(addr("0.50"), Qos::default(), T0).unwrap();
    let cells = wire(&mut a, ha, &sdu(1, 3000));
    b.receive(T0, &cells);
    let r = b.recv(hb).unwrap();
    assert!(!r.posted);
    assert_eq!(b.aal5_stats().posted_misses, 1);
}

#[test]
fn slot_exhaustion_is_a_counted_drop_and_memory_stays_bounded() {
    let (mut a, mut b) = pair(DataPath::Copy, SyncMode::Event, 100);
    let ha = a.open(addr("0.60"), Qos::default(), T0).unwrap();
    let hb = b.open(addr("0.60"), Qos::default(), T0).unwrap();
    // 9180 bytes need 192 cells: more than the 100 slots.
    let cells = wire(&mut a, ha, &sdu(2, 9180));
    b.receive(T0, &cells);
    assert!(b.recv(hb).is_none());
    let s = b.stats();
    assert_eq!(s.slots_exhausted, 1);
    assert_eq!(
        s.slots_exhausted_cells, 192,
        "100 held, the one refused, and the 91 after it"
    );
    assert_eq!(b.free_slots(), 100, "every slot came back");
    // The rest of that PDU was discarded, and the next one fits.
    let small = sdu(3, 2000);
    b.receive(T0, &wire(&mut a, ha, &small));
    assert_eq!(b.recv(hb).unwrap().sdu(), &small[..]);
    assert_eq!(b.counters(hb).unwrap().rx_drop, 1);
    assert_eq!(
        s.cells_in, s.slots_exhausted_cells,
        "every cell of the broken PDU is counted with its cause"
    );
}

#[test]
fn null_path_makes_no_cells() {
    let (mut a, _) = pair(DataPath::Null, SyncMode::Event, 16);
    let h = a.open(addr("0.70"), Qos::default(), T0).unwrap();
    assert!(wire(&mut a, h, &sdu(0, 65535)).is_empty());
    assert_eq!(a.stats().null_pdus, 1);
    assert_eq!(a.counters(h).unwrap().tx, 1);
}

#[test]
fn poll_mode_shows_pdus_only_when_the_vc_is_polled() {
    let (mut a, mut b) = pair(DataPath::SingleCopy, SyncMode::Poll, 16);
    let ha = a.open(addr("0.80"), Qos::default(), T0).unwrap();
    let hb = b.open(addr("0.80"), Qos::default(), T0).unwrap();
    b.set_poll_period(hb, Duration::from_millis(5), T0);
    let cells = wire(&mut a, ha, &sdu(4, 100));
    b.receive(Instant::from_millis(1), &cells);
    assert!(b.recv(hb).is_none(), "not before the poll");
    assert_eq!(b.poll_at(), Some(Instant::from_millis(5)));
    b.handle_timeout(Instant::from_millis(5));
    let r = b.recv(hb).unwrap();
    assert_eq!(r.completed, Instant::from_millis(1));
}

#[test]
fn aal34_datagrams_use_the_dg_table() {
    let (mut a, mut b) = pair(DataPath::SingleCopy, SyncMode::Event, 16);
    let q: Qos = "ubr,aal34".parse().unwrap();
    let ha = a.open(addr("0.90"), q, T0).unwrap();
    let hb = b.open(addr("0.90"), q, T0).unwrap();
    a.set_mid(ha, 17).unwrap();
    let data = sdu(5, 5000);
    b.receive(T0, &wire(&mut a, ha, &data));
    let r = b.recv(hb).unwrap();
    assert_eq!((r.sdu(), r.mid), (&data[..], 17));
    // A datagram flushed half-way is counted, not delivered.
    let cells = wire(&mut a, ha, &data);
    b.receive(T0, &cells[..10]);
    b.flush_datagram(hb, 17).unwrap();
    b.receive(T0, &cells[10..]);
    assert!(b.recv(hb).is_none());
    assert_eq!(
        b.aal34_stats()
            .pdus_dropped
            .get(aurora_sar::DropReason::Flushed),
        1
    );
}

#[test]
fn tables_have_limits_and_strangers_are_counted() {
    let cfg = HostConfig {
        vc_table: 2,
        ..HostConfig::default()
    };
    let mut a = HostInterface::new(cfg);
    a.open(addr("0.1"), Qos::default(), T0).unwrap();
    assert!(a.open(addr("0.1"), Qos::default(), T0).is_err());
    let h2 = a.open(addr("0.2"), Qos::default(), T0).unwrap();
    assert!(a.open(addr("0.3"), Qos::default(), T0).is_err());
    a.close(h2).unwrap();
    a.open(addr("0.3"), Qos::default(), T0).unwrap();
    let mut other = HostInterface::new(HostConfig::default());
    let ho = other.open(addr("0.99"), Qos::default(), T0).unwrap();
    a.receive(T0, &wire(&mut other, ho, b"who is this"));
    assert_eq!(a.stats().unknown_vc_cells, 1);
}

#[test]
fn checked_receive_corrects_and_discards_headers_inside_a_run() {
    use aurora_wire::hec::HecReceiver;
    let (mut a, mut b) = pair(DataPath::SingleCopy, SyncMode::Event, 16);
    let ha = a.open(addr("0.33"), Qos::default(), T0).unwrap();
    let hb = b.open(addr("0.33"), Qos::default(), T0).unwrap();
    let mut cells = Vec::new();
    let sent: Vec<Vec<u8>> = (0..5).map(|i| sdu(i, 3000)).collect();
    for s in &sent {
        cells.extend(wire(&mut a, ha, s));
    }
    let per = cells.len() / 5;
    cells[per + 10][2] ^= 0x08; // one bit: corrected
    cells[3 * per + 5][0] ^= 0x11; // two bits: discarded, so PDU 3 is lost
    for _ in 0..4 {
        b.post_buffer(hb, vec![0; 4096]).unwrap();
    }
    let mut hec = HecReceiver::new();
    b.receive_checked(T0, &mut cells, &mut hec);
    let mut got = Vec::new();
    while let Some(r) = b.recv(hb) {
        got.push(r.sdu().to_vec());
    }
    assert_eq!(
        got,
        vec![
            sent[0].clone(),
            sent[1].clone(),
            sent[2].clone(),
            sent[4].clone()
        ]
    );
    let c = hec.counters();
    assert_eq!((c.corrected, c.discarded), (1, 1));
    assert_eq!(c.valid + c.corrected + c.discarded, cells.len() as u64);
    assert_eq!(
        b.aal5_stats().pdus_dropped.get(aurora_sar::DropReason::Crc),
        1
    );
}
