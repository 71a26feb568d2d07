//! Property tests of the planner over random catalogs, inventories and mappings.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::{Value, json};

use super::simulate;
use super::tests::{admin_backup, bsl, cluster, entry, ns};
use super::*;
use crate::model::{BackupPhase, labels};
use crate::resolve::{NamespaceMapping, PrefixRewrite, ProtectedNamespaces, owner_of};

const TENANTS: [&str; 3] = ["team-a", "team-b", "team-c"];
const TARGET_NAMESPACES: [&str; 6] = ["team-a", "team-b", "team-c", "team-a-dr", "dr-b", "dr-c"];

#[derive(Debug, Clone)]
struct BackupCase {
    tenant: Option<usize>,
    tampered: bool,
    phase: usize,
    pvbs: usize,
}

fn backup_case() -> impl Strategy<Value = BackupCase> {
    (proptest::option::of(0..TENANTS.len()), proptest::bool::weighted(0.15), 0..BackupPhase::ALL.len(), 0..3usize)
        .prop_map(|(tenant, tampered, phase, pvbs)| BackupCase { tenant, tampered, phase, pvbs })
}

fn backup_json(i: usize, case: &BackupCase) -> Value {
    let phase = BackupPhase::ALL[case.phase].as_str();
    let Some(t) = case.tenant else { return admin_backup(&format!("admin-{i}"), phase) };
    let tenant = TENANTS[t];
    let nacuuid = format!("{tenant}-nab{i}-00000000-0000-4000-8000-{i:012}");
    let included = if case.tampered { TENANTS[(t + 1) % TENANTS.len()] } else { tenant };
    json!({"apiVersion": "velero.io/v1", "kind": "Backup",
        "metadata": {"name": nacuuid, "namespace": "openshift-adp",
            "labels": {labels::OADP: "True", labels::MANAGED_BY: labels::NAC_MANAGED_BY_VALUE,
                labels::NAB_ORIGIN_NACUUID: nacuuid},
            "annotations": {labels::NAB_ORIGIN_NAME: format!("nab{}", i % 3), labels::NAB_ORIGIN_NAMESPACE: tenant}},
        "spec": {"includedNamespaces": [included], "storageLocation": "default"},
        "status": {"phase": phase, "expiration": "2026-12-01T00:00:00Z"}})
}

/// Objects a user made on the target, without ferry's label: same names as ours, other contents.
fn foreign_objects(which: &BTreeSet<usize>, backups: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for &i in which {
        match i % 3 {
            0 => out.push(json!({"kind": "NonAdminBackup", "metadata": {"name": format!("nab{}", i % 3),
                "namespace": TARGET_NAMESPACES[i % TARGET_NAMESPACES.len()]}, "spec": {"backupSpec": {}}})),
            1 => {
                if let Some(b) = backups.get(i % backups.len().max(1)) {
                    out.push(
                        json!({"kind": "Backup", "metadata": {"name": b["metadata"]["name"], "namespace": "velero",
                        "uid": "user-uid"}, "spec": {"storageLocation": "user-bsl"}}),
                    );
                }
            }
            _ => {
                if let Some(b) = backups.get(i % backups.len().max(1)) {
                    out.push(json!({"kind": "PodVolumeBackup", "metadata": {"name": format!("{}-pvb0", b["metadata"]["name"].as_str().unwrap_or("")),
                        "namespace": "velero", "labels": {labels::VELERO_BACKUP_NAME: "someone-else"}}}));
                }
            }
        }
    }
    out
}

fn mappings(explicit: bool, prefix: bool) -> NamespaceMappings {
    let m = NamespaceMapping {
        from: "cluster-a".into(),
        to: "cluster-b".into(),
        namespaces: if explicit { BTreeMap::from([("team-a".into(), "team-a-dr".into())]) } else { BTreeMap::new() },
        prefix: prefix.then(|| PrefixRewrite { strip: "team-".into(), add: "dr-".into() }),
    };
    NamespaceMappings::new(vec![m], ProtectedNamespaces::default()).expect("valid mapping")
}

