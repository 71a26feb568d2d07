//! The coordinator's shared state: every configured cluster's record, every location's latest catalog, and
//! which clusters need their DesiredSet recomputed. Sessions, the catalog refresher and the recompute loop all
//! go through it; it holds one mutex, never across an `.await`.
//!
//! Each cluster has two watch channels: its current DesiredSet (sessions send it when it changes) and the id of
//! its current session (a newer stream bumps it, and the older session says goodbye).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use tokio::sync::{Notify, watch};

use super::cluster::{CheckedItems, ClusterRecord, Liveness, Session};
use super::describe::{self, ClusterRecords, UnknownBackup};
use super::held_set::{HeldSet, ItemPool};
use super::leadership::Role;
use super::location::LocationState;
use super::settings::Settings;
use super::status;
use super::telemetry::Telemetry;
use crate::catalog::{Listing, LocationCatalog};
use crate::grpc::convert::desired_set;
use crate::grpc::proto::{
    Ack, ApplyResult, ClusterApis, DescribeBackupResponse, DesiredSet, GetStatusResponse, Hello, ObjectRef,
    ResourceType,
};
use crate::plan::{ClusterState, PlanOptions, TemplateCache, collision, plan_cluster_with, retirement};
use crate::resolve::NamespaceMappings;

/// Why a hub operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HubError {
    #[error("cluster {0:?} is not in the coordinator's config")]
    UnknownCluster(String),
    #[error("this stream was replaced by a newer stream of cluster {0:?}")]
    Replaced(String),
}

/// A published DesiredSet and the inventory generation of its cluster it was planned from.
#[derive(Debug, Default)]
pub struct Published {
    pub set: Arc<HeldSet>,
    pub generation: u64,
}

/// What a session needs to follow its cluster.
pub struct SessionHandle {
    pub id: u64,
    pub desired: watch::Receiver<Arc<Published>>,
    pub current_session: watch::Receiver<u64>,
}

struct ClusterEntry {
    record: ClusterRecord,
    desired: watch::Sender<Arc<Published>>,
    current_session: watch::Sender<u64>,
}

#[derive(Default)]
struct HubState {
    clusters: BTreeMap<String, ClusterEntry>,
    locations: Vec<LocationState>,
    /// Clusters whose inputs changed since their last recompute.
    dirty: BTreeSet<String>,
    /// Clusters whose DesiredSet must be published even if its version did not change, once it is planned
    /// from at least this inventory generation (a session just sent its last snapshot and waits for a set).
    resend: BTreeMap<String, u64>,
    /// Every cluster's DesiredSet items, each once (a thousand clusters planned the same items hold one copy).
    items: ItemPool,
}

/// Everything one recompute needs, copied out of the lock.
pub struct RecomputeInputs {
    /// Each dirty cluster's planner input and the inventory generation it was taken at.
    pub clusters: Vec<(Arc<ClusterState>, u64)>,
    pub catalogs: Vec<Arc<LocationCatalog>>,
    pub complete: bool,
}

pub struct Hub {
    state: Mutex<HubState>,
    /// Wakes the recompute loop when something is dirty.
    pub changed: Notify,
    pub settings: Settings,
    pub mappings: NamespaceMappings,
    next_session: AtomicU64,
    /// This replica's part among coordinator replicas ([`Role::Leader`] unless leader election is on): only a
    /// leader serves agents and operators.
    pub role: watch::Sender<Role>,
    /// The live counters and histograms of `/metrics`.
    pub telemetry: Telemetry,
    /// The planned objects of the last recompute pass, found again by the next (`plan/template.rs`).
    pub templates: TemplateCache,
}

