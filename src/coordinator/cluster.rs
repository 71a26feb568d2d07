//! What the coordinator knows about one cluster: its inventory as its agent published it, the session that
//! published it, the last DesiredSet computed for it and the agent's results for that set. Pure: time is
//! passed in, nothing here does IO.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::held_set::HeldSet;
use crate::grpc::convert::{ItemError, ObjectKey, api_of, inventory_object, served_apis};
use crate::grpc::proto::{ApplyOutcome, ClusterApis, InventoryItem, ItemResult, ObjectRef, RejectedItem, ResourceType};
use crate::model::inventory_updates::KINDS;
use crate::model::{Inventory, InventoryObject, ObjectMeta, ownership};
use crate::plan::ClusterState;

/// The open agent stream of a cluster, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Increases with every stream the coordinator accepts; a stream whose id is not the current one has been
    /// replaced and its messages are dropped.
    pub id: u64,
    pub software_version: String,
    pub connected_at: SystemTime,
}

/// Liveness as operators see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// No agent stream is open (or none ever was).
    Disconnected,
    /// A stream is open and the agent spoke within the allowed number of heartbeat intervals.
    Live,
    /// A stream is open but the agent has been silent too long: nothing is planned for deletion on it.
    Stale,
}

/// The coordinator's record of one configured cluster.
#[derive(Debug, Clone)]
pub struct ClusterRecord {
    /// The planner's input: the cluster's config (name, Velero namespace, configured BSL names), its inventory
    /// as its agent published it and whether it is live. Held once and handed to every plan pass as is: an
    /// update copies it only while a pass still reads the previous one.
    state: Arc<ClusterState>,
    pub session: Option<Session>,
    /// When the agent last sent anything (heartbeats and every other message count).
    pub last_seen: Option<SystemTime>,
    /// The last DesiredSet computed (and sent, if a session was open).
    pub desired: Arc<HeldSet>,
    /// The agent's latest outcome per item of `desired`, by the item's position (empty until the agent
    /// reports on the set; results for older versions are dropped).
    results: Vec<Option<AgentResult>>,
    /// The positions of `desired`'s items sorted by ref: results are kept only for objects of the set.
    desired_order: Vec<u32>,
    /// Counts inventory changes, so a DesiredSet can say which inventory it was planned from.
    pub generation: u64,
    /// Which kinds the cluster serves, as its agent last said (`None`: never said; every kind is assumed).
    pub apis: Option<ClusterApis>,
    /// [`ClusterRecord::retirement_view`] as last built, with the generation it was built for: every location
    /// refresh takes it of every cluster.
    retirement_input: Option<(u64, Arc<ClusterState>)>,
}

impl ClusterRecord {
    pub fn new(config: ClusterState) -> Self {
        let mut state = ClusterState { inventory: Inventory::default(), live: false, ..config };
        state.inventory.apis = served_apis(None);
        Self {
            state: Arc::new(state),
            session: None,
            last_seen: None,
            desired: Arc::new(HeldSet::default()),
            results: Vec::new(),
            desired_order: Vec::new(),
            generation: 0,
            apis: None,
            retirement_input: None,
        }
    }

    /// The cluster's name, as configured.
    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// Every object of the cluster's inventory.
    pub fn inventory(&self) -> &Inventory {
        &self.state.inventory
    }

    fn inventory_mut(&mut self) -> &mut Inventory {
        &mut Arc::make_mut(&mut self.state).inventory
    }

    /// Replaces every object of `resource`'s kind with the snapshot's. Items that fail validation are left out
    /// and returned with their reason; the rest are taken. Returns whether the inventory changed.
    pub fn apply_snapshot(&mut self, resource: &ResourceType, items: &[InventoryItem]) -> (bool, Vec<RejectedItem>) {
        let checked = CheckedItems::of_snapshot(resource, items);
        self.apply_checked_snapshot(resource, checked, usize::MAX)
    }

