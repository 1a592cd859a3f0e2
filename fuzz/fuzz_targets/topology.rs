//! Topology files from users: any text is either a network or a list of
//! located problems; never a panic, and a network that loads also runs.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match aurora_topo::load(text, 1) {
        Ok(mut net) => net.sim.run_until(aurora_time::Instant::from_micros(200)),
        Err(p) => {
            assert!(!p.0.is_empty());
            for x in &p.0 {
                assert!(x.line >= 1 && x.col >= 1, "{x}");
            }
        }
    }
});
