//! Namespace mapping per (source cluster, target cluster): identity by default, explicit pairs, and a prefix
//! rewrite; explicit pairs win. A mapping into a protected namespace is refused (docs/design.md §6).

use std::collections::{BTreeMap, BTreeSet};

use crate::model::names::invalid_namespace_name;

use super::Refusal;

/// Namespaces no tenant may be mapped into, whatever the config says.
pub const ALWAYS_PROTECTED: [&str; 1] = ["default"];
pub const PROTECTED_PREFIXES: [&str; 2] = ["kube-", "openshift-"];

/// `strip` is removed from the front of a source namespace that starts with it, then `add` is put in front.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrefixRewrite {
    pub strip: String,
    pub add: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceMapping {
    pub from: String,
    pub to: String,
    pub namespaces: BTreeMap<String, String>,
    pub prefix: Option<PrefixRewrite>,
}

/// The protected namespaces: `default`, `kube-*`, `openshift-*`, each cluster's Velero namespace, and any
/// listed in config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtectedNamespaces {
    pub listed: BTreeSet<String>,
    /// Cluster → its Velero/OADP namespace.
    pub velero_namespaces: BTreeMap<String, String>,
}

impl ProtectedNamespaces {
    /// Why `namespace` on `cluster` is protected, or `None`.
    pub fn why_protected(&self, cluster: &str, namespace: &str) -> Option<String> {
        if ALWAYS_PROTECTED.contains(&namespace) {
            return Some(format!("{namespace:?} is a protected namespace"));
        }
        if let Some(prefix) = PROTECTED_PREFIXES.iter().find(|p| namespace.starts_with(*p)) {
            return Some(format!("{namespace:?} is protected ({prefix}* namespaces belong to the platform)"));
        }
        // Every configured cluster's Velero namespace, on every cluster: a mapping into `openshift-adp` is as
        // wrong on a cluster whose own Velero lives in `velero` (the namespace may hold OADP later, or a copy).
        if self.velero_namespaces.get(cluster).is_some_and(|v| v == namespace) {
            return Some(format!("{namespace:?} is the Velero/OADP namespace of cluster {cluster:?}"));
        }
        if let Some((other, _)) = self.velero_namespaces.iter().find(|(_, v)| *v == namespace) {
            return Some(format!("{namespace:?} is the Velero/OADP namespace of cluster {other:?}"));
        }
        if self.listed.contains(namespace) {
            return Some(format!("{namespace:?} is listed in protectedNamespaces"));
        }
        None
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    #[error("namespaceMappings {from} → {to}: listed twice; merge the two entries")]
    Duplicate { from: String, to: String },
    #[error("namespaceMappings {from} → {to}: {src:?} → {dst:?} is refused: {reason}")]
    Protected { from: String, to: String, src: String, dst: String, reason: String },
    #[error("namespaceMappings {from} → {to}: {src:?} → {dst:?}: {reason}")]
    InvalidName { from: String, to: String, src: String, dst: String, reason: String },
    #[error("namespaceMappings {from} → {to}: prefix rule (strip {strip:?}, add {add:?}) is refused: {reason}")]
    ProtectedPrefix { from: String, to: String, strip: String, add: String, reason: String },
}

/// Why a prefix rule could rewrite some namespace into a protected one, or `None`. A rewritten name is
/// `add` + the rest, and the rest can be anything: so the rule reaches a protected name when that name starts
/// with `add`, and a protected prefix when either of the two starts with the other.
fn prefix_reaches_protected(p: &PrefixRewrite, protected: &ProtectedNamespaces) -> Option<String> {
    if p.strip.is_empty() && p.add.is_empty() {
        return None;
    }
    let add = p.add.as_str();
    let names = ALWAYS_PROTECTED
        .iter()
        .map(|n| n.to_string())
        .chain(protected.listed.iter().cloned())
        .chain(protected.velero_namespaces.values().cloned());
    for name in names {
        if let Some(rest) = name.strip_prefix(add) {
            let source = format!("{}{rest}", p.strip);
            return Some(format!("it can rewrite {source:?} into {name:?}, a protected namespace"));
        }
    }
    PROTECTED_PREFIXES.iter().find(|q| q.starts_with(add) || add.starts_with(*q)).map(|q| {
        format!(
            "its results can start with {q:?} (those namespaces belong to the platform); list such pairs explicitly"
        )
    })
}

/// All configured mappings, validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceMappings {
    by_pair: BTreeMap<(String, String), NamespaceMapping>,
    protected: ProtectedNamespaces,
}

