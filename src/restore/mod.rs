//! `ferry restore`: a Velero Restore of a backup that ferry materialized on a target cluster, into the namespace
//! the config maps its source namespace to (`a` on the source → `b` on the target). For a tenant backup that is
//! the one way into a mapped namespace: NAC's NonAdminRestore forbids `namespaceMapping` and forces
//! `includedNamespaces` to the NAR's own namespace (docs/design.md §3 rule 4). For an admin backup it is
//! `velero restore create --from-backup` with the mapping filled in from the config. Pure: from the Backup CR on
//! the target and the mapping config to the Restore to create; [`existing`] finds one made before.

pub mod existing;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::model::labels;
use crate::model::names::{MAX_OBJECT_NAME, cut};
use crate::resolve::NamespaceMappings;

/// What to do for a restore request.
#[derive(Debug, Clone, PartialEq)]
pub enum RestorePlan {
    /// The namespace is not mapped: the backup restores as it is, with the usual tools (see [`UnmappedHint`]).
    Identity { namespace: String, tenant: bool },
    /// Create this Velero Restore.
    Create { restore: Value, from: String, to: String },
}

/// How the Restore to create is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreNaming {
    /// [`default_restore_name`]: one name per backup and mapping, so that a repeated (or concurrent) request
    /// finds the Restore already there instead of making Velero restore the same objects twice.
    Default,
    /// The name the operator chose (`--name`).
    Named(String),
    /// A new, server-generated name (`--new`): another Restore of the same backup, asked for deliberately.
    New,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    #[error("Backup {0} was not materialized by ferry (no {label} label); restore it with Velero directly", label = labels::FERRY_MANAGED_BY)]
    NotFerrys(String),
    #[error(
        "Backup {backup} names no single namespace (includedNamespaces {namespaces:?}); ferry restores backups of one namespace"
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
    naming: &RestoreNaming,
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
        let tenant = annotation(labels::NAB_ORIGIN_NAMESPACE).is_some();
        return Ok(RestorePlan::Identity { namespace: target_namespace, tenant });
    }
    let velero_namespace = backup.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("velero");
    let mut metadata = json!({
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
    });
    match naming {
        RestoreNaming::Default => {
            metadata["name"] = default_restore_name(&name, source_namespace, &target_namespace).into();
        }
        RestoreNaming::Named(chosen) => metadata["name"] = chosen.as_str().into(),
        RestoreNaming::New => metadata["generateName"] = generate_name_base(&name).into(),
    }
    let restore = json!({
        "apiVersion": "velero.io/v1",
        "kind": "Restore",
        "metadata": metadata,
        "spec": {
            "backupName": name,
            "includedNamespaces": [source_namespace],
            "namespaceMapping": {source_namespace.as_str(): target_namespace.as_str()},
        },
    });
    Ok(RestorePlan::Create { restore, from: source_namespace.clone(), to: target_namespace })
}

