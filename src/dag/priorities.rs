//! Restore resource priorities: Velero's defaults (docs/upstream.md §V7)
//! and the `a,b,-,c` syntax of `velero server --restore-resource-priorities` (`pkg/types/priority.go`).
//!
//! A priority list ranks resources into tiers: the high list in order, then every other resource (one tier:
//! Velero restores "the rest" alphabetically, which is tidiness, not a dependency), then the low list in order.
//! The graph turns tiers into edges, "each kind after the kinds ranked before it" (see `graph.rs`).

use std::fmt;

/// Velero's `HighPriorities`, exactly as the source lists them (item 4 is singular there too).
pub const VELERO_HIGH: [&str; 23] = [
    "customresourcedefinitions",
    "namespaces",
    "storageclasses",
    "volumesnapshotclass.snapshot.storage.k8s.io",
    "volumesnapshotcontents.snapshot.storage.k8s.io",
    "volumesnapshots.snapshot.storage.k8s.io",
    "datauploads.velero.io",
    "persistentvolumes",
    "persistentvolumeclaims",
    "clusterroles",
    "roles",
    "serviceaccounts",
    "clusterrolebindings",
    "rolebindings",
    "secrets",
    "configmaps",
    "limitranges",
    "priorityclasses",
    "pods",
    "replicasets.apps",
    "clusterclasses.cluster.x-k8s.io",
    "endpoints",
    "services",
];

/// Velero's `LowPriorities`.
pub const VELERO_LOW: [&str; 5] = [
    "clusterbootstraps.run.tanzu.vmware.com",
    "clusters.cluster.x-k8s.io",
    "clusterresourcesets.addons.cluster.x-k8s.io",
    "apps.kappctrl.k14s.io",
    "packageinstalls.packaging.carvel.dev",
];

/// A parsed priority list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Priorities {
    pub high: Vec<String>,
    pub low: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriorityError {
    #[error("priorities {0:?}: only one \"-\" may split the high and low lists")]
    TwoSeparators(String),
    #[error("priorities {list:?}: entry {index} is empty")]
    EmptyEntry { list: String, index: usize },
    #[error("priorities {list:?}: {entry:?} is listed twice")]
    Repeated { list: String, entry: String },
}

impl Default for Priorities {
    fn default() -> Self {
        Self::velero_default()
    }
}