impl Hub {
    pub fn new(
        settings: Settings,
        mappings: NamespaceMappings,
        clusters: Vec<ClusterState>,
        locations: Vec<LocationState>,
    ) -> Self {
        let telemetry =
            Telemetry::new(clusters.iter().map(|c| c.name.as_str()), locations.iter().map(|l| l.name.as_str()));
        let clusters = clusters
            .into_iter()
            .map(|config| {
                let name = config.name.clone();
                let entry = ClusterEntry {
                    record: ClusterRecord::new(config),
                    desired: watch::Sender::new(Arc::new(Published::default())),
                    current_session: watch::Sender::new(0),
                };
                (name, entry)
            })
            .collect();
        let state = HubState { clusters, locations, ..Default::default() };
        let templates = if settings.share_templates { TemplateCache::default() } else { TemplateCache::disabled() };
        Self {
            templates,
            state: Mutex::new(state),
            changed: Notify::new(),
            settings,
            mappings,
            next_session: AtomicU64::new(1),
            role: watch::Sender::new(Role::Leader),
            telemetry,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        // A panic while holding the lock leaves plain data behind; keep serving rather than poison every rpc.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn knows(&self, cluster: &str) -> bool {
        self.lock().clusters.contains_key(cluster)
    }

    /// Accepts a new stream for `cluster`. A previous stream of the same cluster is replaced (it sees the
    /// session id change and says goodbye); the inventory is kept until the new stream's snapshot replaces it.
    pub fn open_session(&self, cluster: &str, hello: &Hello, now: SystemTime) -> Result<SessionHandle, HubError> {
        let mut state = self.lock();
        let entry = state.clusters.get_mut(cluster).ok_or_else(|| HubError::UnknownCluster(cluster.into()))?;
        let id = self.next_session.fetch_add(1, Ordering::Relaxed);
        entry.record.session =
            Some(Session { id, software_version: hello.software_version.clone(), connected_at: now });
        entry.record.last_seen = Some(now);
        entry.record.set_apis(hello.apis.clone());
        entry.current_session.send_replace(id);
        let mut desired = entry.desired.subscribe();
        // The session sends the set after its snapshot was planned, not the one from before it connected.
        desired.mark_unchanged();
        let handle = SessionHandle { id, desired, current_session: entry.current_session.subscribe() };
        drop(state);
        self.telemetry.connected(cluster);
        Ok(handle)
    }

    /// Ends a session; a no-op if a newer one already replaced it.
    pub fn close_session(&self, cluster: &str, id: u64) {
        let mut state = self.lock();
        if let Some(entry) = state.clusters.get_mut(cluster)
            && entry.record.session.as_ref().is_some_and(|s| s.id == id)
        {
            entry.record.session = None;
        }
    }

    /// Runs `f` on the record of `cluster` if `id` is its current session, and notes that the agent spoke.
    fn with_session<T>(
        &self,
        cluster: &str,
        id: u64,
        now: SystemTime,
        f: impl FnOnce(&mut HubState) -> T,
    ) -> Result<T, HubError> {
        let mut state = self.lock();
        let entry = state.clusters.get_mut(cluster).ok_or_else(|| HubError::UnknownCluster(cluster.into()))?;
        if entry.record.session.as_ref().map(|s| s.id) != Some(id) {
            return Err(HubError::Replaced(cluster.into()));
        }
        entry.record.last_seen = Some(now);
        Ok(f(&mut state))
    }

    pub fn heartbeat(&self, cluster: &str, id: u64, now: SystemTime) -> Result<(), HubError> {
        self.with_session(cluster, id, now, |_| ())
    }

    /// Applies a snapshot of `resource` (its items checked beforehand, outside the lock; see
    /// [`CheckedItems`]); returns the Ack and the cluster's inventory generation after it.
    pub fn snapshot(
        &self,
        cluster: &str,
        id: u64,
        now: SystemTime,
        resource: &ResourceType,
        checked: CheckedItems,
        last: bool,
    ) -> Result<(Ack, u64), HubError> {
        let max_items = self.settings.max_inventory_items;
        let (ack, generation) = self.with_session(cluster, id, now, |state| {
            let record = record_mut(state, cluster);
            let (changed, rejected) = record.apply_checked_snapshot(resource, checked, max_items);
            let generation = record.generation;
            state.dirty.insert(cluster.to_string());
            if changed && resource.kind == STORAGE_LOCATION {
                refresh_collisions(state);
            }
            if last {
                // Publish even an unchanged set: the stream waits for one planned from this inventory.
                state.resend.insert(cluster.to_string(), generation);
            }
            (Ack { of: "snapshot".into(), rejected }, generation)
        })?;
        // Plan once the whole inventory is in, not after each type.
        if last {
            self.changed.notify_one();
        }
        Ok((ack, generation))
    }

    pub fn delta(
        &self,
        cluster: &str,
        id: u64,
        now: SystemTime,
        upserts: CheckedItems,
        deletes: &[ObjectRef],
    ) -> Result<Ack, HubError> {
        let max_items = self.settings.max_inventory_items;
        let touches_bsls = upserts.objects.iter().any(|(k, _)| k.kind == STORAGE_LOCATION)
            || deletes.iter().any(|r| r.kind == STORAGE_LOCATION);
        let (ack, changed) = self.with_session(cluster, id, now, |state| {
            let (changed, rejected) = record_mut(state, cluster).apply_checked_delta(upserts, deletes, max_items);
            if changed {
                state.dirty.insert(cluster.to_string());
            }
            if changed && touches_bsls {
                refresh_collisions(state);
            }
            (Ack { of: "delta".into(), rejected }, changed)
        })?;
        if changed {
            self.changed.notify_one();
        }
        Ok(ack)
    }

    /// The agent says which kinds its cluster serves now (a CRD was installed or removed).
    pub fn apis(&self, cluster: &str, id: u64, now: SystemTime, apis: &ClusterApis) -> Result<Ack, HubError> {
        let changed = self.with_session(cluster, id, now, |state| {
            let changed = record_mut(state, cluster).set_apis(Some(apis.clone()));
            if changed {
                state.dirty.insert(cluster.to_string());
            }
            changed
        })?;
        if changed {
            self.changed.notify_one();
        }
        Ok(Ack { of: "apis".into(), rejected: Vec::new() })
    }

    pub fn apply_result(&self, cluster: &str, id: u64, now: SystemTime, result: &ApplyResult) -> Result<Ack, HubError> {
        let taken = self.with_session(cluster, id, now, |state| {
            record_mut(state, cluster).record_results_by_outcome(&result.desired_version, &result.items)
        })?;
        self.telemetry.applied(cluster, &taken);
        Ok(Ack { of: "apply_result".into(), rejected: Vec::new() })
    }

    /// Marks every cluster for recompute (catalog changed, periodic resync).
    pub fn mark_all_dirty(&self) {
        let mut state = self.lock();
        let names: Vec<String> = state.clusters.keys().cloned().collect();
        state.dirty.extend(names);
        drop(state);
        self.changed.notify_one();
    }

    pub fn location(&self, index: usize) -> Option<LocationState> {
        self.lock().locations.get(index).cloned()
    }

    /// Installs the outcome of a location refresh. A failure keeps the previous catalog (nothing is taken as
    /// deleted because a bucket is unreachable) and marks the location unhealthy. Every cluster is replanned
    /// when the catalog or the location's completeness changed.
    pub fn set_catalog(&self, index: usize, outcome: Result<LocationCatalog, String>, now: SystemTime) {
        self.install_catalog(index, outcome, now, Refresh::Whole);
    }

    /// Installs what a cold load has read so far (`Loader::refresh_streaming`), so that planning starts before
    /// the last backup is read. Its listing is incomplete, so nothing is retired from it; it is not a refresh
    /// (`last_refresh` stays unset until the load ends). Ignored once the location holds a catalog that is not
    /// itself partial: a partial never replaces a whole read.
    pub fn set_partial_catalog(&self, index: usize, catalog: LocationCatalog, now: SystemTime) {
        let whole_held =
            self.lock().locations.get(index).and_then(|l| l.catalog.as_deref()).is_some_and(|c| c.pending.is_empty());
        if !whole_held {
            self.install_catalog(index, Ok(catalog), now, Refresh::Partial);
        }
    }

    fn install_catalog(
        &self,
        index: usize,
        outcome: Result<LocationCatalog, String>,
        now: SystemTime,
        refresh: Refresh,
    ) {
        let mut state = self.lock();
        let Some(location) = state.locations.get_mut(index) else { return };
        let was_complete = location.is_complete();
        let mut catalog_changed = false;
        match outcome {
            Ok(mut catalog) => {
                let previous = location.catalog.as_deref();
                catalog.absences = previous.map(|c| c.absences.clone()).unwrap_or_default();
                catalog.collision = {
                    let views: Vec<ClusterState> =
                        state.clusters.values().map(|e| e.record.storage_location_view()).collect();
                    collision::collision(&catalog.location, &collision::writers(&catalog.location, &views))
                };
                if catalog.collision.is_some() {
                    // What a listing lacks while two Velero instances write there is no evidence of deletion.
                    catalog.absences = Default::default();
                } else if catalog.listing == Listing::Complete {
                    // Rule 5's evidence: only complete, successful listings count.
                    let (watched, present) = {
                        let clusters: Vec<Arc<ClusterState>> =
                            state.clusters.values_mut().map(|e| e.record.retirement_view()).collect();
                        retirement::watched_keys(&catalog, clusters.iter().map(|c| &**c))
                    };
                    let empty =
                        catalog.backups.is_empty() && catalog.skipped.is_empty() && catalog.foreign_folders.is_empty();
                    catalog.absences.record(&watched, |k| present.contains(k), empty, now);
                }
                let location = &mut state.locations[index];
                catalog_changed = !location.catalog.as_deref().is_some_and(|old| same_catalog(old, &catalog));
                if catalog_changed {
                    location.catalog = Some(Arc::new(catalog));
                }
                if refresh == Refresh::Whole {
                    location.error = None;
                    location.last_refresh = Some(now);
                }
            }
            Err(error) => {
                // The previous catalog stays, marked: nothing is retired from a location that failed.
                if let Some(previous) = &location.catalog
                    && previous.refresh_error.as_deref() != Some(error.as_str())
                {
                    let mut marked = LocationCatalog::clone(previous);
                    marked.refresh_error = Some(error.clone());
                    location.catalog = Some(Arc::new(marked));
                    catalog_changed = true;
                }
                location.error = Some(error);
            }
        }
        let location = &state.locations[index];
        if catalog_changed || was_complete != location.is_complete() {
            let names: Vec<String> = state.clusters.keys().cloned().collect();
            state.dirty.extend(names);
            drop(state);
            self.changed.notify_one();
        }
    }

    /// Takes the dirty set and copies out what planning it needs.
    pub fn take_dirty(&self) -> RecomputeInputs {
        let mut state = self.lock();
        let dirty = std::mem::take(&mut state.dirty);
        let now = SystemTime::now();
        let s = &self.settings;
        let mut clusters = Vec::with_capacity(dirty.len());
        for name in &dirty {
            let Some(entry) = state.clusters.get_mut(name) else { continue };
            let record = &mut entry.record;
            let live = record.liveness(now, s.heartbeat_interval, s.stale_after_missed) == Liveness::Live;
            clusters.push((record.planner_input(live), record.generation));
        }
        let (catalogs, complete) = catalogs(&state.locations);
        RecomputeInputs { clusters, catalogs, complete }
    }

    /// Installs a set planned from inventory `generation` and publishes it to the cluster's session if its
    /// version changed (or the session waits for a set planned from at least that generation). Returns
    /// whether it was published.
    pub fn publish(&self, cluster: &str, desired: DesiredSet, generation: u64) -> bool {
        let mut state = self.lock();
        let resend = match state.resend.get(cluster) {
            Some(&wanted) if generation >= wanted => state.resend.remove(cluster).is_some(),
            _ => false,
        };
        let state = &mut *state;
        let Some(entry) = state.clusters.get_mut(cluster) else { return false };
        if desired.version == entry.record.desired.version && !resend {
            return false;
        }
        let changed = entry.record.set_desired(Arc::new(state.items.share(desired)));
        if changed || resend {
            entry.desired.send_replace(Arc::new(Published { set: entry.record.desired.clone(), generation }));
        }
        changed || resend
    }

    /// Drops the DesiredSet items no cluster's set holds any more (after a recompute pass replaced sets).
    /// Returns how many distinct items the sets hold.
    pub fn prune_items(&self) -> usize {
        self.lock().items.prune()
    }

    /// The set the coordinator would send `cluster` now, computed from the current inputs (the `Plan` rpc).
    pub fn plan_now(&self, cluster: &str, options: &PlanOptions) -> Result<DesiredSet, HubError> {
        let (cluster_state, catalogs, complete) = {
            let state = self.lock();
            let entry = state.clusters.get(cluster).ok_or_else(|| HubError::UnknownCluster(cluster.into()))?;
            let (catalogs, complete) = catalogs(&state.locations);
            let s = &self.settings;
            let mut cluster_state = entry.record.cluster_state();
            cluster_state.live =
                entry.record.liveness(SystemTime::now(), s.heartbeat_interval, s.stale_after_missed) == Liveness::Live;
            (cluster_state, catalogs, complete)
        };
        Ok(compute(&catalogs, &cluster_state, &self.mappings, options, complete, &TemplateCache::default()))
    }

    pub fn status(&self, cluster: Option<&str>, now: SystemTime) -> Result<GetStatusResponse, HubError> {
        let state = self.lock();
        if let Some(name) = cluster
            && !state.clusters.contains_key(name)
        {
            return Err(HubError::UnknownCluster(name.into()));
        }
        let clusters = state
            .clusters
            .values()
            .filter(|e| cluster.is_none_or(|name| e.record.name() == name))
            .map(|e| status::cluster_status(&e.record, &self.settings, now, cluster.is_some()))
            .collect();
        let locations = state.locations.iter().map(status::location_status).collect();
        Ok(GetStatusResponse {
            caller: String::new(),
            clusters,
            locations,
            coordinator_version: env!("CARGO_PKG_VERSION").into(),
        })
    }

    /// One backup across every location and cluster, from the current catalogs, DesiredSets, results and
    /// inventories (the `DescribeBackup` rpc). Describing one backup is cheap; it is done under the lock.
    pub fn describe_backup(&self, backup: &str, now: SystemTime) -> Result<DescribeBackupResponse, UnknownBackup> {
        let state = self.lock();
        let (catalogs, _) = catalogs(&state.locations);
        let s = &self.settings;
        let records: Vec<ClusterRecords<'_>> = state
            .clusters
            .values()
            .map(|e| ClusterRecords {
                cluster: e.record.name(),
                state: describe::liveness_name(e.record.liveness(now, s.heartbeat_interval, s.stale_after_missed)),
                inventory: e.record.inventory(),
                desired: &e.record.desired,
                results: e.record.results(),
            })
            .collect();
        describe::describe_backup(backup, &catalogs, &records)
    }

    /// Every backup described as [`Hub::describe_backup`] does, for the status page: at most `limit`, those
    /// some DesiredSet still has items for (work left, refused, in conflict) first, then the converged ones by
    /// name. Returns them and how many backups there are in all. Done under the lock, the records gathered
    /// once; each description scans every cluster's objects, hence the limit.
    pub fn describe_backups(&self, now: SystemTime, limit: usize) -> (Vec<DescribeBackupResponse>, usize) {
        let state = self.lock();
        let (catalogs, _) = catalogs(&state.locations);
        let planned: BTreeSet<&str> = state
            .clusters
            .values()
            .flat_map(|e| e.record.desired.items.iter().map(|i| i.backup.as_str()))
            .filter(|b| !b.is_empty())
            .collect();
        let in_buckets: BTreeSet<&str> = catalogs.iter().flat_map(|c| c.backups.keys().map(String::as_str)).collect();
        let total = planned.union(&in_buckets).count();
        let names: Vec<&str> =
            planned.iter().chain(in_buckets.iter().filter(|b| !planned.contains(*b))).copied().take(limit).collect();
        let s = &self.settings;
        let records: Vec<ClusterRecords<'_>> = state
            .clusters
            .values()
            .map(|e| ClusterRecords {
                cluster: e.record.name(),
                state: describe::liveness_name(e.record.liveness(now, s.heartbeat_interval, s.stale_after_missed)),
                inventory: e.record.inventory(),
                desired: &e.record.desired,
                results: e.record.results(),
            })
            .collect();
        // A name was taken from a catalog or a set, so each is known; `ok()` only skips what cannot happen.
        let described = names.iter().filter_map(|n| describe::describe_backup(n, &catalogs, &records).ok()).collect();
        (described, total)
    }

    /// Liveness of one cluster (for tests and logs).
    pub fn liveness(&self, cluster: &str, now: SystemTime) -> Option<Liveness> {
        let state = self.lock();
        let s = &self.settings;
        state.clusters.get(cluster).map(|e| e.record.liveness(now, s.heartbeat_interval, s.stale_after_missed))
    }

    /// How many inventory objects a cluster holds (for tests and the benchmark).
    pub fn inventory_len(&self, cluster: &str) -> usize {
        self.lock().clusters.get(cluster).map_or(0, |e| e.record.inventory().len())
    }

    /// The agent's last outcome for one object of the current set (for tests).
    pub fn result_of(&self, cluster: &str, r: &ObjectRef) -> Option<String> {
        let state = self.lock();
        state.clusters.get(cluster)?.record.result_for(r).map(|result| result.outcome.as_str_name().to_string())
    }
}

fn record_mut<'a>(state: &'a mut HubState, cluster: &str) -> &'a mut ClusterRecord {
    // Callers looked the cluster up under the same lock.
    &mut state.clusters.get_mut(cluster).expect("cluster checked under the same lock").record
}

