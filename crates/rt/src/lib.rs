//! The real-time frame driver for ATOMIC ([`frames`]): variable-length
//! frames between nodes on threads of their own, against the wall clock.
//!
//! Cell networks run in real time on the engine's wall clock
//! (`aurora_engine::Engine::run_wall`), one process per node included
//! (external links and packet devices, `aurora_engine::io`).

pub mod frames;
pub use aurora_engine::io::{DeviceCounters, PacketDevice, DEVICE_BATCH};
pub use aurora_engine::lateness;

/// Why a run could not start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtError(pub String);

impl std::fmt::Display for RtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RtError {}
