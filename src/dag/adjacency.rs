//! How edges are stored: compressed sparse rows built from an edge list with a counting sort (the graph's, both
//! directions), the same rows with edges added while rules are checked, and a bit matrix of reachability between
//! the few resource kinds (for priorities). Plain structures: they know node ids and edge kinds, not objects.

use std::collections::VecDeque;

use super::edge::{Edge, EdgeKind, NodeId};
use super::intern::FastHashMap;

/// Compressed sparse rows: the neighbours of node `v` are `targets[offsets[v]..offsets[v + 1]]`.
#[derive(Debug, Clone, Default)]
pub(super) struct Csr {
    pub(super) offsets: Vec<u32>,
    pub(super) targets: Vec<NodeId>,
}

impl Csr {
    pub(super) fn row(&self, v: NodeId) -> std::ops::Range<usize> {
        let v = v as usize;
        self.offsets[v] as usize..self.offsets[v + 1] as usize
    }
}

/// CSR of `edges` (from → to, or to → from when `reverse`), each row sorted and without repeats (the first kind
/// by [`EdgeKind`] order wins, so a fact explains an edge before a rule or priority does).
///
/// A counting sort by row into one array of `target << 8 | kind` words, so sorting a row by target then kind is
/// a sort of integers, and the rows are compacted in place (a row never moves right).
pub(super) fn csr(total: usize, edges: &[Edge], reverse: bool) -> (Csr, Vec<EdgeKind>) {
    let mut starts = vec![0u32; total + 1];
    for &(f, t, _) in edges {
        let row = if reverse { t } else { f };
        starts[row as usize + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut fill = starts.clone();
    let mut packed = vec![0u64; edges.len()];
    for &(f, t, kind) in edges {
        let (row, target) = if reverse { (t, f) } else { (f, t) };
        let at = &mut fill[row as usize];
        packed[*at as usize] = u64::from(target) << 8 | kind as u64;
        *at += 1;
    }
    drop(fill);
    let mut offsets = Vec::with_capacity(total + 1);
    offsets.push(0u32);
    let mut write = 0usize;
    for v in 0..total {
        let (start, end) = (starts[v] as usize, starts[v + 1] as usize);
        let row = &mut packed[start..end];
        if row.len() > 1 {
            row.sort_unstable();
        }
        let mut last = None;
        for i in start..end {
            let word = packed[i];
            if last != Some(word >> 8) {
                last = Some(word >> 8);
                packed[write] = word;
                write += 1;
            }
        }
        offsets.push(write as u32);
    }
    packed.truncate(write);
    let targets = packed.iter().map(|w| (w >> 8) as NodeId).collect();
    let kinds = packed.iter().map(|w| EdgeKind::from_u8(*w as u8)).collect();
    (Csr { offsets, targets }, kinds)
}

/// Adjacency over a growing edge list, for the cycle checks while rules are added.
pub(super) struct Adjacency {
    rows: Csr,
    extra: FastHashMap<NodeId, Vec<NodeId>>,
}

impl Adjacency {
    pub(super) fn new(total: usize, edges: &[Edge]) -> Self {
        Self { rows: csr(total, edges, false).0, extra: FastHashMap::default() }
    }

    pub(super) fn grow(&mut self, total: usize) {
        let last = self.rows.offsets.last().copied().unwrap_or(0);
        self.rows.offsets.resize(total + 1, last);
    }

    pub(super) fn add(&mut self, from: NodeId, to: NodeId) {
        self.extra.entry(from).or_default().push(to);
    }

    fn neighbours(&self, v: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        let row = if (v as usize) + 1 < self.rows.offsets.len() { self.rows.row(v) } else { 0..0 };
        self.rows.targets[row].iter().copied().chain(self.extra.get(&v).into_iter().flatten().copied())
    }

    /// A path from any of `starts` to a node in `targets`, following dependencies.
    pub(super) fn path(&self, starts: &[NodeId], targets: &[bool]) -> Option<Vec<NodeId>> {
        let mut parent: FastHashMap<NodeId, NodeId> = FastHashMap::default();
        let mut queue: VecDeque<NodeId> = VecDeque::new();
        for &s in starts {
            if parent.insert(s, s).is_none() {
                queue.push_back(s);
            }
        }
        while let Some(v) = queue.pop_front() {
            if targets.get(v as usize).copied().unwrap_or(false) {
                let mut path = vec![v];
                let mut at = v;
                while parent[&at] != at {
                    at = parent[&at];
                    path.push(at);
                }
                path.reverse();
                return Some(path);
            }
            for w in self.neighbours(v) {
                if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(w) {
                    e.insert(v);
                    queue.push_back(w);
                }
            }
        }
        None
    }
}

/// A square bit matrix: `get(a, b)` = "a reaches b" (kinds are few: tens, rarely hundreds).
#[derive(Debug, Clone)]
pub(super) struct BitMatrix {
    pub(super) size: usize,
    words: usize,
    bits: Vec<u64>,
}

impl BitMatrix {
    pub(super) fn new(size: usize) -> Self {
        let words = size.div_ceil(64).max(1);
        Self { size, words, bits: vec![0; size * words] }
    }

    pub(super) fn get(&self, a: u32, b: u32) -> bool {
        self.bits[a as usize * self.words + b as usize / 64] >> (b % 64) & 1 == 1
    }

    pub(super) fn set(&mut self, a: u32, b: u32) {
        self.bits[a as usize * self.words + b as usize / 64] |= 1 << (b % 64);
    }

    /// Transitive closure (Warshall over bit rows).
    pub(super) fn close(&mut self) {
        for m in 0..self.size as u32 {
            for a in 0..self.size as u32 {
                if self.get(a, m) {
                    self.or_row(a, m);
                }
            }
        }
    }

    fn or_row(&mut self, into: u32, from: u32) {
        let (i, f) = (into as usize * self.words, from as usize * self.words);
        for w in 0..self.words {
            let x = self.bits[f + w];
            self.bits[i + w] |= x;
        }
    }

    /// Adds `a → b` to a closed matrix and keeps it closed.
    pub(super) fn add_edge(&mut self, a: u32, b: u32) {
        for x in 0..self.size as u32 {
            if x == a || self.get(x, a) {
                self.set(x, b);
                self.or_row(x, b);
            }
        }
    }
}
