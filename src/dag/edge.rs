//! The graph's vocabulary: node ids (the objects `0..n`, then virtual nodes), where an edge comes from, and the
//! virtual nodes that stand for a set of edges (a rule, a priority tier), which keep kind-level edges O(n)
//! instead of O(n²). Shared by [`super::graph`] and the passes that build its edges.

use std::fmt;

use serde::Serialize;

use super::node::Object;

pub type NodeId = u32;

/// Where an edge comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
#[repr(u8)]
pub enum EdgeKind {
    OwnerReference,
    Reference,
    Namespace,
    Crd,
    Rule,
    Priority,
}

impl EdgeKind {
    /// The inverse of `kind as u8` (anything else reads as the weakest kind, and never occurs).
    pub(super) fn from_u8(k: u8) -> Self {
        match k {
            0 => EdgeKind::OwnerReference,
            1 => EdgeKind::Reference,
            2 => EdgeKind::Namespace,
            3 => EdgeKind::Crd,
            4 => EdgeKind::Rule,
            _ => EdgeKind::Priority,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::OwnerReference => "ownerReference",
            EdgeKind::Reference => "reference",
            EdgeKind::Namespace => "namespace",
            EdgeKind::Crd => "crd",
            EdgeKind::Rule => "rule",
            EdgeKind::Priority => "priority",
        }
    }
}

/// A node that is not an object: it stands for a set of edges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Virtual {
    /// Rule `index` (0-based): its waiting objects depend on this node, which depends on the awaited objects.
    Rule { index: usize, text: String },
    /// Depends on every object of `resource`.
    PriorityDone { resource: String },
    /// Every object of `resource` depends on this node, which depends on the `PriorityDone` of earlier resources.
    PriorityGate { resource: String },
}

impl fmt::Display for Virtual {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Virtual::Rule { index, text } => write!(f, "(rule {}: {text})", index + 1),
            Virtual::PriorityDone { resource } => write!(f, "(all {resource})"),
            Virtual::PriorityGate { resource } => write!(f, "(priority gate of {resource})"),
        }
    }
}

/// An edge "`.0` depends on `.1`" (`.1` is restored first), and where it comes from.
pub(super) type Edge = (NodeId, NodeId, EdgeKind);

/// `Kind[.group] [ns/]name` of an object, the description of a virtual node, while the graph is being built.
pub(super) fn node_name(objects: &[Object], virtuals: &[Virtual], v: NodeId) -> String {
    match objects.get(v as usize) {
        Some(o) => o.id().to_string(),
        None => virtuals.get(v as usize - objects.len()).map(|x| x.to_string()).unwrap_or_default(),
    }
}
