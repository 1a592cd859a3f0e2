//! The link-sharing tree: how a port's bandwidth is divided among customers.
//!
//! A customer's bandwidth is a *service*. A customer may resell part of what
//! it buys, so a service can be split into sub-services: a service that is
//! split is a *service class* (an internal node), one that is not is a *real
//! service* (a leaf, whose cells wait in one queue of the port, named by its
//! [`QueueId`]). The root is the link itself.
//!
//! Each node owns a share of its parent: a fraction of the parent's rate, or
//! an absolute rate in bits/s when the parent's rate is known in bits/s. A
//! [`ClassTree`] is validated when it is built: the shares of a node's
//! children add up to no more than the node's own, every leaf names a queue,
//! no class does, and no queue is named twice. Every error names the node.
//!
//! [`ClassTree::hgps_rates`] gives the ideal service the schedulers in
//! [`crate::hier`] and [`crate::flat_approx`] approximate: hierarchical
//! generalised processor sharing (H-GPS), in which every backlogged node gets
//! its parent's rate times its share over the shares of its backlogged
//! siblings.

use std::collections::HashMap;
use std::fmt;

use crate::QueueId;

/// The largest queue id a tree may name. Schedulers index tables by queue
/// id, so ids are meant to be small and dense (numbered from 0).
pub const MAX_QUEUE_ID: QueueId = (1 << 24) - 1;

/// Shares of siblings may exceed their parent's by this much (relative) for
/// rounding in decimal descriptions (three children of a third each).
const SHARE_SLACK: f64 = 1e-9;

/// What a node owns of its parent's service.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Share {
    /// A fraction of the parent's rate, in (0, 1]. The root's share must be
    /// `Fraction(1.0)`: the whole link.
    Fraction(f64),
    /// An absolute rate in bits/s. The parent's rate must be known in bits/s
    /// (an absolute root, or fractions of one); at the root it is the link's
    /// rate.
    BitsPerSec(u64),
}

/// One node of a tree's description, as a topology file would give it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassSpec {
    /// The node's name, unique in the tree.
    pub name: String,
    /// The parent's name; `None` for the root (the link).
    pub parent: Option<String>,
    /// What the node owns of its parent.
    pub share: Share,
    /// The queue of a real service (a leaf); `None` for a service class.
    pub queue: Option<QueueId>,
}

impl ClassSpec {
    /// A node named `name` under `parent` owning `share`, with `queue` if it
    /// is a real service.
    pub fn new(name: &str, parent: Option<&str>, share: Share, queue: Option<QueueId>) -> Self {
        ClassSpec {
            name: name.to_string(),
            parent: parent.map(str::to_string),
            share,
            queue,
        }
    }
}

impl From<(&str, Option<&str>, Share, Option<QueueId>)> for ClassSpec {
    fn from((name, parent, share, queue): (&str, Option<&str>, Share, Option<QueueId>)) -> Self {
        ClassSpec::new(name, parent, share, queue)
    }
}

impl From<(String, Option<String>, Share, Option<QueueId>)> for ClassSpec {
    fn from(
        (name, parent, share, queue): (String, Option<String>, Share, Option<QueueId>),
    ) -> Self {
        ClassSpec {
            name,
            parent,
            share,
            queue,
        }
    }
}

/// Why a description is not a valid tree. Every variant names the node.
#[derive(Clone, Debug, PartialEq)]
pub enum TreeError {
    /// The description has no nodes.
    Empty,
    /// No node lacks a parent.
    NoRoot,
    /// A second node without a parent (`first` was the first one).
    TwoRoots {
        /// The first root.
        first: String,
        /// The second root.
        second: String,
    },
    /// Two nodes share a name.
    DuplicateName {
        /// The name.
        node: String,
    },
    /// A node's parent is not in the description.
    UnknownParent {
        /// The node.
        node: String,
        /// The parent it names.
        parent: String,
    },
    /// A node is not below the root: its ancestors form a cycle.
    NotUnderRoot {
        /// The node.
        node: String,
    },
    /// A share that is zero, negative, not a number, or more than the
    /// parent's rate.
    BadShare {
        /// The node.
        node: String,
    },
    /// The root's share is neither `Fraction(1.0)` nor a rate in bits/s.
    BadRootShare {
        /// The root.
        node: String,
    },
    /// A share in bits/s under a parent whose rate is only a fraction.
    RateUnderFraction {
        /// The node.
        node: String,
    },
    /// The children of a node own more than the node.
    Oversubscribed {
        /// The parent.
        node: String,
        /// What its children own, as a fraction of it.
        children: f64,
    },
    /// A leaf without a queue.
    LeafWithoutQueue {
        /// The leaf.
        node: String,
    },
    /// A service class (a node with children) that names a queue.
    ClassWithQueue {
        /// The class.
        node: String,
    },
    /// Two leaves name the same queue.
    DuplicateQueue {
        /// The queue.
        queue: QueueId,
        /// The first leaf naming it.
        first: String,
        /// The second.
        second: String,
    },
    /// A queue id above [`MAX_QUEUE_ID`].
    QueueTooLarge {
        /// The leaf.
        node: String,
        /// Its queue.
        queue: QueueId,
    },
}

