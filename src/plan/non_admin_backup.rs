//! docs/design.md §3 rule 3 (and the NAC consequences of rule 4): a tenant's backup on the target, as a
//! NonAdminBackup in the namespace mapped from its origin, in the shape NAC treats as *synced*.

use serde_json::{Map, Value, json};

use crate::catalog::{BackupFile, CatalogBackup, Layout};
use crate::model::{Kind, NonAdminBackup, Object, labels};
use crate::resolve::{NamespaceMappings, Tenant};

use super::phase::PhaseGate;
use super::velero_backup::{self, BackupState, Placement};
use super::{Action, PlanItem, PlannedObject, Prerequisite, Target, object_template, pod_volume_backups};

/// All items of a tenant (NAC) backup on one target.
///
/// - The NAB goes only into the namespace mapped from the origin namespace, and only if that namespace
///   exists: ferry never creates tenant namespaces.
/// - NAC's garbage collector deletes NAC Backups that have no NAB, so the Backup CR and PVBs are
///   materialized only together with the NAB (rule 4): no namespace, nothing at all.
/// - A NAB that already refers to the NACUUID (sync label or `status.veleroBackup.nacuuid`, e.g. made by NAC's
///   own sync) counts as done; a NAB of the same name that refers to something else is a conflict.
pub fn plan_tenant_backup(
    target: &Target<'_>,
    entry: &CatalogBackup,
    tenant: &Tenant,
    mappings: &NamespaceMappings,
    gate: PhaseGate,
) -> Vec<PlanItem> {
    let inventory = &target.cluster.inventory;
    let origin_ns = tenant.origin_namespace.as_str();
    let target_ns = match mapped_namespace(target, entry, tenant, mappings) {
        Ok(ns) => ns,
        Err(refused) => return refused,
    };
    let nab_item =
        |action, reason: Option<String>, waits_for: Option<Prerequisite>, object: Option<PlannedObject>| PlanItem {
            action,
            kind: NonAdminBackup::KIND.into(),
            namespace: target_ns.clone(),
            name: tenant.origin_name.clone(),
            backup: entry.name.clone(),
            reason,
            waits_for,
            object,
        };

    if !inventory.namespaces.contains(&target_ns) {
        let reason = "a tenant backup is materialized only together with its NonAdminBackup, and ferry never creates tenant namespaces";
        return vec![nab_item(
            Action::Wait,
            Some(reason.into()),
            Some(Prerequisite::Namespace { name: target_ns.clone() }),
            None,
        )];
    }
    let storage_location = match target.bsl.view.non_admin_origin() {
        None => String::new(),
        Some((ns, name)) if ns == target_ns => name.to_string(),
        Some((ns, _)) => {
            let reason = format!(
                "location {:?} is read on {} through BSL {:?}, which belongs to namespace {ns:?}'s NonAdminBackupStorageLocation",
                target.location.name,
                target.cluster.name,
                target.bsl.name()
            );
            return vec![nab_item(Action::Refuse, Some(reason), None, None)];
        }
    };

    let referring = target.index.nabs_referring_to(&tenant.nacuuid);
    // Only a NAB in the backup's own (mapped) namespace counts as done: one in any other namespace would let a
    // tenant block another tenant's backup by labelling a NAB of their own. Such a claim is reported instead.
    let done = referring.iter().any(|n| n.namespace() == target_ns);
    // Ferry's own NABs of this backup that no longer match (docs/design.md §3 rule 4: create-only, report drift). They
    // are never re-applied: each is reported once, in place of any other item about it.
    let made_by_ferry = |n: &Object<NonAdminBackup>| {
        let meta = n.meta();
        meta.label(labels::FERRY_MANAGED_BY) == Some(labels::FERRY_MANAGED_BY_VALUE)
            && meta.annotation(labels::FERRY_BACKUP_NAME) == Some(entry.name.as_str())
            && meta.annotation(labels::FERRY_SOURCE_LOCATION) == Some(target.location.name.as_str())
    };
    let drifted: Vec<&Object<NonAdminBackup>> = target
        .index
        .nabs_annotated_with_backup(&entry.name)
        .iter()
        .copied()
        .filter(|n| made_by_ferry(n))
        .filter(|n| {
            n.namespace() != target_ns || n.meta().label(labels::NAB_SYNCED_FROM_NACUUID) != Some(&tenant.nacuuid)
        })
        .collect();
    let is_drifted = |n: &Object<NonAdminBackup>| drifted.iter().any(|d| std::ptr::eq(*d, n));
    let mut foreign_claims: Vec<PlanItem> = referring
        .iter()
        .filter(|n| n.namespace() != target_ns && !is_drifted(n))
        .map(|n| PlanItem {
            action: Action::Conflict,
            kind: NonAdminBackup::KIND.into(),
            namespace: n.namespace().to_string(),
            name: n.name().to_string(),
            backup: entry.name.clone(),
            reason: Some(format!(
                "NonAdminBackup {}/{} claims backup {} of namespace {origin_ns:?}, which belongs in {target_ns:?}; \
                 the claim does not count (NAC refuses it too: its origin namespace differs) and is left untouched",
                n.namespace(),
                n.name(),
                tenant.nacuuid
            )),
            waits_for: None,
            object: None,
        })
        .collect();
    foreign_claims.extend(drifted.iter().map(|n| drift_item(n, entry, tenant, &target_ns)));
    if !done && let Some(other) = target.index.non_admin_backup(&target_ns, &tenant.origin_name) {
        let mut items = foreign_claims;
        if !is_drifted(other) {
            let refers_to = other.view.nacuuid().unwrap_or("no backup");
            let reason = format!(
                "NonAdminBackup {target_ns}/{} exists and refers to {refers_to}, not {}; left untouched",
                other.name(),
                tenant.nacuuid
            );
            items.push(nab_item(Action::Conflict, Some(reason), None, None));
        }
        return items;
    }

    // Decision (docs/design.md §3 rule 3): a NAB whose PVBs are unreadable is held, not created. A NonAdminRestore from it
    // would bring the tenant's volumes back empty without a word; an admin sees why in status. The Backup CR
    // waits with it (NAC deletes a NAC Backup without its NAB), and both follow once the file is readable.
    if !done && let Some(error) = &entry.pod_volume_backups_error {
        let key = Layout::new(&target.location.prefix).key(&entry.name, BackupFile::PodVolumeBackups);
        let reason = format!(
            "held: the backup's PVB file {key} is unusable ({error}); a NonAdminRestore would restore its volumes \
             empty, so the NonAdminBackup (and its Backup CR) wait until the file is readable"
        );
        let mut items = foreign_claims;
        items.push(nab_item(Action::Wait, Some(reason), Some(Prerequisite::ReadablePodVolumeBackups { key }), None));
        return items;
    }

    let placement = Placement { tenant, target_namespace: &target_ns };
    let (mut items, state) = velero_backup::plan(target, entry, Some(&placement), gate);
    items.extend(foreign_claims);
    if state == BackupState::Conflict {
        return items;
    }
    if !done && let Some(reason) = origin_mismatch(target, entry, &target_ns) {
        items.push(nab_item(Action::Conflict, Some(reason), None, None));
        return items;
    }
    items.extend(pod_volume_backups::plan(target, entry, &state));
    if done {
        return items;
    }
    // A mapped NAB's restore hint names the cluster: shared only between clusters that would get the same.
    let hint_cluster = if target_ns != origin_ns { target.cluster.name.clone() } else { String::new() };
    let shape = vec![target_ns.clone(), storage_location.clone(), hint_cluster];
    let object = target.object(entry, NonAdminBackup::KIND, &tenant.origin_name, shape, || {
        desired(target, entry, tenant, &target_ns, &storage_location)
    });
    let note = (target_ns != origin_ns).then(|| restore_hint(entry, origin_ns, &target_ns, &target.cluster.name));
    match &state {
        BackupState::Exists { .. } => items.push(nab_item(Action::Create, note, None, Some(object))),
        _ => items.push(nab_item(Action::Wait, note, Some(state.waits_for(target, &entry.name)), Some(object))),
    }
    items
}

