//! The t-frame reassembler fed arbitrary cells, timeouts and frame closes
//! (and sometimes good t-frames among them): no panic, the unit buffer
//! within its limit, and the books never count more t-frames than units
//! could hold.
#![no_main]
use aurora_time::{Duration, Instant};
use aurora_video::frame::{Picture, PictureSize, PixelFormat};
use aurora_video::source::{Source, SyntheticSource};
use aurora_video::val::{segment_frame, Layout, Reassembler, RxConfig};
use aurora_wire::cell::{Format, Header, VcId};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&opts, mut rest)) = data.split_first() else {
        return;
    };
    let size = PictureSize::ALL[usize::from(opts % 3)];
    let format = PixelFormat::ALL[usize::from(opts >> 2 & 1)];
    let lt = 1 + u16::from(opts >> 3) % size.height() as u16;
    let layout = Layout::new(size, format, lt).unwrap();
    let mut r = Reassembler::new(
        layout,
        RxConfig {
            timeout: Duration::from_micros(500),
        },
    );
    let vc = VcId::new(0, 100);
    let mut good = Vec::new();
    let mut pic = Picture::new(size, format);
    SyntheticSource::new(7).render(3, &mut pic);
    segment_frame(layout, 3, &pic, vc, Format::Uni, &mut good);
    let mut now = Instant::ZERO;
    let mut frames = 0u64;
    let mut pushed = 0u64;
    while let Some((&ctl, tail)) = rest.split_first() {
        rest = tail;
        now += Duration::from_micros(i64::from(ctl >> 4) * 40);
        match ctl & 0x0F {
            0 => r.poll(now),
            1 => r.close_frame(now, &mut |_, _| frames += 1),
            2 | 3 => {
                // A run of the good frame's cells, from a chosen place.
                let Some((&at, t)) = rest.split_first() else {
                    break;
                };
                rest = t;
                let from = usize::from(at) * good.len() / 256;
                for c in good.iter().skip(from).take(usize::from(ctl >> 4) * 16 + 1) {
                    r.push(now, c, &mut |_, _| frames += 1);
                    pushed += 1;
                }
            }
            _ => {
                let Some(bytes) = rest.get(..49) else { break };
                rest = &rest[49..];
                let mut cell = [0u8; 53];
                Header::data(vc).emit(&mut cell).unwrap();
                cell[3] = (cell[3] & 0xF0) | (bytes[0] & 0x0F);
                cell[5..].copy_from_slice(&bytes[1..]);
                r.push(now, &cell, &mut |_, _| frames += 1);
                pushed += 1;
            }
        }
        assert!(r.buffered() <= r.buffer_limit());
    }
    let s = r.stats();
    assert_eq!(s.cells, pushed);
    assert_eq!(s.frames_complete + s.frames_incomplete, frames);
    // Every t-frame delivered took at least one cell of its own.
    assert!(s.tframes_delivered <= pushed);
});
