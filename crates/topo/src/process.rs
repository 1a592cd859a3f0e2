//! A partition of a network run as one process (`aurora node`): the nodes
//! named, on one engine; the links among them the engine's own links, with
//! the link model; every link to a node outside an external link end
//! reaching the process that runs that node; and a member's TUN interface,
//! if it has one, the engine's packet device for it. One node is a
//! partition of one. Cell networks ([`Blueprint::node_process`]) and
//! networks with an ATOMIC part ([`Blueprint::mixed_process`]) both build
//! theirs with [`build`]; only how a link's far end is reached differs
//! ([`Outside`]).

use std::collections::BTreeMap;

use aurora_engine::carry::Carries;
use aurora_engine::io::{ExternalSink, ExternalSource};
use aurora_engine::{Engine, EngineNode, LinkSpec, NodeId};
use aurora_link::frame_udp::{FrameRx, FrameTx};
use aurora_link::{CellSink, LinkCounters, LinkError};
use aurora_net::{Frame, PortId};
use aurora_wire::CellBytes;

use crate::{escape, Blueprint, BlueprintInfo, TunSpec};

/// How long a node process waits for a peer's shared-memory ring.
pub const SHM_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// A partition of a network set up to run as its own process.
pub struct NodeProcess<F: Frame = CellBytes> {
    /// The names it was asked for, in the order given (nodes; for an ATOMIC
    /// network, meshes and hosts).
    pub names: Vec<String>,
    /// An engine holding the partition's nodes, its links to other
    /// processes external link ends and its TUN interfaces packet devices,
    /// ready to run on the wall clock.
    pub engine: Engine<F>,
    /// Its nodes; a member's id in [`NodeProcess::engine`] is its index here.
    pub members: Vec<Member>,
    /// Its ports linked to nodes outside, by node and port.
    pub ports: Vec<NodePort>,
    /// The link directions between its own nodes.
    pub links: Vec<InnerLink>,
    /// Its TUN interfaces, made and configured: the member and the interface.
    pub tuns: Vec<(NodeId, TunSpec)>,
    /// Its members' output ports under a discipline (`[[port]]`), by the
    /// member's id in the engine.
    pub disciplines: Vec<(NodeId, crate::qos::PortPlan)>,
    /// Its members the file pins to a worker (`worker = K`): the member's
    /// id in the engine and the worker, for [`Engine::plan_pinned`].
    pub pins: Vec<(u32, u32)>,
}

impl<F: Carries<CellBytes>> NodeProcess<F> {
    /// Puts the ports of `plans` (by node index in the whole network) that
    /// belong to members under their disciplines.
    pub(crate) fn install_ports(
        &mut self,
        plans: Vec<(usize, crate::qos::PortPlan)>,
    ) -> Result<(), String> {
        let members = &self.members;
        let local = |i: usize| {
            members
                .iter()
                .find(|m| m.id.0 as usize == i)
                .map(|m| m.local)
        };
        self.disciplines = crate::qos::install(&mut self.engine, plans, &local)?;
        Ok(())
    }

    /// Keeps the pins of `pins` (node ids in the whole network) that
    /// name members.
    pub(crate) fn keep_pins(&mut self, pins: &[(NodeId, u16)]) {
        self.pins = pins
            .iter()
            .filter_map(|&(n, w)| {
                let m = self.members.iter().find(|m| m.id == n)?;
                Some((m.local.0, u32::from(w)))
            })
            .collect();
    }
}

/// One node of a [`NodeProcess`].
#[derive(Clone, Debug)]
pub struct Member {
    /// Its name.
    pub name: String,
    /// Its id in the whole network.
    pub id: NodeId,
    /// Its id in the process's engine.
    pub local: NodeId,
}

/// One port of a [`NodeProcess`] linked to a node outside it.
#[derive(Clone, Debug)]
pub struct NodePort {
    /// The member (its id in the process's engine).
    pub node: NodeId,
    /// The port.
    pub port: PortId,
    /// This end, as `node:port` (a Mosaic node's port by its direction,
    /// `m.0.0:West`): the same name in every process.
    pub here: String,
    /// The far end, likewise.
    pub peer: String,
    /// What this end reads from: its UDP address, or its ring's file.
    pub local: String,
    /// What it writes to: the far end's address, or the far end's ring.
    pub remote: String,
    /// It sends to the far end.
    pub sends: bool,
    /// It hears from the far end.
    pub hears: bool,
}