const STORAGE_LOCATION: &str = "BackupStorageLocation";

/// Recomputes every read location's writer collision from all clusters' BSLs (a cluster's BSLs changed). A
/// change replaces that catalog (with its absence ledger cleared once in collision) and replans every cluster,
/// since one cluster's BSL decides what every other gets from the location.
fn refresh_collisions(state: &mut HubState) {
    let views: Vec<ClusterState> = state.clusters.values().map(|e| e.record.storage_location_view()).collect();
    let mut changed = false;
    for location in &mut state.locations {
        let Some(catalog) = &location.catalog else { continue };
        let found = collision::collision(&catalog.location, &collision::writers(&catalog.location, &views));
        if found != catalog.collision {
            let mut updated = LocationCatalog::clone(catalog);
            if found.is_some() {
                updated.absences = Default::default();
            }
            updated.collision = found;
            location.catalog = Some(Arc::new(updated));
            changed = true;
        }
    }
    if changed {
        let names: Vec<String> = state.clusters.keys().cloned().collect();
        state.dirty.extend(names);
    }
}

/// Whether a catalog handed to the hub ends a refresh or is what a cold load read so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refresh {
    Whole,
    Partial,
}

/// The catalogs to plan with (locations never read are left out) and whether the set is complete.
fn catalogs(locations: &[LocationState]) -> (Vec<Arc<LocationCatalog>>, bool) {
    let catalogs = locations.iter().filter_map(|l| l.catalog.clone()).collect();
    (catalogs, locations.iter().all(LocationState::is_complete))
}