    /// [`ClusterRecord::apply_snapshot`] with items checked beforehand (outside the hub's lock), keeping the
    /// cluster's whole inventory at most `max_items` objects: the items past the cap are rejected.
    pub fn apply_checked_snapshot(
        &mut self,
        resource: &ResourceType,
        checked: CheckedItems,
        max_items: usize,
    ) -> (bool, Vec<RejectedItem>) {
        let CheckedItems { objects, mut rejected } = checked;
        let held = self.inventory();
        let room = max_items.saturating_sub(held.len() - held.count_of(&resource.kind));
        let mut fresh = Vec::with_capacity(objects.len().min(room));
        // Names are counted only when the snapshot could pass the cap (a name twice counts once).
        let mut taken: HashSet<ObjectKey> = HashSet::new();
        let counting = objects.len() > room;
        for (key, object) in objects {
            if counting {
                if taken.len() >= room && !taken.contains(&key) {
                    rejected.push(over_cap(&key, max_items));
                    continue;
                }
                taken.insert(key);
            }
            fresh.push(object);
        }
        let changed = self.inventory_mut().replace_kind(&resource.kind, fresh);
        // Every snapshot counts (even an unchanged one): a stream waits for a set planned after it.
        self.generation += 1;
        (changed, rejected)
    }

    /// Applies a delta: upserts (validated like snapshot items) and deletes. Returns whether anything changed.
    pub fn apply_delta(&mut self, upserts: &[InventoryItem], deletes: &[ObjectRef]) -> (bool, Vec<RejectedItem>) {
        self.apply_checked_delta(CheckedItems::of_delta(upserts), deletes, usize::MAX)
    }

    /// [`ClusterRecord::apply_delta`] with upserts checked beforehand; a new object past `max_items` is
    /// rejected (changes to objects the cluster already has are always taken).
    pub fn apply_checked_delta(
        &mut self,
        upserts: CheckedItems,
        deletes: &[ObjectRef],
        max_items: usize,
    ) -> (bool, Vec<RejectedItem>) {
        let CheckedItems { objects, mut rejected } = upserts;
        let mut changed = false;
        let inventory = self.inventory_mut();
        for r in deletes {
            // The group is part of an object's identity: a delete naming another group's kind removes nothing.
            if api_of(&r.kind).is_some_and(|(group, _)| group == r.group) {
                changed |= inventory.remove(&r.kind, &r.namespace, &r.name);
            }
        }
        for (key, object) in objects {
            if inventory.len() >= max_items && !inventory.contains(&key.kind, &key.namespace, &key.name) {
                rejected.push(over_cap(&key, max_items));
                continue;
            }
            changed |= inventory.upsert(object);
        }
        if changed {
            self.generation += 1;
        }
        (changed, rejected)
    }

    /// Records which kinds the cluster serves. Returns whether that changed (the cluster needs a new plan).
    pub fn set_apis(&mut self, apis: Option<ClusterApis>) -> bool {
        if self.apis == apis {
            return false;
        }
        self.inventory_mut().apis = served_apis(apis.as_ref());
        self.apis = apis;
        self.generation += 1;
        true
    }

    /// Records an agent's results; results for a version other than the current DesiredSet are ignored
    /// (they describe a set that no longer exists), and so are results for objects not in the set (so an agent
    /// cannot grow this map beyond the set's size) and messages past [`MAX_RESULT_MESSAGE`]. Returns how many
    /// were taken.
    pub fn record_results(&mut self, desired_version: &str, items: &[ItemResult]) -> usize {
        self.record_results_by_outcome(desired_version, items).values().sum::<u64>() as usize
    }

