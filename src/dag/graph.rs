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
//! kind-level edges O(n) instead of O(n²)), CSR adjacency in both directions, FxHash indexes borrowed from the
//! objects while building.

use std::collections::VecDeque;
use std::fmt;

use serde::Serialize;

use super::intern::{FxHashMap, Interner};
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
        let (objects, mut edges) = facts(objects, &mut report);
        let n = objects.len() as u32;
        let mut virtuals = Vec::new();
        if !rules.is_empty() {
            apply_rules(&objects, rules, &mut edges, &mut virtuals, &mut report);
        }
        apply_priorities(&objects, priorities, &mut edges, &mut virtuals, &mut report);
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
fn facts(mut objects: Vec<Object>, report: &mut BuildReport) -> (Vec<Object>, Vec<Edge>) {
    loop {
        match fact_edges(&objects, report) {
            Ok(edges) => return (objects, edges),
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

/// (group, kind, namespace, name) → node. Kinds and namespaces are few and interned in small (cache-resident)
/// maps, so the big map hashes one string and two integers per object.
#[derive(Default)]
struct IdentityIndex<'a> {
    kinds: FxHashMap<(&'a str, &'a str), u32>,
    namespaces: FxHashMap<&'a str, u32>,
    nodes: FxHashMap<(u32, u32, &'a str), NodeId>,
}

impl<'a> IdentityIndex<'a> {
    /// Inserts `o` as `v`; the node already there if `o` is a repeat.
    fn insert(&mut self, o: &'a Object, v: NodeId) -> Option<NodeId> {
        let next = self.kinds.len() as u32;
        let kind = *self.kinds.entry((&o.group, &o.kind)).or_insert(next);
        let next = self.namespaces.len() as u32;
        let ns = *self.namespaces.entry(&o.namespace).or_insert(next);
        match self.nodes.entry((kind, ns, &o.name)) {
            std::collections::hash_map::Entry::Occupied(e) => Some(*e.get()),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(v);
                None
            }
        }
    }

    fn get(&self, group: &str, kind: &str, namespace: &str, name: &str) -> Option<NodeId> {
        let kind = *self.kinds.get(&(group, kind))?;
        let ns = *self.namespaces.get(namespace)?;
        self.nodes.get(&(kind, ns, name)).copied()
    }
}

/// Edges from the objects themselves: owners, well-known references, namespace, CRD. `Err` with the indexes of
/// repeated objects (same identity as an earlier one) when there are any.
fn fact_edges(objects: &[Object], report: &mut BuildReport) -> Result<Vec<Edge>, Vec<NodeId>> {
    let mut by_identity = IdentityIndex::default();
    by_identity.nodes.reserve(objects.len());
    let mut by_uid: FxHashMap<&str, NodeId> = FxHashMap::default();
    by_uid.reserve(objects.len());
    // (group, kind) → CRDs defining it; group → CRDs whose kind is unknown (read from a resource list).
    let mut crds: FxHashMap<(&str, &str), Vec<NodeId>> = FxHashMap::default();
    let mut crds_of_group: FxHashMap<&str, Vec<NodeId>> = FxHashMap::default();
    let mut repeated = Vec::new();
    let mut uid_repeats = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        let v = i as NodeId;
        if by_identity.insert(o, v).is_some() {
            repeated.push(v);
            continue;
        }
        if !o.uid.is_empty() {
            // The first object keeps the uid.
            match by_uid.entry(&o.uid) {
                std::collections::hash_map::Entry::Occupied(_) => uid_repeats.push(v),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(v);
                }
            }
        }
        if let Some(def) = &o.defines {
            match &def.kind {
                Some(kind) => crds.entry((&def.group, kind)).or_default().push(v),
                None => crds_of_group.entry(&def.group).or_default().push(v),
            }
        }
    }
    if !repeated.is_empty() {
        return Err(repeated);
    }
    for v in uid_repeats {
        report.duplicates.push(Duplicate { object: objects[v as usize].id().to_string(), reason: "uid" });
    }
    let mut namespace_nodes: FxHashMap<u32, Option<NodeId>> = FxHashMap::default();
    let mut edges = Vec::with_capacity(objects.len() * 4);
    let mut external = |from: NodeId, via: EdgeKind, target: String| {
        report.external.push(External { from, via, target });
    };
    for (i, o) in objects.iter().enumerate() {
        let v = i as NodeId;
        for owner in &o.owners {
            match by_uid.get(owner.uid.as_str()) {
                Some(&d) => edges.push((v, d, EdgeKind::OwnerReference)),
                None => {
                    external(v, EdgeKind::OwnerReference, format!("{} {} (uid {})", owner.kind, owner.name, owner.uid))
                }
            }
        }
        for r in &o.references {
            match by_identity.get(&r.group, &r.kind, &r.namespace, &r.name) {
                Some(d) if d != v => edges.push((v, d, EdgeKind::Reference)),
                Some(_) => {}
                None => {
                    let id = ObjectId { group: &r.group, kind: &r.kind, namespace: &r.namespace, name: &r.name };
                    external(v, EdgeKind::Reference, format!("{id} ({})", r.field));
                }
            }
        }
        if !o.namespace.is_empty() {
            // One big-map lookup per namespace, not per object.
            let ns = by_identity.namespaces.get(o.namespace.as_str()).copied().unwrap_or(u32::MAX);
            let namespace =
                *namespace_nodes.entry(ns).or_insert_with(|| by_identity.get("", "Namespace", "", &o.namespace));
            match namespace {
                Some(d) => edges.push((v, d, EdgeKind::Namespace)),
                None => external(v, EdgeKind::Namespace, format!("Namespace {}", o.namespace)),
            }
        }
        if !is_built_in_group(&o.group) {
            let defining =
                crds.get(&(o.group.as_str(), o.kind.as_str())).or_else(|| crds_of_group.get(o.group.as_str()));
            match defining {
                Some(ds) => edges.extend(ds.iter().filter(|d| **d != v).map(|&d| (v, d, EdgeKind::Crd))),
                None => external(v, EdgeKind::Crd, format!("CustomResourceDefinition of {}.{}", o.kind, o.group)),
            }
        }
    }
    Ok(edges)
}

