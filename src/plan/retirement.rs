//! docs/design.md §3 rule 5, guarded retirement: what ferry made from a backup that its location no longer holds (or
//! through a BSL that now points elsewhere) is retired — NAB first, then the Backup CR and PVBs — but only
//! under every guard at once:
//! - the object carries ferry's label and a whole [`Provenance`] (never a user's, Velero's or NAC's object);
//! - its location's last refresh succeeded with a complete listing (no listing error, no outage);
//! - the absence is proven by the location's [`AbsenceLedger`](crate::catalog::absence::AbsenceLedger):
//!   N consecutive complete listings and a grace period (an empty listing after a full one needs a second);
//! - the location is in no writer collision (`plan/collision.rs`);
//! - the cluster's agent is connected and live (its inventory is current);
//! - `retirement.mode: delete`; in `report` mode (the default) the same items are `would-retire`.
//!
//! The agent checks label and provenance again and deletes with UID + resourceVersion preconditions
//! (`agent/retire.rs`), and never sets a NAB's `deleteBackup`: no bucket data is ever touched.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::catalog::LocationCatalog;
use crate::catalog::absence::AbsencePolicy;
use crate::model::{BackupStorageLocation, Kind, NonAdminBackup, Object, Provenance, labels};

use super::binding::reads;
use super::{Action, ClusterState, PlanItem, PlanOptions};

/// `retirement.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RetireMode {
    /// Plan, status and metrics show what would be retired; nothing is deleted.
    #[default]
    Report,
    /// The agents delete it.
    Delete,
}

/// `retirement` in the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetirementOptions {
    pub mode: RetireMode,
    pub policy: AbsencePolicy,
}

/// The ledger key of a backup's absence from its location.
pub fn backup_key(backup: &str) -> String {
    format!("backup/{backup}")
}

/// The ledger key of a cluster's BSL no longer pointing at the location.
pub fn moved_key(cluster: &str, bsl: &str) -> String {
    format!("bsl/{cluster}/{bsl}")
}

/// One object ferry made, as retirement sees it.
struct Made<'a> {
    kind: &'static str,
    namespace: &'a str,
    name: &'a str,
    provenance: Provenance,
    /// The BSL a Backup or PVB is bound to; for a NAB, the BSL of ferry's Backup CR of the same backup.
    bsl: Option<&'a str>,
    /// A NAC backup's CR or PVB (its NAB goes first).
    tenant: bool,
    raw: Value,
}

fn made_objects<'a>(cluster: &'a ClusterState) -> Vec<Made<'a>> {
    let inventory = &cluster.inventory;
    // A NAB names no BSL: it is read through its Backup CR's (ferry's, of the same provenance), so a re-pointed
    // BSL retires the NAB too — first, and the CR and PVBs that wait for it after.
    let cr_bsl: BTreeMap<Provenance, &'a str> = inventory
        .backups
        .iter()
        .filter_map(|b| Some((Provenance::of(b.meta())?, b.view.spec.storage_location.as_str())))
        .collect();
    let mut made = Vec::new();
    let mut push = |kind, object: &'a dyn MadeView, bsl: Option<&'a str>, tenant: bool| {
        if let Some(provenance) = Provenance::of(object.meta_ref()) {
            made.push(Made {
                kind,
                namespace: object.namespace_ref(),
                name: object.name_ref(),
                provenance,
                bsl,
                tenant,
                raw: object.planned(),
            });
        }
    };
    for b in &inventory.backups {
        let tenant = b.meta().label(labels::NAB_ORIGIN_NACUUID).is_some();
        push("Backup", b, Some(b.view.spec.storage_location.as_str()), tenant);
    }
    for p in &inventory.pod_volume_backups {
        push("PodVolumeBackup", p, Some(p.view.spec.backup_storage_location.as_str()), false);
    }
    for n in &inventory.non_admin_backups {
        let bsl = Provenance::of(n.meta()).and_then(|p| cr_bsl.get(&p).copied());
        push(NonAdminBackup::KIND, n, bsl, false);
    }
    made
}