fn exists(inv: &crate::model::Inventory, kind: &str, namespace: &str, name: &str) -> bool {
    let hit = |n: &str, ns: &str| n == name && ns == namespace;
    match kind {
        "Backup" => inv.backups.iter().any(|o| hit(o.name(), o.namespace())),
        "PodVolumeBackup" => inv.pod_volume_backups.iter().any(|o| hit(o.name(), o.namespace())),
        "NonAdminBackup" => inv.non_admin_backups.iter().any(|o| hit(o.name(), o.namespace())),
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn plans_respect_tenancy_never_touch_existing_objects_and_converge(
        cases in proptest::collection::vec(backup_case(), 0..12),
        present in proptest::collection::btree_set(0..TARGET_NAMESPACES.len(), 0..=TARGET_NAMESPACES.len()),
        foreign in proptest::collection::btree_set(0..12usize, 0..5),
        explicit in any::<bool>(),
        prefix in any::<bool>(),
    ) {
        let backups: Vec<Value> = cases.iter().enumerate().map(|(i, c)| backup_json(i, c)).collect();
        let entries: Vec<_> = backups.iter().zip(&cases).map(|(b, c)| entry(b.clone(), c.pvbs)).collect();
        let by_name: BTreeMap<String, _> = entries.iter().map(|e| (e.name.clone(), e.clone())).collect();
        let mut docs = vec![bsl("b-bsl", "velero")];
        docs.extend(present.iter().map(|&i| ns(TARGET_NAMESPACES[i])));
        docs.extend(foreign_objects(&foreign, &backups));
        let mut target = cluster(docs);
        let mappings = mappings(explicit, prefix);
        let options = PlanOptions { materialize_velero_backups: true, now: super::tests::now(), ..Default::default() };
        let catalogs = super::tests::catalog(entries.clone());

        let mut rounds = 0;
        loop {
            let plan = plan_cluster(&catalogs, &target, &mappings, &options);
            for item in &plan.items {
                if item.kind == "NonAdminBackup" && matches!(item.action, Action::Create | Action::Wait) {
                    let backup = &by_name[&item.backup].backup;
                    let Ok(Owner::Tenant(t)) = owner_of(backup) else {
                        panic!("NAB planned for a backup without a tenant owner: {item:?}");
                    };
                    let mapped = mappings.target_namespace("cluster-a", "cluster-b", &t.origin_namespace).expect("mapped");
                    prop_assert_eq!(&item.namespace, &mapped, "NAB outside the namespace mapped from its origin");
                }
                if item.action == Action::Create {
                    prop_assert!(!exists(&target.inventory, &item.kind, &item.namespace, &item.name),
                        "create planned over an existing object: {:?}", item);
                    let object = item.object.as_ref().expect("create carries its object");
                    prop_assert_eq!(&object["metadata"]["labels"][labels::FERRY_MANAGED_BY], "ferry");
                }
            }
            let created = simulate::apply(&plan, &mut target.inventory);
            if created == 0 {
                prop_assert_eq!(plan.count(Action::Create), 0);
                break;
            }
            rounds += 1;
            prop_assert!(rounds <= 3, "no fixed point after 3 applies");
        }
        // At the fixed point nothing waits on something ferry itself could create.
        let last = plan_cluster(&catalogs, &target, &mappings, &options);
        for item in last.items.iter().filter(|i| i.action == Action::Wait) {
            let external =
                matches!(
                    item.waits_for,
                    Some(
                        Prerequisite::Namespace { .. }
                            | Prerequisite::TerminalPhase
                            | Prerequisite::ReadablePodVolumeBackups { .. }
                    )
                );
            prop_assert!(external, "{:?}", item);
        }
    }
}
