//! The dependency graph of one backup: a node per object, an edge "A depends on B" (B is restored first) from
//! the backup's own facts (ownerReferences by uid, well-known references, namespace, CRD), then the user's rules,
//! then restore priorities. The root (the backup) is implicit: every node without dependencies is its child.
//!
//! Precedence, and why: facts describe the objects and cannot be refused; a cycle among them (corrupt or
//! hand-edited ownerReferences) is reported and its objects never become ready. A user rule that would close a
//! cycle is refused as a whole, with the cycle as a path (`ferry graph` fails on it; plans carry it as a reason).
//! Priorities come last and are kind-level preferences: Velero's own defaults restore `pods` before
//! `replicasets.apps`, which every ReplicaSet-owned Pod contradicts, so a priority pair that would close a cycle
//! is dropped for that pair only and reported with the path, instead of failing every backup with a Deployment.
//!
//! This file is the public [`Graph`]: building it (the edge list from `fact_edges`, then `rule_edges`, then
//! `priority_edges`, compacted into CSR rows in both directions by `adjacency`), reading it, and finding the
//! cycles among its facts. Node ids and edge kinds are in [`super::edge`]; what building found besides the graph
//! is the [`BuildReport`] ([`super::report`]).

use std::collections::VecDeque;

use super::adjacency::{Csr, csr};
use super::edge::{EdgeKind, NodeId, Virtual};
use super::fact_edges::facts;
use super::node::{Object, ObjectId};
use super::priorities::Priorities;
use super::priority_edges::apply_priorities;
use super::report::{BuildReport, CyclePath, GraphError};
use super::rule_edges::apply_rules;
use super::rules::Rule;

/// The graph of one backup.
#[derive(Debug, Clone)]
pub struct Graph {
    objects: Vec<Object>,
    virtuals: Vec<Virtual>,
    deps: Csr,
    dep_kinds: Vec<EdgeKind>,
    dependents: Csr,
    pub report: BuildReport,
}

impl Graph {
    /// Builds the graph of `objects` with user `rules` (applied in order) and `priorities`.
    pub fn build(objects: Vec<Object>, priorities: &Priorities, rules: &[Rule]) -> Self {
        let mut report = BuildReport::default();
        let (objects, mut edges, resources) = facts(objects, &mut report);
        let n = objects.len() as u32;
        let mut virtuals = Vec::new();
        if !rules.is_empty() {
            apply_rules(&objects, rules, &mut edges, &mut virtuals, &mut report);
        }
        apply_priorities(&objects, &resources, priorities, &mut edges, &mut virtuals, &mut report);
        let total = n as usize + virtuals.len();
        let (deps, dep_kinds) = csr(total, &edges, false);
        let (dependents, _) = csr(total, &edges, true);
        drop(edges);
        let mut graph = Self { objects, virtuals, deps, dep_kinds, dependents, report };
        graph.report.cycles = graph.find_cycles(100);
        graph
    }

    /// The first refused rule as an error (docs/design.md §4: a rule that closes a cycle is refused).
    pub fn check(&self) -> Result<(), GraphError> {
        match self.report.refused_rules.first() {
            Some(r) => Err(GraphError::RuleCycle(r.clone())),
            None => Ok(()),
        }
    }

    /// Objects and virtual nodes.
    pub fn node_count(&self) -> usize {
        self.objects.len() + self.virtuals.len()
    }

    pub fn object_count(&self) -> usize {
        self.objects.len()
    }

    pub fn edge_count(&self) -> usize {
        self.deps.targets.len()
    }

    pub fn objects(&self) -> &[Object] {
        &self.objects
    }

    pub fn object(&self, v: NodeId) -> Option<&Object> {
        self.objects.get(v as usize)
    }

    pub fn virtual_node(&self, v: NodeId) -> Option<&Virtual> {
        (v as usize).checked_sub(self.objects.len()).and_then(|i| self.virtuals.get(i))
    }

    pub fn is_object(&self, v: NodeId) -> bool {
        (v as usize) < self.objects.len()
    }

