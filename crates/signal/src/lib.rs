//! Application-oriented signalling, VuNet style: applications open and
//! close their own VCs; no central signalling entity.
//!
//! What lives where:
//! - [`table`]: VCI allocation without theft. One table per network says
//!   which VCI each VC holds on each link it crosses, who owns it and until
//!   when (a lease). Two hosts allocating at once never get the same VCI on
//!   a shared link: every change happens under one lock, a mutex for hosts
//!   in one process ([`table::MemTable`]) or an advisory lock on a file for
//!   hosts in several processes on one machine ([`table::FileTable`]).
//!   Entries whose lease ran out are reclaimed by the next operation, so a
//!   host that went away leaks nothing.

//! - [`conn`]: the connection library a host drives: open a VC across a
//!   path of relaying links, relay by relay (write the entry, read it
//!   back), with a timeout, retries and a clear reason for a failure; close
//!   it. Control cells reach relays beyond the first by the route they
//!   carry ([`aurora_net::vunet::Route`]).
//! - [`control`]: commands to a running host from another thread (open a
//!   VC to a named host, close it, list), through the host's inbox.
//! - [`discover`]: the topology daemon: maps relays and switch ports with
//!   identify probes, round after round, and gives the connection library
//!   its paths.

pub mod conn;
pub mod control;
pub mod discover;
pub mod host;
pub mod table;