impl fmt::Display for TreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TreeError::Empty => write!(f, "the class tree has no nodes"),
            TreeError::NoRoot => write!(f, "the class tree has no root (every node has a parent)"),
            TreeError::TwoRoots { first, second } => {
                write!(f, "nodes {first:?} and {second:?} both lack a parent")
            }
            TreeError::DuplicateName { node } => write!(f, "node {node:?} is described twice"),
            TreeError::UnknownParent { node, parent } => {
                write!(f, "node {node:?} names an unknown parent {parent:?}")
            }
            TreeError::NotUnderRoot { node } => {
                write!(
                    f,
                    "node {node:?} is not under the root (its parents form a cycle)"
                )
            }
            TreeError::BadShare { node } => write!(
                f,
                "node {node:?} has a share that is not positive or is more than its parent's rate"
            ),
            TreeError::BadRootShare { node } => write!(
                f,
                "root {node:?} must own the whole link: Fraction(1.0) or a rate in bits/s"
            ),
            TreeError::RateUnderFraction { node } => write!(
                f,
                "node {node:?} has a share in bits/s but its parent's rate is not known in bits/s"
            ),
            TreeError::Oversubscribed { node, children } => write!(
                f,
                "the children of node {node:?} own {children} of it, more than all of it"
            ),
            TreeError::LeafWithoutQueue { node } => {
                write!(f, "leaf {node:?} (a real service) names no queue")
            }
            TreeError::ClassWithQueue { node } => {
                write!(
                    f,
                    "node {node:?} has children (a service class) but names a queue"
                )
            }
            TreeError::DuplicateQueue {
                queue,
                first,
                second,
            } => write!(f, "leaves {first:?} and {second:?} both name queue {queue}"),
            TreeError::QueueTooLarge { node, queue } => write!(
                f,
                "leaf {node:?} names queue {queue}, above the largest id {MAX_QUEUE_ID}"
            ),
        }
    }
}

impl std::error::Error for TreeError {}

/// A node's index in its tree: its place in pre-order (the root is 0, every
/// node comes before its descendants, a subtree is a contiguous range).
pub type NodeIdx = usize;

#[derive(Clone, Debug)]
struct Node {
    name: String,
    parent: Option<NodeIdx>,
    /// Fraction of the parent's rate.
    share: f64,
    /// Rate in bits/s, when the root's is known.
    bps: Option<f64>,
    queue: Option<QueueId>,
    children: Vec<NodeIdx>,
    /// One past the last node of the subtree.
    end: NodeIdx,
    depth: usize,
}

/// A validated link-sharing tree, its nodes in pre-order.
#[derive(Clone, Debug)]
pub struct ClassTree {
    nodes: Vec<Node>,
    leaves: Vec<NodeIdx>,
    by_queue: HashMap<QueueId, NodeIdx>,
}