/// One cluster's DesiredSet from the inputs, its objects shared with the other clusters of the pass
/// (`templates`). Pure.
pub fn compute(
    catalogs: &[Arc<LocationCatalog>],
    cluster: &ClusterState,
    mappings: &NamespaceMappings,
    options: &PlanOptions,
    complete: bool,
    templates: &TemplateCache,
) -> DesiredSet {
    desired_set(&plan_cluster_with(catalogs, cluster, mappings, options, templates), complete)
}

/// Same backups (entries unchanged by the loader are the same allocations), errors and listing state.
fn same_catalog(a: &LocationCatalog, b: &LocationCatalog) -> bool {
    a.listing == b.listing
        && a.errors == b.errors
        && a.skipped == b.skipped
        && a.foreign_folders == b.foreign_folders
        && a.pending == b.pending
        && a.absences == b.absences
        && a.refresh_error == b.refresh_error
        && a.collision == b.collision
        && a.backups.len() == b.backups.len()
        && a.backups.iter().zip(&b.backups).all(|((ka, va), (kb, vb))| ka == kb && (Arc::ptr_eq(va, vb) || va == vb))
}

/// Location `shared`, written by `a`, nothing read yet.
#[cfg(test)]
fn test_location() -> crate::coordinator::location::LocationState {
    crate::coordinator::location::LocationState {
        name: "shared".into(),
        source_cluster: "a".into(),
        insecure_tls: false,
        catalog: None,
        error: None,
        last_refresh: None,
    }
}

