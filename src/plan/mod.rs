//! The desired state per cluster: from the catalog and every cluster's inventory, the exact objects each
//! target must get (docs/design.md §3 rules 1–7). Pure and deterministic: same inputs, same plan, byte for byte.

pub mod binding;
pub mod collision;
pub mod inventory_index;
pub mod non_admin_backup;
pub mod object_template;
pub mod phase;
pub mod pod_volume_backups;
pub mod prerequisite;
pub mod retirement;
pub mod simulate;
pub mod template;
pub mod velero_backup;

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;

use crate::catalog::{self, CatalogBackup, CatalogError, Location, LocationCatalog};
use crate::model::{Backup, BackupStorageLocation, Inventory, Kind, Object, PodVolumeBackup};
use crate::resolve::{NamespaceMappings, Owner, owner_of};
use inventory_index::InventoryIndex;

pub use prerequisite::Prerequisite;
pub use template::{PlannedObject, TemplateCache, TemplateKey};

/// What a plan item asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Create `object` (it does not exist on the cluster).
    Create,
    /// Never materialize: `reason` says why.
    Refuse,
    /// An object of that name exists and is not ours or not this backup's: left untouched.
    Conflict,
    /// To be created once `waitsFor` exists.
    Wait,
    /// ferry's object of a backup that is gone (rule 5): the agent deletes it (`retirement.mode: delete`).
    Retire,
    /// What `retire` would be in `retirement.mode: report` (the default): shown, never deleted.
    #[serde(rename = "would-retire")]
    WouldRetire,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Refuse => "refuse",
            Action::Conflict => "conflict",
            Action::Wait => "wait",
            Action::Retire => "retire",
            Action::WouldRetire => "would-retire",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanItem {
    pub action: Action,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// The Velero backup this item belongs to.
    pub backup: String,
    pub reason: Option<String>,
    pub waits_for: Option<Prerequisite>,
    /// The object that would be applied: complete for `create`, a template for `wait` (its missing parts are
    /// what it waits for), absent otherwise.
    pub object: Option<PlannedObject>,
}

