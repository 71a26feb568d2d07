//! docs/design.md §3 rule 2: the backup's PodVolumeBackups on the target, owned by the target's Backup UID.

use serde_json::Value;

use crate::catalog::CatalogBackup;
use crate::model::names::{invalid_object_name, velero_label_value};
use crate::model::{Backup, Kind, Object, PodVolumeBackup, labels};

use super::object_template::{for_target, metadata_mut, set_label, set_spec};
use super::velero_backup::BackupState;
use super::{Action, PlanItem, PlannedObject, Prerequisite, Target};

/// Rule 2: every PVB of the backup's PVB file that the target lacks (by name and `velero.io/backup-name`) is
/// created in the Velero namespace, its Backup owner reference and `velero.io/backup-uid` set to the UID of
/// the Backup **on the target**, `spec.backupStorageLocation` set to the target's BSL. `spec.pod.namespace`
/// stays the source namespace: Velero's restore matches PVBs by it (rule 4). Backups whose CR already existed
/// get their PVBs too (Velero skips those).
pub fn plan(target: &Target<'_>, entry: &CatalogBackup, state: &BackupState) -> Vec<PlanItem> {
    if *state == BackupState::Conflict || entry.pod_volume_backups.is_empty() {
        return Vec::new();
    }
    let ns = target.cluster.velero_namespace.as_str();
    let backup_label = velero_label_value(&entry.name);
    let item =
        |action, name: &str, reason: Option<String>, waits_for: Option<Prerequisite>, object: Option<PlannedObject>| {
            PlanItem {
                action,
                kind: PodVolumeBackup::KIND.into(),
                namespace: ns.to_string(),
                name: name.to_string(),
                backup: entry.name.clone(),
                reason,
                waits_for,
                object,
            }
        };
    let existing = |name: &str| target.index.pod_volume_backup(ns, name);
    let mut items = Vec::new();
    let mut missing = Vec::new();
    // Names first: on a converged cluster every PVB exists and nothing is decoded.
    for name in entry.pod_volume_backups.names() {
        match existing(name) {
            Some(p) if p.meta().label(labels::VELERO_BACKUP_NAME) == Some(backup_label.as_str()) => {}
            Some(_) => {
                let reason =
                    format!("PodVolumeBackup {ns}/{name} exists but belongs to another backup; left untouched");
                items.push(item(Action::Conflict, name, Some(reason), None, None));
            }
            None => missing.push(name),
        }
    }
    if missing.is_empty() {
        return items;
    }
    let mut seen = std::collections::BTreeSet::new();
    let decoded = target.templates.pod_volume_backups(entry);
    for pvb in decoded.iter().filter(|p| missing.contains(&p.name())) {
        if !seen.insert(pvb.name().to_string()) {
            let reason = format!(
                "PodVolumeBackup {:?} is listed twice in backup {:?}'s PVB file; only the first is materialized",
                pvb.name(),
                entry.name
            );
            items.push(item(Action::Refuse, pvb.name(), Some(reason), None, None));
            continue;
        }
        if let Some(reason) = refusal(entry, pvb) {
            items.push(item(Action::Refuse, pvb.name(), Some(reason), None, None));
            continue;
        }
        let object = |uid: &str| {
            let shape = vec![target.bsl.name().to_string(), ns.to_string(), uid.to_string()];
            target.object(entry, PodVolumeBackup::KIND, pvb.name(), shape, || desired(target, entry, pvb, uid))
        };
        match state {
            BackupState::Exists { uid: Some(uid) } => {
                items.push(item(Action::Create, pvb.name(), None, None, Some(object(uid))));
            }
            _ => {
                let waits_for = state.waits_for(target, &entry.name);
                items.push(item(Action::Wait, pvb.name(), None, Some(waits_for), Some(object(""))));
            }
        }
    }
    items
}