/// One link direction between two members of a [`NodeProcess`].
#[derive(Clone, Debug)]
pub struct InnerLink {
    /// Its sending member (id in the process's engine) and port.
    pub from: (NodeId, PortId),
    /// `node:port -> node:port`.
    pub name: String,
}

/// One link direction of a whole network, numbered as the whole network's
/// engine numbers it (its index in the list): the process's engine draws
/// its loss and bit errors from that direction's random stream.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WholeDir {
    pub(crate) from: (usize, PortId),
    pub(crate) to: (usize, PortId),
    pub(crate) spec: LinkSpec,
}

/// How the far ends of the directions that leave or reach a partition are
/// reached (direction `k` of the whole network; `from_end`: this process
/// is its sending end).
pub(crate) trait Outside<F> {
    /// What this end reads from and writes to, described; an error when
    /// the link has no way between processes.
    fn about(&self, k: usize, from_end: bool, member: &str) -> Result<(String, String), String>;
    /// Opens what brings direction `k` in. Every input is opened before
    /// any output (a shared-memory ring is created by its reader, and a
    /// writer waits for it), so processes started in any order meet.
    fn input(&mut self, k: usize) -> Result<Box<dyn ExternalSource<F>>, String>;
    /// Opens what takes direction `k` out.
    fn output(&mut self, k: usize) -> Result<Box<dyn ExternalSink<F>>, String>;
}

/// A partition's nodes before they are built into its engine: index in
/// the whole network, name, node.
pub(crate) type Members<F> = Vec<(usize, String, Box<dyn EngineNode<F>>)>;

/// Builds the engine of a partition: `members` (whole-network index, name,
/// node) in the order the engine is to hold them, the whole network's
/// link directions `dirs`, `name_of` naming any node's port, `outside`
/// reaching the rest, and the TUN interfaces of `tuns` (whole-network
/// index) for the members that have one.
pub(crate) fn build<F: Frame>(
    names: Vec<String>,
    seed: u64,
    members: Members<F>,
    dirs: &[WholeDir],
    name_of: &dyn Fn(usize, PortId) -> String,
    outside: &mut dyn Outside<F>,
    tuns: &[(usize, TunSpec)],
) -> Result<NodeProcess<F>, String> {
    let engine_err = |e: aurora_engine::EngineError| e.to_string();
    let mut engine = Engine::<F>::with_frames(seed);
    let mut local: BTreeMap<usize, NodeId> = BTreeMap::new();
    let mut list = Vec::new();
    for (id, name, node) in members {
        let here = engine.add_boxed(node);
        local.insert(id, here);
        list.push(Member {
            name,
            id: NodeId(id as u32),
            local: here,
        });
    }
    let member_name = |l: NodeId| list[l.0 as usize].name.as_str();
    let mut made_tuns = Vec::new();
    for (id, t) in tuns {
        if let Some(&here) = local.get(id) {
            engine
                .set_packet_device(here, Box::new(crate::open_tun(t)?))
                .map_err(engine_err)?;
            made_tuns.push((here, t.clone()));
        }
    }
    let mut links = Vec::new();
    let (mut ins, mut outs) = (Vec::new(), Vec::new());
    let mut ports: BTreeMap<(u32, PortId), NodePort> = BTreeMap::new();
    for (k, d) in dirs.iter().enumerate() {
        let (a, b) = (local.get(&d.from.0), local.get(&d.to.0));
        let (here, from_end) = match (a, b) {
            (Some(&a), Some(&b)) => {
                engine
                    .connect_oneway((a, d.from.1), (b, d.to.1), d.spec)
                    .map_err(engine_err)?;
                engine
                    .set_stream(a, d.from.1, k as u32)
                    .map_err(engine_err)?;
                links.push(InnerLink {
                    from: (a, d.from.1),
                    name: format!(
                        "{} -> {}",
                        name_of(d.from.0, d.from.1),
                        name_of(d.to.0, d.to.1)
                    ),
                });
                continue;
            }
            (Some(&a), None) => {
                outs.push((k, a));
                ((a, d.from.1), true)
            }
            (None, Some(&b)) => {
                ins.push((k, b));
                ((b, d.to.1), false)
            }
            (None, None) => continue,
        };
        let (mine, theirs) = if from_end {
            (d.from, d.to)
        } else {
            (d.to, d.from)
        };
        let (reads, writes) = outside.about(k, from_end, member_name(here.0))?;
        let p = ports
            .entry((here.0 .0, here.1))
            .or_insert_with(|| NodePort {
                node: here.0,
                port: here.1,
                here: name_of(mine.0, mine.1),
                peer: name_of(theirs.0, theirs.1),
                local: reads,
                remote: writes,
                sends: false,
                hears: false,
            });
        if from_end {
            p.sends = true;
        } else {
            p.hears = true;
        }
    }
    for (k, b) in ins {
        let src = outside.input(k)?;
        engine
            .add_external_source((b, dirs[k].to.1), src)
            .map_err(engine_err)?;
    }
    for (k, a) in outs {
        let sink = outside.output(k)?;
        let d = &dirs[k];
        engine
            .connect_external_frames((a, d.from.1), d.spec, sink)
            .map_err(engine_err)?;
        engine
            .set_stream(a, d.from.1, k as u32)
            .map_err(engine_err)?;
    }
    Ok(NodeProcess {
        names,
        engine,
        members: list,
        ports: ports.into_values().collect(),
        links,
        tuns: made_tuns,
        disciplines: Vec::new(),
        pins: Vec::new(),
    })
}

