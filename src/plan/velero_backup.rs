//! docs/design.md §3 rule 1: the Velero Backup CR on the target, bound to the target's own BSL.

use serde_json::Value;

use crate::catalog::CatalogBackup;
use crate::model::names::velero_label_value;
use crate::model::{Backup, Kind, Object, labels, ownership};
use crate::resolve::Tenant;

use super::object_template::{for_target, metadata_mut, set_annotation, set_label, set_spec};
use super::phase::PhaseGate;
use super::{Action, PlanItem, PlannedObject, Prerequisite, Target};

/// Where a tenant backup lands on the target.
pub struct Placement<'a> {
    pub tenant: &'a Tenant,
    pub target_namespace: &'a str,
}

/// The state of the backup's CR on the target, which its PVBs and NAB depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackupState {
    /// Exists (the UID may be unknown in a recorded inventory).
    Exists { uid: Option<String> },
    /// Created by this plan: the UID is known only once it exists.
    ToCreate,
    /// Left to Velero's own sync (`materialize.veleroBackups: false`).
    AwaitingVeleroSync,
    /// A different Backup holds the name: nothing of this backup may be materialized.
    Conflict,
}

impl BackupState {
    pub fn waits_for(&self, target: &Target<'_>, backup: &str) -> Prerequisite {
        let (namespace, name) = (target.cluster.velero_namespace.clone(), backup.to_string());
        match self {
            BackupState::Exists { .. } => Prerequisite::BackupUid { namespace, name },
            BackupState::AwaitingVeleroSync => Prerequisite::VeleroSync { namespace, name },
            BackupState::ToCreate | BackupState::Conflict => Prerequisite::Backup { namespace, name },
        }
    }
}

/// Rule 1: if the target has no Backup of this name, create a copy of `velero-backup.json` bound to the
/// target's BSL (`spec.storageLocation` and label `velero.io/storage-location`), with source-cluster owner
/// references dropped. A tenant backup mapped to another namespace carries that namespace as its NAC origin
/// namespace (rule 4: NAC refuses a NAB whose Backup names another origin), the original in
/// `ferry.dev/source-namespace`.
pub fn plan(
    target: &Target<'_>,
    entry: &CatalogBackup,
    placement: Option<&Placement<'_>>,
    gate: PhaseGate,
) -> (Vec<PlanItem>, BackupState) {
    let name = entry.name.as_str();
    let ns = target.cluster.velero_namespace.as_str();
    let item =
        |action, reason: Option<String>, waits_for: Option<Prerequisite>, object: Option<PlannedObject>| PlanItem {
            action,
            kind: Backup::KIND.into(),
            namespace: ns.to_string(),
            name: name.to_string(),
            backup: name.to_string(),
            reason,
            waits_for,
            object,
        };
    let existing = target.index.backup(ns, name);
    if let Some(existing) = existing {
        if is_same_backup(existing, target, entry) {
            let uid = existing.meta().uid.clone().filter(|u| !u.is_empty());
            return (Vec::new(), BackupState::Exists { uid });
        }
        let reason = format!(
            "Backup {ns}/{name} exists but was not synced from location {:?} (its storageLocation is {:?}); left untouched",
            target.location.name, existing.view.spec.storage_location
        );
        return (vec![item(Action::Conflict, Some(reason), None, None)], BackupState::Conflict);
    }
    if !target.options.materialize_velero_backups {
        let waits = Prerequisite::VeleroSync { namespace: ns.to_string(), name: name.to_string() };
        return (vec![item(Action::Wait, None, Some(waits), None)], BackupState::AwaitingVeleroSync);
    }
    let shape = vec![
        target.bsl.name().to_string(),
        ns.to_string(),
        placement.map(|p| p.target_namespace.to_string()).unwrap_or_default(),
        format!("{gate:?}"),
    ];
    let object = target.object(entry, Backup::KIND, name, shape, || desired(target, entry, placement, gate));
    (vec![item(Action::Create, None, None, Some(object))], BackupState::ToCreate)
}

/// An existing Backup of the same name is this backup when Velero synced it from the BSL that reads this
/// location, ferry created it from this location, or it carries the same NACUUID.
fn is_same_backup(existing: &Object<Backup>, target: &Target<'_>, entry: &CatalogBackup) -> bool {
    let meta = existing.meta();
    let from_bsl = existing.view.spec.storage_location == target.bsl.name();
    let ferry_from_here = ownership::is_ferry_managed(&meta.labels)
        && meta.annotation(labels::FERRY_SOURCE_LOCATION) == Some(target.location.name.as_str());
    let nacuuid = entry.backup.meta().label(labels::NAB_ORIGIN_NACUUID);
    let same_nacuuid = nacuuid.is_some() && meta.label(labels::NAB_ORIGIN_NACUUID) == nacuuid;
    from_bsl || ferry_from_here || same_nacuuid
}

fn desired(target: &Target<'_>, entry: &CatalogBackup, placement: Option<&Placement<'_>>, gate: PhaseGate) -> Value {
    let bsl = target.bsl.name();
    let mut object = for_target(
        entry.backup.to_value(),
        Backup::API_VERSION,
        Backup::KIND,
        &target.cluster.velero_namespace,
        target.location,
        entry,
    );
    // Owner UIDs are the source cluster's: on the target the garbage collector would delete the Backup at
    // once. Velero's sync drops Schedule references; ferry drops them all.
    metadata_mut(&mut object).remove("ownerReferences");
    set_spec(&mut object, "storageLocation", bsl.into());
    set_label(&mut object, labels::VELERO_STORAGE_LOCATION, &velero_label_value(bsl));
    if let Some(p) = placement
        && p.target_namespace != p.tenant.origin_namespace
    {
        set_annotation(&mut object, labels::NAB_ORIGIN_NAMESPACE, p.target_namespace);
        set_annotation(&mut object, labels::FERRY_SOURCE_NAMESPACE, &p.tenant.origin_namespace);
    }
    if gate == PhaseGate::ExpiredToPartiallyFailed
        && let Some(status) = object.get_mut("status").and_then(Value::as_object_mut)
    {
        status.insert("phase".into(), "PartiallyFailed".into());
    }
    object
}
