//! A port's capture, given arbitrary cells, frames and drops in each of its
//! six forms: it never panics, writes one record per unit it counts, and the
//! file reads back with exactly those records.
#![no_main]
use aurora_capture::{CaptureFormat, FrameLink, PortCapture};
use aurora_time::Instant;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&form, mut rest)) = data.split_first() else {
        return;
    };
    let form = form % 6;
    let mut cap = match form {
        0 => PortCapture::with_format(Vec::new(), CaptureFormat::Erf),
        1 => PortCapture::with_format(Vec::new(), CaptureFormat::SunAtm),
        2 => PortCapture::with_format(Vec::new(), CaptureFormat::Rfc1483),
        3 => PortCapture::for_frames(Vec::new(), FrameLink::Routed),
        4 => PortCapture::for_frames(Vec::new(), FrameLink::Payload),
        _ => PortCapture::for_frames(Vec::new(), FrameLink::FromHost),
    }
    .unwrap();
    let frames_file = form >= 3;
    let (mut cells, mut frames, mut t) = (0u64, 0u64, 0i64);
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        t += i64::from(op >> 4);
        let now = Instant::from_nanos(t);
        match op % 3 {
            0 => {
                let Some(cell) = rest.get(..53) else { break };
                let cell: [u8; 53] = cell.try_into().unwrap();
                rest = &rest[53..];
                cap.cell(now, &cell).unwrap();
                cells += 1;
            }
            1 => {
                let Some((&n, tail)) = rest.split_first() else {
                    break;
                };
                let n = usize::from(n).min(tail.len());
                cap.frame(now, &tail[..n]).unwrap();
                rest = &tail[n..];
                frames += 1;
            }
            _ => cap.note_dropped(u64::from(op >> 2)),
        }
    }
    let c = cap.counters();
    if frames_file {
        // A cell at a port of frames is recorded as the frame it came as.
        assert_eq!((c.frames, c.cells, c.pdus), (cells + frames, 0, 0));
    } else {
        assert_eq!(c.frames, 0);
        assert_eq!(c.wrong_kind, frames);
        let want = if form == 0 { cells } else { 0 };
        assert_eq!(c.cells, want);
        assert!(c.pdus <= cells);
    }
    let records = c.cells + c.pdus + c.frames;
    let bytes = cap.finish();
    let mut r = pcap_file::pcap::PcapReader::new(&bytes[..]).unwrap();
    let mut n = 0u64;
    while let Some(p) = r.next_packet() {
        p.unwrap();
        n += 1;
    }
    assert_eq!(n, records);
});