    /// [`ClusterRecord::record_results`], returning how many results were taken by outcome (for the metrics).
    pub fn record_results_by_outcome(
        &mut self,
        desired_version: &str,
        items: &[ItemResult],
    ) -> BTreeMap<ApplyOutcome, u64> {
        let mut taken = BTreeMap::new();
        if desired_version != self.desired.version {
            return taken;
        }
        for result in items {
            let Some(index) = result.r#ref.as_ref().and_then(|r| self.position(r)) else { continue };
            let outcome = ApplyOutcome::try_from(result.outcome).unwrap_or(ApplyOutcome::Unspecified);
            let message: String = result.message.chars().take(MAX_RESULT_MESSAGE).collect();
            if self.results.is_empty() {
                self.results.resize(self.desired.items.len(), None);
            }
            self.results[index] = Some(AgentResult { outcome, message: message.into() });
            *taken.entry(outcome).or_default() += 1;
        }
        taken
    }

    /// The position in the current DesiredSet of the item for the object `r` names (whatever the API version).
    fn position(&self, r: &ObjectRef) -> Option<usize> {
        let items = &self.desired.items;
        let found = self
            .desired_order
            .binary_search_by(|&i| items[i as usize].r#ref.as_ref().map(identity).cmp(&Some(identity(r))));
        found.ok().map(|at| self.desired_order[at] as usize)
    }

    /// The agent's latest result for the item at `index` of the current DesiredSet.
    pub fn result(&self, index: usize) -> Option<&AgentResult> {
        self.results.get(index).and_then(Option::as_ref)
    }

    /// The agent's latest result for the current DesiredSet's item for the object `r` names.
    pub fn result_for(&self, r: &ObjectRef) -> Option<&AgentResult> {
        self.result(self.position(r)?)
    }

    /// The agent's latest results, by the position of their item in the current DesiredSet (empty when
    /// the agent has not reported on it).
    pub fn results(&self) -> &[Option<AgentResult>] {
        &self.results
    }

    /// How many items of the current DesiredSet the agent reported on.
    pub fn reported(&self) -> usize {
        self.results.iter().flatten().count()
    }

    /// Installs a newly computed DesiredSet; results of the previous one no longer apply unless the version
    /// is the same. Returns whether the version changed.
    pub fn set_desired(&mut self, desired: Arc<HeldSet>) -> bool {
        if desired.version == self.desired.version {
            return false;
        }
        let mut order: Vec<u32> = (0..desired.items.len() as u32).collect();
        order.sort_unstable_by_key(|&i| desired.items[i as usize].r#ref.as_ref().map(identity));
        self.desired_order = order;
        self.desired = desired;
        self.results = Vec::new();
        true
    }

    /// The planner's input for this cluster, as a copy.
    pub fn cluster_state(&self) -> ClusterState {
        ClusterState::clone(&self.state)
    }

    /// The planner's input with `live` set: the record's own, shared, not a copy.
    pub fn planner_input(&mut self, live: bool) -> Arc<ClusterState> {
        if self.state.live != live {
            Arc::make_mut(&mut self.state).live = live;
        }
        self.state.clone()
    }

    /// What retirement's bookkeeping reads of this cluster: its BSLs and the objects ferry made, nothing else
    /// (a location refresh takes this of every cluster, so it must not copy whole inventories), built again only
    /// when the inventory changed since (1,000 clusters × 1,000 objects walked on every refresh was most of an
    /// idle coordinator's CPU).
    pub fn retirement_view(&mut self) -> Arc<ClusterState> {
        match &self.retirement_input {
            Some((generation, view)) if *generation == self.generation => view.clone(),
            _ => {
                let view = Arc::new(self.build_retirement_view());
                self.retirement_input = Some((self.generation, view.clone()));
                view
            }
        }
    }

    fn build_retirement_view(&self) -> ClusterState {
        let held = self.inventory();
        let ours = |meta: &ObjectMeta| ownership::is_ferry_managed(&meta.labels);
        let inventory = Inventory {
            storage_locations: held.storage_locations.clone(),
            backups: held.backups.iter().filter(|o| ours(o.meta())).cloned().collect(),
            pod_volume_backups: held.pod_volume_backups.iter().filter(|o| ours(o.meta())).cloned().collect(),
            non_admin_backups: held.non_admin_backups.iter().filter(|o| ours(o.meta())).cloned().collect(),
            ..Inventory::default()
        };
        self.view_with(inventory)
    }

    /// Only the BSLs (for writer collisions, taken of every cluster whenever one's BSLs change).
    pub fn storage_location_view(&self) -> ClusterState {
        let storage_locations = self.inventory().storage_locations.clone();
        self.view_with(Inventory { storage_locations, ..Inventory::default() })
    }

    /// The cluster's config with `inventory` in place of its own, not live.
    fn view_with(&self, mut inventory: Inventory) -> ClusterState {
        inventory.declares_non_admin_backups = !inventory.non_admin_backups.is_empty();
        let config = &*self.state;
        ClusterState {
            name: config.name.clone(),
            velero_namespace: config.velero_namespace.clone(),
            inventory,
            storage_locations: config.storage_locations.clone(),
            granted_locations: config.granted_locations.clone(),
            allow_read_write_locations: config.allow_read_write_locations,
            live: false,
        }
    }

    pub fn liveness(&self, now: SystemTime, heartbeat: Duration, missed: u32) -> Liveness {
        if self.session.is_none() {
            return Liveness::Disconnected;
        }
        let silent = self.last_seen.and_then(|t| now.duration_since(t).ok()).unwrap_or_default();
        if silent > heartbeat * missed { Liveness::Stale } else { Liveness::Live }
    }

    /// Inventory counts per kind (kinds it holds none of are left out).
    pub fn counts_by_kind(&self) -> BTreeMap<String, u64> {
        let held = self.inventory();
        KINDS
            .into_iter()
            .map(|kind| (kind.to_string(), held.count_of(kind) as u64))
            .filter(|(_, count)| *count > 0)
            .collect()
    }
}

/// What an agent last said of one item of its DesiredSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentResult {
    pub outcome: ApplyOutcome,
    /// Cut to [`MAX_RESULT_MESSAGE`] characters.
    pub message: Box<str>,
}

/// What identifies an object within a cluster: its ref without the API version.
fn identity(r: &ObjectRef) -> (&str, &str, &str, &str) {
    (&r.group, &r.kind, &r.namespace, &r.name)
}

/// Longest apply-result message kept (the API server's errors are shorter; a longer one is cut).
pub const MAX_RESULT_MESSAGE: usize = 4096;

/// Inventory items checked against their own JSON and parsed, and those refused with their reason: the CPU
/// work of taking an agent's message, done before the hub's lock is taken.
#[derive(Debug, Default)]
pub struct CheckedItems {
    pub objects: Vec<(ObjectKey, InventoryObject)>,
    pub rejected: Vec<RejectedItem>,
}

impl CheckedItems {
    /// The items of a snapshot of `resource`: items of another type are refused too.
    pub fn of_snapshot(resource: &ResourceType, items: &[InventoryItem]) -> Self {
        let mut checked = Self::default();
        for item in items {
            if item.kind != resource.kind || item.group != resource.group {
                let found = format!("{}/{}", item.group, item.kind);
                let expected = format!("{}/{}", resource.group, resource.kind);
                checked.rejected.push(rejection(item, &ItemError::WrongType { found, expected }));
                continue;
            }
            checked.take(item);
        }
        checked
    }