/// The few things retirement reads of any object.
trait MadeView {
    fn meta_ref(&self) -> &crate::model::ObjectMeta;
    fn namespace_ref(&self) -> &str;
    fn name_ref(&self) -> &str;
    /// What the agent checks before it deletes (`agent/retire.rs`): identity, UID, resourceVersion, ferry's label
    /// and the provenance annotations. Built from the typed view, so it is the same whether the inventory kept
    /// each object's JSON (`ferry plan`) or not (the coordinator).
    fn planned(&self) -> Value;
}

impl<T: Kind> MadeView for Object<T> {
    fn meta_ref(&self) -> &crate::model::ObjectMeta {
        self.meta()
    }
    fn namespace_ref(&self) -> &str {
        self.namespace()
    }
    fn name_ref(&self) -> &str {
        self.name()
    }
    fn planned(&self) -> Value {
        let metadata = serde_json::to_value(self.meta()).unwrap_or_default();
        serde_json::json!({"apiVersion": T::API_VERSION, "kind": T::KIND, "metadata": metadata})
    }
}

fn made_from(made: &Made<'_>, catalog: &LocationCatalog) -> bool {
    let location = &catalog.location;
    made.provenance.location == location.name
        && made.provenance.bucket == location.bucket
        && made.provenance.prefix == location.prefix
}

fn in_catalog(catalog: &LocationCatalog, backup: &str) -> bool {
    catalog.backups.contains_key(backup) || catalog.skipped.contains(backup) || catalog.foreign_folders.contains(backup)
}

fn bsl_named<'c>(cluster: &'c ClusterState, name: &str) -> Option<&'c Object<BackupStorageLocation>> {
    cluster.inventory.storage_locations.iter().find(|b| b.name() == name && b.namespace() == cluster.velero_namespace)
}

/// What the coordinator watches in `catalog`'s ledger, from every cluster's inventory, and which of those keys
/// the current state holds: backups ferry's objects came from, and the BSLs they are bound to.
pub fn watched_keys<'c>(
    catalog: &LocationCatalog,
    clusters: impl IntoIterator<Item = &'c ClusterState>,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut watched, mut present) = (BTreeSet::new(), BTreeSet::new());
    for cluster in clusters {
        for made in made_objects(cluster).iter().filter(|m| made_from(m, catalog)) {
            let key = backup_key(&made.provenance.backup_name);
            if in_catalog(catalog, &made.provenance.backup_name) {
                present.insert(key.clone());
            }
            watched.insert(key);
            // A BSL that is gone is not "moved": a reinstall may bring it back, so nothing is retired for it.
            if let Some(bsl) = made.bsl.and_then(|name| bsl_named(cluster, name)) {
                let key = moved_key(&cluster.name, bsl.name());
                if reads(bsl, &catalog.location) {
                    present.insert(key.clone());
                }
                watched.insert(key);
            }
        }
    }
    (watched, present)
}

