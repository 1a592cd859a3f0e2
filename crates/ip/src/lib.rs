//! IP over Aurora's cell network (Classical IP over ATM).
//!
//! | module | what |
//! |---|---|
//! | [`lpm`] | longest-prefix-match table (8-bit-stride trie) |
//! | [`arp`] | the ATMARP cache, with ageing |
//! | [`forward`] | the IPv4 forwarding decision and its named drops |
//! | [`node`] | an IP host or router on ATM ports: encapsulation, InATMARP, forwarding, ICMP |
//! | [`workload`] | a fixed forwarding workload for benchmarks and instruction counts |
//!
//! Formats (RFC 2684 headers, ATMARP packets, IPv4 headers) live in
//! `aurora-wire`; this crate holds the state machines. Like every node, it
//! does no I/O: the driver hands it cells, and packets from the local host
//! (a TUN interface), and takes what it sends.

pub mod arp;
pub mod forward;
pub mod lpm;
pub mod node;
pub mod workload;
