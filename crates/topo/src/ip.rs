//! The IP side of topology files: hosts with addresses, routers, and what
//! a host's TUN interface is given when the host runs as its own process.

use std::net::Ipv4Addr;

use aurora_ip::node::{Interface, IpConfig, StaticRoute, DEFAULT_MTU};
use aurora_wire::atmarp::AtmAddr;
use aurora_wire::llc::{Encapsulation, Protocol};

use crate::{HostDef, RouterDef};

/// What a host's TUN interface gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunSpec {
    /// Interface name.
    pub name: String,
    /// Its address.
    pub addr: Ipv4Addr,
    /// Its prefix length.
    pub prefix: u8,
    /// Its MTU.
    pub mtu: usize,
    /// Routes through it.
    pub routes: Vec<StaticRoute>,
    /// The network namespace (made by `ip netns add`) to make it in; then
    /// `aurora run` opens it too, not only `aurora node`.
    pub netns: Option<String>,
}

/// Reads `a.b.c.d/len`.
pub fn parse_cidr(s: &str) -> Result<(Ipv4Addr, u8), String> {
    let bad = || format!("\"{s}\" is not an IPv4 address with a prefix length, as \"10.1.0.1/24\"");
    let (a, l) = s.trim().split_once('/').ok_or_else(bad)?;
    let a: Ipv4Addr = a.parse().map_err(|_| bad())?;
    let l: u8 = l.parse().map_err(|_| bad())?;
    if l > 32 {
        return Err(bad());
    }
    Ok((a, l))
}

/// Reads `PREFIX via GATEWAY` or `default via GATEWAY`.
pub fn parse_route(s: &str) -> Result<StaticRoute, String> {
    let bad = || {
        format!("route \"{s}\" is not \"10.2.0.0/16 via 10.1.0.254\" or \"default via 10.1.0.254\"")
    };
    let (dst, gw) = s.trim().split_once(" via ").ok_or_else(bad)?;
    let (dst, prefix) = match dst.trim() {
        "default" => (Ipv4Addr::UNSPECIFIED, 0),
        d => parse_cidr(d).map_err(|_| bad())?,
    };
    let gateway = gw.trim().parse().map_err(|_| bad())?;
    Ok(StaticRoute {
        dst,
        prefix,
        gateway,
    })
}

fn encap(s: Option<&str>) -> Result<Encapsulation, String> {
    match s {
        None | Some("llc") => Ok(Encapsulation::Llc),
        Some("vcmux") => Ok(Encapsulation::VcMux(Protocol::Ipv4)),
        Some(e) => Err(format!(
            "encapsulation \"{e}\" is not \"llc\" (LLC/SNAP) or \"vcmux\" (VC multiplexing)"
        )),
    }
}

fn mtu(m: Option<usize>) -> Result<usize, String> {
    mtu_in_range(m.unwrap_or(DEFAULT_MTU))
}

/// Checks an MTU of an IP node or a TUN interface: 68 to 65000.
pub(crate) fn mtu_in_range(m: usize) -> Result<usize, String> {
    match m {
        68..=65_000 => Ok(m),
        m => Err(format!("MTU {m} is outside 68 to 65000")),
    }
}

/// True for a TUN interface name Aurora gives: 1 to 15 letters, digits,
/// '-', '_' or '.'.
pub(crate) fn tun_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// Checks a `netns` value: a name `ip netns add` would take (up to 64
/// letters, digits, '-', '_' or '.', not starting with '.').
pub(crate) fn netns_ok(host: &str, ns: &str) -> Result<(), String> {
    if ns.len() <= 64 && crate::compile::plain_name(ns) {
        Ok(())
    } else {
        Err(format!(
            "netns \"{ns}\" of host \"{host}\" must be 1 to 64 letters, digits, '-', '_' or '.', not starting with '.'"
        ))
    }
}

/// Reads an NSAP address written in hex (dots and spaces allowed), 1 to
/// 20 bytes.
pub fn parse_atm(s: &str) -> Result<AtmAddr, String> {
    let bad = || format!("ATM address \"{s}\" is not 2 to 40 hex digits (dots allowed)");
    let digits: Vec<u8> = s
        .chars()
        .filter(|c| !matches!(c, '.' | ' '))
        .map(|c| c.to_digit(16).map(|d| d as u8).ok_or_else(bad))
        .collect::<Result<_, _>>()?;
    if digits.is_empty() || !digits.len().is_multiple_of(2) || digits.len() > 40 {
        return Err(bad());
    }
    let bytes: Vec<u8> = digits.chunks(2).map(|p| p[0] << 4 | p[1]).collect();
    AtmAddr::nsap(&bytes).map_err(|_| bad())
}

/// The NSAP address a node gets when its file gives none: AFI 0x47 and
/// Aurora's own prefix, then 16 bytes from the node's name (FNV-1a).
pub fn default_atm(name: &str) -> AtmAddr {
    let mut b = [0u8; 20];
    b[..4].copy_from_slice(&[0x47, 0x00, 0x05, 0xA0]);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (k, chunk) in b[4..].chunks_mut(8).enumerate() {
        for c in name.bytes().chain([k as u8]) {
            h ^= u64::from(c);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        chunk.copy_from_slice(&h.to_be_bytes()[..chunk.len()]);
    }
    AtmAddr::nsap(&b).expect("20 bytes")
}

/// The ATMARP settings both hosts and routers have.
pub(crate) struct Atmarp<'a> {
    pub atm: Option<&'a str>,
    pub server: bool,
    pub inarp: Option<bool>,
}

