//! Overlap between backups' resource sets: the objects two or more backups share, and whether running them in
//! parallel is safe. Object-level: Velero 1.18's concurrent backups compare included namespaces only (docs/upstream.md
//! §V9c), so two backups of different Deployments in one namespace conflict there but not here; its verdict is
//! reported next to ferry's for comparison.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::node::Object;

/// One backup's objects, by name.
#[derive(Debug, Clone)]
pub struct ResourceSet<'a> {
    pub backup: String,
    pub objects: &'a [Object],
}

/// A pair of backups and what they share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PairOverlap {
    pub a: String,
    pub b: String,
    /// Objects in both (`Kind[.group] [ns/]name`), sorted.
    pub shared: Vec<String>,
    /// Namespaces that hold objects of both (what Velero's namespace-level check sees).
    pub shared_namespaces: Vec<String>,
    /// No shared object: running both at once touches disjoint objects.
    pub parallel_safe: bool,
    /// What Velero 1.18's namespace-level check would say.
    pub velero_namespace_level_safe: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Overlap {
    pub pairs: Vec<PairOverlap>,
    /// Every pair is safe.
    pub parallel_safe: bool,
}

/// Every pair of `sets`.
pub fn overlap(sets: &[ResourceSet<'_>]) -> Overlap {
    let keyed: Vec<(BTreeSet<String>, BTreeSet<&str>)> = sets
        .iter()
        .map(|s| {
            let ids = s.objects.iter().map(|o| o.id().to_string()).collect();
            let namespaces = s.objects.iter().map(|o| o.namespace.as_str()).filter(|n| !n.is_empty()).collect();
            (ids, namespaces)
        })
        .collect();
    let mut pairs = Vec::new();
    for i in 0..sets.len() {
        for j in i + 1..sets.len() {
            let shared: Vec<String> = keyed[i].0.intersection(&keyed[j].0).cloned().collect();
            let shared_namespaces: Vec<String> = keyed[i].1.intersection(&keyed[j].1).map(|s| s.to_string()).collect();
            pairs.push(PairOverlap {
                a: sets[i].backup.clone(),
                b: sets[j].backup.clone(),
                parallel_safe: shared.is_empty(),
                velero_namespace_level_safe: shared_namespaces.is_empty(),
                shared,
                shared_namespaces,
            });
        }
    }
    let parallel_safe = pairs.iter().all(|p| p.parallel_safe);
    Overlap { pairs, parallel_safe }
}

/// Shared objects by kind, for summaries.
pub fn shared_by_kind(pair: &PairOverlap) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for s in &pair.shared {
        let kind = s.split(' ').next().unwrap_or_default().to_string();
        *out.entry(kind).or_insert(0) += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_level_is_finer_than_namespace_level() {
        let a =
            vec![Object::new("apps", "v1", "Deployment", "shop", "web"), Object::new("", "v1", "Namespace", "", "x")];
        let b = vec![Object::new("apps", "v1", "Deployment", "shop", "api")];
        let c = vec![Object::new("apps", "v1", "Deployment", "shop", "web"), Object::new("", "v1", "Pod", "shop", "p")];
        let sets = [
            ResourceSet { backup: "a".into(), objects: &a },
            ResourceSet { backup: "b".into(), objects: &b },
            ResourceSet { backup: "c".into(), objects: &c },
        ];
        let o = overlap(&sets);
        assert_eq!(o.pairs.len(), 3);
        let ab = &o.pairs[0];
        assert!(ab.parallel_safe && !ab.velero_namespace_level_safe);
        assert_eq!(ab.shared_namespaces, ["shop"]);
        let ac = &o.pairs[1];
        assert!(!ac.parallel_safe);
        assert_eq!(ac.shared, ["Deployment.apps shop/web"]);
        assert_eq!(shared_by_kind(ac)["Deployment.apps"], 1);
        assert!(!o.parallel_safe);
    }
}