    /// What `v` depends on (restored before it), with where each edge came from.
    pub fn dependencies(&self, v: NodeId) -> impl Iterator<Item = (NodeId, EdgeKind)> + '_ {
        let row = self.deps.row(v);
        self.deps.targets[row.clone()].iter().copied().zip(self.dep_kinds[row].iter().copied())
    }

    /// What depends on `v`.
    pub fn dependents(&self, v: NodeId) -> &[NodeId] {
        &self.dependents.targets[self.dependents.row(v)]
    }

    pub fn dependency_count(&self, v: NodeId) -> usize {
        self.deps.row(v).len()
    }

    /// The objects `v` waits for, looking through virtual nodes (a rule or priority gate stands for many
    /// objects; it is named instead of expanded).
    pub fn waits_on(&self, v: NodeId) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (d, kind) in self.dependencies(v) {
            match self.virtual_node(d) {
                None => out.push(format!("{} ({})", self.name(d), kind.as_str())),
                Some(Virtual::PriorityGate { .. }) => {
                    let after: Vec<String> = self
                        .dependencies(d)
                        .filter_map(|(done, _)| match self.virtual_node(done) {
                            Some(Virtual::PriorityDone { resource }) => Some(resource.clone()),
                            _ => None,
                        })
                        .collect();
                    out.push(format!("all {} (priority)", after.join(", ")));
                }
                Some(other) => out.push(other.to_string()),
            }
        }
        out
    }

    /// `Kind[.group] [ns/]name` for objects, the description for virtual nodes.
    pub fn name(&self, v: NodeId) -> String {
        match self.object(v) {
            Some(o) => o.id().to_string(),
            None => self.virtual_node(v).map(|x| x.to_string()).unwrap_or_else(|| format!("#{v}")),
        }
    }

    pub fn id(&self, v: NodeId) -> Option<ObjectId<'_>> {
        self.object(v).map(Object::id)
    }

    /// Which nodes Kahn's algorithm finishes (the rest are on or behind a cycle).
    fn kahn_done(&self) -> Vec<bool> {
        let total = self.node_count();
        let mut waiting: Vec<u32> = (0..total as NodeId).map(|v| self.dependency_count(v) as u32).collect();
        let mut queue: VecDeque<NodeId> = (0..total as NodeId).filter(|v| waiting[*v as usize] == 0).collect();
        let mut done = vec![false; total];
        while let Some(v) = queue.pop_front() {
            done[v as usize] = true;
            for &c in self.dependents(v) {
                waiting[c as usize] -= 1;
                if waiting[c as usize] == 0 {
                    queue.push_back(c);
                }
            }
        }
        done
    }

    /// Cycles among nodes that Kahn's algorithm cannot finish: every such node has an unfinished dependency, so
    /// walking unfinished dependencies from it must revisit a node. At most `limit` cycles, each once.
    fn find_cycles(&self, limit: usize) -> Vec<CyclePath> {
        let total = self.node_count();
        let done = self.kahn_done();
        if done.iter().all(|d| *d) {
            return Vec::new();
        }
        // 0 = unvisited, 1 = on the current walk, 2 = walked before.
        let mut state = vec![0u8; total];
        let mut cycles = Vec::new();
        for start in 0..total as NodeId {
            if done[start as usize] || state[start as usize] != 0 || cycles.len() >= limit {
                continue;
            }
            let mut walk = vec![start];
            state[start as usize] = 1;
            let mut v = start;
            loop {
                let next = self.dependencies(v).map(|(d, _)| d).find(|d| !done[*d as usize]);
                let Some(next) = next else { break };
                match state[next as usize] {
                    0 => {
                        state[next as usize] = 1;
                        walk.push(next);
                        v = next;
                    }
                    1 => {
                        let from = walk.iter().position(|w| *w == next).unwrap_or(0);
                        let mut path: Vec<String> = walk[from..].iter().map(|w| self.name(*w)).collect();
                        path.push(self.name(next));
                        cycles.push(CyclePath(path));
                        break;
                    }
                    _ => break,
                }
            }
            for w in walk {
                state[w as usize] = 2;
            }
        }
        cycles
    }
}
