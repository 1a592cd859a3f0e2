//! The ATOMIC LAN: variable-length packets source-routed through meshes
//! of Mosaic nodes, hosts attached through host-interface nodes, and the
//! Address Consultant (AC) that maps the network and hands out routes.
//!
//! | module | what |
//! |---|---|
//! | [`wire`] | routes of (ΔX, ΔY) pairs, and the hosts', nodes' and ACs' messages |
//! | [`ac`] | the Address Consultant: loop and flood mapping, host discovery, routes, bandwidth |
//! | [`built`] | a layout running in the virtual-time driver |
//! | [`flow`] | flow packets: their bytes, and which flow and packet a frame carries |
//! | [`gateway`] | an IP router with ATM ports and interfaces on ATOMIC LANs |
//! | [`host`] | a host: link-level access, IP over ATOMIC with cached routes, an AC when it runs one |
//! | [`layout`] | meshes, host nodes and cables as built; random layouts and their ground truth |
//! | [`map`] | an AC's map: nodes by identifier, channels, hosts, shortest walks |
//! | [`mosaic`] | a Mosaic node: wormhole hops, store-and-forward, probe records, flood mapping |
//!
//! Nodes are sans-I/O [`aurora_net::Node`]s over `Vec<u8>` frames, so the
//! same code runs in virtual time (`aurora_engine::Engine<Vec<u8>>`) and real time.

pub mod ac;
pub mod built;
pub mod flow;
pub mod gateway;
pub mod host;
pub mod layout;
pub mod map;
pub mod mosaic;
pub mod wire;