impl NamespaceMappings {
    /// Validates `mappings`: one entry per (from, to); no explicit pair into a protected namespace; names valid.
    pub fn new(mappings: Vec<NamespaceMapping>, protected: ProtectedNamespaces) -> Result<Self, MappingError> {
        let mut by_pair = BTreeMap::new();
        for m in mappings {
            for (src, dst) in &m.namespaces {
                let err = |reason: String| MappingError::InvalidName {
                    from: m.from.clone(),
                    to: m.to.clone(),
                    src: src.clone(),
                    dst: dst.clone(),
                    reason,
                };
                if let Some(reason) = invalid_namespace_name(src).or_else(|| invalid_namespace_name(dst)) {
                    return Err(err(reason));
                }
                if let Some(reason) = protected.why_protected(&m.to, dst) {
                    return Err(MappingError::Protected {
                        from: m.from.clone(),
                        to: m.to.clone(),
                        src: src.clone(),
                        dst: dst.clone(),
                        reason,
                    });
                }
            }
            if let Some(p) = &m.prefix
                && let Some(reason) = prefix_reaches_protected(p, &protected)
            {
                return Err(MappingError::ProtectedPrefix {
                    from: m.from.clone(),
                    to: m.to.clone(),
                    strip: p.strip.clone(),
                    add: p.add.clone(),
                    reason,
                });
            }
            let key = (m.from.clone(), m.to.clone());
            if by_pair.contains_key(&key) {
                return Err(MappingError::Duplicate { from: m.from, to: m.to });
            }
            by_pair.insert(key, m);
        }
        Ok(Self { by_pair, protected })
    }

    pub fn protected(&self) -> &ProtectedNamespaces {
        &self.protected
    }