/// `<backup>-ferry-<8 hex digits>`: the hash covers the backup and the mapping, so the same request always gets
/// the same name (a second create answers AlreadyExists), and a changed mapping gets another. The backup's part
/// is cut so that the name stays within Kubernetes' limit.
pub fn default_restore_name(backup: &str, from: &str, to: &str) -> String {
    let digest = Sha256::digest(format!("{backup}\n{from}\n{to}").as_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    const SUFFIX: usize = "-ferry-".len() + 8;
    format!("{}-ferry-{hash}", cut(backup, MAX_OBJECT_NAME - SUFFIX).trim_end_matches(['-', '.']))
}

/// `<backup>-ferry-`, for a server-generated name (the API server appends five characters and cuts the base to
/// leave room for them).
fn generate_name_base(backup: &str) -> String {
    format!("{}-ferry-", cut(backup, MAX_OBJECT_NAME - "-ferry-".len() - 5).trim_end_matches(['-', '.']))
}

/// What to tell an operator who asked for a restore of a backup that is not mapped on the target: the tools
/// that restore it as it is, for the kind of backup and of cluster.
pub fn unmapped_hint(backup: &str, namespace: &str, tenant: bool, oadp: bool, velero_namespace: &str) -> String {
    let velero = format!("velero restore create --from-backup {backup} -n {velero_namespace}");
    let how = match (tenant, oadp) {
        (true, true) => format!(
            "the tenant restores it with a NonAdminRestore in {namespace} naming its NonAdminBackup (or an admin \
             with `{velero}`)"
        ),
        (true, false) => {
            format!("this cluster serves no NonAdminRestores (no OADP): an admin restores it with `{velero}`")
        }
        (false, _) => format!("restore it with `{velero}`"),
    };
    format!("Backup {backup} is not mapped (namespace {namespace} on both clusters): {how}; no Restore created.")
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
        let plan =
            plan_restore(&backup(true), "b", &mappings("team-a-dr"), &RestoreNaming::Named("r1".into())).expect("plan");
        let RestorePlan::Create { restore, from, to } = plan else { panic!("expected a restore") };
        assert_eq!((from.as_str(), to.as_str()), ("team-a", "team-a-dr"));
        assert_eq!(restore["spec"]["namespaceMapping"]["team-a"], "team-a-dr");
        assert_eq!(restore["spec"]["backupName"], "nightly");
        assert_eq!(restore["metadata"]["namespace"], "openshift-adp");
        assert_eq!(restore["metadata"]["labels"][labels::FERRY_MANAGED_BY], "ferry");
        assert_eq!(restore["metadata"]["name"], "r1");
    }

    #[test]
    fn the_default_name_is_one_per_backup_and_mapping() {
        let name = |to: &str| {
            let plan = plan_restore(&backup(true), "b", &mappings(to), &RestoreNaming::Default).expect("plan");
            let RestorePlan::Create { restore, .. } = plan else { panic!("expected a restore") };
            restore["metadata"]["name"].as_str().expect("a name").to_string()
        };
        assert_eq!(name("team-a-dr"), name("team-a-dr"), "the same request, the same name");
        assert_ne!(name("team-a-dr"), name("team-a-dr2"), "another mapping, another name");
        assert!(name("team-a-dr").starts_with("nightly-ferry-"), "{}", name("team-a-dr"));
        assert_eq!(name("team-a-dr").len(), "nightly-ferry-".len() + 8);
        let long = default_restore_name(&"b".repeat(253), "a", "b");
        assert!(long.len() <= MAX_OBJECT_NAME, "{}", long.len());
        assert_eq!(crate::model::names::invalid_object_name(&long), None);
        let dotted = default_restore_name(&format!("{}.x", "b".repeat(237)), "a", "b");
        assert_eq!(crate::model::names::invalid_object_name(&dotted), None, "{dotted}");
    }

    #[test]
    fn new_asks_the_server_for_a_name() {
        let plan = plan_restore(&backup(true), "b", &mappings("team-a-dr"), &RestoreNaming::New).expect("plan");
        let RestorePlan::Create { restore, .. } = plan else { panic!("expected a restore") };
        assert_eq!(restore["metadata"]["generateName"], "nightly-ferry-");
        assert!(restore["metadata"].get("name").is_none());
    }

    #[test]
    fn unmapped_hints_name_the_tool_for_the_cluster() {
        let tenant_oadp = unmapped_hint("n", "team-a", true, true, "openshift-adp");
        assert!(tenant_oadp.contains("NonAdminRestore in team-a"), "{tenant_oadp}");
        let tenant_plain = unmapped_hint("n", "team-a", true, false, "velero");
        assert!(!tenant_plain.contains("NonAdminRestore in"), "{tenant_plain}");
        assert!(tenant_plain.contains("velero restore create --from-backup n -n velero"), "{tenant_plain}");
        let admin = unmapped_hint("n", "shop", false, true, "velero");
        assert!(!admin.contains("NonAdmin"), "{admin}");
        assert!(admin.contains("velero restore create --from-backup n -n velero"), "{admin}");
    }

    #[test]
    fn identity_mapping_points_at_nac() {
        assert_eq!(
            plan_restore(&backup(true), "b", &mappings("team-a"), &RestoreNaming::Default),
            Ok(RestorePlan::Identity { namespace: "team-a".into(), tenant: false })
        );
        let mut tenant = backup(true);
        tenant["metadata"]["annotations"][labels::NAB_ORIGIN_NAMESPACE] = json!("team-a");
        assert_eq!(
            plan_restore(&tenant, "b", &mappings("team-a"), &RestoreNaming::Default),
            Ok(RestorePlan::Identity { namespace: "team-a".into(), tenant: true })
        );
    }

    #[test]
    fn refusals() {
        assert!(matches!(
            plan_restore(&backup(false), "b", &mappings("x"), &RestoreNaming::Default),
            Err(RestoreError::NotFerrys(_))
        ));
        let mut two = backup(true);
        two["spec"]["includedNamespaces"] = json!(["team-a", "team-b"]);
        assert!(matches!(
            plan_restore(&two, "b", &mappings("x"), &RestoreNaming::Default),
            Err(RestoreError::NotOneNamespace { .. })
        ));
        // A target namespace that is protected is refused again here (prefix rules that could reach one are
        // refused when the config loads; an identity mapping of a protected origin is not).
        let protected = ProtectedNamespaces { listed: Default::default(), velero_namespaces: BTreeMap::new() };
        let m = NamespaceMappings::new(vec![], protected).expect("mappings");
        let mut kube = backup(true);
        kube["spec"]["includedNamespaces"] = json!(["kube-a"]);
        kube["metadata"]["annotations"]["openshift.io/oadp-nab-origin-namespace"] = json!("kube-a");
        let err = plan_restore(&kube, "b", &m, &RestoreNaming::Default).unwrap_err().to_string();
        assert!(err.contains("kube-a") && err.contains("refused"), "{err}");
    }
}
