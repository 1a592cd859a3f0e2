//! What crossed a node process's edge, for the books of a run of several
//! processes: the boundary tap counts cells a link takes to another
//! process (side `out`) and cells read from one (side `in`), and the
//! stop-time drain what was left unread at the process's inputs.
//!
//! Two books read it. IP PVCs count AAL5 end cells per place and VC
//! (`crate::books_ip`). Traffic PVCs, whose cells carry tags, keep per
//! place the last PDU whose end cell crossed: a PDU that left one process
//! after the last the next read or held unread never reached it
//! (`crate::books`). Only the places and VCs where the file's PVCs cross
//! are counted, so a peer's cells cannot grow either; a traffic PVC's
//! count takes only end cells on its VC whose tag names its flow.

use std::collections::{BTreeMap, BTreeSet};

use aurora_engine::carry::Carries;
use aurora_engine::NodeId;
use aurora_net::accounting::{self, Place, Side};
use aurora_net::tag::Tag;
use aurora_wire::cell::VcId;
use aurora_wire::CellBytes;

use crate::books_ip::EndCounts;

/// Per place and the VC a traffic PVC has there: the PVC's flow number,
/// and the last PDU whose end cell crossed there, if any did.
pub(crate) type LastPdus = BTreeMap<(Place, VcId), (u16, Option<u64>)>;

/// What crossed a process's edge (or was left unread at it).
#[derive(Clone, Debug, Default)]
pub(crate) struct Edge {
    /// IP PVCs' end cells.
    pub ends: EndCounts,
    /// Traffic PVCs' last PDUs.
    pub last: LastPdus,
}

impl Edge {
    /// The places where the PVCs of `info` cross the edge of process `p`,
    /// each with nothing counted yet: leaving a node of the process for
    /// one outside (side `Out`), or arriving from outside (`In`).
    pub(crate) fn of<F: aurora_net::Frame>(
        p: &aurora_topo::NodeProcess<F>,
        info: &aurora_topo::BlueprintInfo,
    ) -> Edge {
        let local = |id: NodeId| p.members.iter().find(|m| m.id == id).map(|m| m.local);
        let mut last = LastPdus::new();
        for (i, pvc) in info.pvcs.iter().enumerate() {
            // A traffic PVC's flow number is its place in the file.
            let Ok(flow) = u16::try_from(i) else { break };
            if pvc.flows.is_empty() {
                continue;
            }
            for h in &pvc.hops {
                let place = match (local(h.from.0), local(h.to.0)) {
                    (Some(l), None) => Place {
                        node: l.0,
                        port: h.from.1,
                        side: Side::Out,
                    },
                    (None, Some(l)) => Place {
                        node: l.0,
                        port: h.to.1,
                        side: Side::In,
                    },
                    _ => continue,
                };
                last.insert((place, h.vc), (flow, None));
            }
        }
        Edge {
            ends: crate::books_ip::crossings(p, info),
            last,
        }
    }

    /// No PVC crosses here.
    pub(crate) fn is_empty(&self) -> bool {
        self.ends.is_empty() && self.last.is_empty()
    }

    /// The ports (process-local node, port) where cells leave the process
    /// and are counted.
    pub(crate) fn exits(&self) -> BTreeSet<(u32, u16)> {
        self.ends
            .keys()
            .map(|(at, _)| at)
            .chain(self.last.keys().map(|(at, _)| at))
            .filter(|at| at.side == Side::Out)
            .map(|at| (at.node, at.port))
            .collect()
    }

