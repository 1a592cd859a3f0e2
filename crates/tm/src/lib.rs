//! ATM traffic management (ITU-T I.371, ATM Forum TM 4.0), sans-I/O.
//!
//! For switches: police each VC's cells at an input against its contract
//! ([`Upc`]: pass, tag or drop), and admit cells to an output port's buffer
//! with selective discard, EPD and PPD ([`PduDiscard`]). For hosts: shape
//! each VC's cells so they conform ([`Shaper`]). Contracts come from
//! linux-atm's QoS text ([`Contract`], [`qos`]).
//!
//! | module | what |
//! |---|---|
//! | [`gcra`] | GCRA(T, τ) by virtual scheduling and as a leaky bucket, with T exact; the dual GCRA |
//! | [`contract`] | traffic contracts: unlimited, peak (CBR), peak + sustained + burst (VBR) |
//! | [`qos`] | QoS text, `cbr:pcr=100k,cdv=250`, `vbr:pcr=10Mbps,scr=2k,mbs=100` |
//! | [`upc`] | usage parameter control: CLP=0+1 and CLP=0 conformance, tagging, counters |
//! | [`shaper`] | host shaping: when the next cell may leave |
//! | [`discard`] | output buffer admission: tail drop, CLP=1 selective discard, EPD, PPD |
//!
//! Nothing here reads a clock, starts a thread or does I/O: the caller
//! passes the time in as an [`aurora_time::Instant`] (integer nanoseconds).
//! Memory is fixed when a value is made. No input panics: times saturate at
//! the ends of their range, out-of-range VC indices are refused and
//! counted, and text that is not a QoS is an error.
#![forbid(unsafe_code)]

pub mod contract;
pub mod discard;
pub mod gcra;
pub mod qos;
pub mod shaper;
pub mod upc;

pub use contract::{burst_tolerance, Contract, Envelope};
pub use discard::{Admission, BufferLimits, DiscardCounters, DropReason, PduDiscard};
pub use gcra::{DualGcra, Gcra, Interval, LeakyBucket, VirtualScheduling};
pub use qos::{Aal, ParseError, Qos, TrafficClass, MAX_CDV_US, MAX_MBS, MAX_PCR};
pub use shaper::Shaper;
pub use upc::{Action, Definition, Upc, UpcCounters, Verdict};
