//! Topology files from users: any text is either a network or a list of
//! located problems; never a panic, and a network that loads also runs.
//! Cell networks and ATOMIC ones alike.
#![no_main]
use libfuzzer_sys::fuzz_target;

fn located(p: &aurora_topo::Problems) {
    assert!(!p.0.is_empty());
    for x in &p.0 {
        assert!(x.line >= 1 && x.col >= 1, "{x}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if aurora_topo::is_atomic_text(text) {
        match aurora_topo::compile_atomic(text) {
            // Keep runs small: big meshes are fine, but slow to fuzz.
            Ok(net) if net.layout.nodes.len() <= 256 => {
                if let Ok(mut b) = net.build(1) {
                    b.sim.run_until(aurora_time::Instant::from_micros(200));
                }
            }
            Ok(_) => {}
            Err(p) => located(&p),
        }
        return;
    }
    match aurora_topo::load(text, 1) {
        Ok(mut net) => net.sim.run_until(aurora_time::Instant::from_micros(200)),
        Err(p) => located(&p),
    }
});
