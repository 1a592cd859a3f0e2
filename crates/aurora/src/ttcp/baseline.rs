//! The kernel baseline: the same PDUs, pattern and checks over a plain
//! Linux loopback TCP connection, so every figure has the kernel's next to it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use super::pattern::{now_ns, Pattern};
use super::run::{LinkSummary, Report};

fn cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Listens on `addr`, accepts one sender and reads `count` messages of `len` bytes.
pub fn receive(
    addr: SocketAddr,
    len: usize,
    count: u64,
    listener: Option<TcpListener>,
) -> Result<Report, String> {
    let l = match listener {
        Some(l) => l,
        None => TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?,
    };
    let (mut s, _) = l
        .accept()
        .map_err(|e| format!("accept on {addr} failed: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| format!("cannot set a read timeout: {e}"))?;
    let pattern = Pattern::new(len);
    let mut buf = vec![0u8; len];
    let (mut pdus, mut corrupted, mut lost, mut next) = (0u64, 0u64, 0u64, 0u64);
    let mut lat = super::pattern::Latencies::default();
    let cpu0 = cpu_ns();
    let mut first = None;
    let mut last = 0;
    for _ in 0..count {
        if let Err(e) = s.read_exact(&mut buf) {
            lost = count - pdus - corrupted;
            eprintln!("aurora ttcp: the TCP baseline stopped early: {e}");
            break;
        }
        let t = now_ns();
        first.get_or_insert(t);
        last = t;
        let c = pattern.check(&buf);
        if c.body_ok {
            pdus += 1;
        } else {
            corrupted += 1;
        }
        if let Some(seq) = c.seq {
            if seq > next {
                lost += seq - next;
            }
            next = seq + 1;
        }
        if let Some(sent) = c.sent_ns {
            lat.push(t.saturating_sub(sent));
        }
    }
    let secs = first.map_or(0.0, |f| (last - f) as f64 / 1e9);
    let cpu = (cpu_ns() - cpu0) as f64 / 1e9;
    Ok(Report {
        role: "receive".into(),
        len,
        pdus,
        bytes: pdus * len as u64,
        secs,
        mbps: if pdus > 1 {
            super::run::rate_mbps((pdus - 1) * len as u64, secs)
        } else {
            None
        },
        cpu_secs: cpu,
        cpu_us_per_pdu: cpu * 1e6 / pdus.max(1) as f64,
        corrupted,
        lost,
        latency_us: lat.summary(),
        link: LinkSummary::default(),
        drops: Vec::new(),
    })
}

/// Connects to `addr` and writes `count` messages of `len` bytes.
pub fn transmit(addr: SocketAddr, len: usize, count: u64) -> Result<Report, String> {
    let start = std::time::Instant::now();
    let mut s = loop {
        match TcpStream::connect(addr) {
            Ok(s) => break s,
            Err(e) if start.elapsed() > Duration::from_secs(10) => {
                return Err(format!("cannot connect to {addr}: {e}"))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    let pattern = Pattern::new(len);
    let mut buf = vec![0u8; len];
    pattern.fill(&mut buf);
    let cpu0 = cpu_ns();
    let t0 = now_ns();
    for seq in 0..count {
        Pattern::stamp(&mut buf, seq, now_ns());
        s.write_all(&buf)
            .map_err(|e| format!("TCP baseline write failed: {e}"))?;
    }
    let secs = (now_ns() - t0) as f64 / 1e9;
    let cpu = (cpu_ns() - cpu0) as f64 / 1e9;
    let bytes = count * len as u64;
    Ok(Report {
        role: "transmit".into(),
        len,
        pdus: count,
        bytes,
        secs,
        mbps: super::run::rate_mbps(bytes, secs),
        cpu_secs: cpu,
        cpu_us_per_pdu: cpu * 1e6 / count.max(1) as f64,
        ..Report::default()
    })
}