    /// The namespace on `target` that `namespace` on `source` maps to. Refused when the result is protected or
    /// not a valid namespace name (possible with prefix rewrites, which cannot all be checked up front).
    pub fn target_namespace(&self, source: &str, target: &str, namespace: &str) -> Result<String, Refusal> {
        let mapping = self.by_pair.get(&(source.to_string(), target.to_string()));
        let mapped = match mapping {
            Some(m) => match m.namespaces.get(namespace) {
                Some(dst) => dst.clone(),
                None => match &m.prefix {
                    Some(p) if namespace.starts_with(&p.strip) => format!("{}{}", p.add, &namespace[p.strip.len()..]),
                    _ => namespace.to_string(),
                },
            },
            None => namespace.to_string(),
        };
        if let Some(reason) = invalid_namespace_name(&mapped) {
            return Err(Refusal(format!("namespace {namespace:?} maps to {mapped:?} on {target}: {reason}")));
        }
        if let Some(reason) = self.protected.why_protected(target, &mapped) {
            return Err(Refusal(format!("namespace {namespace:?} maps to {mapped:?} on {target}, refused: {reason}")));
        }
        Ok(mapped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protected() -> ProtectedNamespaces {
        ProtectedNamespaces {
            listed: ["vault".to_string()].into(),
            velero_namespaces: [
                ("b".to_string(), "openshift-adp".to_string()),
                ("c".to_string(), "velero".to_string()),
            ]
            .into(),
        }
    }

    fn mapping(namespaces: &[(&str, &str)], prefix: Option<(&str, &str)>) -> NamespaceMapping {
        NamespaceMapping {
            from: "a".into(),
            to: "b".into(),
            namespaces: namespaces.iter().map(|(s, d)| (s.to_string(), d.to_string())).collect(),
            prefix: prefix.map(|(strip, add)| PrefixRewrite { strip: strip.into(), add: add.into() }),
        }
    }

    #[test]
    fn identity_pairs_and_prefix() {
        let m = NamespaceMappings::new(vec![mapping(&[("team-a", "team-a-dr")], Some(("team-", "dr-")))], protected())
            .unwrap();
        assert_eq!(m.target_namespace("a", "b", "team-a").unwrap(), "team-a-dr");
        assert_eq!(m.target_namespace("a", "b", "team-b").unwrap(), "dr-b");
        assert_eq!(m.target_namespace("a", "b", "other").unwrap(), "other");
        assert_eq!(m.target_namespace("a", "c", "team-a").unwrap(), "team-a");
        assert_eq!(m.target_namespace("b", "a", "team-a").unwrap(), "team-a");
    }

    #[test]
    fn protected_targets_are_refused_at_load_and_at_resolve() {
        for dst in ["default", "kube-system", "openshift-config", "openshift-adp", "vault"] {
            let err = NamespaceMappings::new(vec![mapping(&[("team-a", dst)], None)], protected()).unwrap_err();
            assert!(matches!(err, MappingError::Protected { .. }), "{dst}: {err}");
            assert!(err.to_string().contains("a → b"), "{err}");
        }
        let m = NamespaceMappings::new(vec![mapping(&[], Some(("team-", "dr-")))], protected()).unwrap();
        // Identity into a protected namespace is refused too: a tenant backup claiming `default` gets nowhere.
        assert!(m.target_namespace("x", "c", "velero").is_err());
        assert!(m.target_namespace("a", "b", "kube-system").unwrap_err().0.contains("protected"));
    }

    /// docs/configuration.md: every configured cluster's `veleroNamespace` is protected on every cluster.
    #[test]
    fn any_clusters_velero_namespace_is_protected_on_every_cluster() {
        // `velero` is cluster c's Velero namespace; b's is openshift-adp.
        let err = NamespaceMappings::new(vec![mapping(&[("team-a", "velero")], None)], protected()).unwrap_err();
        assert!(err.to_string().contains("Velero/OADP namespace of cluster \"c\""), "{err}");
        let prefix = NamespaceMappings::new(vec![mapping(&[], Some(("team-", "vel")))], protected()).unwrap_err();
        assert!(matches!(prefix, MappingError::ProtectedPrefix { .. }), "{prefix}");
        let m = NamespaceMappings::new(vec![], protected()).unwrap();
        let refusal = m.target_namespace("a", "b", "velero").unwrap_err();
        assert!(refusal.0.contains("of cluster \"c\""), "{}", refusal.0);
        assert_eq!(m.target_namespace("a", "b", "team-a").unwrap(), "team-a");
    }

    #[test]
    fn prefix_rules_that_can_reach_a_protected_namespace_are_refused_at_load() {
        // (strip, add): each can rewrite some tenant namespace into a protected one.
        for (strip, add) in
            [("", "kube-"), ("team-", "openshift-"), ("team-", ""), ("team-", "ku"), ("x", "d"), ("t", "vau")]
        {
            let err = NamespaceMappings::new(vec![mapping(&[], Some((strip, add)))], protected()).unwrap_err();
            assert!(matches!(err, MappingError::ProtectedPrefix { .. }), "{strip:?} {add:?}: {err}");
            assert!(err.to_string().contains("a → b"), "{err}");
        }
        for (strip, add) in [("team-", "dr-"), ("", "tenant-"), ("", "")] {
            assert!(
                NamespaceMappings::new(vec![mapping(&[], Some((strip, add)))], protected()).is_ok(),
                "{strip:?} {add:?}"
            );
        }
    }

    #[test]
    fn duplicates_and_bad_names() {
        let dup = NamespaceMappings::new(vec![mapping(&[], None), mapping(&[], None)], protected());
        assert!(matches!(dup, Err(MappingError::Duplicate { .. })));
        let bad = NamespaceMappings::new(vec![mapping(&[("team-a", "Team_A")], None)], protected());
        assert!(matches!(bad, Err(MappingError::InvalidName { .. })));
        let m = NamespaceMappings::new(vec![mapping(&[], Some(("", "x.")))], protected()).unwrap();
        assert!(m.target_namespace("a", "b", "t").is_err());
    }
}