/// docs/design.md §3 rule 7: a tenant backup on a cluster that serves no NonAdminBackups (plain Velero, no OADP)
/// becomes what an admin can restore: its Backup CR and PVBs, shaped exactly as on an OADP cluster (origin
/// namespace mapped), whether or not the tenant namespace exists there. No NAC runs on such a cluster, so
/// no garbage collector deletes a NAC Backup without its NAB (the coupling of rule 4 does not apply), and
/// `ferry restore` (a Velero Restore with the configured namespace mapping) restores it — Velero creates the
/// namespace. Ownership and mapping are checked as for OADP targets: a backup refused there is refused here.
pub fn plan_tenant_backup_without_oadp(
    target: &Target<'_>,
    entry: &CatalogBackup,
    tenant: &Tenant,
    mappings: &NamespaceMappings,
    gate: PhaseGate,
) -> Vec<PlanItem> {
    let target_ns = match mapped_namespace(target, entry, tenant, mappings) {
        Ok(ns) => ns,
        Err(refused) => return refused,
    };
    let placement = Placement { tenant, target_namespace: &target_ns };
    let (mut items, state) = velero_backup::plan(target, entry, Some(&placement), gate);
    let note = admin_only_note(entry, tenant, &target_ns, &target.cluster.name);
    for item in items.iter_mut().filter(|i| i.action != Action::Conflict && i.reason.is_none()) {
        item.reason = Some(note.clone());
    }
    if state == BackupState::Conflict {
        return items;
    }
    items.extend(pod_volume_backups::plan(target, entry, &state));
    items
}