impl PlanItem {
    /// An item about a backup as a whole (refused, or waiting), reported on its Backup CR's name.
    pub fn about_backup(
        action: Action,
        target: &Target<'_>,
        backup: &str,
        reason: String,
        waits_for: Option<Prerequisite>,
    ) -> Self {
        PlanItem {
            action,
            kind: "Backup".into(),
            namespace: target.cluster.velero_namespace.clone(),
            name: backup.to_string(),
            backup: backup.to_string(),
            reason: Some(reason),
            waits_for,
            object: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterPlan {
    pub cluster: String,
    pub items: Vec<PlanItem>,
}

impl ClusterPlan {
    pub fn count(&self, action: Action) -> usize {
        self.items.iter().filter(|i| i.action == action).count()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub clusters: Vec<ClusterPlan>,
    pub errors: Vec<CatalogError>,
}

/// One cluster as the planner sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterState {
    pub name: String,
    pub velero_namespace: String,
    pub inventory: Inventory,
    /// Location name → the BSL on this cluster that reads it, where config names it explicitly.
    pub storage_locations: BTreeMap<String, String>,
    /// The locations the config grants this cluster (`clusters[].locations` and `storageLocations` keys): it
    /// reads no other, whatever BSLs its agent reports (docs/design.md §3 rule 6).
    pub granted_locations: BTreeSet<String>,
    /// Config opt-out of the read-only rule: this cluster may read other clusters' locations through read-write
    /// BSLs (its Velero could then delete the writer's backups).
    pub allow_read_write_locations: bool,
    /// The agent is connected and live, so the inventory is current: only then is anything retired (rule 5).
    /// Recorded inventories (`ferry plan`) are never live.
    pub live: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PlanOptions {
    /// Rule 1 is optional: with `false`, Velero's own sync creates Backup CRs and ferry only waits for them.
    pub materialize_velero_backups: bool,
    /// "Now", for expiration checks and retirement's grace period (the planner reads no clock).
    pub now: SystemTime,
    /// Rule 5: how absence is proven and what is done then.
    pub retirement: retirement::RetirementOptions,
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self { materialize_velero_backups: true, now: SystemTime::UNIX_EPOCH, retirement: Default::default() }
    }
}

/// Everything the planner needs for one backup on one target.
pub struct Target<'a> {
    pub cluster: &'a ClusterState,
    pub location: &'a Location,
    pub bsl: &'a Object<BackupStorageLocation>,
    pub options: &'a PlanOptions,
    /// Objects built once per pass for every cluster that gets the same (`plan/template.rs`).
    pub templates: &'a TemplateCache,
    /// The cluster's inventory by what planning looks up.
    pub index: &'a InventoryIndex<'a>,
}

impl Target<'_> {
    /// The object `build` makes of `entry` for this target, shared with every other target of the pass for
    /// which `target` (the properties written into it) is the same.
    pub fn object(
        &self,
        entry: &CatalogBackup,
        kind: &'static str,
        name: &str,
        target: Vec<String>,
        build: impl FnOnce() -> Value,
    ) -> PlannedObject {
        let key = TemplateKey { entry: std::ptr::from_ref(entry) as usize, kind, name: name.to_string(), target };
        self.templates.get_or_build(key, build)
    }
}

/// Plans every cluster against every location it can read.
pub fn plan<L: AsRef<LocationCatalog>>(
    locations: &[L],
    clusters: &[ClusterState],
    mappings: &NamespaceMappings,
    options: &PlanOptions,
) -> Plan {
    let mut errors: Vec<CatalogError> = locations.iter().flat_map(|l| l.as_ref().errors.iter().cloned()).collect();
    errors.sort();
    let templates = TemplateCache::default();
    let clusters =
        clusters.iter().map(|cluster| plan_cluster_with(locations, cluster, mappings, options, &templates)).collect();
    Plan { clusters, errors }
}

/// Plans one cluster against every location it can read. Takes catalogs by value or shared (`Arc`).
pub fn plan_cluster<L: AsRef<LocationCatalog>>(
    locations: &[L],
    cluster: &ClusterState,
    mappings: &NamespaceMappings,
    options: &PlanOptions,
) -> ClusterPlan {
    plan_cluster_with(locations, cluster, mappings, options, &TemplateCache::default())
}

/// [`plan_cluster`], sharing the objects it builds with the other clusters of the same pass (`templates`).
pub fn plan_cluster_with<L: AsRef<LocationCatalog>>(
    locations: &[L],
    cluster: &ClusterState,
    mappings: &NamespaceMappings,
    options: &PlanOptions,
    templates: &TemplateCache,
) -> ClusterPlan {
    let missing = &cluster.inventory.apis.missing_required;
    if !missing.is_empty() {
        return ClusterPlan {
            cluster: cluster.name.clone(),
            items: missing.iter().map(|crd| missing_crd(cluster, crd)).collect(),
        };
    }
    let mut items = Vec::new();
    let index = InventoryIndex::new(&cluster.inventory);
    // One name is one Backup on a cluster: the first location (in config order) that holds it wins.
    let mut first_location: BTreeMap<&str, &str> = BTreeMap::new();
    // Names an earlier location listed and has not read yet (a cold load still running): whether it holds them
    // is not known, so a later location's backup of that name waits, without a conflict, until it is.
    let mut unread_earlier: BTreeSet<&str> = BTreeSet::new();
    for catalog in locations.iter().map(AsRef::as_ref) {
        let location = &catalog.location;
        let bsl = match binding::storage_location_for(cluster, location) {
            Ok(Some(bsl)) => bsl,
            Ok(None) => continue,
            Err(refusal) => {
                let name = cluster.storage_locations.get(&location.name).cloned().unwrap_or_default();
                items.push(refused_bsl(cluster, name, refusal.0));
                continue;
            }
        };
        // The writer's own BSL on its location needs no grant to be left alone: it has the backups already.
        if location.source_cluster == cluster.name && !binding::is_granted(cluster, location) {
            continue;
        }
        if let Some(collision) = &catalog.collision {
            items.push(collided_bsl(cluster, catalog, bsl, collision));
            // Its names stay taken: a same-named backup elsewhere must not slip in while this one is held back.
            for name in catalog.backups.keys() {
                first_location.entry(name).or_insert(&location.name);
            }
            unread_earlier.extend(catalog.pending.iter().map(String::as_str));
            continue;
        }
        if let Err(refusal) = binding::may_read(cluster, location, bsl) {
            items.push(refused_bsl(cluster, bsl.name().to_string(), refusal.0.clone()));
            // A read-write reader gets every backup refused by name, so each shows why in plan and status.
            if binding::is_granted(cluster, location) {
                let target = Target { cluster, location, bsl, options, templates, index: &index };
                items.extend(
                    catalog
                        .backups
                        .keys()
                        .map(|b| PlanItem::about_backup(Action::Refuse, &target, b, refusal.0.clone(), None)),
                );
            }
            continue;
        }
        let target = Target { cluster, location, bsl, options, templates, index: &index };
        for backup in catalog.backups.values() {
            if unread_earlier.contains(backup.name.as_str()) {
                continue;
            }
            if let Some(first) = first_location.get(backup.name.as_str()) {
                let reason = format!(
                    "backup {:?} is in location {first:?} too, which cluster {} reads first; one name is one Backup \
                     on a cluster, so this one is left out",
                    backup.name, cluster.name
                );
                items.push(PlanItem::about_backup(Action::Conflict, &target, &backup.name, reason, None));
                continue;
            }
            first_location.insert(&backup.name, &location.name);
            items.extend(plan_backup(&target, backup, mappings));
        }
        unread_earlier.extend(catalog.pending.iter().map(String::as_str));
    }
    one_pod_volume_backup_per_name(&mut items);
    items.extend(retirement::plan(locations, cluster, options));
    ClusterPlan { cluster: cluster.name.clone(), items }
}

/// One name is one PVB in a cluster's Velero namespace: a name that two backups' PVB files both hold (Velero
/// names PVBs after their backup, so only a hand-made or hostile file does this) is created for the first backup
/// in plan order and a reported conflict for every other — never applied over the first, whose restore reads it.
fn one_pod_volume_backup_per_name(items: &mut [PlanItem]) {
    let mut first: BTreeMap<String, String> = BTreeMap::new();
    for item in items.iter_mut() {
        if item.kind != PodVolumeBackup::KIND || !matches!(item.action, Action::Create | Action::Wait) {
            continue;
        }
        match first.get(&item.name) {
            None => {
                first.insert(item.name.clone(), item.backup.clone());
            }
            Some(owner) if *owner == item.backup => {}
            Some(owner) => {
                item.reason = Some(format!(
                    "PodVolumeBackup {:?} is in backup {owner:?}'s PVB file too, which is planned first; one name is \
                     one PodVolumeBackup on a cluster, so backup {:?}'s is left out (its restore lacks this volume)",
                    item.name, item.backup
                ));
                item.action = Action::Conflict;
                item.waits_for = None;
                item.object = None;
            }
        }
    }
}

/// A BSL through which the cluster gets nothing, with the reason (an Event on the BSL, a line in status).
fn refused_bsl(cluster: &ClusterState, name: String, reason: String) -> PlanItem {
    PlanItem {
        action: Action::Refuse,
        kind: "BackupStorageLocation".into(),
        namespace: cluster.velero_namespace.clone(),
        name,
        backup: String::new(),
        reason: Some(reason),
        waits_for: None,
        object: None,
    }
}

/// One item for a location in collision, however many backups it holds (100k refusals would say nothing more).
/// Objects already materialized from it stay: a collision is no proof that anything is gone.
fn collided_bsl(
    cluster: &ClusterState,
    catalog: &LocationCatalog,
    bsl: &Object<BackupStorageLocation>,
    collision: &collision::Collision,
) -> PlanItem {
    let mut reason = format!("{}; {} backups of it are held back", collision.reason, catalog.backups.len());
    // A read-write reader is also refused by rule 6: say so, or fixing the collision alone looks like enough.
    if binding::is_granted(cluster, &catalog.location)
        && let Err(refusal) = binding::may_read(cluster, &catalog.location, bsl)
    {
        reason = format!("{reason}; also: {}", refusal.0);
    }
    refused_bsl(cluster, bsl.name().to_string(), reason)
}

/// A cluster without one of Velero's CRDs can hold nothing ferry makes: one refusal per missing CRD.
fn missing_crd(cluster: &ClusterState, crd: &str) -> PlanItem {
    PlanItem {
        action: Action::Refuse,
        kind: "CustomResourceDefinition".into(),
        namespace: String::new(),
        name: crd.to_string(),
        backup: String::new(),
        reason: Some(format!(
            "cluster {} does not serve {crd}, which Velero needs: install Velero's CRDs there; nothing is planned until then",
            cluster.name
        )),
        waits_for: None,
        object: None,
    }
}

/// The items for one backup on one target, in apply order: Backup, then its PVBs, then its NAB.
pub fn plan_backup(target: &Target<'_>, entry: &CatalogBackup, mappings: &NamespaceMappings) -> Vec<PlanItem> {
    let backup = &entry.backup;
    let gate = match phase::gate(backup, target.options.now) {
        Ok(gate) => gate,
        Err(item) => return vec![item.into_item(target, backup.name())],
    };
    let mut items = match owner_of(backup) {
        Err(refusal) => return vec![PlanItem::about_backup(Action::Refuse, target, backup.name(), refusal.0, None)],
        Ok(Owner::Admin) => {
            let (mut items, state) = velero_backup::plan(target, entry, None, gate);
            items.extend(pod_volume_backups::plan(target, entry, &state));
            items
        }
        Ok(Owner::Tenant(tenant)) if target.cluster.inventory.apis.non_admin_backups => {
            non_admin_backup::plan_tenant_backup(target, entry, &tenant, mappings, gate)
        }
        Ok(Owner::Tenant(tenant)) => {
            non_admin_backup::plan_tenant_backup_without_oadp(target, entry, &tenant, mappings, gate)
        }
    };
    if let Some(error) = &entry.pod_volume_backups_error {
        note_unusable_pod_volume_backups(&mut items, target, entry, error);
    }
    items
}

/// A backup whose PVB file is unusable is still materialized (Velero's sync does the same): its Backup item
/// says that its volume data cannot be restored until the file is readable. A Backup that exists already has
/// no item to carry that, so it gets one: WAIT for the readable file (the agent holds it, nothing is written).
fn note_unusable_pod_volume_backups(
    items: &mut Vec<PlanItem>,
    target: &Target<'_>,
    entry: &CatalogBackup,
    error: &str,
) {
    let key = catalog::Layout::new(&target.location.prefix).key(&entry.name, catalog::BackupFile::PodVolumeBackups);
    let note = format!(
        "its PVB file {key} is unusable ({error}): no PodVolumeBackups are materialized, so a restore brings its \
         file-system volumes back empty until the file is readable"
    );
    let about_backup = |i: &PlanItem| i.kind == Backup::KIND && i.name == entry.name;
    let backup_item = items.iter_mut().find(|i| about_backup(i) && matches!(i.action, Action::Create | Action::Wait));
    if let Some(item) = backup_item {
        item.reason = Some(match item.reason.take() {
            Some(reason) => format!("{reason}; {note}"),
            None => note,
        });
        return;
    }
    // Already said (a tenant's NAB held for the file), or the Backup is refused or someone else's.
    let said = items.iter().any(|i| matches!(i.waits_for, Some(Prerequisite::ReadablePodVolumeBackups { .. })));
    if said || items.iter().any(about_backup) {
        return;
    }
    let reason = format!(
        "Backup {} exists here; its PVB file {key} is unusable ({error}): PodVolumeBackups this cluster lacks are \
         not materialized, so a restore may bring its file-system volumes back empty until the file is readable",
        entry.name
    );
    let waits_for = Some(Prerequisite::ReadablePodVolumeBackups { key });
    items.push(PlanItem::about_backup(Action::Wait, target, &entry.name, reason, waits_for));
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