/// A hub with cluster `cluster` (Velero namespace `velero`) and location `shared` (written by `a`), nothing read yet.
#[cfg(test)]
pub(crate) fn test_hub(cluster: &str) -> Hub {
    use crate::resolve::{NamespaceMappings, ProtectedNamespaces};
    let location = test_location();
    let protected = ProtectedNamespaces { listed: Default::default(), velero_namespaces: Default::default() };
    let mappings = NamespaceMappings::new(Vec::new(), protected).expect("mappings");
    let cluster = ClusterState { name: cluster.into(), velero_namespace: "velero".into(), ..Default::default() };
    Hub::new(Settings::default(), mappings, vec![cluster], vec![location])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::convert::{inventory_item, watched_types};
    use crate::resolve::ProtectedNamespaces;

    fn hub() -> Hub {
        let protected = ProtectedNamespaces { listed: Default::default(), velero_namespaces: Default::default() };
        let mappings = NamespaceMappings::new(Vec::new(), protected).expect("mappings");
        let cluster = ClusterState { name: "b".into(), velero_namespace: "velero".into(), ..Default::default() };
        Hub::new(Settings::default(), mappings, vec![cluster], Vec::new())
    }

    fn bsl_item(name: &str, mode: &str) -> crate::grpc::proto::InventoryItem {
        let bsl = serde_json::json!({"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
            "metadata": {"name": name, "namespace": "velero"},
            "spec": {"provider": "aws", "accessMode": mode,
                "objectStorage": {"bucket": "velero-backups", "prefix": "velero"}}});
        inventory_item("BackupStorageLocation", &bsl)
    }

    #[test]
    fn a_second_writer_on_a_location_stops_it_for_every_cluster_until_it_turns_read_only() {
        let protected = ProtectedNamespaces { listed: Default::default(), velero_namespaces: Default::default() };
        let mappings = NamespaceMappings::new(Vec::new(), protected).expect("mappings");
        let cluster = |name: &str| ClusterState {
            name: name.into(),
            velero_namespace: "velero".into(),
            granted_locations: ["shared".to_string()].into(),
            ..Default::default()
        };
        let location = crate::catalog::Location {
            name: "shared".into(),
            kind: crate::catalog::StoreKind::S3,
            bucket: "velero-backups".into(),
            prefix: "velero".into(),
            source_cluster: "a".into(),
        };
        let hub = Hub::new(Settings::default(), mappings, vec![cluster("a"), cluster("b")], vec![test_location()]);
        let now = SystemTime::UNIX_EPOCH;
        hub.set_catalog(0, Ok(LocationCatalog::empty(location)), now);
        let bsls = watched_types().into_iter().find(|t| t.kind == STORAGE_LOCATION).expect("BSL type");
        let report = |cluster: &str, mode: &str| {
            let session = hub.open_session(cluster, &Hello::default(), now).expect("session");
            let checked = CheckedItems::of_snapshot(&bsls, &[bsl_item("default", mode)]);
            hub.snapshot(cluster, session.id, now, &bsls, checked, true).expect("snapshot");
            session.id
        };
        let collision = |hub: &Hub| hub.status(None, now).expect("status").locations[0].clone();
        report("a", "ReadWrite");
        assert!(collision(&hub).collision.is_empty(), "the source alone writes there");
        let b = report("b", "ReadOnly");
        assert!(collision(&hub).collision.is_empty(), "a read-only reader is no writer");
        hub.take_dirty();

        // b's BSL turns read-write: both clusters are replanned, the location is in collision.
        let checked = CheckedItems::of_delta(&[bsl_item("default", "")]);
        hub.delta("b", b, now, checked, &[]).expect("delta");
        let status = collision(&hub);
        assert_eq!(status.writers, ["a", "b"]);
        assert!(status.collision.contains("is written by 2 clusters"), "{}", status.collision);
        let inputs = hub.take_dirty();
        assert_eq!(inputs.clusters.len(), 2, "every cluster is replanned");
        assert!(inputs.catalogs[0].collision.is_some(), "the planner sees it");
        let set = hub.plan_now("a", &PlanOptions::default()).expect("plan");
        assert!(set.items.iter().any(|i| i.reason.starts_with("collision:")), "{set:?}");
        // A location refresh keeps what the BSLs say.
        hub.set_catalog(0, Ok(LocationCatalog::empty(inputs.catalogs[0].location.clone())), now);
        assert_eq!(collision(&hub).writers, ["a", "b"]);

        // Back to read-only: resolved, everyone replanned again.
        let checked = CheckedItems::of_delta(&[bsl_item("default", "ReadOnly")]);
        hub.delta("b", b, now, checked, &[]).expect("delta");
        assert!(collision(&hub).collision.is_empty() && collision(&hub).writers.is_empty());
        assert_eq!(hub.take_dirty().clusters.len(), 2);
    }

    /// Issue 30: a cold load's partial catalog is planned and makes the coordinator ready, but it is no refresh
    /// (last refresh unset, location not healthy, its message says it loads) and never replaces a whole read.
    #[test]
    fn a_partial_catalog_is_served_and_ready_but_no_refresh_and_never_replaces_a_whole_one() {
        let hub = test_hub("b");
        let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000);
        let location = LocationCatalog::empty(location_of(&hub));
        let status = |hub: &Hub| hub.status(None, now).expect("status");
        assert!(crate::coordinator::metrics::readiness(&status(&hub)).is_err(), "nothing read");

        let mut partial = location.clone();
        partial.pending.insert("daily-2".into());
        partial.listing = Listing::Incomplete { reason: "loading: 1 of 2 backups read".into() };
        hub.take_dirty();
        hub.set_partial_catalog(0, partial.clone(), now);
        assert_eq!(hub.take_dirty().clusters.len(), 1, "planned as it loads");
        let loading = status(&hub).locations[0].clone();
        assert_eq!((loading.pending, loading.last_refresh_unix, loading.healthy), (1, 0, false));
        assert!(loading.message.contains("loading: 1 of 2 backups read"), "{}", loading.message);
        crate::coordinator::metrics::readiness(&status(&hub)).expect("ready while it loads");

        hub.set_catalog(0, Ok(location.clone()), now);
        let read = status(&hub).locations[0].clone();
        assert_eq!((read.pending, read.last_refresh_unix, read.healthy), (0, 1_000, true));
        hub.take_dirty();
        hub.set_partial_catalog(0, partial, now);
        assert!(hub.take_dirty().clusters.is_empty(), "a late partial changes nothing");
        assert_eq!(status(&hub).locations[0].pending, 0);
    }

    fn location_of(hub: &Hub) -> crate::catalog::Location {
        let state = hub.location(0).expect("location 0");
        crate::catalog::Location {
            name: state.name,
            kind: crate::catalog::StoreKind::S3,
            bucket: "velero-backups".into(),
            prefix: "velero".into(),
            source_cluster: state.source_cluster,
        }
    }

    /// The status page's list: backups some set still plans come first, then the rest by name, cut at the limit
    /// and counted in full.
    #[test]
    fn describe_backups_puts_planned_ones_first_and_counts_all() {
        use crate::catalog::{CatalogBackup, Location, ObjectVersion, PodVolumeBackupFile, StoreKind};
        use crate::grpc::convert::object_ref;
        use crate::grpc::proto::{DesiredAction, DesiredItem};
        let hub = test_hub("b");
        let mut catalog = LocationCatalog::empty(Location {
            name: "shared".into(),
            kind: StoreKind::S3,
            bucket: "velero-backups".into(),
            prefix: "velero".into(),
            source_cluster: "a".into(),
        });
        for name in ["a-converged", "m-converged", "z-planned"] {
            let json = crate::fixture::admin_backup_json(name, crate::model::BackupPhase::Completed, "default");
            let backup = crate::model::Object::from_value(json).expect("backup");
            let entry = CatalogBackup {
                name: name.into(),
                backup,
                pod_volume_backups: PodVolumeBackupFile::default(),
                metadata_version: ObjectVersion::new(Some("e"), 1, 0),
                pod_volume_backups_version: None,
                pod_volume_backups_error: None,
                has_resource_list: false,
            };
            catalog.backups.insert(name.into(), Arc::new(entry));
        }
        let now = SystemTime::UNIX_EPOCH;
        hub.set_catalog(0, Ok(catalog), now);
        let item = DesiredItem {
            action: DesiredAction::Refuse as i32,
            r#ref: Some(object_ref("Backup", "velero", "z-planned")),
            backup: "z-planned".into(),
            reason: "why not".into(),
            ..Default::default()
        };
        hub.publish("b", DesiredSet { version: "v".into(), items: vec![item], ..Default::default() }, 0);

        let names = |limit| {
            let (described, total) = hub.describe_backups(now, limit);
            (described.into_iter().map(|d| d.name).collect::<Vec<_>>(), total)
        };
        assert_eq!(names(10), (vec!["z-planned".into(), "a-converged".into(), "m-converged".into()], 3));
        assert_eq!(names(1), (vec!["z-planned".to_string()], 3), "the planned one survives the cut");
        let (described, _) = hub.describe_backups(now, 1);
        let planned = &described[0].clusters[0].planned[0];
        assert_eq!((described[0].clusters[0].cluster.as_str(), planned.reason.as_str()), ("b", "why not"));
    }

    #[test]
    fn a_waiting_stream_gets_only_a_set_planned_from_its_whole_inventory() {
        let hub = hub();
        let now = SystemTime::UNIX_EPOCH;
        let mut session = hub.open_session("b", &Hello::default(), now).expect("session");
        // A recompute takes its inputs before the agent's last snapshot is in...
        let early = hub.take_dirty();
        let resource = watched_types().remove(0);
        let item = inventory_item("Namespace", &serde_json::json!({"metadata": {"name": "team-a"}}));
        let checked = CheckedItems::of_snapshot(&resource, &[item]);
        let (_, generation) = hub.snapshot("b", session.id, now, &resource, checked, true).expect("snapshot");
        assert!(early.clusters.is_empty(), "nothing was dirty yet");
        // ...so a set planned from the older generation is marked as such (the session, ready at `generation`,
        // skips it) and does not count as the set the stream waits for.
        let planned = DesiredSet { version: "v".into(), ..Default::default() };
        assert!(hub.publish("b", planned.clone(), generation - 1), "a new version is published");
        assert_eq!(session.desired.borrow_and_update().generation, generation - 1);
        // The next pass plans from the snapshot: published again although the version is the same.
        let inputs = hub.take_dirty();
        assert_eq!(inputs.clusters[0].1, generation);
        assert!(hub.publish("b", planned.clone(), generation), "the waiting stream gets it");
        let published = session.desired.borrow_and_update().clone();
        assert_eq!((published.set.version.as_str(), published.generation), ("v", generation));
        assert!(!hub.publish("b", planned, generation), "same version, nobody waiting: not sent again");
    }

    #[test]
    fn clusters_planned_equal_items_hold_one_copy_until_no_set_has_it() {
        let protected = ProtectedNamespaces { listed: Default::default(), velero_namespaces: Default::default() };
        let mappings = NamespaceMappings::new(Vec::new(), protected).expect("mappings");
        let cluster =
            |name: &str| ClusterState { name: name.into(), velero_namespace: "velero".into(), ..Default::default() };
        let hub = Hub::new(Settings::default(), mappings, vec![cluster("a"), cluster("b")], Vec::new());
        let item = |name: &str| crate::grpc::proto::DesiredItem {
            r#ref: Some(crate::grpc::convert::object_ref("Backup", "velero", name)),
            backup: name.into(),
            raw_json: bytes::Bytes::from(format!("{{\"metadata\":{{\"name\":\"{name}\"}}}}")),
            ..Default::default()
        };
        let set = |version: &str, names: &[&str]| DesiredSet {
            version: version.into(),
            items: names.iter().map(|n| item(n)).collect(),
            complete: true,
            ..Default::default()
        };
        // Each cluster's set is planned separately (its own copies of the items, as a pass builds them).
        assert!(hub.publish("a", set("v1", &["x", "y"]), 0));
        assert!(hub.publish("b", set("v2", &["y", "z"]), 0));
        let held = |cluster: &str| hub.lock().clusters[cluster].record.desired.clone();
        let (a, b) = (held("a"), held("b"));
        assert!(Arc::ptr_eq(&a.items[1], &b.items[0]), "y is held once");
        assert!(!Arc::ptr_eq(&a.items[0], &b.items[1]));
        assert_eq!(hub.prune_items(), 3);
        drop((a, b));
        // a's next set no longer has x: nothing holds it after the pass.
        assert!(hub.publish("a", set("v3", &["y"]), 0));
        assert_eq!(hub.prune_items(), 2, "x is gone, y and z are held");
    }
}