impl ClassTree {
    /// Builds and validates a tree from its description, in any order
    /// (children keep the order they are described in).
    pub fn new<S: Into<ClassSpec>>(
        spec: impl IntoIterator<Item = S>,
    ) -> Result<ClassTree, TreeError> {
        let spec: Vec<ClassSpec> = spec.into_iter().map(Into::into).collect();
        if spec.is_empty() {
            return Err(TreeError::Empty);
        }
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        for (i, s) in spec.iter().enumerate() {
            if by_name.insert(s.name.as_str(), i).is_some() {
                return Err(TreeError::DuplicateName {
                    node: s.name.clone(),
                });
            }
        }
        // Children in description order, and the root.
        let mut kids: Vec<Vec<usize>> = vec![Vec::new(); spec.len()];
        let mut root: Option<usize> = None;
        for (i, s) in spec.iter().enumerate() {
            match &s.parent {
                None => {
                    if let Some(r) = root {
                        return Err(TreeError::TwoRoots {
                            first: spec[r].name.clone(),
                            second: s.name.clone(),
                        });
                    }
                    root = Some(i);
                }
                Some(p) => match by_name.get(p.as_str()) {
                    Some(&pi) => kids[pi].push(i),
                    None => {
                        return Err(TreeError::UnknownParent {
                            node: s.name.clone(),
                            parent: p.clone(),
                        })
                    }
                },
            }
        }
        let root = root.ok_or(TreeError::NoRoot)?;

        // Pre-order numbering from the root.
        let mut order: Vec<usize> = Vec::with_capacity(spec.len());
        let mut stack = vec![root];
        while let Some(i) = stack.pop() {
            order.push(i);
            stack.extend(kids[i].iter().rev());
        }
        if order.len() < spec.len() {
            let mut seen = vec![false; spec.len()];
            for &i in &order {
                seen[i] = true;
            }
            let lost = seen.iter().position(|s| !s).unwrap_or(0);
            return Err(TreeError::NotUnderRoot {
                node: spec[lost].name.clone(),
            });
        }
        let mut index = vec![0; spec.len()];
        for (pre, &i) in order.iter().enumerate() {
            index[i] = pre;
        }

        let mut nodes: Vec<Node> = Vec::with_capacity(spec.len());
        for &i in &order {
            let s = &spec[i];
            let parent = s.parent.as_ref().map(|p| index[by_name[p.as_str()]]);
            let depth = parent.map_or(0, |p| nodes[p].depth + 1);
            let bad = || TreeError::BadShare {
                node: s.name.clone(),
            };
            let (share, bps) = match (parent, s.share) {
                (None, Share::Fraction(1.0)) => (1.0, None),
                (None, Share::BitsPerSec(b)) if b > 0 => (1.0, Some(b as f64)),
                (None, _) => {
                    return Err(TreeError::BadRootShare {
                        node: s.name.clone(),
                    })
                }
                (Some(p), Share::Fraction(f)) => {
                    if !(f > 0.0 && f <= 1.0) {
                        return Err(bad());
                    }
                    (f, nodes[p].bps.map(|b| b * f))
                }
                (Some(p), Share::BitsPerSec(b)) => {
                    if b == 0 {
                        return Err(bad());
                    }
                    let Some(pb) = nodes[p].bps else {
                        return Err(TreeError::RateUnderFraction {
                            node: s.name.clone(),
                        });
                    };
                    let share = b as f64 / pb;
                    if share > 1.0 + SHARE_SLACK {
                        return Err(bad());
                    }
                    (share, Some(b as f64))
                }
            };
            nodes.push(Node {
                name: s.name.clone(),
                parent,
                share,
                bps,
                queue: s.queue,
                children: kids[i].iter().map(|&k| index[k]).collect(),
                end: 0,
                depth,
            });
        }
        for i in (0..nodes.len()).rev() {
            nodes[i].end = nodes[i].children.last().map_or(i + 1, |&c| nodes[c].end);
        }

        let mut leaves = Vec::new();
        let mut by_queue: HashMap<QueueId, NodeIdx> = HashMap::new();
        for (i, n) in nodes.iter().enumerate() {
            if !n.children.is_empty() {
                let sum: f64 = n.children.iter().map(|&c| nodes[c].share).sum();
                if sum > 1.0 + SHARE_SLACK {
                    return Err(TreeError::Oversubscribed {
                        node: n.name.clone(),
                        children: sum,
                    });
                }
                if n.queue.is_some() {
                    return Err(TreeError::ClassWithQueue {
                        node: n.name.clone(),
                    });
                }
                continue;
            }
            let Some(q) = n.queue else {
                return Err(TreeError::LeafWithoutQueue {
                    node: n.name.clone(),
                });
            };
            if q > MAX_QUEUE_ID {
                return Err(TreeError::QueueTooLarge {
                    node: n.name.clone(),
                    queue: q,
                });
            }
            if let Some(&first) = by_queue.get(&q) {
                return Err(TreeError::DuplicateQueue {
                    queue: q,
                    first: nodes[first].name.clone(),
                    second: n.name.clone(),
                });
            }
            by_queue.insert(q, i);
            leaves.push(i);
        }
        Ok(ClassTree {
            nodes,
            leaves,
            by_queue,
        })
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// A tree always has its root, so this is always false.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// A node's name.
    pub fn name(&self, n: NodeIdx) -> &str {
        &self.nodes[n].name
    }

    /// The node called `name`.
    pub fn find(&self, name: &str) -> Option<NodeIdx> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// A node's parent (`None` for the root, node 0).
    pub fn parent(&self, n: NodeIdx) -> Option<NodeIdx> {
        self.nodes[n].parent
    }

    /// A node's children, in description order.
    pub fn children(&self, n: NodeIdx) -> &[NodeIdx] {
        &self.nodes[n].children
    }

    /// One past the last node of `n`'s subtree: the subtree is `n..end`.
    pub fn subtree_end(&self, n: NodeIdx) -> NodeIdx {
        self.nodes[n].end
    }

    /// A node's share of its parent's rate, as a fraction (1 for the root).
    pub fn share(&self, n: NodeIdx) -> f64 {
        self.nodes[n].share
    }

    /// A node's guaranteed rate in bits/s, when the root's rate is known.
    pub fn rate_bps(&self, n: NodeIdx) -> Option<f64> {
        self.nodes[n].bps
    }

    /// A leaf's queue (`None` for a service class).
    pub fn queue(&self, n: NodeIdx) -> Option<QueueId> {
        self.nodes[n].queue
    }

    /// A node's depth: 0 for the root.
    pub fn depth_of(&self, n: NodeIdx) -> usize {
        self.nodes[n].depth
    }

    /// The depth of the deepest leaf: the number of schedulers a cell
    /// passes through in a hierarchical scheduler.
    pub fn depth(&self) -> usize {
        self.leaves
            .iter()
            .map(|&l| self.nodes[l].depth)
            .max()
            .unwrap_or(0)
    }

    /// The leaves (real services) in pre-order.
    pub fn leaves(&self) -> &[NodeIdx] {
        &self.leaves
    }

    /// The leaf whose queue is `q`.
    pub fn leaf_of(&self, q: QueueId) -> Option<NodeIdx> {
        self.by_queue.get(&q).copied()
    }

    /// One more than the largest queue id: the size of a table indexed by
    /// queue.
    pub fn queue_slots(&self) -> usize {
        self.leaves
            .iter()
            .filter_map(|&l| self.nodes[l].queue)
            .max()
            .map_or(0, |q| q as usize + 1)
    }

    /// A leaf's guaranteed fraction of the link: the product of the shares
    /// on its path (what it gets when every leaf is backlogged and every
    /// class owns all of its parent).
    pub fn guaranteed(&self, n: NodeIdx) -> f64 {
        let mut g = 1.0;
        let mut i = Some(n);
        while let Some(x) = i {
            g *= self.nodes[x].share;
            i = self.nodes[x].parent;
        }
        g
    }

    /// The ideal hierarchical fluid (H-GPS) rate of every leaf, in leaf
    /// pre-order, as `(queue, rate)`, when the leaves for which `backlogged`
    /// is true have data waiting and the link serves `link_rate` (in any
    /// unit: 1.0 gives fractions of the link).
    ///
    /// A node is active if any leaf below it is backlogged. The root gets
    /// `link_rate`; an active node gets its parent's rate times its share
    /// divided by the sum of the shares of its parent's active children, an
    /// inactive node nothing. So each active node receives at least its
    /// share of its parent (Ndiaye's first goal), and what an idle node owns
    /// goes to its active siblings in proportion to their shares (the
    /// second), as does any part of the parent its children do not own.
    /// The rates of backlogged leaves add up to `link_rate` when any leaf is
    /// backlogged.
    pub fn hgps_rates(
        &self,
        backlogged: impl Fn(QueueId) -> bool,
        link_rate: f64,
    ) -> Vec<(QueueId, f64)> {
        let n = self.nodes.len();
        // Activity bottom-up (reverse pre-order visits children first), and
        // the sum of the active children's shares of each node.
        let mut active = vec![false; n];
        let mut active_sum = vec![0.0; n];
        for i in (0..n).rev() {
            let node = &self.nodes[i];
            active[i] = match node.queue {
                Some(q) if node.children.is_empty() => backlogged(q),
                _ => active_sum[i] > 0.0,
            };
            if active[i] {
                if let Some(p) = node.parent {
                    active_sum[p] += node.share;
                }
            }
        }
        // Rates top-down.
        let mut rate = vec![0.0; n];
        for i in 0..n {
            let node = &self.nodes[i];
            rate[i] = match node.parent {
                None if active[i] => link_rate,
                Some(p) if active[i] => rate[p] * node.share / active_sum[p],
                _ => 0.0,
            };
        }
        self.leaves
            .iter()
            .map(|&l| (self.nodes[l].queue.unwrap_or_default(), rate[l]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: f64) -> Share {
        Share::Fraction(x)
    }

    fn two_level() -> Vec<ClassSpec> {
        vec![
            ClassSpec::new("link", None, f(1.0), None),
            ClassSpec::new("A", Some("link"), f(0.6), None),
            ClassSpec::new("B", Some("link"), f(0.4), None),
            ClassSpec::new("a1", Some("A"), f(0.5), Some(0)),
            ClassSpec::new("a2", Some("A"), f(0.5), Some(1)),
            ClassSpec::new("b1", Some("B"), f(0.75), Some(2)),
            ClassSpec::new("b2", Some("B"), f(0.25), Some(3)),
        ]
    }

    #[test]
    fn pre_order_and_structure() {
        let t = ClassTree::new(two_level()).unwrap();
        let names: Vec<&str> = (0..t.len()).map(|i| t.name(i)).collect();
        assert_eq!(names, ["link", "A", "a1", "a2", "B", "b1", "b2"]);
        assert_eq!(t.subtree_end(0), 7);
        assert_eq!(t.subtree_end(1), 4);
        assert_eq!(t.subtree_end(2), 3);
        assert_eq!(t.leaves(), &[2, 3, 5, 6]);
        assert_eq!(t.depth(), 2);
        assert_eq!(t.leaf_of(2), Some(5));
        assert_eq!(t.queue_slots(), 4);
        assert!((t.guaranteed(6) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn description_order_does_not_matter() {
        let mut d = two_level();
        d.reverse();
        let t = ClassTree::new(d).unwrap();
        // Children keep description order, now reversed.
        let names: Vec<&str> = (0..t.len()).map(|i| t.name(i)).collect();
        assert_eq!(names, ["link", "B", "b2", "b1", "A", "a2", "a1"]);
    }

    #[test]
    fn tuples_build_a_tree() {
        let t = ClassTree::new(vec![
            ("link", None, f(1.0), None),
            ("x", Some("link"), f(0.5), Some(7)),
        ])
        .unwrap();
        assert_eq!(t.leaf_of(7), Some(1));
    }

    #[test]
    fn rates_in_bits_per_second() {
        let t = ClassTree::new(vec![
            ("link", None, Share::BitsPerSec(155_000_000), None),
            ("A", Some("link"), Share::BitsPerSec(100_000_000), None),
            ("a1", Some("A"), f(0.5), Some(0)),
            ("a2", Some("A"), Share::BitsPerSec(50_000_000), Some(1)),
        ])
        .unwrap();
        assert!((t.share(1) - 100.0 / 155.0).abs() < 1e-12);
        assert!((t.share(3) - 0.5).abs() < 1e-12);
        assert_eq!(t.rate_bps(2), Some(50e6));
    }

    #[test]
    fn hgps_known_answers() {
        let t = ClassTree::new(two_level()).unwrap();
        let r = |set: &[QueueId]| -> Vec<f64> {
            t.hgps_rates(|q| set.contains(&q), 1.0)
                .into_iter()
                .map(|(_, r)| r)
                .collect()
        };
        let close = |a: Vec<f64>, b: [f64; 4]| {
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() < 1e-12, "{a:?} against {b:?}");
            }
        };
        close(r(&[0, 1, 2, 3]), [0.3, 0.3, 0.3, 0.1]);
        close(r(&[0, 2, 3]), [0.6, 0.0, 0.3, 0.1]);
        close(r(&[2, 3]), [0.0, 0.0, 0.75, 0.25]);
        close(r(&[0, 3]), [0.6, 0.0, 0.0, 0.4]);
        close(r(&[]), [0.0; 4]);
    }

    #[test]
    fn unowned_share_goes_to_active_children() {
        let t = ClassTree::new(vec![
            ("link", None, f(1.0), None),
            ("A", Some("link"), f(0.3), Some(0)),
            ("B", Some("link"), f(0.3), Some(1)),
            ("C", Some("link"), f(0.2), Some(2)),
        ])
        .unwrap();
        let r = t.hgps_rates(|q| q != 2, 10.0);
        assert_eq!(r, vec![(0, 5.0), (1, 5.0), (2, 0.0)]);
    }

    fn err(d: Vec<(&str, Option<&str>, Share, Option<QueueId>)>) -> String {
        ClassTree::new(d).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_node() {
        let none: Vec<ClassSpec> = Vec::new();
        assert_eq!(ClassTree::new(none).unwrap_err(), TreeError::Empty);
        let e = err(vec![
            ("link", None, f(1.0), None),
            ("A", Some("link"), f(0.7), Some(0)),
            ("B", Some("link"), f(0.4), Some(1)),
        ]);
        assert!(e.contains("\"link\"") && e.contains("more than"), "{e}");
        let e = err(vec![
            ("link", None, f(1.0), None),
            ("A", Some("link"), f(0.5), None),
        ]);
        assert!(e.contains("\"A\"") && e.contains("no queue"), "{e}");
        let e = err(vec![
            ("link", None, f(1.0), None),
            ("A", Some("link"), f(0.5), Some(3)),
            ("B", Some("link"), f(0.5), Some(3)),
        ]);
        assert!(
            e.contains("\"A\"") && e.contains("\"B\"") && e.contains('3'),
            "{e}"
        );
        let e = err(vec![
            ("link", None, f(1.0), Some(0)),
            ("A", Some("link"), f(0.5), Some(1)),
        ]);
        assert!(e.contains("\"link\"") && e.contains("names a queue"), "{e}");
        let e = err(vec![
            ("link", None, f(1.0), None),
            ("A", Some("nowhere"), f(0.5), Some(1)),
        ]);
        assert!(e.contains("\"A\"") && e.contains("\"nowhere\""), "{e}");
        let e = err(vec![
            ("link", None, f(1.0), None),
            ("A", Some("B"), f(0.5), None),
            ("B", Some("A"), f(0.5), Some(0)),
        ]);
        assert!(e.contains("not under the root"), "{e}");
        let e = err(vec![
            ("link", None, f(1.0), None),
            ("A", Some("link"), f(0.0), Some(0)),
        ]);
        assert!(e.contains("\"A\"") && e.contains("share"), "{e}");
        let e = err(vec![
            ("link", None, f(1.0), None),
            ("A", Some("link"), f(f64::NAN), Some(0)),
        ]);
        assert!(e.contains("\"A\""), "{e}");
        let e = err(vec![("link", None, f(0.5), Some(0))]);
        assert!(e.contains("root \"link\""), "{e}");
        let e = err(vec![
            ("link", None, f(1.0), None),
            ("A", Some("link"), Share::BitsPerSec(1000), Some(0)),
        ]);
        assert!(e.contains("\"A\"") && e.contains("bits/s"), "{e}");
        let e = err(vec![("a", None, f(1.0), None), ("b", None, f(1.0), None)]);
        assert!(e.contains("\"a\"") && e.contains("\"b\""), "{e}");
        let e = err(vec![
            ("a", None, f(1.0), None),
            ("x", Some("a"), f(0.1), Some(1)),
            ("x", Some("a"), f(0.1), Some(2)),
        ]);
        assert!(e.contains("\"x\"") && e.contains("twice"), "{e}");
        let e = err(vec![
            ("a", None, f(1.0), None),
            ("x", Some("a"), f(0.1), Some(MAX_QUEUE_ID + 1)),
        ]);
        assert!(e.contains("\"x\""), "{e}");
        let e = err(vec![
            ("a", None, Share::BitsPerSec(1000), None),
            ("x", Some("a"), Share::BitsPerSec(2000), Some(1)),
        ]);
        assert!(e.contains("\"x\"") && e.contains("share"), "{e}");
    }

    #[test]
    fn thirds_are_not_oversubscribed() {
        ClassTree::new(vec![
            ("link", None, f(1.0), None),
            ("A", Some("link"), f(1.0 / 3.0), Some(0)),
            ("B", Some("link"), f(1.0 / 3.0), Some(1)),
            ("C", Some("link"), f(1.0 / 3.0), Some(2)),
        ])
        .unwrap();
    }
}