/// Adjacency over a growing edge list, for the cycle checks while rules are added.
struct Adjacency {
    rows: Csr,
    extra: FxHashMap<NodeId, Vec<NodeId>>,
}

impl Adjacency {
    fn new(total: usize, edges: &[Edge]) -> Self {
        Self { rows: csr(total, edges, false).0, extra: FxHashMap::default() }
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
        let mut parent: FxHashMap<NodeId, NodeId> = FxHashMap::default();
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
    priorities: &Priorities,
    edges: &mut Vec<Edge>,
    virtuals: &mut Vec<Virtual>,
    report: &mut BuildReport,
) {
    if priorities.high.is_empty() && priorities.low.is_empty() {
        return;
    }
    let mut kinds = Interner::default();
    let mut tier: Vec<u32> = Vec::new();
    let kind_of: Vec<u32> = objects
        .iter()
        .map(|o| {
            let r = kinds.intern(&o.resource);
            if r as usize == tier.len() {
                tier.push(priorities.tier(&o.resource, &o.group, &o.kind));
            }
            r
        })
        .collect();
    let k = kinds.len();
    if tier.iter().all(|t| *t == tier[0]) {
        return;
    }
    // A kind-level edge through a virtual (rule) node joins the kinds on both sides.
    let n = objects.len();
    let kind_at = |v: NodeId| kind_of.get(v as usize).copied();
    let mut example: FxHashMap<(u32, u32), Edge> = FxHashMap::default();
    let mut reach = BitMatrix::new(k);
    let mut rule_in: FxHashMap<NodeId, Vec<u32>> = FxHashMap::default();
    let mut rule_out: FxHashMap<NodeId, Vec<(u32, Edge)>> = FxHashMap::default();
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
fn csr(total: usize, edges: &[Edge], reverse: bool) -> (Csr, Vec<EdgeKind>) {
    let mut counts = vec![0u32; total + 1];
    for &(f, t, _) in edges {
        let row = if reverse { t } else { f };
        counts[row as usize + 1] += 1;
    }
    for i in 1..counts.len() {
        counts[i] += counts[i - 1];
    }
    let mut fill = counts.clone();
    let mut targets = vec![0 as NodeId; edges.len()];
    let mut kinds = vec![EdgeKind::OwnerReference; edges.len()];
    for &(f, t, kind) in edges {
        let (row, target) = if reverse { (t, f) } else { (f, t) };
        let at = &mut fill[row as usize];
        targets[*at as usize] = target;
        kinds[*at as usize] = kind;
        *at += 1;
    }
    // Sort and dedup each row in place, compacting as we go.
    let mut offsets = Vec::with_capacity(total + 1);
    offsets.push(0u32);
    let mut write = 0usize;
    let mut row_buf: Vec<(NodeId, EdgeKind)> = Vec::new();
    for v in 0..total {
        let (start, end) = (counts[v] as usize, counts[v + 1] as usize);
        row_buf.clear();
        row_buf.extend(targets[start..end].iter().copied().zip(kinds[start..end].iter().copied()));
        if row_buf.len() > 1 {
            row_buf.sort_unstable();
            row_buf.dedup_by_key(|(t, _)| *t);
        }
        for &(t, kind) in &row_buf {
            targets[write] = t;
            kinds[write] = kind;
            write += 1;
        }
        offsets.push(write as u32);
    }
    targets.truncate(write);
    kinds.truncate(write);
    (Csr { offsets, targets }, kinds)
}