/// The directions of a network's cell links: link i is directions 2i (a
/// to b) and 2i + 1 (b to a), as in the whole network's engine.
pub(crate) fn cell_dirs(links: &[(crate::LinkEnd, crate::LinkEnd, LinkSpec)]) -> Vec<WholeDir> {
    links
        .iter()
        .flat_map(|(a, b, spec)| {
            [(a, b), (b, a)].map(|(x, y)| WholeDir {
                from: (x.1 .0 as usize, x.2),
                to: (y.1 .0 as usize, y.2),
                spec: *spec,
            })
        })
        .collect()
}

/// The members of a partition named by `asked` among `known` (name, index
/// in the whole network), in the order of their indices; a clear sentence
/// for a name that is unknown or given twice.
pub(crate) fn members_named(
    asked: &[String],
    known: &[(&str, usize)],
    what: &str,
) -> Result<Vec<usize>, String> {
    let mut ids = Vec::new();
    for (i, n) in asked.iter().enumerate() {
        if asked[..i].contains(n) {
            return Err(format!("\"{}\" is named twice", escape(n)));
        }
        let found: Vec<usize> = known
            .iter()
            .filter(|(k, _)| *k == n.as_str())
            .map(|&(_, id)| id)
            .collect();
        if found.is_empty() {
            return Err(format!(
                "the topology has no {what} called \"{}\"",
                escape(n)
            ));
        }
        ids.extend(found);
    }
    if ids.is_empty() {
        return Err("no node was named to run".into());
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

impl Blueprint {
    /// Sets up the nodes called `names` to run together as one process:
    /// the links among them are the engine's own, every other link a node
    /// of theirs has is a UDP link between the addresses the topology
    /// gives or a pair of shared-memory rings, its sending side shaped as
    /// in the other drivers. The other nodes are other processes, started
    /// with their own names.
    pub fn node_process(
        mut self,
        names: &[String],
        seed: u64,
    ) -> Result<(NodeProcess, BlueprintInfo), String> {
        self.seed_tcp_hosts(seed);
        let plans = self.take_port_plans()?;
        let Blueprint {
            nodes,
            hosts,
            switches,
            routers,
            ip_nodes,
            links,
            link_transport,
            tuns,
            pvcs,
            pins,
            atomic: _,
            ports: _,
            tcp: _,
            video: _,
            stripes,
        } = self;
        let mut node_names: Vec<String> = (0..nodes.len()).map(|i| format!("node {i}")).collect();
        let named = hosts
            .iter()
            .map(|(n, id)| (n, *id))
            .chain(switches.iter().map(|(n, id, _)| (n, *id)))
            .chain(routers.iter().map(|(n, id, _)| (n, *id)));
        for (n, id) in named {
            if let Some(slot) = node_names.get_mut(id.0 as usize) {
                slot.clone_from(n);
            }
        }
        let known: Vec<(&str, usize)> = hosts
            .iter()
            .map(|(n, id)| (n.as_str(), id.0 as usize))
            .chain(
                switches
                    .iter()
                    .map(|(n, id, _)| (n.as_str(), id.0 as usize)),
            )
            .chain(routers.iter().map(|(n, id, _)| (n.as_str(), id.0 as usize)))
            .collect();
        let ids = members_named(names, &known, "node")?;
        let mut slots: Vec<Option<Box<dyn crate::BuiltNode>>> =
            nodes.into_iter().map(Some).collect();
        let members = ids
            .iter()
            .filter_map(|&i| {
                let n = slots.get_mut(i)?.take()?;
                Some((i, node_names[i].clone(), n as Box<dyn EngineNode>))
            })
            .collect();
        let dirs = cell_dirs(&links);
        let name_of =
            |n: usize, p: PortId| format!("{}:{p}", node_names.get(n).map_or("?", String::as_str));
        let tuns: Vec<(usize, TunSpec)> =
            tuns.into_iter().map(|(id, t)| (id.0 as usize, t)).collect();
        let mut outside = CellOutside::new(&links, &link_transport);
        let mut process = build(
            names.to_vec(),
            seed,
            members,
            &dirs,
            &name_of,
            &mut outside,
            &tuns,
        )?;
        process.install_ports(plans)?;
        process.keep_pins(&pins);
        let info = BlueprintInfo {
            hosts,
            switches,
            routers,
            ip_nodes,
            links: links.into_iter().map(|(a, b, _)| (a, b)).collect(),
            pvcs,
            stripes,
        };
        Ok((process, info))
    }
}

/// The far ends of a cell network's links: cells over UDP (one socket
/// for both directions of a link) or shared-memory rings.
pub(crate) struct CellOutside<'a> {
    links: &'a [(crate::LinkEnd, crate::LinkEnd, LinkSpec)],
    transport: &'a [Option<crate::Transport>],
    /// A link's UDP sender, opened with its receiver.
    udp_tx: BTreeMap<usize, aurora_link::udp::UdpTx>,
}

impl<'a> CellOutside<'a> {
    /// The far ends of `links`, reached by `transport`.
    pub(crate) fn new(
        links: &'a [(crate::LinkEnd, crate::LinkEnd, LinkSpec)],
        transport: &'a [Option<crate::Transport>],
    ) -> Self {
        CellOutside {
            links,
            transport,
            udp_tx: BTreeMap::new(),
        }
    }

    /// Link `k / 2`'s transport, and whether this end is its end `a`.
    fn end(
        &self,
        k: usize,
        from_end: bool,
        member: &str,
    ) -> Result<(&crate::Transport, bool), String> {
        let i = k / 2;
        let (a, b, _) = &self.links[i];
        // Direction 2i leaves a; 2i + 1 leaves b.
        let is_a = k.is_multiple_of(2) == from_end;
        let t = self.transport[i].as_ref().ok_or_else(|| {
            format!(
                "the link from {}:{} to {}:{} has neither udp_a and udp_b nor shm, \
                 so \"{}\" cannot run as its own process",
                a.0,
                a.2,
                b.0,
                b.2,
                escape(member)
            )
        })?;
        Ok((t, is_a))
    }

    fn rings(path: &std::path::Path, is_a: bool) -> (std::path::PathBuf, std::path::PathBuf) {
        let ring = |dir: &str| {
            let mut p = path.to_path_buf().into_os_string();
            p.push(dir);
            std::path::PathBuf::from(p)
        };
        // (what this end reads, what it writes)
        if is_a {
            (ring("-ba"), ring("-ab"))
        } else {
            (ring("-ab"), ring("-ba"))
        }
    }

    fn open_udp(&mut self, k: usize, is_a: bool) -> Result<aurora_link::udp::UdpRx, String> {
        let Some(crate::Transport::Udp(x, y)) = self.transport[k / 2].clone() else {
            return Err("not a UDP link".into());
        };
        let (local, remote) = if is_a { (x, y) } else { (y, x) };
        let (tx, rx) =
            aurora_link::udp::open(local, remote, aurora_link::udp::DEFAULT_CELLS_PER_DATAGRAM)
                .map_err(|e| e.to_string())?;
        self.udp_tx.insert(k / 2, tx);
        Ok(rx)
    }
}

impl Outside<CellBytes> for CellOutside<'_> {
    fn about(&self, k: usize, from_end: bool, member: &str) -> Result<(String, String), String> {
        let (t, is_a) = self.end(k, from_end, member)?;
        Ok(match t {
            crate::Transport::Udp(x, y) => {
                let (local, remote) = if is_a { (x, y) } else { (y, x) };
                (local.to_string(), remote.to_string())
            }
            crate::Transport::Shm(path) => {
                let (inp, outp) = Self::rings(path, is_a);
                (inp.display().to_string(), outp.display().to_string())
            }
        })
    }

    fn input(&mut self, k: usize) -> Result<Box<dyn ExternalSource<CellBytes>>, String> {
        let (t, is_a) = self.end(k, false, "")?;
        let rx: Box<dyn aurora_link::CellSource> = match t {
            crate::Transport::Udp(..) => Box::new(self.open_udp(k, is_a)?),
            crate::Transport::Shm(path) => {
                let (inp, _) = Self::rings(path, is_a);
                let cap = (self.links[k / 2].2.buffer * 2).clamp(64, 1 << 20);
                Box::new(aurora_link::shm::create_consumer(&inp, cap).map_err(|e| e.to_string())?)
            }
        };
        Ok(Box::new(aurora_engine::io::Cells::new(rx)))
    }

    fn output(&mut self, k: usize) -> Result<Box<dyn ExternalSink<CellBytes>>, String> {
        let (t, is_a) = self.end(k, true, "")?;
        let tx: Box<dyn CellSink> = match t {
            crate::Transport::Udp(..) => {
                if !self.udp_tx.contains_key(&(k / 2)) {
                    self.open_udp(k, is_a)?;
                }
                match self.udp_tx.remove(&(k / 2)) {
                    Some(tx) => Box::new(tx),
                    None => return Err("the link's UDP socket is gone".into()),
                }
            }
            crate::Transport::Shm(path) => {
                let (_, outp) = Self::rings(path, is_a);
                Box::new(
                    aurora_link::shm::attach_producer(&outp, SHM_WAIT).map_err(|e| {
                        format!(
                            "{e} (waited {} s for the process at the far end to create it)",
                            SHM_WAIT.as_secs()
                        )
                    })?,
                )
            }
        };
        Ok(Box::new(tx))
    }
}

/// A frame link's sending half as an engine's external output.
pub(crate) struct FrameSink(pub(crate) FrameTx);

impl ExternalSink<Vec<u8>> for FrameSink {
    fn send(&mut self, frames: &[Vec<u8>]) -> Result<usize, LinkError> {
        Ok(self.0.send(frames))
    }
    fn counters(&self) -> LinkCounters {
        self.0.counters()
    }
}

/// A frame link's receiving half as an engine's external input.
pub(crate) struct FrameSource(pub(crate) FrameRx);

impl ExternalSource<Vec<u8>> for FrameSource {
    fn recv(&mut self, out: &mut Vec<Vec<u8>>, max: usize) -> Result<usize, LinkError> {
        self.0.recv(out, max)
    }
    fn counters(&self) -> LinkCounters {
        self.0.counters()
    }
    fn waited(&self) -> Option<std::time::Duration> {
        self.0.waited()
    }
}