    /// The upserts of a delta.
    pub fn of_delta(items: &[InventoryItem]) -> Self {
        let mut checked = Self::default();
        for item in items {
            checked.take(item);
        }
        checked
    }

    fn take(&mut self, item: &InventoryItem) {
        match inventory_object(item) {
            Ok(object) => self.objects.push((ObjectKey::of_item(item), object)),
            Err(e) => self.rejected.push(rejection(item, &e)),
        }
    }
}

fn over_cap(key: &ObjectKey, max_items: usize) -> RejectedItem {
    RejectedItem {
        r#ref: Some(ObjectRef {
            group: key.group.clone(),
            version: String::new(),
            kind: key.kind.clone(),
            namespace: key.namespace.clone(),
            name: key.name.clone(),
        }),
        reason: format!("the cluster's inventory is at coordinator.maxInventoryItems ({max_items}); not taken"),
    }
}

fn rejection(item: &InventoryItem, error: &ItemError) -> RejectedItem {
    RejectedItem {
        r#ref: Some(ObjectRef {
            group: item.group.clone(),
            version: item.version.clone(),
            kind: item.kind.clone(),
            namespace: item.namespace.clone(),
            name: item.name.clone(),
        }),
        reason: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::convert::{inventory_item, object_ref, watched_types};
    use crate::grpc::proto::{DesiredItem, DesiredSet};
    use serde_json::json;

    fn record() -> ClusterRecord {
        ClusterRecord::new(ClusterState { name: "b".into(), velero_namespace: "velero".into(), ..Default::default() })
    }

    fn ns(name: &str) -> InventoryItem {
        inventory_item("Namespace", &json!({"kind": "Namespace", "metadata": {"name": name}}))
    }

    fn namespace_type() -> ResourceType {
        watched_types().into_iter().find(|t| t.kind == "Namespace").expect("namespace type")
    }

    #[test]
    fn a_snapshot_replaces_its_kind_and_rejects_bad_items_only() {
        let mut r = record();
        let (changed, rejected) = r.apply_snapshot(&namespace_type(), &[ns("a"), ns("b")]);
        assert!(changed && rejected.is_empty());
        let mut bad = ns("c");
        bad.raw_json = b"{\"metadata\":".to_vec();
        let backup = inventory_item("Backup", &json!({"metadata": {"name": "x", "namespace": "velero"}}));
        let (changed, rejected) = r.apply_snapshot(&namespace_type(), &[ns("a"), bad, backup]);
        assert!(changed, "b is gone");
        assert_eq!(rejected.len(), 2);
        assert_eq!(rejected[0].r#ref.as_ref().unwrap().name, "c");
        assert!(rejected[0].reason.contains("not a JSON object"), "{}", rejected[0].reason);
        assert!(rejected[1].reason.contains("inside a snapshot of"), "{}", rejected[1].reason);
        assert_eq!(r.cluster_state().inventory.namespaces.into_iter().collect::<Vec<_>>(), ["a"]);
        // The same snapshot again changes nothing.
        assert!(!r.apply_snapshot(&namespace_type(), &[ns("a")]).0);
    }

    #[test]
    fn deltas_upsert_and_delete() {
        let mut r = record();
        let (changed, _) = r.apply_delta(&[ns("a")], &[]);
        assert!(changed);
        assert!(!r.apply_delta(&[ns("a")], &[]).0, "same object again is no change");
        assert!(r.apply_delta(&[], &[object_ref("Namespace", "", "a")]).0);
        assert!(r.inventory().is_empty());
        assert!(!r.apply_delta(&[], &[object_ref("Namespace", "", "a")]).0);
    }

    #[test]
    fn results_count_only_for_the_current_version() {
        let mut r = record();
        let set = DesiredSet {
            version: "v1".into(),
            items: vec![DesiredItem { r#ref: Some(object_ref("Backup", "velero", "b1")), ..Default::default() }],
            complete: true,
            more: false,
            ..Default::default()
        };
        assert!(r.set_desired(Arc::new(set.clone().into())));
        assert!(!r.set_desired(Arc::new(set.into())), "same version: not a change");
        let result = ItemResult {
            r#ref: Some(object_ref("Backup", "velero", "b1")),
            outcome: ApplyOutcome::Applied as i32,
            message: String::new(),
        };
        assert_eq!(r.record_results("v0", std::slice::from_ref(&result)), 0);
        assert_eq!(r.record_results("v1", &[result]), 1);
        assert_eq!(r.reported(), 1);
        let b1 = object_ref("Backup", "velero", "b1");
        assert_eq!(
            r.result_for(&ObjectRef { version: "v2".into(), ..b1.clone() }).map(|a| a.outcome),
            Some(ApplyOutcome::Applied)
        );
        // Results about objects outside the set are not kept, and long messages are cut.
        let stranger = ItemResult {
            r#ref: Some(object_ref("Backup", "velero", "not-in-the-set")),
            outcome: ApplyOutcome::Failed as i32,
            message: String::new(),
        };
        let chatty = ItemResult {
            r#ref: Some(object_ref("Backup", "velero", "b1")),
            outcome: ApplyOutcome::Failed as i32,
            message: "x".repeat(100_000),
        };
        assert_eq!(r.record_results("v1", &[stranger, chatty]), 1);
        assert_eq!(r.reported(), 1);
        assert_eq!(r.result_for(&b1).unwrap().message.len(), MAX_RESULT_MESSAGE);
        r.set_desired(Arc::new(HeldSet { version: "v2".into(), ..Default::default() }));
        assert_eq!(r.reported(), 0);
    }

    #[test]
    fn a_clusters_inventory_is_capped() {
        let mut r = record();
        let names: Vec<InventoryItem> = (0..10).map(|i| ns(&format!("n{i}"))).collect();
        let (_, rejected) =
            r.apply_checked_snapshot(&namespace_type(), CheckedItems::of_snapshot(&namespace_type(), &names), 4);
        assert_eq!(r.inventory().len(), 4);
        assert_eq!(rejected.len(), 6);
        assert!(rejected[0].reason.contains("maxInventoryItems (4)"), "{}", rejected[0].reason);
        // A delta may change what is there, not add past the cap.
        let (_, rejected) = r.apply_checked_delta(CheckedItems::of_delta(&[ns("n0"), ns("new")]), &[], 4);
        assert_eq!(rejected.len(), 1);
        assert_eq!(rejected[0].r#ref.as_ref().unwrap().name, "new");
        assert_eq!(r.inventory().len(), 4);
    }

    #[test]
    fn what_the_agent_says_it_serves_reaches_the_planner() {
        let mut r = record();
        assert!(r.cluster_state().inventory.apis.non_admin_backups, "an agent that never said: every kind");
        let plain = ClusterApis {
            served: watched_types().into_iter().filter(|t| t.kind != "NonAdminBackup").collect(),
            missing_required: Vec::new(),
            velero_version: "v1.18.3".into(),
        };
        let generation = r.generation;
        assert!(r.set_apis(Some(plain.clone())));
        assert!(r.generation > generation, "a set planned before is from another inventory");
        assert!(!r.set_apis(Some(plain)), "same again: no change");
        let apis = r.cluster_state().inventory.apis;
        assert!(!apis.non_admin_backups);
        assert_eq!(apis.velero_version.as_deref(), Some("v1.18.3"));
        let broken = ClusterApis { missing_required: vec!["backups.velero.io".into()], ..Default::default() };
        r.set_apis(Some(broken));
        assert_eq!(r.cluster_state().inventory.apis.missing_required, ["backups.velero.io"]);
    }

    #[test]
    fn liveness_from_last_message() {
        let mut r = record();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let beat = Duration::from_secs(10);
        assert_eq!(r.liveness(t0, beat, 5), Liveness::Disconnected);
        r.session = Some(Session { id: 1, software_version: "0.1.0".into(), connected_at: t0 });
        r.last_seen = Some(t0);
        assert_eq!(r.liveness(t0 + Duration::from_secs(50), beat, 5), Liveness::Live);
        assert_eq!(r.liveness(t0 + Duration::from_secs(51), beat, 5), Liveness::Stale);
    }
}
