//! Topology files from users: any text is either a network or a list of
//! located problems; never a panic, and a network that loads also runs.
//! Cell networks, ATOMIC ones and both in one file alike.
#![no_main]
use libfuzzer_sys::fuzz_target;

fn located(p: &aurora_topo::Problems) {
    assert!(!p.0.is_empty());
    for x in &p.0 {
        assert!(x.line >= 1 && x.col >= 1, "{x}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let end = aurora_time::Instant::from_micros(200);
    match aurora_topo::compile(text) {
        // Keep runs small: big meshes are fine, but slow to fuzz.
        Ok(bp) => match &bp.atomic {
            Some(a) if a.layout.nodes.len() > 256 => {}
            Some(_) => {
                if let Ok(mut net) = bp.into_mixed(1) {
                    net.sim.run_until(end);
                }
            }
            None => {
                if let Ok(mut net) = bp.into_sim(1) {
                    net.sim.run_until(end);
                }
            }
        },
        Err(p) => located(&p),
    }
});
