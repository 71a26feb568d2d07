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
//! Representation: u32 node ids (objects `0..n`, then virtual nodes for rules and priority tiers, which keep
//! kind-level edges O(n) instead of O(n²)), CSR adjacency in both directions, built from an edge list with a
//! counting sort; the objects are joined to their owners and references through sorted key indexes (see
//! [`KeyIndex`]), not hash maps.

use std::collections::VecDeque;
use std::fmt;

use serde::Serialize;

use super::intern::{FastHashMap, Interner, key};
use super::node::{Object, ObjectId};
use super::priorities::Priorities;
use super::references::is_built_in_group;
use super::rules::Rule;

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
    fn from_u8(k: u8) -> Self {
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

/// Compressed sparse rows: the neighbours of node `v` are `targets[offsets[v]..offsets[v + 1]]`.
#[derive(Debug, Clone, Default)]
struct Csr {
    offsets: Vec<u32>,
    targets: Vec<NodeId>,
}

impl Csr {
    fn row(&self, v: NodeId) -> std::ops::Range<usize> {
        let v = v as usize;
        self.offsets[v] as usize..self.offsets[v + 1] as usize
    }
}

/// An object that was in the backup twice; the first one is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Duplicate {
    pub object: String,
    /// `identity` (same group, kind, namespace, name) or `uid` (another object has its uid).
    pub reason: &'static str,
}

/// A reference to an object that is not in the backup (kept as external: no edge, reported).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct External {
    pub from: NodeId,
    pub via: EdgeKind,
    pub target: String,
}

/// A cycle as a path of node names, first = last (`a → b → c → a`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CyclePath(pub Vec<String>);

impl fmt::Display for CyclePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(" → "))
    }
}

/// A rule or priority pair that was not applied because it would close a cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    /// `rule 2 (Ingress after services)` or `priority pods < replicasets.apps`.
    pub rule: String,
    pub cycle: CyclePath,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} would close a cycle: {}", self.rule, self.cycle)
    }
}

/// What building found besides the graph.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildReport {
    pub duplicates: Vec<Duplicate>,
    pub external: Vec<External>,
    /// Cycles among the backup's own references (bad ownerReferences); their objects never become ready.
    pub cycles: Vec<CyclePath>,
    /// User rules refused: an error for `ferry graph`, a refusal reason in plans.
    pub refused_rules: Vec<Refusal>,
    /// Priority pairs not applied because the backup's references or the rules order those kinds the other way.
    pub refused_priorities: Vec<Refusal>,
    /// Rules that matched no object on one side (not an error: another backup may have them).
    pub unmatched_rules: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    #[error("{0}")]
    RuleCycle(Refusal),
}

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

