//! Ordering a graph: Kahn layers, and the hold-and-retry traversal of docs/design.md §4.
//!
//! Layers: layer 0 holds the objects that depend on nothing but the root (CRDs, Namespaces, StorageClasses,
//! VolumeSnapshotClasses, …); an object's layer is one more than its deepest dependency. Virtual nodes (rules,
//! priority gates) cost no layer: they stand for edges, not for something to restore.
//!
//! Traversal (docs/design.md §4): start at the root's children; process a layer; an item whose parents are not all done
//! is put on hold; held items are retried before the next layer; items that never become ready (cycles and what
//! depends on them) are reported. Each node is visited once and done at most once, so it terminates in
//! O(nodes + edges).

use std::collections::VecDeque;

use serde::Serialize;

use super::edge::NodeId;
use super::graph::Graph;

/// Objects by layer, plus those that never became ready.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Layers {
    pub layers: Vec<Vec<NodeId>>,
    pub never_ready: Vec<NodeId>,
}

impl Layers {
    /// Objects in restore order: layer by layer.
    pub fn order(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.layers.iter().flatten().copied()
    }

    /// The layer of every object (`u32::MAX` for never ready), indexed by node.
    pub fn layer_of(&self, objects: usize) -> Vec<u32> {
        let mut out = vec![u32::MAX; objects];
        for (i, layer) in self.layers.iter().enumerate() {
            for &v in layer {
                out[v as usize] = i as u32;
            }
        }
        out
    }
}

/// Kahn layers of `graph`'s objects (longest path from the root, virtual nodes weighing nothing).
pub fn layers(graph: &Graph) -> Layers {
    let total = graph.node_count();
    let mut waiting: Vec<u32> = (0..total as NodeId).map(|v| graph.dependency_count(v) as u32).collect();
    // The layer a node would be in; for a virtual node, the layer its dependents must at least be in.
    let mut level = vec![0u32; total];
    let mut queue: VecDeque<NodeId> = (0..total as NodeId).filter(|v| waiting[*v as usize] == 0).collect();
    let mut layers: Vec<Vec<NodeId>> = Vec::new();
    let mut placed = vec![false; total];
    while let Some(v) = queue.pop_front() {
        let l = level[v as usize];
        let after = if graph.is_object(v) {
            if layers.len() <= l as usize {
                layers.resize_with(l as usize + 1, Vec::new);
            }
            layers[l as usize].push(v);
            placed[v as usize] = true;
            l + 1
        } else {
            placed[v as usize] = true;
            l
        };
        for &c in graph.dependents(v) {
            let c = c as usize;
            level[c] = level[c].max(after);
            waiting[c] -= 1;
            if waiting[c] == 0 {
                queue.push_back(c as NodeId);
            }
        }
    }
    for layer in &mut layers {
        layer.sort_unstable();
    }
    let never_ready = (0..graph.object_count() as NodeId).filter(|v| !placed[*v as usize]).collect();
    Layers { layers, never_ready }
}

/// One processed item of the traversal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    pub node: NodeId,
    /// The traversal layer (breadth from the root) in which it was done.
    pub layer: u32,
    /// It was held at least once before it was done.
    pub retried: bool,
}

/// The result of the hold-and-retry traversal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Traversal {
    /// Objects in the order they were done (virtual nodes left out).
    pub steps: Vec<Step>,
    /// How many times an item was put on hold.
    pub holds: usize,
    /// Objects that never became ready: on a cycle, or depending on one.
    pub never_ready: Vec<NodeId>,
}

/// The hold-and-retry traversal (docs/design.md §4): breadth-first from the root; an item reached before all its parents are done waits on
/// hold and is retried, before the next layer, as soon as its last parent is done.
pub fn traverse(graph: &Graph) -> Traversal {
    let total = graph.node_count();
    let mut walk = Walk {
        graph,
        waiting: (0..total as NodeId).map(|v| graph.dependency_count(v) as u32).collect(),
        visited: vec![false; total],
        held: vec![false; total],
        done: vec![false; total],
        next: Vec::new(),
        retry: Vec::new(),
        out: Traversal::default(),
    };
    let mut frontier: Vec<NodeId> = (0..total as NodeId).filter(|v| walk.waiting[*v as usize] == 0).collect();
    for &v in &frontier {
        walk.visited[v as usize] = true;
    }
    let mut layer = 0u32;
    while !frontier.is_empty() {
        for &v in &frontier {
            if walk.waiting[v as usize] == 0 {
                walk.finish(v, false, layer);
            } else {
                walk.held[v as usize] = true;
                walk.out.holds += 1;
            }
        }
        // Retry held items before the next layer, until none becomes ready.
        while let Some(h) = walk.retry.pop() {
            if !walk.done[h as usize] && walk.waiting[h as usize] == 0 {
                walk.held[h as usize] = false;
                walk.finish(h, true, layer);
            }
        }
        frontier = std::mem::take(&mut walk.next);
        layer += 1;
    }
    let done = &walk.done;
    walk.out.never_ready = (0..graph.object_count() as NodeId).filter(|v| !done[*v as usize]).collect();
    walk.out
}

/// The traversal's state.
struct Walk<'g> {
    graph: &'g Graph,
    /// Parents not done yet.
    waiting: Vec<u32>,
    visited: Vec<bool>,
    held: Vec<bool>,
    done: Vec<bool>,
    /// The next layer: children first reached in this one.
    next: Vec<NodeId>,
    /// Held items whose last parent is now done.
    retry: Vec<NodeId>,
    out: Traversal,
}

impl Walk<'_> {
    fn finish(&mut self, v: NodeId, retried: bool, layer: u32) {
        self.done[v as usize] = true;
        if self.graph.is_object(v) {
            self.out.steps.push(Step { node: v, layer, retried });
        }
        for &c in self.graph.dependents(v) {
            let ci = c as usize;
            self.waiting[ci] -= 1;
            if !self.visited[ci] {
                self.visited[ci] = true;
                self.next.push(c);
            } else if self.held[ci] && self.waiting[ci] == 0 {
                self.retry.push(c);
            }
        }
    }
}
