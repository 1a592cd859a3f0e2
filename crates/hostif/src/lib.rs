//! A host interface for Aurora's cell network, modelled on Penn's ATM host
//! interface: VC and datagram tables, a fixed reassembly buffer managed as
//! linked lists of cell slots, a POLL table, polled and event-driven
//! synchronisation, and copy, single-copy and null data paths. Sans-I/O: the
//! caller moves cells between [`HostInterface`] and a link and passes `now`.
//!
//! | module | what |
//! |---|---|
//! | [`host`] | the interface node and its application API |
//! | [`tables`] | slot buffer (linked lists of cell slots) and POLL table |
//! | [`qos`] | linux-atm's address (`[itf.]vpi.vci`) and QoS text forms |

pub mod host;
pub mod qos;
pub mod tables;

pub use host::{
    DataPath, HostConfig, HostError, HostInterface, HostStats, Received, SyncMode, TxPdu, VcHandle,
};
pub use qos::{Aal, PvcAddr, Qos, TrafficClass, MAX_CDV_US, MAX_PCR};