impl Priorities {
    pub fn velero_default() -> Self {
        Self {
            high: VELERO_HIGH.iter().map(|s| s.to_string()).collect(),
            low: VELERO_LOW.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// No priorities at all: only references and rules order objects.
    pub fn none() -> Self {
        Self { high: Vec::new(), low: Vec::new() }
    }

    /// Velero's syntax: comma-separated; one `-` splits high from low; no `-` means all high; a leading `-` means
    /// only low; a trailing `-` means only high. Entries are compared in lower case.
    pub fn parse(text: &str) -> Result<Self, PriorityError> {
        let mut out = Self::none();
        let mut seen_separator = false;
        if text.trim().is_empty() {
            return Ok(out);
        }
        for (index, entry) in text.split(',').enumerate() {
            let entry = entry.trim().to_ascii_lowercase();
            if entry == "-" {
                if seen_separator {
                    return Err(PriorityError::TwoSeparators(text.to_string()));
                }
                seen_separator = true;
                continue;
            }
            if entry.is_empty() {
                return Err(PriorityError::EmptyEntry { list: text.to_string(), index });
            }
            if out.high.contains(&entry) || out.low.contains(&entry) {
                return Err(PriorityError::Repeated { list: text.to_string(), entry });
            }
            if seen_separator { out.low.push(entry) } else { out.high.push(entry) }
        }
        Ok(out)
    }

    /// The tier of a resource: its index in the high list; `high.len()` for everything else; after that the low
    /// list. An entry names a resource as Velero's discovery resolves it: `resource.group` (`replicasets.apps`),
    /// a bare plural of any group (`customresourcedefinitions`), or a singular `kind[.group]`
    /// (`volumesnapshotclass.snapshot.storage.k8s.io`).
    pub fn tier(&self, resource: &str, group: &str, kind: &str) -> u32 {
        let matches = |entry: &String| entry_matches(entry, resource, group, kind);
        if let Some(i) = self.high.iter().position(matches) {
            return i as u32;
        }
        let rest = self.high.len() as u32;
        match self.low.iter().position(matches) {
            Some(j) => rest + 1 + j as u32,
            None => rest,
        }
    }

    /// The name of a tier, for explanations.
    pub fn tier_name(&self, tier: u32) -> String {
        let t = tier as usize;
        if t < self.high.len() {
            self.high[t].clone()
        } else if t == self.high.len() {
            "(other resources)".to_string()
        } else {
            self.low.get(t - self.high.len() - 1).cloned().unwrap_or_default()
        }
    }
}

/// Whether a priority entry (lower case) names this resource; see [`Priorities::tier`].
pub fn entry_matches(entry: &str, resource: &str, group: &str, kind: &str) -> bool {
    if entry == resource {
        return true;
    }
    let plural = resource.split_once('.').map_or(resource, |(p, _)| p);
    match entry.split_once('.') {
        None => entry == plural || entry.eq_ignore_ascii_case(kind),
        Some((head, tail)) => tail == group && head.eq_ignore_ascii_case(kind),
    }
}

/// Velero's `Priorities.String()`: the high list, then `-` and the low list when there is one.
impl fmt::Display for Priorities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut all: Vec<&str> = self.high.iter().map(String::as_str).collect();
        if !self.low.is_empty() {
            all.push("-");
            all.extend(self.low.iter().map(String::as_str));
        }
        f.write_str(&all.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_velero_syntax() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            ("a,b,-,c", &["a", "b"], &["c"]),
            ("a,b", &["a", "b"], &[]),
            ("-,c,d", &[], &["c", "d"]),
            ("a,-", &["a"], &[]),
            ("", &[], &[]),
            (" Pods , secrets ", &["pods", "secrets"], &[]),
        ];
        for (text, high, low) in cases {
            let p = Priorities::parse(text).unwrap();
            assert!(p.high == *high && p.low == *low, "{text}: {p:?}");
        }
        assert!(matches!(Priorities::parse("a,-,b,-,c"), Err(PriorityError::TwoSeparators(_))));
        assert!(matches!(Priorities::parse("a,,b"), Err(PriorityError::EmptyEntry { index: 1, .. })));
        assert!(matches!(Priorities::parse("a,-,a"), Err(PriorityError::Repeated { .. })));
    }

    #[test]
    fn display_round_trips() {
        for text in ["a,b,-,c", "a,b", "-,c"] {
            let p = Priorities::parse(text).unwrap();
            assert_eq!(Priorities::parse(&p.to_string()).unwrap(), p);
        }
        assert_eq!(Priorities::parse("a,b,-,c").unwrap().to_string(), "a,b,-,c");
        let d = Priorities::velero_default().to_string();
        assert!(d.starts_with("customresourcedefinitions,namespaces,storageclasses,"), "{d}");
        assert!(d.contains(",services,-,clusterbootstraps.run.tanzu.vmware.com,"), "{d}");
    }

    #[test]
    fn tiers_follow_velero_order() {
        let p = Priorities::velero_default();
        assert_eq!(p.tier("customresourcedefinitions.apiextensions.k8s.io", "apiextensions.k8s.io", "X"), 0);
        assert_eq!(p.tier("customresourcedefinitions", "", "CustomResourceDefinition"), 0);
        assert_eq!(
            p.tier("volumesnapshotclasses.snapshot.storage.k8s.io", "snapshot.storage.k8s.io", "VolumeSnapshotClass"),
            3
        );
        assert_eq!(p.tier("pods", "", "Pod"), 18);
        assert_eq!(p.tier("replicasets.apps", "apps", "ReplicaSet"), 19);
        assert_eq!(p.tier("deployments.apps", "apps", "Deployment"), 23);
        assert_eq!(p.tier("clusters.cluster.x-k8s.io", "cluster.x-k8s.io", "Cluster"), 25);
        assert_eq!(p.tier_name(23), "(other resources)");
        assert_eq!(p.tier_name(24), "clusterbootstraps.run.tanzu.vmware.com");
    }
}