/// A NAB that ferry made for this backup and that no longer matches it: reported as drift, never re-applied.
fn drift_item(nab: &Object<NonAdminBackup>, entry: &CatalogBackup, tenant: &Tenant, target_ns: &str) -> PlanItem {
    let at = format!("{}/{}", nab.namespace(), nab.name());
    let what = if nab.namespace() != target_ns {
        format!(
            "it is in namespace {:?}, but backup {} now maps to {target_ns:?} (the namespace mapping changed)",
            nab.namespace(),
            entry.name
        )
    } else {
        let now =
            nab.meta().label(labels::NAB_SYNCED_FROM_NACUUID).map_or("no such label".to_string(), |v| format!("{v:?}"));
        format!("its label {}={} was changed (now {now})", labels::NAB_SYNCED_FROM_NACUUID, tenant.nacuuid)
    };
    PlanItem {
        action: Action::Conflict,
        kind: NonAdminBackup::KIND.into(),
        namespace: nab.namespace().to_string(),
        name: nab.name().to_string(),
        backup: entry.name.clone(),
        reason: Some(format!(
            "drift: ferry's NonAdminBackup {at} no longer matches its backup: {what}; ferry creates NonAdminBackups \
             once and never re-applies them: undo the change, or delete the NonAdminBackup (a plain delete; never set \
             spec.deleteBackup, which deletes the backup's data) to have it made anew"
        )),
        waits_for: None,
        object: None,
    }
}

/// The tenant namespace on the target, mapped from the origin namespace; or the refusal of the whole backup
/// (a mapping that resolves into a protected or invalid namespace).
fn mapped_namespace(
    target: &Target<'_>,
    entry: &CatalogBackup,
    tenant: &Tenant,
    mappings: &NamespaceMappings,
) -> Result<String, Vec<PlanItem>> {
    let origin_ns = tenant.origin_namespace.as_str();
    mappings
        .target_namespace(&target.location.source_cluster, &target.cluster.name, origin_ns)
        .map_err(|refusal| vec![PlanItem::about_backup(Action::Refuse, target, &entry.name, refusal.0, None)])
}

/// What a tenant backup is on a cluster without OADP, in words (the Backup item's reason in plan and status).
pub fn admin_only_note(entry: &CatalogBackup, tenant: &Tenant, target_ns: &str, cluster: &str) -> String {
    let mapping = if target_ns == tenant.origin_namespace { String::new() } else { format!(" into {target_ns}") };
    format!(
        "tenant backup {}/{}: cluster {cluster} serves no NonAdminBackups (OADP is not installed), so it is there for admins only; restore it{mapping} with `ferry restore {} --cluster {cluster}`",
        tenant.origin_namespace, tenant.origin_name, entry.name
    )
}