type Edge = (NodeId, NodeId, EdgeKind);

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

    /// The first refused rule as an error (the seed's "fail the backup and warn the user").
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

    /// Cycles among nodes that Kahn's algorithm cannot finish: every such node has an unfinished dependency, so
    /// walking unfinished dependencies from it must revisit a node. At most `limit` cycles, each once.
    fn find_cycles(&self, limit: usize) -> Vec<CyclePath> {
        let total = self.node_count();
        let done = super::order::kahn_done(self);
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

/// The backup's objects without repeats (the first of the same identity is kept, the rest reported), and the
/// edges of their facts. Repeats are rare: the index is built again only when there were some.
fn facts(mut objects: Vec<Object>, report: &mut BuildReport) -> (Vec<Object>, Vec<Edge>, Resources) {
    loop {
        match fact_edges(&objects, report) {
            Ok((edges, resources)) => return (objects, edges, resources),
            Err(repeated) => {
                let mut drop = vec![false; objects.len()];
                for i in repeated {
                    drop[i as usize] = true;
                    report
                        .duplicates
                        .push(Duplicate { object: objects[i as usize].id().to_string(), reason: "identity" });
                }
                let mut i = 0;
                objects.retain(|_| {
                    i += 1;
                    !drop[i - 1]
                });
            }
        }
    }
}

/// Nodes sorted by the 64-bit [`key`] of a string key (identity or uid), the build's join index. Sorting and
/// merging stream through memory, where a hash map of 1M entries costs a cache and TLB miss per insert and per
/// lookup (the build spent ~1 s of CPU on that at 1M objects). Equal keys sit together, earliest node first.
struct KeyIndex {
    entries: Vec<(u64, NodeId)>,
}

/// Each object's resource (`resource.group`) as a dense id, for priorities: interned in the same pass that keys
/// the objects, as every pass over 1M objects' scattered strings costs tens of milliseconds.
#[derive(Default)]
struct Resources {
    names: Interner,
    /// By node.
    of: Vec<u32>,
    /// By resource id: its first object (whose group and kind rank it).
    first: Vec<NodeId>,
}

/// "No candidate" in a join result.
const NONE: u32 = u32::MAX;

impl KeyIndex {
    fn new(mut entries: Vec<(u64, NodeId)>) -> Self {
        entries.sort_unstable();
        Self { entries }
    }

    /// For each query `(key, query number)`, the earliest node with that key (or [`NONE`]): one merge of the
    /// sorted queries with the sorted entries. `queries` is sorted in place.
    fn join(&self, queries: &mut [(u64, u32)]) -> Vec<NodeId> {
        queries.sort_unstable();
        let mut out = vec![NONE; queries.len()];
        let mut i = 0;
        for &(key, q) in queries.iter() {
            while i < self.entries.len() && self.entries[i].0 < key {
                i += 1;
            }
            if let Some(&(k, v)) = self.entries.get(i)
                && k == key
            {
                out[q as usize] = v;
            }
        }
        out
    }

    /// The earliest node with `key`, by binary search (for the few queries not worth a join).
    fn find(&self, key: u64) -> NodeId {
        let i = self.entries.partition_point(|e| e.0 < key);
        self.entries.get(i).filter(|e| e.0 == key).map_or(NONE, |e| e.1)
    }

    /// The node a query means: `first` (its join result) if `is` accepts it, else (a 64-bit collision, never in
    /// practice) the next node with the same key that `is` accepts. A key match is always confirmed by comparing
    /// the strings, so a collision costs a comparison, never a wrong edge.
    fn resolve(&self, first: NodeId, key: impl FnOnce() -> u64, is: impl Fn(NodeId) -> bool) -> Option<NodeId> {
        if first == NONE {
            return None;
        }
        if is(first) {
            return Some(first);
        }
        let key = key();
        let start = self.entries.partition_point(|e| e.0 < key);
        self.entries[start..].iter().take_while(|e| e.0 == key).map(|e| e.1).find(|&v| is(v))
    }

    /// Runs of equal keys, for finding repeats (nearly always none: runs of one are skipped).
    fn runs(&self) -> impl Iterator<Item = &[(u64, NodeId)]> {
        self.entries.chunk_by(|a, b| a.0 == b.0).filter(|run| run.len() > 1)
    }
}

fn identity_key(group: &str, kind: &str, namespace: &str, name: &str) -> u64 {
    key(&[group, kind, namespace, name])
}

fn same_identity(o: &Object, group: &str, kind: &str, namespace: &str, name: &str) -> bool {
    o.name == name && o.namespace == namespace && o.kind == kind && o.group == group
}

/// Edges from the objects themselves: owners, well-known references, namespace, CRD. `Err` with the indexes of
/// repeated objects (same identity as an earlier one) when there are any.
///
/// Three streaming passes instead of per-object hash lookups: key every object (identity, uid) and every
/// owner and reference; sort and merge-join; then emit the edges object by object, confirming each match by its
/// strings, in the order the objects list them (which the reports and refusal examples follow).
fn fact_edges(objects: &[Object], report: &mut BuildReport) -> Result<(Vec<Edge>, Resources), Vec<NodeId>> {
    let n = objects.len();
    let mut identities: Vec<(u64, NodeId)> = Vec::with_capacity(n);
    let mut uids: Vec<(u64, NodeId)> = Vec::with_capacity(n);
    let mut owner_queries: Vec<(u64, u32)> = Vec::with_capacity(n);
    let mut reference_queries: Vec<(u64, u32)> = Vec::with_capacity(n * 2);
    // (group, kind) → CRDs defining it; group → CRDs whose kind is unknown (read from a resource list). CRDs
    // are few: hash maps are fine here.
    let mut crds: FastHashMap<(&str, &str), Vec<NodeId>> = FastHashMap::default();
    let mut crds_of_group: FastHashMap<&str, Vec<NodeId>> = FastHashMap::default();
    let mut resources = Resources { of: Vec::with_capacity(n), ..Default::default() };
    // Objects mostly come grouped by resource (tarball order): remember the last one.
    let mut last_resource: Option<(&str, u32)> = None;
    for (i, o) in objects.iter().enumerate() {
        let v = i as NodeId;
        let resource = match last_resource {
            Some((name, id)) if name == o.resource => id,
            _ => {
                let id = resources.names.intern(&o.resource);
                if id as usize == resources.first.len() {
                    resources.first.push(v);
                }
                last_resource = Some((&o.resource, id));
                id
            }
        };
        resources.of.push(resource);
        identities.push((identity_key(&o.group, &o.kind, &o.namespace, &o.name), v));
        if !o.uid.is_empty() {
            uids.push((key(&[&o.uid]), v));
        }
        for owner in &o.owners {
            owner_queries.push((key(&[&owner.uid]), owner_queries.len() as u32));
        }
        for r in &o.references {
            reference_queries
                .push((identity_key(&r.group, &r.kind, &r.namespace, &r.name), reference_queries.len() as u32));
        }
        if let Some(def) = &o.defines {
            match &def.kind {
                Some(kind) => crds.entry((&def.group, kind)).or_default().push(v),
                None => crds_of_group.entry(&def.group).or_default().push(v),
            }
        }
    }
    let by_identity = KeyIndex::new(identities);
    // Within a run of equal keys, nodes ascend: a later object with an earlier one's identity is a repeat.
    let mut repeated = Vec::new();
    for run in by_identity.runs() {
        for (j, &(_, v)) in run.iter().enumerate().skip(1) {
            let o = &objects[v as usize];
            if run[..j]
                .iter()
                .any(|&(_, w)| same_identity(&objects[w as usize], &o.group, &o.kind, &o.namespace, &o.name))
            {
                repeated.push(v);
            }
        }
    }
    if !repeated.is_empty() {
        repeated.sort_unstable();
        return Err(repeated);
    }
    // The first object keeps a uid; later ones are reported and not found by it.
    let by_uid = KeyIndex::new(uids);
    let mut uid_repeats = Vec::new();
    for run in by_uid.runs() {
        for (j, &(_, v)) in run.iter().enumerate().skip(1) {
            let uid = &objects[v as usize].uid;
            if run[..j].iter().any(|&(_, w)| objects[w as usize].uid == *uid) {
                uid_repeats.push(v);
            }
        }
    }
    uid_repeats.sort_unstable();
    for v in uid_repeats {
        report.duplicates.push(Duplicate { object: objects[v as usize].id().to_string(), reason: "uid" });
    }
    let owner_at = by_uid.join(&mut owner_queries);
    drop(owner_queries);
    let reference_at = by_identity.join(&mut reference_queries);
    drop(reference_queries);

    // Namespaces are few and objects come grouped by them: remember the last one, and each one's node.
    let mut namespace_nodes: FastHashMap<&str, Option<NodeId>> = FastHashMap::default();
    let mut last_namespace: Option<(&str, Option<NodeId>)> = None;
    let mut last_group: Option<(&str, bool)> = None;
    let mut edges = Vec::with_capacity(n * 4);
    let mut external = |from: NodeId, via: EdgeKind, target: String| {
        report.external.push(External { from, via, target });
    };
    let (mut next_owner, mut next_reference) = (0usize, 0usize);
    for (i, o) in objects.iter().enumerate() {
        let v = i as NodeId;
        for owner in &o.owners {
            let at = owner_at[next_owner];
            next_owner += 1;
            match by_uid.resolve(at, || key(&[&owner.uid]), |d| objects[d as usize].uid == owner.uid) {
                Some(d) => edges.push((v, d, EdgeKind::OwnerReference)),
                None => {
                    external(v, EdgeKind::OwnerReference, format!("{} {} (uid {})", owner.kind, owner.name, owner.uid))
                }
            }
        }
        for r in &o.references {
            let at = reference_at[next_reference];
            next_reference += 1;
            let found = by_identity.resolve(
                at,
                || identity_key(&r.group, &r.kind, &r.namespace, &r.name),
                |d| same_identity(&objects[d as usize], &r.group, &r.kind, &r.namespace, &r.name),
            );
            match found {
                Some(d) if d != v => edges.push((v, d, EdgeKind::Reference)),
                Some(_) => {}
                None => {
                    let id = ObjectId { group: &r.group, kind: &r.kind, namespace: &r.namespace, name: &r.name };
                    external(v, EdgeKind::Reference, format!("{id} ({})", r.field));
                }
            }
        }
        if !o.namespace.is_empty() {
            let namespace = match last_namespace {
                Some((ns, node)) if ns == o.namespace => node,
                _ => {
                    let node = *namespace_nodes.entry(&o.namespace).or_insert_with(|| {
                        let key = || identity_key("", "Namespace", "", &o.namespace);
                        by_identity.resolve(by_identity.find(key()), key, |d| {
                            same_identity(&objects[d as usize], "", "Namespace", "", &o.namespace)
                        })
                    });
                    last_namespace = Some((&o.namespace, node));
                    node
                }
            };
            match namespace {
                Some(d) => edges.push((v, d, EdgeKind::Namespace)),
                None => external(v, EdgeKind::Namespace, format!("Namespace {}", o.namespace)),
            }
        }
        let built_in = match last_group {
            Some((group, built_in)) if group == o.group => built_in,
            _ => {
                let built_in = is_built_in_group(&o.group);
                last_group = Some((&o.group, built_in));
                built_in
            }
        };
        if !built_in {
            let defining =
                crds.get(&(o.group.as_str(), o.kind.as_str())).or_else(|| crds_of_group.get(o.group.as_str()));
            match defining {
                Some(ds) => edges.extend(ds.iter().filter(|d| **d != v).map(|&d| (v, d, EdgeKind::Crd))),
                None => external(v, EdgeKind::Crd, format!("CustomResourceDefinition of {}.{}", o.kind, o.group)),
            }
        }
    }
    Ok((edges, resources))
}

/// Adjacency over a growing edge list, for the cycle checks while rules are added.
struct Adjacency {
    rows: Csr,
    extra: FastHashMap<NodeId, Vec<NodeId>>,
}

impl Adjacency {
    fn new(total: usize, edges: &[Edge]) -> Self {
        Self { rows: csr(total, edges, false).0, extra: FastHashMap::default() }
    }

    fn grow(&mut self, total: usize) {
        let last = self.rows.offsets.last().copied().unwrap_or(0);
        self.rows.offsets.resize(total + 1, last);
    }

    fn add(&mut self, from: NodeId, to: NodeId) {
        self.extra.entry(from).or_default().push(to);
    }

    fn neighbours(&self, v: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        let row = if (v as usize) + 1 < self.rows.offsets.len() { self.rows.row(v) } else { 0..0 };
        self.rows.targets[row].iter().copied().chain(self.extra.get(&v).into_iter().flatten().copied())
    }

    /// A path from any of `starts` to a node in `targets`, following dependencies.
    fn path(&self, starts: &[NodeId], targets: &[bool]) -> Option<Vec<NodeId>> {
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

fn node_name(objects: &[Object], virtuals: &[Virtual], v: NodeId) -> String {
    match objects.get(v as usize) {
        Some(o) => o.id().to_string(),
        None => virtuals.get(v as usize - objects.len()).map(|x| x.to_string()).unwrap_or_default(),
    }
}

/// User rules in order: each adds one virtual node (waiting objects → it → awaited objects), unless an awaited
/// object already (transitively) depends on a waiting one, in which case the rule is refused with that path.
fn apply_rules(
    objects: &[Object],
    rules: &[Rule],
    edges: &mut Vec<Edge>,
    virtuals: &mut Vec<Virtual>,
    report: &mut BuildReport,
) {
    let n = objects.len();
    let mut adjacency = Adjacency::new(n, edges);
    for (index, rule) in rules.iter().enumerate() {
        let waiting: Vec<bool> = objects.iter().map(|o| rule.waits(o)).collect();
        let awaited: Vec<NodeId> =
            objects.iter().enumerate().filter(|(_, o)| rule.awaited(o)).map(|(i, _)| i as NodeId).collect();
        let text = rule.to_string();
        if awaited.is_empty() || !waiting.iter().any(|w| *w) {
            report.unmatched_rules.push(format!("rule {} ({text})", index + 1));
            continue;
        }
        let label = Virtual::Rule { index, text: text.clone() };
        if let Some(path) = adjacency.path(&awaited, &waiting) {
            // waiting → (rule) → awaited → … → waiting
            let last = path[path.len() - 1];
            let mut names = vec![node_name(objects, virtuals, last), label.to_string()];
            names.extend(path.iter().map(|v| node_name(objects, virtuals, *v)));
            report
                .refused_rules
                .push(Refusal { rule: format!("rule {} ({text})", index + 1), cycle: CyclePath(names) });
            continue;
        }
        let r = (n + virtuals.len()) as NodeId;
        virtuals.push(label);
        adjacency.grow(n + virtuals.len());
        for (i, _) in waiting.iter().enumerate().filter(|(_, w)| **w) {
            edges.push((i as NodeId, r, EdgeKind::Rule));
            adjacency.add(i as NodeId, r);
        }
        for &a in &awaited {
            edges.push((r, a, EdgeKind::Rule));
            adjacency.add(r, a);
        }
    }
}

/// Priorities as kind-level edges. Every resource present is a kind node; the facts and rules give kind edges
/// ("some object of kind A depends on some object of kind B"). Pairs "B after A" (A in an earlier tier) are
/// added nearest tiers first, each unless A already reaches B (it would close a cycle; refused with the path),
/// and skipped when implied. The kind graph stays acyclic, so the object graph gains no cycle: any object cycle
/// would map onto a kind cycle through at least one priority pair.
fn apply_priorities(
    objects: &[Object],
    resources: &Resources,
    priorities: &Priorities,
    edges: &mut Vec<Edge>,
    virtuals: &mut Vec<Virtual>,
    report: &mut BuildReport,
) {
    if priorities.high.is_empty() && priorities.low.is_empty() {
        return;
    }
    let kinds = &resources.names;
    let kind_of = &resources.of;
    let tier: Vec<u32> = resources
        .first
        .iter()
        .map(|&v| {
            let o = &objects[v as usize];
            priorities.tier(&o.resource, &o.group, &o.kind)
        })
        .collect();
    let k = kinds.len();
    if tier.iter().all(|t| *t == tier[0]) {
        return;
    }
    // A kind-level edge through a virtual (rule) node joins the kinds on both sides.
    let n = objects.len();
    let kind_at = |v: NodeId| kind_of.get(v as usize).copied();
    let mut example: FastHashMap<(u32, u32), Edge> = FastHashMap::default();
    let mut reach = BitMatrix::new(k);
    let mut rule_in: FastHashMap<NodeId, Vec<u32>> = FastHashMap::default();
    let mut rule_out: FastHashMap<NodeId, Vec<(u32, Edge)>> = FastHashMap::default();
    for &(from, to, kind) in edges.iter() {
        match (kind_at(from), kind_at(to)) {
            (Some(a), Some(b)) if a != b && !reach.get(a, b) => {
                reach.set(a, b);
                example.insert((a, b), (from, to, kind));
            }
            (Some(a), None) => rule_in.entry(to).or_default().push(a),
            (None, Some(b)) => rule_out.entry(from).or_default().push((b, (from, to, kind))),
            _ => {}
        }
    }
    for (r, ins) in &rule_in {
        for a in ins {
            for (b, e) in rule_out.get(r).into_iter().flatten() {
                if a != b && !reach.get(*a, *b) {
                    reach.set(*a, *b);
                    example.insert((*a, *b), *e);
                }
            }
        }
    }
    let direct = reach.clone();
    reach.close();
    // Candidate pairs (earlier, later), nearest tiers first.
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    for a in 0..k as u32 {
        for b in 0..k as u32 {
            if tier[a as usize] < tier[b as usize] {
                pairs.push((a, b));
            }
        }
    }
    pairs.sort_by_key(|&(a, b)| {
        (tier[b as usize] - tier[a as usize], tier[a as usize], kinds.resolve(a), kinds.resolve(b))
    });
    let mut accepted: Vec<(u32, u32)> = Vec::new();
    let mut accepted_edges = BitMatrix::new(k);
    for (a, b) in pairs {
        if reach.get(a, b) {
            // The refused pair is b → a; the path a ⇝ b closes the cycle.
            let path = kind_path(&direct, &accepted_edges, a, b);
            let mut names = vec![kinds.resolve(b).to_string(), format!("{} (priority)", kinds.resolve(a))];
            for w in path.windows(2) {
                names.push(match example.get(&(w[0], w[1])) {
                    Some(&(f, t, kind)) if direct.get(w[0], w[1]) => format!(
                        "{} ({}: {} → {})",
                        kinds.resolve(w[1]),
                        kind.as_str(),
                        node_name(objects, virtuals, f),
                        node_name(objects, virtuals, t)
                    ),
                    _ => format!("{} (priority)", kinds.resolve(w[1])),
                });
            }
            report.refused_priorities.push(Refusal {
                rule: format!("priority {} < {}", kinds.resolve(a), kinds.resolve(b)),
                cycle: CyclePath(names),
            });
            continue;
        }
        if reach.get(b, a) {
            continue; // implied by earlier pairs or facts
        }
        reach.add_edge(b, a);
        accepted_edges.set(b, a);
        accepted.push((a, b));
    }
    if accepted.is_empty() {
        return;
    }
    // Virtual nodes: gate(b) → done(a) for each accepted pair; objects of b → gate(b); done(a) → objects of a.
    let base = (n + virtuals.len()) as NodeId;
    let mut done: Vec<Option<NodeId>> = vec![None; k];
    let mut gate: Vec<Option<NodeId>> = vec![None; k];
    let mut next = base;
    let mut fresh = |slot: &mut Option<NodeId>, v: Virtual, virtuals: &mut Vec<Virtual>| -> NodeId {
        *slot.get_or_insert_with(|| {
            virtuals.push(v);
            next += 1;
            next - 1
        })
    };
    for &(a, b) in &accepted {
        let d = fresh(&mut done[a as usize], Virtual::PriorityDone { resource: kinds.resolve(a).into() }, virtuals);
        let g = fresh(&mut gate[b as usize], Virtual::PriorityGate { resource: kinds.resolve(b).into() }, virtuals);
        edges.push((g, d, EdgeKind::Priority));
    }
    for (i, &kind) in kind_of.iter().enumerate() {
        if let Some(g) = gate[kind as usize] {
            edges.push((i as NodeId, g, EdgeKind::Priority));
        }
        if let Some(d) = done[kind as usize] {
            edges.push((d, i as NodeId, EdgeKind::Priority));
        }
    }
}

/// A shortest kind path from `a` to `b` over direct fact/rule kind edges and accepted priority pairs.
fn kind_path(direct: &BitMatrix, accepted: &BitMatrix, a: u32, b: u32) -> Vec<u32> {
    let k = direct.size;
    let mut parent = vec![u32::MAX; k];
    parent[a as usize] = a;
    let mut queue = VecDeque::from([a]);
    while let Some(v) = queue.pop_front() {
        if v == b {
            break;
        }
        for w in 0..k as u32 {
            if parent[w as usize] == u32::MAX && (direct.get(v, w) || accepted.get(v, w)) {
                parent[w as usize] = v;
                queue.push_back(w);
            }
        }
    }
    let mut path = vec![b];
    let mut at = b;
    while at != a && parent[at as usize] != u32::MAX {
        at = parent[at as usize];
        path.push(at);
    }
    path.reverse();
    path
}

/// A square bit matrix: `get(a, b)` = "a reaches b" (kinds are few: tens, rarely hundreds).
#[derive(Debug, Clone)]
struct BitMatrix {
    size: usize,
    words: usize,
    bits: Vec<u64>,
}

impl BitMatrix {
    fn new(size: usize) -> Self {
        let words = size.div_ceil(64).max(1);
        Self { size, words, bits: vec![0; size * words] }
    }

    fn get(&self, a: u32, b: u32) -> bool {
        self.bits[a as usize * self.words + b as usize / 64] >> (b % 64) & 1 == 1
    }

    fn set(&mut self, a: u32, b: u32) {
        self.bits[a as usize * self.words + b as usize / 64] |= 1 << (b % 64);
    }

    /// Transitive closure (Warshall over bit rows).
    fn close(&mut self) {
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
    fn add_edge(&mut self, a: u32, b: u32) {
        for x in 0..self.size as u32 {
            if x == a || self.get(x, a) {
                self.set(x, b);
                self.or_row(x, b);
            }
        }
    }
}

/// CSR of `edges` (from → to, or to → from when `reverse`), each row sorted and without repeats (the first kind
/// by [`EdgeKind`] order wins, so a fact explains an edge before a rule or priority does).
///
/// A counting sort by row into one array of `target << 8 | kind` words, so sorting a row by target then kind is
/// a sort of integers, and the rows are compacted in place (a row never moves right).
fn csr(total: usize, edges: &[Edge], reverse: bool) -> (Csr, Vec<EdgeKind>) {
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
