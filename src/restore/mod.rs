//! `ferry restore`: for a tenant backup whose namespace was mapped (`a` on the source → `b` on the target),
//! NAC's NonAdminRestore cannot restore it — it forbids `namespaceMapping` and forces `includedNamespaces` to
//! the NAR's own namespace (docs/design.md §3 rule 4) — so ferry creates a Velero Restore with `namespaceMapping
//! {a: b}` instead, with admin credentials. Pure: from the Backup CR on the target and the mapping config to
//! the Restore to create.

use serde_json::{Value, json};

use crate::model::labels;
use crate::resolve::NamespaceMappings;

/// What to do for a restore request.
#[derive(Debug, Clone, PartialEq)]
pub enum RestorePlan {
    /// The namespace is not mapped: NAC's NonAdminRestore in `namespace` works as usual.
    Identity { namespace: String },
    /// Create this Velero Restore.
    Create { restore: Value, from: String, to: String },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    #[error("Backup {0} was not materialized by ferry (no {label} label); restore it with Velero directly", label = labels::FERRY_MANAGED_BY)]
    NotFerrys(String),
    #[error(
        "Backup {backup} names no single namespace (includedNamespaces {namespaces:?}); ferry restores tenant backups of one namespace"
    )]
    NotOneNamespace { backup: String, namespaces: Vec<String> },
    #[error("Backup {0} has no {key} annotation: its source cluster is unknown", key = labels::FERRY_SOURCE_CLUSTER)]
    NoSourceCluster(String),
    #[error("{0}")]
    Refused(String),
}

/// Decides the restore for `backup` (the Backup CR as it exists on `target`).
pub fn plan_restore(
    backup: &Value,
    target: &str,
    mappings: &NamespaceMappings,
    restore_name: &str,
) -> Result<RestorePlan, RestoreError> {
    let name = backup.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let label = |key: &str| backup.pointer("/metadata/labels").and_then(|l| l.get(key)).and_then(Value::as_str);
    let annotation =
        |key: &str| backup.pointer("/metadata/annotations").and_then(|l| l.get(key)).and_then(Value::as_str);
    if label(labels::FERRY_MANAGED_BY) != Some(labels::FERRY_MANAGED_BY_VALUE) {
        return Err(RestoreError::NotFerrys(name));
    }
    let source_cluster =
        annotation(labels::FERRY_SOURCE_CLUSTER).ok_or_else(|| RestoreError::NoSourceCluster(name.clone()))?;
    let namespaces: Vec<String> = backup
        .pointer("/spec/includedNamespaces")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let [source_namespace] = namespaces.as_slice() else {
        return Err(RestoreError::NotOneNamespace { backup: name, namespaces });
    };
    // The mapping config decides, and is checked again here (protected namespaces: docs/design.md §6).
    let target_namespace = mappings
        .target_namespace(source_cluster, target, source_namespace)
        .map_err(|refusal| RestoreError::Refused(refusal.0))?;
    if &target_namespace == source_namespace {
        return Ok(RestorePlan::Identity { namespace: target_namespace });
    }
    let velero_namespace = backup.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("velero");
    let restore = json!({
        "apiVersion": "velero.io/v1",
        "kind": "Restore",
        "metadata": {
            "name": restore_name,
            "namespace": velero_namespace,
            "labels": {
                labels::FERRY_MANAGED_BY: labels::FERRY_MANAGED_BY_VALUE,
                labels::VELERO_BACKUP_NAME: crate::model::names::velero_label_value(&name),
            },
            "annotations": {
                labels::FERRY_BACKUP_NAME: name,
                labels::FERRY_NAMESPACE_MAPPING: format!("{source_namespace}={target_namespace}"),
                labels::FERRY_SOURCE_CLUSTER: source_cluster,
            },
        },
        "spec": {
            "backupName": name,
            "includedNamespaces": [source_namespace],
            "namespaceMapping": {source_namespace.as_str(): target_namespace.as_str()},
        },
    });
    Ok(RestorePlan::Create { restore, from: source_namespace.clone(), to: target_namespace })
}

/// Velero's terminal Restore phases.
pub fn is_terminal_phase(phase: &str) -> bool {
    matches!(phase, "Completed" | "PartiallyFailed" | "Failed" | "FailedValidation")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::{NamespaceMapping, ProtectedNamespaces};
    use std::collections::BTreeMap;

    fn mappings(to: &str) -> NamespaceMappings {
        let protected = ProtectedNamespaces { listed: Default::default(), velero_namespaces: BTreeMap::new() };
        let mapping = NamespaceMapping {
            from: "a".into(),
            to: "b".into(),
            namespaces: [("team-a".to_string(), to.to_string())].into(),
            prefix: None,
        };
        NamespaceMappings::new(vec![mapping], protected).expect("mappings")
    }

    fn backup(managed: bool) -> Value {
        let mut labels_map = serde_json::Map::new();
        if managed {
            labels_map.insert(labels::FERRY_MANAGED_BY.into(), labels::FERRY_MANAGED_BY_VALUE.into());
        }
        json!({"metadata": {"name": "nightly", "namespace": "openshift-adp", "labels": labels_map,
                            "annotations": {labels::FERRY_SOURCE_CLUSTER: "a"}},
               "spec": {"includedNamespaces": ["team-a"]}})
    }

    #[test]
    fn a_mapped_namespace_gets_a_restore_with_the_mapping() {
        let plan = plan_restore(&backup(true), "b", &mappings("team-a-dr"), "r1").expect("plan");
        let RestorePlan::Create { restore, from, to } = plan else { panic!("expected a restore") };
        assert_eq!((from.as_str(), to.as_str()), ("team-a", "team-a-dr"));
        assert_eq!(restore["spec"]["namespaceMapping"]["team-a"], "team-a-dr");
        assert_eq!(restore["spec"]["backupName"], "nightly");
        assert_eq!(restore["metadata"]["namespace"], "openshift-adp");
        assert_eq!(restore["metadata"]["labels"][labels::FERRY_MANAGED_BY], "ferry");
    }

    #[test]
    fn identity_mapping_points_at_nac() {
        assert_eq!(
            plan_restore(&backup(true), "b", &mappings("team-a"), "r1"),
            Ok(RestorePlan::Identity { namespace: "team-a".into() })
        );
    }

    #[test]
    fn refusals() {
        assert!(matches!(plan_restore(&backup(false), "b", &mappings("x"), "r"), Err(RestoreError::NotFerrys(_))));
        let mut two = backup(true);
        two["spec"]["includedNamespaces"] = json!(["team-a", "team-b"]);
        assert!(matches!(plan_restore(&two, "b", &mappings("x"), "r"), Err(RestoreError::NotOneNamespace { .. })));
        // A target namespace that is protected is refused again here (prefix rules that could reach one are
        // refused when the config loads; an identity mapping of a protected origin is not).
        let protected = ProtectedNamespaces { listed: Default::default(), velero_namespaces: BTreeMap::new() };
        let m = NamespaceMappings::new(vec![], protected).expect("mappings");
        let mut kube = backup(true);
        kube["spec"]["includedNamespaces"] = json!(["kube-a"]);
        kube["metadata"]["annotations"]["openshift.io/oadp-nab-origin-namespace"] = json!("kube-a");
        let err = plan_restore(&kube, "b", &m, "r").unwrap_err().to_string();
        assert!(err.contains("kube-a") && err.contains("refused"), "{err}");
    }
}
