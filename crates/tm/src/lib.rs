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
//! Memory is fixed when a value is made (a [`PduDiscard`] table changes
//! size only when asked to). No input panics: times saturate at
//! the ends of their range, out-of-range VC indices are refused and
//! counted, and text that is not a QoS is an error.
//!
//! ```
//! use aurora_time::{Duration, Instant};
//! use aurora_tm::{Action, Admission, BufferLimits, Contract, Definition, PduDiscard, Shaper, Upc, Verdict};
//!
//! // A VBR contract from QoS text: 10,000 cells/s peak, 2,000 sustained,
//! // bursts of 50, 500 µs of CDVT.
//! let c: Contract = "vbr:pcr=10k,scr=2k,mbs=50,cdvt=500".parse().unwrap();
//!
//! // The host shapes; the switch polices (VBR.3: tag CLP=0 cells over SCR).
//! let mut shaper = Shaper::new(&c);
//! let mut upc = Upc::new(&c, Definition::Clp0, Action::Tag);
//! let mut now = Instant::ZERO;
//! for _ in 0..1_000 {
//!     now = shaper.next_conforming(now);
//!     shaper.sent(now);
//!     assert_eq!(upc.police(now, false), Verdict::Pass);
//! }
//! // 50 cells in a burst at the peak rate, then one every 500 µs.
//! assert_eq!(now, Instant::ZERO + Duration::from_micros(4_900 + 950 * 500));
//!
//! // At an output port: EPD above 300 waiting cells, of 512.
//! let limits = BufferLimits { size: 512, epd: 300, clp1: 400 };
//! let mut port = PduDiscard::new(limits, 64);
//! assert_eq!(port.admit(7, false, false, 299), Admission::Admit);
//! assert!(matches!(port.admit(8, false, false, 300), Admission::Drop(_)));
//! ```
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