/// docs/design.md §3 rule 6: what a PVB from the bucket must be before it may reach a cluster. An unfinished PVB is
/// work for the target's node-agent; one whose pod is outside the backup's namespaces would let a (tenant's)
/// backup carry another namespace's volume data into a restore. `None` when it may cross.
pub fn refusal(entry: &CatalogBackup, pvb: &Object<PodVolumeBackup>) -> Option<String> {
    let key = format!("PodVolumeBackup {:?} of backup {:?}", pvb.name(), entry.name);
    if let Some(why) = invalid_object_name(pvb.name()) {
        return Some(format!("{key}: metadata.name is not a Kubernetes name ({why})"));
    }
    let phase = pvb.view.status.phase.as_str();
    if !TERMINAL_PHASES.contains(&phase) {
        return Some(format!(
            "{key}: status.phase is {phase:?}, not finished (Completed or Failed); an unfinished PodVolumeBackup is work for the target's node-agent"
        ));
    }
    let own = velero_label_value(&entry.name);
    let label = pvb.meta().label(labels::VELERO_BACKUP_NAME);
    if label != Some(own.as_str()) {
        return Some(format!("{key}: label {} is {label:?}, not its own backup {own:?}", labels::VELERO_BACKUP_NAME));
    }
    let pod_ns = pvb.view.spec.pod.namespace.as_str();
    let spec = &entry.backup.view.spec;
    if !namespace_in_backup(pod_ns, &spec.included_namespaces, &spec.excluded_namespaces) {
        return Some(format!(
            "{key}: spec.pod.namespace {pod_ns:?} is not among the backup's namespaces (includedNamespaces {:?}, excludedNamespaces {:?})",
            spec.included_namespaces, spec.excluded_namespaces
        ));
    }
    None
}

/// Phases after which Velero's node-agent never touches a PVB again.
const TERMINAL_PHASES: [&str; 2] = ["Completed", "Failed"];

/// Whether Velero's namespace filter (`includedNamespaces`, empty or `*` for all, with `*`/`?` wildcards; then
/// `excludedNamespaces`) takes `namespace`.
pub fn namespace_in_backup(namespace: &str, included: &[String], excluded: &[String]) -> bool {
    if namespace.is_empty() {
        return false;
    }
    let included = included.is_empty() || included.iter().any(|p| glob_matches(p, namespace));
    included && !excluded.iter().any(|p| glob_matches(p, namespace))
}

/// `*` (any run) and `?` (one character) wildcards, as in Velero's namespace patterns.
fn glob_matches(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// The PVB to create; `backup_uid` is empty in a template that waits for the Backup.
fn desired(target: &Target<'_>, entry: &CatalogBackup, pvb: &Object<PodVolumeBackup>, backup_uid: &str) -> Value {
    let mut object = for_target(
        pvb.to_value(),
        PodVolumeBackup::API_VERSION,
        PodVolumeBackup::KIND,
        &target.cluster.velero_namespace,
        target.location,
        entry,
    );
    let meta = metadata_mut(&mut object);
    if let Some(Value::Array(refs)) = meta.get_mut("ownerReferences") {
        // Only the reference to this PVB's Backup survives, re-pointed at the target's Backup; any other
        // owner is a source-cluster UID the target's garbage collector would act on.
        refs.retain(|r| is_backup_ref(r, &entry.name));
        for r in refs.iter_mut() {
            r["uid"] = backup_uid.into();
        }
    }
    // Set, not copied: whatever the file said, a PVB is its own backup's (Velero's restore finds PVBs by these).
    set_label(&mut object, labels::VELERO_BACKUP_NAME, &velero_label_value(&entry.name));
    set_label(&mut object, labels::VELERO_BACKUP_UID, backup_uid);
    set_spec(&mut object, "backupStorageLocation", target.bsl.name().into());
    object
}

fn is_backup_ref(r: &Value, backup: &str) -> bool {
    r.get("apiVersion").and_then(Value::as_str) == Some(Backup::API_VERSION)
        && r.get("kind").and_then(Value::as_str) == Some(Backup::KIND)
        && r.get("name").and_then(Value::as_str) == Some(backup)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn velero_namespace_patterns() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(namespace_in_backup("shop", &[], &[]));
        assert!(namespace_in_backup("shop", &s(&["*"]), &[]));
        assert!(namespace_in_backup("team-a", &s(&["team-*"]), &[]));
        assert!(namespace_in_backup("team-a", &s(&["team-?"]), &[]));
        assert!(!namespace_in_backup("team-ab", &s(&["team-?"]), &[]));
        assert!(!namespace_in_backup("kube-system", &s(&["team-a"]), &[]));
        assert!(!namespace_in_backup("kube-system", &s(&["*"]), &s(&["kube-*"])));
        assert!(!namespace_in_backup("", &[], &[]));
        assert!(glob_matches("a*b*c", "axxbyyc") && !glob_matches("a*b*c", "axxbyy"));
    }
}