/// NAC refuses a NAB whose Velero Backup names another origin namespace. A Backup that exists already
/// (synced by Velero, not ours to change) with another origin makes a NAB in `target_ns` useless.
fn origin_mismatch(target: &Target<'_>, entry: &CatalogBackup, target_ns: &str) -> Option<String> {
    let ns = &target.cluster.velero_namespace;
    let existing = target.index.backup(ns, &entry.name)?;
    let origin = existing.meta().annotation(labels::NAB_ORIGIN_NAMESPACE).unwrap_or("");
    if origin == target_ns {
        return None;
    }
    let bucket_origin = entry.backup.meta().annotation(labels::NAB_ORIGIN_NAMESPACE).unwrap_or("");
    let ours = existing.meta().label(labels::FERRY_MANAGED_BY) == Some(labels::FERRY_MANAGED_BY_VALUE);
    // Velero's own sync copies velero-backup.json as it is: the bucket's (unmapped) origin namespace, no label
    // of ours. That is the target's Velero syncing a BSL that ferry maps, which no apply of ferry's can repair.
    if !ours && origin == bucket_origin {
        let bsl = target.bsl.name();
        return Some(format!(
            "Velero's own backup sync on {cluster} created Backup {ns}/{name} from BSL {bsl:?} with the unmapped \
             origin namespace {origin:?}, so NAC refuses a NonAdminBackup in {target_ns:?}: when namespaces are \
             mapped, Velero's sync must be off for that BSL (spec.backupSyncPeriod: 0s on it, or velero server \
             --backup-sync-period=0, or give ferry a BSL of its own); then delete Backup {ns}/{name} (not with \
             `velero backup delete`, which would delete the backup's data) and ferry re-creates it mapped",
            cluster = target.cluster.name,
            name = entry.name,
        ));
    }
    Some(format!(
        "Backup {ns}/{} exists with origin namespace {origin:?}, so NAC would refuse a NonAdminBackup in {target_ns:?}; \
         it is not ferry's to change",
        entry.name
    ))
}

/// NAC's NonAdminRestore forbids namespaceMapping and restores only into its own namespace (rule 4).
fn restore_hint(entry: &CatalogBackup, origin_ns: &str, target_ns: &str, cluster: &str) -> String {
    format!(
        "mapped {origin_ns} → {target_ns}: a NonAdminRestore in {target_ns} would restore nothing (NAC forbids namespace \
         mapping); an admin can run `ferry restore {} --cluster {cluster}`",
        entry.name
    )
}

/// The NAB in the shape NAC treats as synced: the sync label makes NAC attach to the existing Velero Backup
/// instead of creating a second one.
fn desired(
    target: &Target<'_>,
    entry: &CatalogBackup,
    tenant: &Tenant,
    target_ns: &str,
    storage_location: &str,
) -> Value {
    let mut backup_spec = entry.backup.to_value().get("spec").cloned().unwrap_or_else(|| Value::Object(Map::new()));
    if let Some(spec) = backup_spec.as_object_mut() {
        spec.insert("storageLocation".into(), storage_location.into());
    }
    let mut annotations = Map::new();
    annotations.insert(labels::FERRY_SOURCE_CLUSTER.into(), target.location.source_cluster.clone().into());
    for (key, value) in object_template::provenance(target.location, entry).annotations() {
        annotations.insert(key.into(), value.into());
    }
    if target_ns != tenant.origin_namespace {
        annotations.insert(labels::FERRY_SOURCE_NAMESPACE.into(), tenant.origin_namespace.clone().into());
        annotations
            .insert(labels::FERRY_NAMESPACE_MAPPING.into(), format!("{}={target_ns}", tenant.origin_namespace).into());
        annotations.insert(
            labels::FERRY_RESTORE_HINT.into(),
            restore_hint(entry, &tenant.origin_namespace, target_ns, &target.cluster.name).into(),
        );
    }
    json!({
        "apiVersion": NonAdminBackup::API_VERSION,
        "kind": NonAdminBackup::KIND,
        "metadata": {
            "name": tenant.origin_name,
            "namespace": target_ns,
            "labels": {
                labels::NAB_SYNCED_FROM_NACUUID: tenant.nacuuid,
                labels::FERRY_MANAGED_BY: labels::FERRY_MANAGED_BY_VALUE,
            },
            "annotations": annotations,
        },
        "spec": {"backupSpec": backup_spec},
    })
}
