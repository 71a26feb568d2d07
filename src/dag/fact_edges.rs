//! The backup's own facts as edges: ownerReferences (by uid), well-known references (by identity), each
//! namespaced object's Namespace, each custom resource's CRD; repeated objects and references to objects not in
//! the backup are reported, not edges.
//!
//! The objects are joined to their owners and references through sorted key indexes ([`KeyIndex`]), not hash
//! maps: at 1M objects, a hash map costs a cache and TLB miss per insert and per lookup.

use super::edge::{Edge, EdgeKind, NodeId};
use super::intern::{FastHashMap, Interner, key};
use super::kinds::is_built_in_group;
use super::node::{Object, ObjectId};
use super::report::{BuildReport, Duplicate, External};

/// The backup's objects without repeats (the first of the same identity is kept, the rest reported), and the
/// edges of their facts. Repeats are rare: the index is built again only when there were some.
pub(super) fn facts(mut objects: Vec<Object>, report: &mut BuildReport) -> (Vec<Object>, Vec<Edge>, Resources) {
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
pub(super) struct Resources {
    pub(super) names: Interner,
    /// By node.
    pub(super) of: Vec<u32>,
    /// By resource id: its first object (whose group and kind rank it).
    pub(super) first: Vec<NodeId>,
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
