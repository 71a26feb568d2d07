//! Ownership of a backup: admin backups have no tenant; NAC backups belong to their origin namespace, and
//! only if every NAC mark agrees with the others and with what the backup contains (docs/design.md §3 rule 3).

use crate::model::labels;
use crate::model::names::{invalid_namespace_name, invalid_object_name};
use crate::model::{Backup, Object};

use super::{Refusal, nac_uuid};

/// A tenant's ownership of a NAC backup, from its origin labels and annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    pub nacuuid: String,
    /// The NonAdminBackup's name on the source cluster.
    pub origin_name: String,
    /// The tenant namespace on the source cluster.
    pub origin_namespace: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// Made by a cluster admin (no NAC marks): no tenant, no NAB.
    Admin,
    Tenant(Tenant),
}

/// NAC's `CheckLabelAnnotationValueIsValid`: present, non-empty, shorter than 253.
fn valid_value(v: Option<&str>) -> Option<&str> {
    v.filter(|v| !v.is_empty() && v.len() < 253)
}

/// Resolves the owner of `backup`. A backup with any NAC mark must carry all of them, consistently, and must
/// contain exactly its origin namespace and no cluster-scoped resources; otherwise it is refused.
pub fn owner_of(backup: &Object<Backup>) -> Result<Owner, Refusal> {
    let meta = backup.meta();
    let oadp = meta.label(labels::OADP);
    let managed_by = meta.label(labels::MANAGED_BY);
    let nacuuid = meta.label(labels::NAB_ORIGIN_NACUUID);
    let origin_name = meta.annotation(labels::NAB_ORIGIN_NAME);
    let origin_ns = meta.annotation(labels::NAB_ORIGIN_NAMESPACE);
    let nac_marked = managed_by == Some(labels::NAC_MANAGED_BY_VALUE)
        || nacuuid.is_some()
        || origin_name.is_some()
        || origin_ns.is_some();
    if !nac_marked {
        return Ok(Owner::Admin);
    }

    let mut missing = Vec::new();
    if oadp != Some(labels::OADP_VALUE) {
        missing.push(format!("label {}={}", labels::OADP, labels::OADP_VALUE));
    }
    if managed_by != Some(labels::NAC_MANAGED_BY_VALUE) {
        missing.push(format!("label {}={}", labels::MANAGED_BY, labels::NAC_MANAGED_BY_VALUE));
    }
    for (what, key, value) in [
        ("label", labels::NAB_ORIGIN_NACUUID, nacuuid),
        ("annotation", labels::NAB_ORIGIN_NAME, origin_name),
        ("annotation", labels::NAB_ORIGIN_NAMESPACE, origin_ns),
    ] {
        if valid_value(value).is_none() {
            missing.push(format!("{what} {key}"));
        }
    }
    let (Some(nacuuid), Some(origin_name), Some(origin_ns), true) =
        (valid_value(nacuuid), valid_value(origin_name), valid_value(origin_ns), missing.is_empty())
    else {
        return Err(Refusal(format!("incomplete NAC ownership marks: missing or invalid {}", missing.join(", "))));
    };

    if let Some(reason) = invalid_namespace_name(origin_ns) {
        return Err(Refusal(format!("origin namespace {origin_ns:?} is not a namespace name: {reason}")));
    }
    if let Some(reason) = invalid_object_name(origin_name) {
        return Err(Refusal(format!("origin name {origin_name:?} is not a NonAdminBackup name: {reason}")));
    }
    // NAC generates the NACUUID as `<namespace>-<name>-<uuid>`, cut to 63 characters (`GenerateNacObjectUUID`);
    // one that is not exactly that for the origin namespace and name means the marks were edited.
    if !nac_uuid::matches(nacuuid, origin_ns, origin_name) {
        return Err(Refusal(format!(
            "labels and annotations disagree: NACUUID {nacuuid:?} was not generated for origin {origin_ns}/{origin_name}"
        )));
    }
    // NAC names the Velero Backup after its NACUUID.
    if backup.name() != nacuuid {
        return Err(Refusal(format!(
            "a NAC backup is named after its NACUUID, but {:?} carries NACUUID {nacuuid:?}",
            backup.name()
        )));
    }

    let spec = &backup.view.spec;
    if spec.included_namespaces[..] != [origin_ns] {
        return Err(Refusal(format!(
            "owner namespace {origin_ns:?} but spec.includedNamespaces is {:?}: a tenant backup must contain exactly its own namespace",
            spec.included_namespaces
        )));
    }
    if spec.include_cluster_resources == Some(true) {
        return Err(Refusal("tenant backup includes cluster resources (spec.includeClusterResources: true)".into()));
    }
    if !spec.included_cluster_scoped_resources.is_empty() {
        return Err(Refusal(format!(
            "tenant backup includes cluster-scoped resources {:?}",
            spec.included_cluster_scoped_resources
        )));
    }
    Ok(Owner::Tenant(Tenant {
        nacuuid: nacuuid.to_string(),
        origin_name: origin_name.to_string(),
        origin_namespace: origin_ns.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn nac_backup() -> Value {
        json!({
            "metadata": {
                "name": "team-a-nightly-0b4c6e1a-1d2f-4c4b-9a57-1f2e3d4c5b6a",
                "labels": {
                    "openshift.io/oadp": "True",
                    "app.kubernetes.io/managed-by": "oadp-nac-controller",
                    "openshift.io/oadp-nab-origin-nacuuid": "team-a-nightly-0b4c6e1a-1d2f-4c4b-9a57-1f2e3d4c5b6a"
                },
                "annotations": {
                    "openshift.io/oadp-nab-origin-name": "nightly",
                    "openshift.io/oadp-nab-origin-namespace": "team-a"
                }
            },
            "spec": {"includedNamespaces": ["team-a"]}
        })
    }

    fn owner(v: Value) -> Result<Owner, Refusal> {
        owner_of(&Object::from_value(v).unwrap())
    }

    #[test]
    fn admin_backup_has_no_tenant() {
        let admin = json!({"metadata": {"name": "daily"}, "spec": {"includedNamespaces": ["*"]}});
        assert_eq!(owner(admin), Ok(Owner::Admin));
    }

    #[test]
    fn nac_backup_belongs_to_its_origin_namespace() {
        let Ok(Owner::Tenant(t)) = owner(nac_backup()) else { panic!("not a tenant") };
        assert_eq!((t.origin_namespace.as_str(), t.origin_name.as_str()), ("team-a", "nightly"));
    }

    #[test]
    fn refusals() {
        type Edit = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(&str, Edit, &str)> = vec![
            (
                "other namespace",
                Box::new(|v| v["spec"]["includedNamespaces"] = json!(["team-b"])),
                "includedNamespaces",
            ),
            ("two namespaces", Box::new(|v| v["spec"]["includedNamespaces"] = json!(["team-a", "team-b"])), "exactly"),
            ("no namespaces", Box::new(|v| v["spec"]["includedNamespaces"] = json!(null)), "includedNamespaces"),
            ("wildcard", Box::new(|v| v["spec"]["includedNamespaces"] = json!(["*"])), "includedNamespaces"),
            (
                "cluster resources",
                Box::new(|v| v["spec"]["includeClusterResources"] = json!(true)),
                "cluster resources",
            ),
            (
                "cluster-scoped",
                Box::new(|v| v["spec"]["includedClusterScopedResources"] = json!(["storageclasses"])),
                "cluster-scoped",
            ),
            (
                "annotation edited",
                Box::new(|v| v["metadata"]["annotations"]["openshift.io/oadp-nab-origin-namespace"] = json!("team-b")),
                "disagree",
            ),
            (
                "label missing",
                Box::new(|v| {
                    v["metadata"]["labels"].as_object_mut().unwrap().remove("openshift.io/oadp");
                }),
                "openshift.io/oadp=True",
            ),
            (
                "annotation missing",
                Box::new(|v| {
                    v["metadata"]["annotations"].as_object_mut().unwrap().remove("openshift.io/oadp-nab-origin-name");
                }),
                "oadp-nab-origin-name",
            ),
            (
                "bad namespace",
                Box::new(|v| v["metadata"]["annotations"]["openshift.io/oadp-nab-origin-namespace"] = json!("Team_A")),
                "not a namespace name",
            ),
        ];
        for (name, edit, expect) in cases {
            let mut v = nac_backup();
            edit(&mut v);
            let err = owner(v).expect_err(name);
            assert!(err.0.contains(expect), "{name}: {err}");
        }
    }

    #[test]
    fn long_namespaces_use_nacs_cut() {
        let ns = "a-very-long-tenant-namespace-name";
        let mut v = nac_backup();
        let uuid = format!("{}-0b4c6e1a-1d2f-4c4b-9a57-1f2e3d4c5b6a", &ns[..25]);
        v["metadata"]["labels"]["openshift.io/oadp-nab-origin-nacuuid"] = json!(uuid);
        v["metadata"]["name"] = json!(uuid);
        v["metadata"]["annotations"]["openshift.io/oadp-nab-origin-namespace"] = json!(ns);
        v["spec"]["includedNamespaces"] = json!([ns]);
        assert!(matches!(owner(v), Ok(Owner::Tenant(_))));
    }

    #[test]
    fn names_are_kubernetes_names_and_the_nacuuid_is_exactly_nacs() {
        let mut bad_name = nac_backup();
        bad_name["metadata"]["annotations"]["openshift.io/oadp-nab-origin-name"] = json!("Nightly_Backup");
        assert!(owner(bad_name).unwrap_err().0.contains("not a NonAdminBackup name"));
        // Origin `team` with a NACUUID generated for `team-a`: a prefix test would accept it.
        let mut prefix = nac_backup();
        prefix["metadata"]["annotations"]["openshift.io/oadp-nab-origin-namespace"] = json!("team");
        prefix["spec"]["includedNamespaces"] = json!(["team"]);
        assert!(owner(prefix).unwrap_err().0.contains("was not generated for origin team/nightly"));
        // The Backup must be named after its NACUUID.
        let mut renamed = nac_backup();
        renamed["metadata"]["name"] = json!("innocent-looking");
        assert!(owner(renamed).unwrap_err().0.contains("named after its NACUUID"));
    }
}