#[allow(clippy::too_many_arguments)]
fn common(
    name: &str,
    interfaces: Vec<Option<Interface>>,
    routes: &[String],
    m: Option<usize>,
    e: Option<&str>,
    forwarding: bool,
    arp: Atmarp,
    errs: &mut Vec<String>,
) -> IpConfig {
    let atm = match arp.atm {
        Some(a) => parse_atm(a)
            .map_err(|m| errs.push(m))
            .unwrap_or(AtmAddr::EMPTY),
        None => default_atm(name),
    };
    let routes = routes
        .iter()
        .filter_map(|r| parse_route(r).map_err(|m| errs.push(m)).ok())
        .collect();
    let cfg = IpConfig {
        interfaces,
        routes,
        forwarding,
        mtu: mtu(m).map_err(|m| errs.push(m)).unwrap_or(DEFAULT_MTU),
        encap: encap(e)
            .map_err(|m| errs.push(m))
            .unwrap_or(Encapsulation::Llc),
        atm,
        atmarp_server: arp.server,
        inarp: arp.inarp.unwrap_or(true),
        ..IpConfig::default()
    };
    if let Err(e) = aurora_ip::node::IpNode::new(cfg.clone()) {
        errs.push(format!("\"{name}\": {e}"));
    }
    cfg
}

/// A host's IP configuration and TUN, if it has an address.
pub(crate) fn host(d: &HostDef) -> Result<Option<(IpConfig, TunSpec)>, Vec<String>> {
    let mut errs = Vec::new();
    let Some(ip) = &d.ip else {
        if !d.routes.is_empty()
            || d.tun.is_some()
            || d.mtu.is_some()
            || d.encap.is_some()
            || d.atm.is_some()
            || d.atmarp.is_some()
            || d.atmarp_server
            || d.inarp.is_some()
            || d.netns.is_some()
        {
            errs.push(format!(
                "host \"{}\" has IP settings (routes, tun, netns, mtu, encap, atm, atmarp...) but no ip",
                d.name
            ));
            return Err(errs);
        }
        return Ok(None);
    };
    let (addr, prefix) = match parse_cidr(ip) {
        Ok(x) => x,
        Err(m) => return Err(vec![m]),
    };
    let cfg = common(
        &d.name,
        vec![Some(Interface { addr, prefix })],
        &d.routes,
        d.mtu,
        d.encap.as_deref(),
        false,
        Atmarp {
            atm: d.atm.as_deref(),
            server: d.atmarp_server,
            inarp: d.inarp,
        },
        &mut errs,
    );
    let name = d.tun.clone().unwrap_or_else(|| {
        let mut n = format!("aur-{}", d.name);
        n.truncate(15);
        n
    });
    if let Some(Err(m)) = d.netns.as_deref().map(|ns| netns_ok(&d.name, ns)) {
        errs.push(m);
    }
    if !tun_name_ok(&name) {
        errs.push(format!(
            "tun \"{name}\" of host \"{}\" must be 1 to 15 letters, digits, '-', '_' or '.'",
            d.name
        ));
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let tun = TunSpec {
        name,
        addr,
        prefix,
        mtu: cfg.mtu,
        routes: cfg.routes.clone(),
        netns: d.netns.clone(),
    };
    Ok(Some((cfg, tun)))
}

/// A router's IP configuration.
pub(crate) fn router(d: &RouterDef) -> Result<IpConfig, Vec<String>> {
    let mut errs = Vec::new();
    if d.ip.len() != usize::from(d.ports) {
        errs.push(format!(
            "router \"{}\" has {} ports but {} addresses; give one per port",
            d.name,
            d.ports,
            d.ip.len()
        ));
    }
    let interfaces =
        d.ip.iter()
            .map(|s| {
                parse_cidr(s)
                    .map(|(addr, prefix)| Some(Interface { addr, prefix }))
                    .map_err(|m| errs.push(m))
                    .unwrap_or(None)
            })
            .collect();
    let cfg = common(
        &d.name,
        interfaces,
        &d.routes,
        d.mtu,
        d.encap.as_deref(),
        true,
        Atmarp {
            atm: d.atm.as_deref(),
            server: d.atmarp_server,
            inarp: d.inarp,
        },
        &mut errs,
    );
    if errs.is_empty() {
        Ok(cfg)
    } else {
        Err(errs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_routes_parse() {
        assert_eq!(
            parse_cidr("10.1.0.1/24"),
            Ok((Ipv4Addr::new(10, 1, 0, 1), 24))
        );
        assert!(parse_cidr("10.1.0.1").is_err());
        assert!(parse_cidr("10.1.0.1/33").is_err());
        assert!(parse_cidr("10.1.0/24").is_err());
        assert_eq!(
            parse_route("default via 10.1.0.254"),
            Ok(StaticRoute {
                dst: Ipv4Addr::UNSPECIFIED,
                prefix: 0,
                gateway: Ipv4Addr::new(10, 1, 0, 254)
            })
        );
        assert_eq!(
            parse_route("10.2.0.0/16 via 10.1.0.254").unwrap().prefix,
            16
        );
        assert!(parse_route("10.2.0.0/16 10.1.0.254").is_err());
        assert!(parse_route("default via nowhere").is_err());
    }

    #[test]
    fn atm_addresses_parse_and_defaults_differ() {
        let a = parse_atm("47.0005.80ffe1000000f21a0001.0020481a0001.00").unwrap();
        assert_eq!(a.as_bytes().len(), 20);
        assert_eq!(a.as_bytes()[0], 0x47);
        assert!(parse_atm("47.0").is_err());
        assert!(parse_atm("zz").is_err());
        assert!(parse_atm(&"00".repeat(21)).is_err());
        assert_ne!(default_atm("h1"), default_atm("h2"));
        assert_eq!(default_atm("h1"), default_atm("h1"));
        assert_eq!(default_atm("h1").as_bytes().len(), 20);
    }
}