    /// Counts `frames` seen at `place`; `noisy` as for
    /// [`crate::books_ip::count_ends`] (headers read as the ledger reads
    /// them, a single-bit error repaired).
    pub(crate) fn saw<F: Carries<CellBytes>>(&mut self, place: Place, frames: &[F], noisy: bool) {
        if !self.ends.is_empty() {
            crate::books_ip::count_ends(&mut self.ends, place, frames, noisy);
        }
        if self.last.is_empty() {
            return;
        }
        for f in frames {
            let Some(c) = f.peek() else { continue };
            // Nearly every header is whole: a cell is copied to repair it
            // only when its HEC says so.
            let fixed;
            let c = if noisy && aurora_wire::crc::hec_syndrome(&[c[0], c[1], c[2], c[3], c[4]]) != 0
            {
                fixed = accounting::repaired(c);
                &fixed
            } else {
                c
            };
            // User data ending a PDU (PTI 0b0x1: congestion bit either way).
            if c[3] & 0x0A != 0x02 {
                continue;
            }
            let Some((flow, last)) = self.last.get_mut(&(place, accounting::vc_of(c))) else {
                continue;
            };
            match Tag::of_cell(c) {
                Some(t) if t.flow == *flow => *last = Some(last.map_or(t.seq, |x| x.max(t.seq))),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aurora_net::tag;

    /// The cells of PDU `seq` of flow `flow`, 100 bytes (three cells).
    fn pdu(flow: u16, seq: u64) -> Vec<CellBytes> {
        tag::pdu_cells(Tag { flow, seq }, 100, VC).unwrap()
    }

    const VC: VcId = VcId { vpi: 0, vci: 40 };

    const AT: Place = Place {
        node: 1,
        port: 2,
        side: Side::Out,
    };

    /// A process's crossings of a traffic PVC are keyed by the VC its cells
    /// carry on each link: here 0.100 into the switch and 0.200 out.
    #[test]
    fn a_crossing_is_keyed_by_the_vc_on_its_link() {
        let port = || {
            std::net::UdpSocket::bind("127.0.0.1:0")
                .and_then(|s| s.local_addr())
                .unwrap()
                .port()
        };
        let link = |a: &str, b: &str| {
            format!(
                "[[link]]\na = \"{a}\"\nb = \"{b}\"\nudp_a = \"127.0.0.1:{}\"\n\
                 udp_b = \"127.0.0.1:{}\"\n",
                port(),
                port()
            )
        };
        let text = format!(
            "[[switch]]\nname = \"sw\"\nports = 2\n[[host]]\nname = \"h1\"\n\
             [[host]]\nname = \"h2\"\n{}{}\
             [[pvc]]\nname = \"p\"\npath = [\"h1\", \"sw\", \"h2\"]\n\
             from_vc = \"0.100\"\nto_vc = \"0.200\"\n\
             [[flow]]\npvc = \"p\"\nsdu = 100\ncount = 1\ninterval = \"1ms\"\n",
            link("h1", "sw:0"),
            link("sw:1", "h2")
        );
        let keys = |names: &[&str]| {
            let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            let bp = aurora_topo::compile(&text).unwrap();
            let (p, info) = bp.node_process(&names, 1).unwrap();
            let e = Edge::of(&p, &info);
            let name = |id: u32| crate::node::member_name(&p, NodeId(id));
            e.last
                .iter()
                .map(|((at, vc), (flow, last))| {
                    (name(at.node), at.port, at.side, *vc, *flow, *last)
                })
                .collect::<Vec<_>>()
        };
        let vc = |vci| VcId { vpi: 0, vci };
        assert_eq!(
            keys(&["sw"]),
            [
                ("sw".to_string(), 0, Side::In, vc(100), 0, None),
                ("sw".to_string(), 1, Side::Out, vc(200), 0, None)
            ]
        );
        assert_eq!(
            keys(&["h1"]),
            [("h1".to_string(), 0, Side::Out, vc(100), 0, None)]
        );
        // Two nodes in one process: only the links leaving it count.
        assert_eq!(
            keys(&["sw", "h2"]),
            [("sw".to_string(), 0, Side::In, vc(100), 0, None)]
        );
    }

    #[test]
    fn the_last_pdu_of_each_expected_flow_is_kept() {
        let mut e = Edge::default();
        e.last.insert((AT, VC), (3, None));
        let last = |e: &Edge| e.last[&(AT, VC)].1;
        // PDU 5's cells but its end, then PDUs 4 and 6 whole (out of
        // order, as no link makes them, to show the highest is kept); on
        // the VC, a PDU of flow 7, which is not this VC's.
        e.saw(AT, &pdu(3, 5)[..2], false);
        assert_eq!(last(&e), None);
        let cells: Vec<CellBytes> = [pdu(3, 6), pdu(3, 4), pdu(7, 9)].concat();
        e.saw(AT, &cells, false);
        assert_eq!(last(&e), Some(6));
        assert_eq!(e.last.len(), 1);
        // Elsewhere, or on another VC, nothing is counted.
        let other = Place { port: 3, ..AT };
        e.saw(other, &pdu(3, 8), false);
        let mut p = pdu(3, 8);
        p[2][3] ^= 0x10; // VCI 40 -> 41, the HEC made good
        p[2][4] = aurora_wire::crc::hec(&[p[2][0], p[2][1], p[2][2], p[2][3]]);
        e.saw(AT, &p, false);
        assert_eq!(last(&e), Some(6));
        // The end bit flipped on a noisy line is repaired (and, unrepaired,
        // the cell does not end a PDU); a damaged tag is not believed.
        let mut p = pdu(3, 8);
        p[2][3] ^= 0x02;
        e.saw(AT, &p, false);
        assert_eq!(last(&e), Some(6));
        e.saw(AT, &p, true);
        assert_eq!(last(&e), Some(8));
        let mut p = pdu(3, 9);
        p[2][40] ^= 0xFF;
        e.saw(AT, &p, false);
        assert_eq!(last(&e), Some(8));
    }
}
