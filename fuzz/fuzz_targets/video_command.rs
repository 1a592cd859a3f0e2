//! Command cells: the parser on arbitrary bytes (no panic, and what parses
//! re-emits to the same 48 bytes), and a camera given arbitrary command
//! cells on its control VC: no panic, every cell counted once, an answer
//! for every malformed one, and nothing sent that a command did not ask
//! for.
#![no_main]
use aurora_net::{Node, Outbox};
use aurora_time::{Duration, Instant};
use aurora_video::command::{check, CommandCell};
use aurora_video::source::SyntheticSource;
use aurora_video::vidboard::{ControlChannel, Vidboard, VidboardConfig};
use aurora_wire::cell::{Format, Header, Pti, VcId};
use libfuzzer_sys::fuzz_target;

const CH: ControlChannel = ControlChannel {
    command: VcId::new(0, 32),
    reply: VcId::new(0, 33),
};

fuzz_target!(|data: &[u8]| {
    let _ = CommandCell::parse_slice(data);
    let cfg = VidboardConfig {
        format: Format::Uni,
        line_rate: 353_207.5,
        channels: vec![CH],
    };
    let mut cam = Vidboard::new(cfg, Box::new(SyntheticSource::new(1))).unwrap();
    let mut out = Outbox::default();
    let mut now = Instant::ZERO;
    let mut cells = 0u64;
    for chunk in data.chunks(49) {
        let Some((&sel, rest)) = chunk.split_first() else {
            break;
        };
        let mut p = [0u8; 48];
        p[..rest.len()].copy_from_slice(rest);
        if sel & 1 != 0 {
            // Get past magic, version and check, to reach the codes.
            p[..3].copy_from_slice(&[b'V', b'B', 1]);
            let c = check(&p[..46]);
            p[46..].copy_from_slice(&c.to_be_bytes());
        }
        if let Ok(c) = CommandCell::parse(&p) {
            assert_eq!(c.emit(), p);
        }
        let mut cell = [0u8; 53];
        let h = Header {
            pti: Pti::DATA_END,
            ..Header::data(CH.command)
        };
        h.emit(&mut cell).unwrap();
        cell[5..].copy_from_slice(&p);
        now += Duration::from_micros(i64::from(sel >> 1) * 50);
        cam.receive(now, 0, &[cell], &mut out);
        cells += 1;
        // Run the camera's timed work up to now, a bounded number of steps.
        for _ in 0..64 {
            match cam.poll_at() {
                Some(t) if t <= now => cam.poll(t, &mut out),
                _ => break,
            }
        }
        out.drain().for_each(drop);
    }
    let k = cam.counters();
    assert_eq!(k.cells_in, cells);
    let handled = k.malformed.iter().sum::<u64>()
        + k.refused.iter().sum::<u64>()
        + k.replies_received
        + k.commands_accepted;
    assert_eq!(handled, cells, "{k:?}");
});