/// The retire items for one cluster (empty unless every guard holds).
pub fn plan<L: AsRef<LocationCatalog>>(
    locations: &[L],
    cluster: &ClusterState,
    options: &PlanOptions,
) -> Vec<PlanItem> {
    if !cluster.live {
        return Vec::new();
    }
    let retirement = &options.retirement;
    let made = made_objects(cluster);
    // NAB first: NAC then removes its Backup CR itself; a tenant backup's CR and PVBs wait while a NAB of
    // ferry's for the same backup is still there.
    let nab_of: BTreeMap<&str, ()> = made
        .iter()
        .filter(|m| m.kind == NonAdminBackup::KIND)
        .map(|m| (m.provenance.backup_name.as_str(), ()))
        .collect();
    let mut items = Vec::new();
    for catalog in locations.iter().map(AsRef::as_ref) {
        // A location in collision is written by more than one Velero: what its listing lacks proves nothing.
        if catalog.listing != crate::catalog::Listing::Complete
            || catalog.refresh_error.is_some()
            || catalog.collision.is_some()
        {
            continue;
        }
        let ledger = &catalog.absences;
        for m in made.iter().filter(|m| made_from(m, catalog)) {
            let backup = m.provenance.backup_name.as_str();
            let reason = if !in_catalog(catalog, backup) {
                match ledger.confirmed(&backup_key(backup), &retirement.policy, options.now) {
                    Ok(absence) => format!(
                        "backup {backup} is gone from location {:?}: absent from {} complete listings since {}",
                        catalog.location.name,
                        absence.listings,
                        humantime::format_rfc3339_seconds(absence.first_absent)
                    ),
                    Err(_) => continue,
                }
            } else if let Some(bsl) = m.bsl.and_then(|name| bsl_named(cluster, name))
                && !reads(bsl, &catalog.location)
            {
                match ledger.confirmed(&moved_key(&cluster.name, bsl.name()), &retirement.policy, options.now) {
                    Ok(_) => format!(
                        "BSL {:?} now points at bucket {:?} prefix {:?}, not location {:?} (bucket {:?} prefix {:?}) \
                         that this object was made from",
                        bsl.name(),
                        bsl.view.bucket(),
                        bsl.view.prefix(),
                        catalog.location.name,
                        catalog.location.bucket,
                        catalog.location.prefix
                    ),
                    Err(_) => continue,
                }
            } else {
                continue;
            };
            let tenant_part = m.tenant || (m.kind == "PodVolumeBackup" && nab_of.contains_key(backup));
            if tenant_part && m.kind != NonAdminBackup::KIND && nab_of.contains_key(backup) {
                continue;
            }
            let (action, prefix) = match retirement.mode {
                RetireMode::Delete => (Action::Retire, "retire"),
                RetireMode::Report => (Action::WouldRetire, "would retire (retirement.mode is report)"),
            };
            items.push(PlanItem {
                action,
                kind: m.kind.to_string(),
                namespace: m.namespace.to_string(),
                name: m.name.to_string(),
                backup: backup.to_string(),
                reason: Some(format!("{prefix}: {reason}")),
                waits_for: None,
                object: Some(m.raw.clone().into()),
            });
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;

    use super::super::tests::{admin_backup, bsl, catalog, cluster, entry, identity, now, ns};
    use super::super::{ClusterState, PlanOptions, plan_cluster, simulate};
    use super::*;
    use crate::catalog::absence::AbsenceLedger;
    use crate::catalog::{CatalogBackup, Listing};

    const POLICY: AbsencePolicy = AbsencePolicy { confirmations: 3, grace: Duration::from_secs(600) };

    fn options(mode: RetireMode) -> PlanOptions {
        PlanOptions { now: now(), retirement: RetirementOptions { mode, policy: POLICY }, ..Default::default() }
    }

    /// A live cluster that holds what ferry made for `entries`.
    fn converged(entries: &[Arc<CatalogBackup>], docs: Vec<serde_json::Value>) -> ClusterState {
        let mut t = cluster(docs);
        t.live = true;
        for _ in 0..3 {
            let plan = plan_cluster(&catalog(entries.to_vec()), &t, &identity(), &options(RetireMode::Delete));
            simulate::apply(&plan, &mut t.inventory);
        }
        t
    }

    /// The location after `entries` left it, with absence recorded `listings` times, the first `ago` before now.
    fn after_deletion(listings: u32, ago: Duration, clusters: &[&ClusterState]) -> Vec<LocationCatalog> {
        let mut gone = catalog(vec![entry(admin_backup("kept", "Completed"), 0)]);
        let (watched, present) = watched_keys(&gone[0], clusters.iter().copied());
        let mut ledger = AbsenceLedger::default();
        for i in 0..listings {
            let at = now() - ago + Duration::from_secs(u64::from(i));
            ledger.record(&watched, |k| present.contains(k), false, at);
        }
        gone[0].absences = ledger;
        gone
    }

    fn retiring(items: &[PlanItem]) -> Vec<&PlanItem> {
        items.iter().filter(|i| matches!(i.action, Action::Retire | Action::WouldRetire)).collect()
    }

    fn kinds(items: &[PlanItem]) -> Vec<(Action, &str, &str)> {
        retiring(items).into_iter().map(|i| (i.action, i.kind.as_str(), i.name.as_str())).collect()
    }

    #[test]
    fn a_backup_gone_from_its_location_is_retired_once_every_guard_holds() {
        let daily = entry(admin_backup("daily-1", "Completed"), 2);
        let t = converged(&[daily], vec![bsl("b-bsl", "velero")]);
        assert_eq!(t.inventory.backups.len(), 1);
        let locations = after_deletion(3, Duration::from_secs(700), &[&t]);
        let items = plan_cluster(&locations, &t, &identity(), &options(RetireMode::Delete)).items;
        let items: Vec<PlanItem> = retiring(&items).into_iter().cloned().collect();
        assert_eq!(
            kinds(&items),
            [
                (Action::Retire, "Backup", "daily-1"),
                (Action::Retire, "PodVolumeBackup", "daily-1-pvb0"),
                (Action::Retire, "PodVolumeBackup", "daily-1-pvb1"),
            ]
        );
        assert!(items[0].reason.as_deref().unwrap().contains("gone from location \"shared\""));
        assert_eq!(items[0].object.as_ref().unwrap()["metadata"]["uid"], "uid-velero-daily-1", "planned on this UID");

        // Report mode: the same items, never acted on.
        let report = plan_cluster(&locations, &t, &identity(), &options(RetireMode::Report)).items;
        let report = retiring(&report);
        assert!(report.iter().all(|i| i.action == Action::WouldRetire) && report.len() == 3);
        assert!(report[0].reason.as_deref().unwrap().starts_with("would retire (retirement.mode is report)"));
    }

    #[test]
    fn an_inventory_held_without_its_json_retires_the_same_objects_with_the_same_preconditions() {
        let daily = entry(admin_backup("daily-1", "Completed"), 1);
        let mut t = converged(&[daily], vec![bsl("b-bsl", "velero")]);
        for b in t.inventory.backups.iter_mut() {
            let mut v = b.to_value();
            v["metadata"]["resourceVersion"] = "41".into();
            *b = Object::from_value(v).unwrap();
        }
        // As the coordinator holds it: typed views only (`InventoryObject::parse_view`).
        let mut held = t.clone();
        held.inventory.backups =
            t.inventory.backups.iter().map(|b| Object::view_only_text(&b.to_value().to_string()).unwrap()).collect();
        held.inventory.pod_volume_backups = t
            .inventory
            .pod_volume_backups
            .iter()
            .map(|p| Object::view_only_text(&p.to_value().to_string()).unwrap())
            .collect();
        assert_eq!(held.inventory.backups[0].raw_len(), 0, "no JSON kept");
        let locations = after_deletion(3, Duration::from_secs(700), &[&t]);
        let whole = plan_cluster(&locations, &t, &identity(), &options(RetireMode::Delete)).items;
        let viewed = plan_cluster(&locations, &held, &identity(), &options(RetireMode::Delete)).items;
        assert_eq!(retiring(&whole), retiring(&viewed));
        let planned = retiring(&viewed)[0].object.as_ref().unwrap();
        assert_eq!(planned["metadata"]["resourceVersion"], "41");
        let whole_planned = retiring(&whole)[0].object.as_ref().unwrap();
        let source_uid = &whole_planned["metadata"]["annotations"][labels::FERRY_BACKUP_UID];
        assert!(source_uid.is_string(), "the provenance annotation is planned");
        assert_eq!(&planned["metadata"]["annotations"][labels::FERRY_BACKUP_UID], source_uid);
        assert_eq!(planned["metadata"]["labels"][labels::FERRY_MANAGED_BY], labels::FERRY_MANAGED_BY_VALUE);
        assert_eq!((planned["apiVersion"].as_str(), planned["kind"].as_str()), (Some("velero.io/v1"), Some("Backup")));
    }

    #[test]
    fn no_guard_can_be_skipped() {
        let daily = entry(admin_backup("daily-1", "Completed"), 1);
        let t = converged(&[daily], vec![bsl("b-bsl", "velero")]);
        let retired = |locations: &[LocationCatalog], t: &ClusterState| {
            retiring(&plan_cluster(locations, t, &identity(), &options(RetireMode::Delete)).items).len()
        };
        assert_eq!(retired(&after_deletion(3, Duration::from_secs(700), &[&t]), &t), 2, "all guards hold");
        // Too few listings, however long ago; enough listings, but within the grace period.
        assert_eq!(retired(&after_deletion(2, Duration::from_secs(100_000), &[&t]), &t), 0);
        assert_eq!(retired(&after_deletion(3, Duration::from_secs(60), &[&t]), &t), 0);
        // The location's listing is incomplete, or its last refresh failed (bucket outage).
        let mut incomplete = after_deletion(3, Duration::from_secs(700), &[&t]);
        incomplete[0].listing = Listing::Incomplete { reason: "page 3 failed".into() };
        assert_eq!(retired(&incomplete, &t), 0);
        let mut failing = after_deletion(3, Duration::from_secs(700), &[&t]);
        failing[0].refresh_error = Some("connection refused".into());
        assert_eq!(retired(&failing, &t), 0);
        // The location is in a writer collision (two Velero instances write there).
        let mut collided = after_deletion(3, Duration::from_secs(700), &[&t]);
        collided[0].collision = Some(crate::catalog::Collision {
            writers: vec!["cluster-a".into(), "cluster-b".into()],
            reason: "collision: two writers".into(),
        });
        assert_eq!(retired(&collided, &t), 0);
        // A stale or disconnected cluster.
        let mut stale = t.clone();
        stale.live = false;
        assert_eq!(retired(&after_deletion(3, Duration::from_secs(700), &[&t]), &stale), 0);
        // Objects that are not ferry's, or carry no whole provenance (made by an older ferry), are never retired.
        let mut foreign = t.clone();
        for b in foreign.inventory.backups.iter_mut() {
            let mut v = b.to_value();
            v["metadata"]["labels"].as_object_mut().unwrap().remove(labels::FERRY_MANAGED_BY);
            *b = Object::from_value(v).unwrap();
        }
        foreign.inventory.pod_volume_backups.clear();
        assert_eq!(retired(&after_deletion(3, Duration::from_secs(700), &[&t]), &foreign), 0);
        let mut older = t.clone();
        for b in older.inventory.backups.iter_mut() {
            let mut v = b.to_value();
            v["metadata"]["annotations"].as_object_mut().unwrap().remove(labels::FERRY_BACKUP_UID);
            *b = Object::from_value(v).unwrap();
        }
        older.inventory.pod_volume_backups.clear();
        assert_eq!(retired(&after_deletion(3, Duration::from_secs(700), &[&t]), &older), 0);
        // A backup that is still listed (even only as skipped or a folder without metadata) is never retired.
        let mut skipped = after_deletion(3, Duration::from_secs(700), &[&t]);
        skipped[0].skipped.insert("daily-1".into());
        assert_eq!(retired(&skipped, &t), 0);
    }

    #[test]
    fn a_tenants_nab_goes_first_and_its_backup_cr_after() {
        let nac = super::super::tests::nac_entry();
        let t = converged(std::slice::from_ref(&nac), vec![bsl("b-bsl", "velero"), ns("team-a")]);
        assert_eq!((t.inventory.non_admin_backups.len(), t.inventory.backups.len()), (1, 1));
        let locations = after_deletion(3, Duration::from_secs(700), &[&t]);
        let items = plan_cluster(&locations, &t, &identity(), &options(RetireMode::Delete)).items;
        assert_eq!(kinds(&items), [(Action::Retire, "NonAdminBackup", "nightly")]);
        // NAC removes the CR once the NAB is gone; where it does not (no NAC running), ferry does.
        let mut nab_gone = t.clone();
        nab_gone.inventory.non_admin_backups.clear();
        let items = plan_cluster(&locations, &nab_gone, &identity(), &options(RetireMode::Delete)).items;
        assert_eq!(kinds(&items)[0], (Action::Retire, "Backup", nac.name.as_str()));
    }

    #[test]
    fn a_bsl_pointed_at_another_bucket_retires_what_ferry_made_from_the_old_one() {
        let daily = entry(admin_backup("daily-1", "Completed"), 0);
        let t = converged(std::slice::from_ref(&daily), vec![bsl("b-bsl", "velero")]);
        let mut moved = t.clone();
        let mut repointed = bsl("b-bsl", "elsewhere");
        repointed["metadata"]["uid"] = json!("bsl-uid");
        moved.inventory.storage_locations = vec![Object::from_value(repointed).unwrap()];
        // The backup is still in the location; the BSL no longer reads it.
        let mut locations = catalog(vec![daily]);
        let (watched, present) = watched_keys(&locations[0], [&moved]);
        assert!(
            watched.contains(&moved_key("cluster-b", "b-bsl")) && !present.contains(&moved_key("cluster-b", "b-bsl"))
        );
        for i in 0..3u64 {
            locations[0].absences.record(
                &watched,
                |k| present.contains(k),
                false,
                now() - Duration::from_secs(700 - i),
            );
        }
        let items = plan_cluster(&locations, &moved, &identity(), &options(RetireMode::Delete)).items;
        let retire: Vec<_> = items.iter().filter(|i| i.action == Action::Retire).collect();
        assert_eq!(retire.len(), 1, "{items:#?}");
        assert!(retire[0].reason.as_deref().unwrap().contains("now points at bucket"), "{:?}", retire[0].reason);
    }

    /// Issue 29 (1): a NAB names no BSL, but is read through its Backup CR's; re-pointing that BSL retires the
    /// tenant's backup too: the NAB first, then (once it is gone) the Backup CR and its PVBs.
    #[test]
    fn a_bsl_pointed_at_another_bucket_retires_a_tenants_nab_then_its_backup_cr() {
        let nac = super::super::tests::nac_entry();
        let t = converged(std::slice::from_ref(&nac), vec![bsl("b-bsl", "velero"), ns("team-a")]);
        assert_eq!((t.inventory.non_admin_backups.len(), t.inventory.backups.len()), (1, 1));
        let mut moved = t.clone();
        moved.inventory.storage_locations = vec![Object::from_value(bsl("b-bsl", "elsewhere")).unwrap()];
        let mut locations = catalog(vec![nac.clone()]);
        let (watched, present) = watched_keys(&locations[0], [&moved]);
        for i in 0..3u64 {
            let at = now() - Duration::from_secs(700 - i);
            locations[0].absences.record(&watched, |k| present.contains(k), false, at);
        }
        let items = plan_cluster(&locations, &moved, &identity(), &options(RetireMode::Delete)).items;
        assert_eq!(kinds(&items), [(Action::Retire, "NonAdminBackup", "nightly")], "{items:#?}");
        assert!(retiring(&items)[0].reason.as_deref().unwrap().contains("now points at bucket"));
        let mut nab_gone = moved.clone();
        nab_gone.inventory.non_admin_backups.clear();
        let items = plan_cluster(&locations, &nab_gone, &identity(), &options(RetireMode::Delete)).items;
        let retired = kinds(&items);
        assert_eq!(retired[0], (Action::Retire, "Backup", nac.name.as_str()), "{retired:?}");
        assert!(retired[1..].iter().all(|(_, kind, _)| *kind == "PodVolumeBackup") && retired.len() > 1, "{retired:?}");
    }
}
