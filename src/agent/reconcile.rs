//! One pass of applying a DesiredSet to the cluster: in dependency order, each item the guard admits is created if
//! absent, counted done if ferry's own object of the same provenance exists (create-only: the agent never writes
//! over an existing object, so it needs no `patch`), reported as a conflict if an object of that name is someone
//! else's, or held while what it waits for is missing. The cluster is behind the
//! [`ClusterApi`] trait (`cluster_api.rs`) so this logic reads the same against the real API server
//! (`kube_api.rs`, e2e tests) and in unit tests.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Mutex;

use futures::StreamExt;

use serde_json::Value;

use super::cluster_api::{ApiError, ClusterApi, describe};
use super::event_budget::EventBudget;
use super::guard::{Guard, Related};
use super::order::apply_layers;
use crate::grpc::convert::ObjectKey;
use crate::grpc::proto::{ApplyOutcome, DesiredAction, DesiredItem, DesiredSet, ItemResult, ObjectRef};
use crate::model::json_meta::{annotation, label};
use crate::model::labels;
use crate::model::ownership::is_ferry_managed_json;
use crate::model::provenance::ANNOTATION_KEYS as PROVENANCE_KEYS;

/// What the agent remembers between passes: which Events it already recorded, so a held or refused item
/// does not produce one Event per retry.
#[derive(Debug, Default)]
pub struct Memory {
    events: HashSet<(String, ObjectKey, String)>,
    /// Warning Events per second, across passes.
    warnings: EventBudget,
}

impl Memory {
    fn first_time(&mut self, version: &str, r: &ObjectRef, reason: &str) -> bool {
        self.events.insert((version.to_string(), ObjectKey::of_ref(r), reason.to_string()))
    }

    /// Forgets Events of other versions (bounded memory).
    fn keep_only(&mut self, version: &str) {
        self.events.retain(|(v, _, _)| v == version);
    }
}

/// Items of one dependency layer applied at once, unless configured otherwise (`--apply-concurrency`): the API
/// server takes some hundreds of creates a second from a few dozen connections, one at a time far fewer.
pub const DEFAULT_APPLY_CONCURRENCY: usize = 32;

/// What one pass shares between the items applied concurrently. The locks are never held across an await.
struct Pass<'a> {
    set: &'a DesiredSet,
    /// Objects read or written in this pass (prerequisites, and what was just created: a PVB takes its Backup's
    /// UID from the create response, not from the watch), as JSON text: a pass of 30,000 creates held as
    /// `Value`s with their managedFields cost more than the rest of the agent.
    live: Mutex<HashMap<ObjectKey, Box<[u8]>>>,
    memory: Mutex<&'a mut Memory>,
    /// What was created, per backup and namespace, for one Event each (not one per object).
    created: Mutex<BTreeMap<(String, String), Created>>,
    /// Objects of this pass's items that exist but are not what the item wanted (CONFLICT), with why: what
    /// waits for one is held, not applied on top of someone else's object.
    conflicts: Mutex<HashMap<ObjectKey, String>>,
}

/// The objects of one backup created in one namespace in a pass.
struct Created {
    /// The object the Event is about: the Backup if it was created, else the first created.
    about: ObjectRef,
    uid: Option<String>,
    source: String,
    objects: Vec<String>,
}

impl Pass<'_> {
    fn first_time(&self, r: &ObjectRef, reason: &str) -> bool {
        self.memory.lock().unwrap_or_else(|p| p.into_inner()).first_time(&self.set.version, r, reason)
    }

    fn live(&self, key: &ObjectKey) -> Option<Value> {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.get(key).and_then(|text| serde_json::from_slice(text).ok())
    }

    /// Keeps what later items of the pass read of `object`: a Backup or BSL whole but for its managedFields (the
    /// guard judges PVBs and NABs against it); of anything else only that it exists, and its UID.
    fn remember(&self, r: &ObjectRef, mut object: Value) {
        let kept = match r.kind.as_str() {
            "Backup" | "BackupStorageLocation" => {
                if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove("managedFields");
                }
                object
            }
            _ => serde_json::json!({"metadata": {
                "name": r.name, "namespace": r.namespace,
                "uid": object.pointer("/metadata/uid").cloned().unwrap_or(Value::Null)}}),
        };
        let text = serde_json::to_vec(&kept).unwrap_or_default().into_boxed_slice();
        self.live.lock().unwrap_or_else(|p| p.into_inner()).insert(ObjectKey::of_ref(r), text);
    }

    fn conflict(&self, r: &ObjectRef, note: &str) {
        self.conflicts.lock().unwrap_or_else(|p| p.into_inner()).insert(ObjectKey::of_ref(r), note.to_string());
    }

    fn conflict_of(&self, r: &ObjectRef) -> Option<String> {
        self.conflicts.lock().unwrap_or_else(|p| p.into_inner()).get(&ObjectKey::of_ref(r)).cloned()
    }

    /// Records a Warning Event about `r` unless the budget is spent (docs/security.md: a coordinator cannot flood
    /// the cluster's Events). Called only for objects the guard's kind check admits.
    async fn warning(&self, api: &dyn ClusterApi, r: &ObjectRef, uid: Option<&str>, reason: &str, note: &str) {
        let allowed = self.memory.lock().unwrap_or_else(|p| p.into_inner()).warnings.allow(std::time::Instant::now());
        if allowed {
            api.event(r, uid, reason, note, true).await;
        }
    }

    fn record_created(&self, item: &DesiredItem, r: &ObjectRef, created: &Value, desired: &Value) {
        let uid = created.pointer("/metadata/uid").and_then(Value::as_str).map(str::to_string);
        let mut all = self.created.lock().unwrap_or_else(|p| p.into_inner());
        let entry = all.entry((item.backup.clone(), r.namespace.clone())).or_insert_with(|| Created {
            about: r.clone(),
            uid: uid.clone(),
            source: source_of(desired),
            objects: Vec::new(),
        });
        if r.kind == "Backup" {
            entry.about = r.clone();
            entry.uid = uid;
        }
        entry.objects.push(describe(r));
    }
}

/// Applies `set` once. Returns one result per item it acted on (REFUSE and CONFLICT items of the plan are
/// not applied and get no result: the coordinator already knows them).
pub async fn reconcile(api: &dyn ClusterApi, guard: &Guard, set: &DesiredSet, memory: &mut Memory) -> Vec<ItemResult> {
    reconcile_with(api, guard, set, memory, DEFAULT_APPLY_CONCURRENCY).await
}

/// [`reconcile`], with up to `concurrency` items of one dependency layer in flight (Backup → PVBs → NAB:
/// a layer never waits on an item of its own).
pub async fn reconcile_with(
    api: &dyn ClusterApi,
    guard: &Guard,
    set: &DesiredSet,
    memory: &mut Memory,
    concurrency: usize,
) -> Vec<ItemResult> {
    memory.keep_only(&set.version);
    let pass = Pass {
        set,
        live: Mutex::new(HashMap::new()),
        memory: Mutex::new(memory),
        created: Mutex::new(BTreeMap::new()),
        conflicts: Mutex::new(HashMap::new()),
    };
    let mut results: Vec<(usize, ItemResult)> = Vec::new();
    for layer in apply_layers(&set.items) {
        let done: Vec<Option<(usize, ItemResult)>> = futures::stream::iter(layer)
            .map(|index| {
                let pass = &pass;
                async move { one_item(api, guard, pass, index).await.map(|result| (index, result)) }
            })
            .buffer_unordered(concurrency.max(1))
            .collect()
            .await;
        results.extend(done.into_iter().flatten());
    }
    let created = std::mem::take(&mut *pass.created.lock().unwrap_or_else(|p| p.into_inner()));
    // As many Events in flight as creates: written one after another, 10,000 backups' Events held up the next
    // pass by as long as the creates took (docs/performance.md, time to visible).
    futures::stream::iter(created_events(created))
        .for_each_concurrent(concurrency.max(1), |(about, uid, note)| async move {
            api.event(&about, uid.as_deref(), "FerryCreated", &note, false).await;
        })
        .await;
    let dropped = pass.memory.lock().unwrap_or_else(|p| p.into_inner()).warnings.take_dropped();
    if dropped > 0 {
        tracing::warn!(dropped, "Warning Events not recorded: more than the agent writes per second");
    }
    results.sort_by_key(|(index, _)| *index);
    results.into_iter().map(|(_, result)| result).collect()
}

/// One item of the set: its result, if it gets one.
async fn one_item(api: &dyn ClusterApi, guard: &Guard, pass: &Pass<'_>, index: usize) -> Option<ItemResult> {
    let item = &pass.set.items[index];
    let r = item.r#ref.clone()?;
    let action = DesiredAction::try_from(item.action).unwrap_or(DesiredAction::Unspecified);
    match action {
        DesiredAction::Create | DesiredAction::Wait => {
            let (outcome, message) = apply_item(api, guard, pass, item, &r).await;
            Some(ItemResult { r#ref: Some(r), outcome: outcome as i32, message })
        }
        DesiredAction::Refuse | DesiredAction::Conflict => {
            let reason = if action == DesiredAction::Refuse { "FerryRefused" } else { "FerryConflict" };
            // The coordinator's words, recorded only about an object the agent could create itself: never an Event
            // with chosen text in kube-system or about a kind ferry does not make.
            if let Some(why) = guard.event_refusal(&r) {
                if pass.first_time(&r, "FerryEventRefused") {
                    tracing::warn!(object = %describe(&r), reason = %why, "no Event for the coordinator's {reason} item");
                }
                return None;
            }
            if pass.first_time(&r, reason) {
                let note = format!("backup {}: {}", item.backup, item.reason);
                pass.warning(api, &r, None, reason, &note).await;
            }
            None
        }
        DesiredAction::Retire => {
            let (outcome, message) = super::retire::retire(api, guard, item, &r).await;
            if outcome != ApplyOutcome::Applied && pass.first_time(&r, "FerryRetireSkipped") {
                tracing::warn!(object = %describe(&r), reason = %message, "not retired");
            }
            Some(ItemResult { r#ref: Some(r), outcome: outcome as i32, message })
        }
        // Report mode: shown in status from the set itself; nothing to do here.
        DesiredAction::WouldRetire | DesiredAction::Unspecified => None,
    }
}

async fn apply_item(
    api: &dyn ClusterApi,
    guard: &Guard,
    pass: &Pass<'_>,
    item: &DesiredItem,
    r: &ObjectRef,
) -> (ApplyOutcome, String) {
    // What the coordinator sent is checked before anything is read or written for it.
    let body: Option<Value> = match item.raw_json.is_empty() {
        true => None,
        false => match serde_json::from_slice(&item.raw_json) {
            Ok(object) => Some(object),
            Err(e) => return (ApplyOutcome::Failed, format!("the coordinator sent invalid JSON: {e}")),
        },
    };
    if let Some(why) = guard.refusal(item, r, body.as_ref()) {
        return refuse(api, pass, r, &why).await;
    }
    // Prerequisites first: everything it waits for must exist (the Backup must have a UID).
    for prerequisite in &item.waits_for {
        // Someone else's object of that name is not what this item waits for (a NAB on Velero's unmapped copy
        // of its Backup would be refused by NAC).
        if let Some(why) = pass.conflict_of(prerequisite) {
            return (
                ApplyOutcome::Held,
                format!("waits for {}, which is not this backup's: {why}", describe(prerequisite)),
            );
        }
        match read(api, pass, prerequisite).await {
            Ok(Some(_)) => {}
            Ok(None) => return (ApplyOutcome::Held, format!("waits for {}", describe(prerequisite))),
            Err(failed) => return failed,
        }
    }
    let Some(mut object) = body else {
        let why =
            if item.waits_for_condition.is_empty() { item.reason.clone() } else { item.waits_for_condition.clone() };
        return (ApplyOutcome::Held, format!("nothing to apply yet: {why}"));
    };
    // What the object relates to, read from this cluster: the guard judges it against that, not the set.
    let needs = guard.needs(r, &object);
    let backup = match &needs.backup {
        Some(backup_ref) => match read(api, pass, backup_ref).await {
            Ok(Some(found)) => Some(found),
            Ok(None) => return (ApplyOutcome::Held, format!("waits for {}", describe(backup_ref))),
            Err(failed) => return failed,
        },
        None => None,
    };
    if r.kind == "PodVolumeBackup"
        && let Some(uid) = backup.as_ref().and_then(|b| b.pointer("/metadata/uid")).and_then(Value::as_str)
    {
        // The UID of the Backup on this cluster, as the agent reads it (the coordinator's view may lag).
        fill_backup_uid(&mut object, uid);
    }
    let location_ref = needs.location.clone().or_else(|| {
        let named = backup.as_ref().and_then(|b| b.pointer("/spec/storageLocation")).and_then(Value::as_str);
        named.and_then(|name| guard.location_ref(name))
    });
    let location = match &location_ref {
        Some(location_ref) => match read(api, pass, location_ref).await {
            Ok(found) => found,
            Err(failed) => return failed,
        },
        None => None,
    };
    let related = Related { backup: backup.as_ref(), location: location.as_ref() };
    if let Some(why) = guard.related_refusal(r, &object, related, std::time::SystemTime::now()) {
        return refuse(api, pass, r, &why).await;
    }

    let existing = match api.get(r).await {
        Ok(existing) => existing,
        Err(e) => return (ApplyOutcome::Failed, format!("reading {}: {e}", describe(r))),
    };
    let outcome = match existing {
        Some(existing) => update_existing(api, pass, r, &object, existing).await,
        None => match api.create(r, &object).await {
            Ok(created) => {
                pass.record_created(item, r, &created, &object);
                if let Some(hint) = annotation(&object, labels::FERRY_RESTORE_HINT) {
                    let uid = created.pointer("/metadata/uid").and_then(Value::as_str);
                    pass.warning(api, r, uid, "FerryNamespaceMapped", hint).await;
                }
                pass.remember(r, created);
                (ApplyOutcome::Applied, String::new())
            }
            // Someone (Velero's or NAC's own sync) created it between our read and our create.
            Err(ApiError::AlreadyExists) => match api.get_fresh(r).await {
                Ok(Some(existing)) => update_existing(api, pass, r, &object, existing).await,
                Ok(None) => (ApplyOutcome::Failed, "created concurrently and deleted again; will retry".into()),
                Err(e) => (ApplyOutcome::Failed, format!("reading {}: {e}", describe(r))),
            },
            Err(e) => (ApplyOutcome::Failed, e.to_string()),
        },
    };
    if outcome.0 == ApplyOutcome::Failed && pass.first_time(r, "FerryApplyFailed") {
        pass.warning(api, r, None, "FerryApplyFailed", &outcome.1).await;
    }
    outcome
}

/// The agent refuses an item: REFUSED with the reason, one Warning Event about it per set version.
async fn refuse(api: &dyn ClusterApi, pass: &Pass<'_>, r: &ObjectRef, why: &str) -> (ApplyOutcome, String) {
    let note = format!("not applied: {why}");
    if pass.first_time(r, "FerryAgentRefused") {
        tracing::warn!(object = %describe(r), reason = %why, "refused an item from the coordinator");
        pass.warning(api, r, None, "FerryAgentRefused", &note).await;
    }
    (ApplyOutcome::Refused, note)
}

/// `r` as this pass made or found it, else as the cluster has it. What the cluster has is not copied into the
/// pass: the agent reads it from its watch index, which stays as it is for the pass.
async fn read(api: &dyn ClusterApi, pass: &Pass<'_>, r: &ObjectRef) -> Result<Option<Value>, (ApplyOutcome, String)> {
    if let Some(found) = pass.live(&ObjectKey::of_ref(r)) {
        return Ok(Some(found));
    }
    api.get(r).await.map_err(|e| (ApplyOutcome::Failed, format!("reading {}: {e}", describe(r))))
}

async fn update_existing(
    api: &dyn ClusterApi,
    pass: &Pass<'_>,
    r: &ObjectRef,
    desired: &Value,
    existing: Value,
) -> (ApplyOutcome, String) {
    let uid = existing.pointer("/metadata/uid").and_then(Value::as_str).map(str::to_string);
    // Velero's or NAC's own sync got there first with this same backup: that is the item done, not a conflict
    // (and never ours to change).
    if !is_ferry_managed_json(&existing) && same_backup(r, desired, &existing) {
        pass.remember(r, existing);
        return (ApplyOutcome::Applied, "made by Velero's or NAC's own sync; left as it is".into());
    }
    if !is_ferry_managed_json(&existing) {
        let note = unmapped_copy(r, desired, &existing).unwrap_or_else(|| {
            format!(
                "{} exists and is not ferry's (no {}={} label); left untouched",
                describe(r),
                labels::FERRY_MANAGED_BY,
                labels::FERRY_MANAGED_BY_VALUE
            )
        });
        if pass.first_time(r, "FerryConflict") {
            pass.warning(api, r, uid.as_deref(), "FerryConflict", &note).await;
        }
        pass.remember(r, existing);
        pass.conflict(r, &note);
        return (ApplyOutcome::Conflict, note);
    }
    // Create-only: ferry's own object of the same provenance is this item done — never written over (NAC rewrites
    // a synced NAB's spec, Velero a Backup's status; and a coordinator must not re-point what exists). One of
    // another backup or location is left untouched and reported.
    if let Some(why) = other_provenance(desired, &existing) {
        let note = format!("{} is ferry's, but {why}; left untouched", describe(r));
        if pass.first_time(r, "FerryConflict") {
            pass.warning(api, r, uid.as_deref(), "FerryConflict", &note).await;
        }
        pass.remember(r, existing);
        pass.conflict(r, &note);
        return (ApplyOutcome::Conflict, note);
    }
    pass.remember(r, existing);
    (ApplyOutcome::Applied, String::new())
}

/// A tenant Backup that someone else (Velero's own backup sync) made on the same BSL with another origin namespace
/// than ferry maps it to: in words that say what to do (docs/operations.md, "Velero's own sync on the target").
fn unmapped_copy(r: &ObjectRef, desired: &Value, existing: &Value) -> Option<String> {
    let origin = |v| annotation(v, labels::NAB_ORIGIN_NAMESPACE);
    let (Some(mapped), Some(found)) = (origin(desired), origin(existing)) else { return None };
    let same_location = storage_location(desired).is_some() && storage_location(desired) == storage_location(existing);
    (r.kind == "Backup" && mapped != found && same_location).then(|| {
        format!(
            "{} exists with origin namespace {found:?}, not {mapped:?} that this cluster maps the backup to: \
                 Velero's own backup sync made it from the same BSL, and NAC refuses a NonAdminBackup in {mapped:?} \
                 for it, so none is created; turn Velero's sync off for that BSL (spec.backupSyncPeriod: 0s), then \
                 delete this Backup with kubectl (never `velero backup delete`, which deletes the backup's data) and \
                 ferry creates it mapped",
            describe(r)
        )
    })
}

/// Why ferry's `existing` object is not the one `desired` describes (another location, bucket, prefix, backup or
/// backup UID; or a provenance incomplete on either side), or `None`.
fn other_provenance(desired: &Value, existing: &Value) -> Option<String> {
    PROVENANCE_KEYS.iter().find_map(|key| {
        let (want, found) = (annotation(desired, key), annotation(existing, key));
        let whole = want.is_some() && (*key == labels::FERRY_SOURCE_PREFIX || want != Some(""));
        (!whole || want != found).then(|| format!("its {key} is {found:?}, not {want:?}"))
    })
}

/// Whether an object someone else made is the very object ferry wanted: a Backup of the same name bound to the
/// same storage location, with the same NAC marks; a NAB in the same namespace synced from the same NACUUID; a
/// PVB labelled for the same backup (name and UID).
fn same_backup(r: &ObjectRef, desired: &Value, existing: &Value) -> bool {
    let same = |a: Option<&str>, b: Option<&str>| a.is_some() && a == b;
    match r.kind.as_str() {
        // For a tenant's backup the NAC marks too: Velero's copy of a mapped backup keeps the bucket's origin
        // namespace, and NAC refuses a NAB in the mapped namespace for it.
        "Backup" => {
            same(storage_location(desired), storage_location(existing))
                && NAC_MARKS.iter().all(|&(is_label, key)| match is_label {
                    true => label(desired, key) == label(existing, key),
                    false => annotation(desired, key) == annotation(existing, key),
                })
        }
        "NonAdminBackup" => {
            same(label(desired, labels::NAB_SYNCED_FROM_NACUUID), label(existing, labels::NAB_SYNCED_FROM_NACUUID))
                && existing.pointer("/metadata/namespace").and_then(Value::as_str) == Some(r.namespace.as_str())
        }
        "PodVolumeBackup" => {
            same(label(desired, labels::VELERO_BACKUP_NAME), label(existing, labels::VELERO_BACKUP_NAME))
                && same(label(desired, labels::VELERO_BACKUP_UID), label(existing, labels::VELERO_BACKUP_UID))
        }
        _ => false,
    }
}

fn storage_location(backup: &Value) -> Option<&str> {
    backup.pointer("/spec/storageLocation").and_then(Value::as_str)
}

/// The marks NAC reads on a tenant's Backup: (is a label, key).
const NAC_MARKS: [(bool, &str); 3] =
    [(true, labels::NAB_ORIGIN_NACUUID), (false, labels::NAB_ORIGIN_NAMESPACE), (false, labels::NAB_ORIGIN_NAME)];

/// Points a PVB template at the target's Backup: the ownerReference's UID and `velero.io/backup-uid`.
pub fn fill_backup_uid(pvb: &mut Value, uid: &str) {
    if let Some(Value::Array(refs)) = pvb.pointer_mut("/metadata/ownerReferences") {
        for r in refs.iter_mut().filter(|r| r.get("kind").and_then(Value::as_str) == Some("Backup")) {
            r["uid"] = Value::String(uid.to_string());
        }
    }
    if let Some(Value::Object(labels_map)) = pvb.pointer_mut("/metadata/labels")
        && labels_map.contains_key(labels::VELERO_BACKUP_UID)
    {
        labels_map.insert(labels::VELERO_BACKUP_UID.to_string(), Value::String(uid.to_string()));
    }
}

/// How many backups of one namespace get a `FerryCreated` Event each in one pass; the rest share one combined
/// Event. As client-go's event correlator combines more than 10 similar Events in 10 minutes: a cold sync of
/// 10,000 backups wrote 10,000 Events, a third more writes than the objects themselves.
pub const EVENTS_BEFORE_COMBINING: usize = 10;

/// The `FerryCreated` Events of a pass, as (about, its UID, note): one per backup and namespace for the first
/// [`EVENTS_BEFORE_COMBINING`] backups of each namespace, then one for the rest of that namespace, about the
/// last of them.
fn created_events(created: BTreeMap<(String, String), Created>) -> Vec<(ObjectRef, Option<String>, String)> {
    let mut by_namespace: BTreeMap<String, Vec<(String, Created)>> = BTreeMap::new();
    for ((backup, namespace), c) in created {
        by_namespace.entry(namespace).or_default().push((backup, c));
    }
    let mut events = Vec::new();
    for (namespace, mut backups) in by_namespace {
        let rest = backups.split_off(backups.len().min(EVENTS_BEFORE_COMBINING));
        for (backup, c) in backups {
            let note = format!("created by ferry from backup {backup} ({}): {}", c.source, c.objects.join(", "));
            events.push((c.about, c.uid, note));
        }
        let Some((last_backup, last)) = rest.last() else { continue };
        let objects: usize = rest.iter().map(|(_, c)| c.objects.len()).sum();
        let sources: BTreeSet<&str> = rest.iter().map(|(_, c)| c.source.as_str()).collect();
        let first_backup = &rest[0].0;
        let note = format!(
            "(combined from similar events): created by ferry in namespace {namespace}: {objects} objects of {} \
             more backups ({first_backup} … {last_backup}; {}); each of the first {EVENTS_BEFORE_COMBINING} \
             backups of this pass has an Event of its own",
            rest.len(),
            sources.into_iter().collect::<Vec<_>>().join(", ")
        );
        events.push((last.about.clone(), last.uid.clone(), note));
    }
    events
}

fn source_of(object: &Value) -> String {
    let cluster = annotation(object, labels::FERRY_SOURCE_CLUSTER)
        .or_else(|| label(object, labels::FERRY_SOURCE_CLUSTER))
        .unwrap_or("?");
    format!("source cluster {cluster}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::guard::{MappingAllowlist, Policy, test_objects as objects};
    use crate::grpc::convert::object_ref;
    use serde_json::json;
    use std::sync::Mutex;

    /// An in-memory cluster, for the decision logic only; the e2e tests run the same code against real
    /// API servers.
    #[derive(Default)]
    struct Memo {
        objects: Mutex<HashMap<ObjectKey, Value>>,
        events: Mutex<Vec<String>>,
        /// Each create takes this long (to see how many are in flight at once).
        create_delay: Option<std::time::Duration>,
        in_flight: std::sync::atomic::AtomicUsize,
        most_in_flight: std::sync::atomic::AtomicUsize,
        /// Objects someone else creates between the agent's read and its create: absent to `get`, stored (and
        /// the create refused with AlreadyExists) once the agent creates one of that name.
        appearing: Mutex<HashMap<ObjectKey, Value>>,
    }

    #[async_trait::async_trait]
    impl ClusterApi for Memo {
        async fn get(&self, r: &ObjectRef) -> Result<Option<Value>, ApiError> {
            Ok(self.objects.lock().unwrap().get(&ObjectKey::of_ref(r)).cloned())
        }
        async fn create(&self, r: &ObjectRef, object: &Value) -> Result<Value, ApiError> {
            use std::sync::atomic::Ordering::SeqCst;
            if let Some(delay) = self.create_delay {
                let now = self.in_flight.fetch_add(1, SeqCst) + 1;
                self.most_in_flight.fetch_max(now, SeqCst);
                tokio::time::sleep(delay).await;
                self.in_flight.fetch_sub(1, SeqCst);
            }
            let mut objects = self.objects.lock().unwrap();
            if let Some(racing) = self.appearing.lock().unwrap().remove(&ObjectKey::of_ref(r)) {
                objects.insert(ObjectKey::of_ref(r), racing);
            }
            if objects.contains_key(&ObjectKey::of_ref(r)) {
                return Err(ApiError::AlreadyExists);
            }
            let mut created = object.clone();
            created["metadata"]["uid"] = json!(format!("uid-{}", r.name));
            objects.insert(ObjectKey::of_ref(r), created.clone());
            Ok(created)
        }
        async fn delete(&self, r: &ObjectRef, uid: &str, version: &str) -> Result<(), ApiError> {
            let mut objects = self.objects.lock().unwrap();
            let key = ObjectKey::of_ref(r);
            let Some(found) = objects.get(&key) else { return Err(ApiError::NotFound) };
            let same = found.pointer("/metadata/uid").and_then(Value::as_str) == Some(uid)
                && found.pointer("/metadata/resourceVersion").and_then(Value::as_str) == Some(version);
            if !same {
                return Err(ApiError::PreconditionFailed("uid or resourceVersion differ".into()));
            }
            objects.remove(&key);
            Ok(())
        }
        async fn event(&self, about: &ObjectRef, _: Option<&str>, reason: &str, _: &str, _: bool) {
            self.events.lock().unwrap().push(format!("{reason} {}", about.name));
        }
    }

    /// Where the tests' objects live: NABs in a tenant namespace, Velero's kinds in the Velero namespace.
    fn ns_of(kind: &str) -> &'static str {
        if kind == "NonAdminBackup" { "team-a" } else { "velero" }
    }

    /// The tenant backup of team-a/n the tests' NAB "n" belongs to (its Backup is named by its NACUUID).
    fn tenant() -> String {
        objects::nacuuid("team-a", "n")
    }

    /// An object as ferry plans it: Backup `name` (of team-a's NAB "n" when named [`tenant`]), a PVB of Backup
    /// "b", the NAB of team-a's backup `name`.
    fn ours(kind: &str, name: &str) -> Value {
        match kind {
            "NonAdminBackup" => objects::nab("team-a", name, "team-a"),
            "PodVolumeBackup" => objects::pvb(name, "b", "shop", ""),
            _ if name == tenant() => objects::tenant_backup("team-a", "n", "team-a"),
            _ => objects::backup(name),
        }
    }

    /// A cluster with ferry's ReadOnly BSL.
    fn cluster() -> Memo {
        let api = Memo::default();
        api.put(objects::bsl(objects::BSL, Some("ReadOnly")));
        api
    }

    impl Memo {
        fn put(&self, object: Value) {
            let text = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
            let r = object_ref(&text("/kind"), &text("/metadata/namespace"), &text("/metadata/name"));
            self.objects.lock().unwrap().insert(ObjectKey::of_ref(&r), object);
        }

        /// `object` is created by someone else just before the agent creates it.
        fn appears(&self, object: Value) {
            let text = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
            let r = object_ref(&text("/kind"), &text("/metadata/namespace"), &text("/metadata/name"));
            self.appearing.lock().unwrap().insert(ObjectKey::of_ref(&r), object);
        }

        fn stored(&self, kind: &str, name: &str) -> Option<Value> {
            self.objects.lock().unwrap().get(&ObjectKey::of_ref(&object_ref(kind, ns_of(kind), name))).cloned()
        }

        fn events(&self) -> Vec<String> {
            self.events.lock().unwrap().clone()
        }
    }

    fn guard() -> Guard {
        Guard::new("velero", &[])
    }

    fn item(
        action: DesiredAction,
        kind: &str,
        name: &str,
        waits: &[(&str, &str)],
        object: Option<Value>,
    ) -> DesiredItem {
        DesiredItem {
            action: action as i32,
            r#ref: Some(object_ref(kind, ns_of(kind), name)),
            backup: "b".into(),
            waits_for: waits.iter().map(|(k, n)| object_ref(k, ns_of(k), n)).collect(),
            raw_json: object.map(|o| serde_json::to_vec(&o).unwrap().into()).unwrap_or_default(),
            ..Default::default()
        }
    }

    fn set_of(items: Vec<DesiredItem>) -> DesiredSet {
        DesiredSet { version: "v1".into(), items, complete: true, more: false, ..Default::default() }
    }

    fn outcome_of(results: &[ItemResult], name: &str) -> ItemResult {
        results.iter().find(|r| r.r#ref.as_ref().unwrap().name == name).cloned().unwrap_or_else(|| panic!("{name}"))
    }

    #[tokio::test]
    async fn one_layer_is_applied_concurrently_within_the_bound_and_created_objects_get_one_event_per_backup() {
        let api = Memo { create_delay: Some(std::time::Duration::from_millis(20)), ..Default::default() };
        api.put(objects::bsl(objects::BSL, Some("ReadOnly")));
        let backup = tenant();
        let mut items = vec![item(DesiredAction::Create, "Backup", &backup, &[], Some(ours("Backup", &backup)))];
        for i in 0..12 {
            let name = format!("p{i}");
            let pvb = objects::pvb(&name, &backup, "team-a", "");
            items.push(item(DesiredAction::Create, "PodVolumeBackup", &name, &[("Backup", &backup)], Some(pvb)));
        }
        let nab = ours("NonAdminBackup", "n");
        items.push(item(DesiredAction::Create, "NonAdminBackup", "n", &[("Backup", &backup)], Some(nab)));
        let results = reconcile_with(&api, &guard(), &set_of(items), &mut Memory::default(), 4).await;
        assert_eq!(results.len(), 14);
        assert!(results.iter().all(|r| r.outcome == ApplyOutcome::Applied as i32), "{results:?}");
        // Results in the set's order, whatever order they finished in.
        let names: Vec<&str> = results.iter().map(|r| r.r#ref.as_ref().unwrap().name.as_str()).collect();
        assert_eq!(names[0], backup);
        assert_eq!(names[13], "n");
        let most = api.most_in_flight.load(std::sync::atomic::Ordering::SeqCst);
        assert!(most > 1 && most <= 4, "{most} creates in flight at once");
        // Every PVB took its Backup's UID from the create response of the same pass.
        let pvb = api.stored("PodVolumeBackup", "p7").unwrap();
        assert_eq!(pvb["metadata"]["ownerReferences"][0]["uid"], format!("uid-{backup}"));
        // One FerryCreated per backup and namespace (velero: the Backup and its 12 PVBs; team-a: the NAB).
        let events = api.events();
        let mut created: Vec<&String> = events.iter().filter(|e| e.starts_with("FerryCreated")).collect();
        created.sort();
        assert_eq!(created, ["FerryCreated n", &format!("FerryCreated {backup}")], "{events:?}");
    }

    /// Issue 30: past the first 10 backups of a namespace in one pass, created objects share one combined Event
    /// (client-go's correlator does the same with similar Events), about the last backup and counting them all.
    #[test]
    fn past_ten_backups_per_namespace_a_pass_records_one_combined_event() {
        let created = |backup: &str, namespace: &str, objects: usize| {
            let about = crate::grpc::convert::object_ref("Backup", namespace, backup);
            let objects = (0..objects).map(|i| format!("object {i}")).collect();
            let c = Created { about, uid: Some(format!("uid-{backup}")), source: "source cluster a".into(), objects };
            ((backup.to_string(), namespace.to_string()), c)
        };
        let mut all: BTreeMap<(String, String), Created> =
            (0..25).map(|i| created(&format!("b{i:02}"), "velero", 3)).collect();
        all.extend([created("n", "team-a", 1)]);
        let events = created_events(all);
        assert_eq!(events.len(), EVENTS_BEFORE_COMBINING + 1 + 1, "10 + one combined in velero, one in team-a");
        let abouts: Vec<&str> = events.iter().map(|(about, ..)| about.name.as_str()).collect();
        assert_eq!(&abouts[..3], ["n", "b00", "b01"], "team-a's, then velero's");
        assert_eq!(abouts[10..], ["b09", "b24"]);
        let (_, uid, combined) = &events[11];
        assert_eq!(uid.as_deref(), Some("uid-b24"));
        assert!(combined.starts_with("(combined from similar events)"), "{combined}");
        assert!(combined.contains("45 objects of 15 more backups (b10 … b24; source cluster a)"), "{combined}");
        assert!(events[1].2.contains("from backup b00 (source cluster a): object 0, object 1, object 2"));
    }

    #[tokio::test]
    async fn retire_deletes_only_the_very_object_planned_on_and_only_where_the_agent_allows_it() {
        let api = cluster();
        let mut ferrys = ours("Backup", "gone");
        ferrys["metadata"]["uid"] = json!("u1");
        ferrys["metadata"]["resourceVersion"] = json!("5");
        let mut users = ferrys.clone();
        users["metadata"]["name"] = json!("users");
        users["metadata"]["labels"] = json!({});
        let mut edited = ferrys.clone();
        edited["metadata"]["name"] = json!("edited");
        for object in [&ferrys, &users, &edited] {
            api.put(object.clone());
        }
        // The coordinator planned "edited" at resourceVersion 4: it changed since.
        let mut planned_edited = edited.clone();
        planned_edited["metadata"]["resourceVersion"] = json!("4");
        let set = set_of(vec![
            item(DesiredAction::Retire, "Backup", "gone", &[], Some(ferrys)),
            item(DesiredAction::Retire, "Backup", "users", &[], Some(users)),
            item(DesiredAction::Retire, "Backup", "edited", &[], Some(planned_edited)),
            item(DesiredAction::WouldRetire, "Backup", "edited", &[], None),
        ]);
        // Without --allow-retirement nothing is deleted, whatever the coordinator sends.
        let results = reconcile(&api, &guard(), &set, &mut Memory::default()).await;
        assert!(results.iter().all(|r| r.outcome == ApplyOutcome::Refused as i32), "{results:?}");
        assert!(outcome_of(&results, "gone").message.contains("--allow-retirement"));
        assert!(api.stored("Backup", "gone").is_some());

        let allowing = guard().with_policy(Policy { allow_retirement: true, ..Policy::default() });
        let results = reconcile(&api, &allowing, &set, &mut Memory::default()).await;
        assert_eq!(outcome_of(&results, "gone").outcome, ApplyOutcome::Applied as i32);
        assert_eq!(outcome_of(&results, "users").outcome, ApplyOutcome::Conflict as i32);
        assert!(outcome_of(&results, "edited").message.contains("resourceVersion"), "{results:?}");
        assert!(api.stored("Backup", "gone").is_none() && api.stored("Backup", "users").is_some());
        assert!(api.stored("Backup", "edited").is_some());
        assert_eq!(results.len(), 3, "report-mode items are not acted on");
        assert!(api.events().contains(&"FerryRetired gone".to_string()));
    }

    #[tokio::test]
    async fn one_pass_creates_the_backup_then_its_pvbs_with_its_uid() {
        let api = cluster();
        let set = set_of(vec![
            item(DesiredAction::Wait, "PodVolumeBackup", "p1", &[("Backup", "b")], Some(ours("PodVolumeBackup", "p1"))),
            item(DesiredAction::Create, "Backup", "b", &[], Some(ours("Backup", "b"))),
        ]);
        let results = reconcile(&api, &guard(), &set, &mut Memory::default()).await;
        assert!(results.iter().all(|r| r.outcome == ApplyOutcome::Applied as i32), "{results:?}");
        let pvb = api.stored("PodVolumeBackup", "p1").unwrap();
        assert_eq!(pvb["metadata"]["ownerReferences"][0]["uid"], "uid-b");
        assert_eq!(pvb["metadata"]["labels"][labels::VELERO_BACKUP_UID], "uid-b");
    }

    #[tokio::test]
    async fn a_pvb_takes_the_uid_of_the_backup_on_this_cluster_not_the_coordinators() {
        let api = cluster();
        api.put(objects::stored(ours("Backup", "b"), "uid-here"));
        let stale = objects::pvb("p1", "b", "shop", "uid-the-coordinator-saw");
        let results = reconcile(
            &api,
            &guard(),
            &set_of(vec![item(DesiredAction::Create, "PodVolumeBackup", "p1", &[], Some(stale))]),
            &mut Memory::default(),
        )
        .await;
        assert_eq!(results[0].outcome, ApplyOutcome::Applied as i32, "{results:?}");
        let pvb = api.stored("PodVolumeBackup", "p1").unwrap();
        assert_eq!(pvb["metadata"]["labels"][labels::VELERO_BACKUP_UID], "uid-here");
        assert_eq!(pvb["metadata"]["ownerReferences"][0]["uid"], "uid-here");
    }

    #[tokio::test]
    async fn missing_prerequisites_hold_and_foreign_objects_conflict() {
        let api = cluster();
        api.put(objects::stored(ours("Backup", &tenant()), "uid-t"));
        let foreign = json!({"kind": "NonAdminBackup", "metadata": {"name": "n", "namespace": "team-a"}});
        api.put(foreign.clone());
        let set = set_of(vec![
            item(
                DesiredAction::Wait,
                "PodVolumeBackup",
                "p1",
                &[("Backup", "absent")],
                Some(objects::pvb("p1", "absent", "shop", "")),
            ),
            item(DesiredAction::Create, "PodVolumeBackup", "p2", &[], Some(ours("PodVolumeBackup", "p2"))),
            item(DesiredAction::Create, "NonAdminBackup", "n", &[], Some(ours("NonAdminBackup", "n"))),
            item(DesiredAction::Refuse, "Backup", "tampered", &[], None),
        ]);
        let mut memory = Memory::default();
        let results = reconcile(&api, &guard(), &set, &mut memory).await;
        assert_eq!(outcome_of(&results, "p1").outcome, ApplyOutcome::Held as i32);
        let p2 = outcome_of(&results, "p2");
        assert_eq!(
            (p2.outcome, p2.message.as_str()),
            (ApplyOutcome::Held as i32, "waits for Backup velero/b"),
            "its own Backup, read by the agent"
        );
        assert_eq!(outcome_of(&results, "n").outcome, ApplyOutcome::Conflict as i32);
        assert!(results.iter().all(|r| r.r#ref.as_ref().unwrap().name != "tampered"), "refusals are not applied");
        assert_eq!(api.stored("NonAdminBackup", "n").unwrap(), foreign, "the foreign object is untouched");
        // A second pass records no second Event for the same things.
        reconcile(&api, &guard(), &set, &mut memory).await;
        assert_eq!(api.events(), ["FerryConflict n", "FerryRefused tampered"]);
    }

    #[tokio::test]
    async fn an_existing_object_of_ferrys_is_never_written_over() {
        let api = cluster();
        // NAC rewrote a synced NAB's spec; Velero a Backup's status; another backup's PVB holds a name.
        let mut rewritten_nab = objects::stored(ours("NonAdminBackup", "n"), "u-n");
        rewritten_nab["spec"] = json!({"backupSpec": {"defaulted": true}});
        let mut rewritten_backup = objects::stored(ours("Backup", "b"), "uid-b");
        rewritten_backup["status"]["phase"] = "PartiallyFailed".into();
        let other_backups = objects::stored(objects::pvb("p1", "other", "shop", "uid-o"), "u-p");
        api.put(objects::stored(ours("Backup", &tenant()), "uid-t"));
        for object in [&rewritten_nab, &rewritten_backup, &other_backups] {
            api.put(object.clone());
        }
        let set = set_of(vec![
            item(DesiredAction::Create, "NonAdminBackup", "n", &[], Some(ours("NonAdminBackup", "n"))),
            item(DesiredAction::Create, "Backup", "b", &[], Some(ours("Backup", "b"))),
            item(DesiredAction::Create, "PodVolumeBackup", "p1", &[], Some(ours("PodVolumeBackup", "p1"))),
        ]);
        let results = reconcile(&api, &guard(), &set, &mut Memory::default()).await;
        assert_eq!(outcome_of(&results, "n").outcome, ApplyOutcome::Applied as i32, "{results:?}");
        assert_eq!(outcome_of(&results, "b").outcome, ApplyOutcome::Applied as i32, "{results:?}");
        let p1 = outcome_of(&results, "p1");
        assert_eq!(p1.outcome, ApplyOutcome::Conflict as i32, "{p1:?}");
        assert!(p1.message.contains("ferry.dev/backup-name"), "{p1:?}");
        assert_eq!(api.stored("NonAdminBackup", "n").unwrap(), rewritten_nab);
        assert_eq!(api.stored("Backup", "b").unwrap(), rewritten_backup);
        assert_eq!(api.stored("PodVolumeBackup", "p1").unwrap(), other_backups, "another backup's PVB stays");

        // Ferry's own Backup of another location, on the same BSL: not "the same backup" as Velero's sync would
        // make it (that rule is for objects someone else made), but another provenance, left untouched.
        let api = cluster();
        let mut elsewhere = objects::stored(ours("Backup", "b"), "uid-b");
        elsewhere["metadata"]["annotations"][labels::FERRY_SOURCE_LOCATION] = "other-location".into();
        api.put(elsewhere.clone());
        let set = set_of(vec![item(DesiredAction::Create, "Backup", "b", &[], Some(ours("Backup", "b")))]);
        let results = reconcile(&api, &guard(), &set, &mut Memory::default()).await;
        let b = outcome_of(&results, "b");
        assert_eq!(b.outcome, ApplyOutcome::Conflict as i32, "{b:?}");
        assert!(b.message.contains(labels::FERRY_SOURCE_LOCATION), "{b:?}");
        assert_eq!(api.stored("Backup", "b").unwrap(), elsewhere);
    }

    #[test]
    fn provenance_must_be_whole_and_the_same() {
        let desired = ours("Backup", "b");
        assert_eq!(other_provenance(&desired, &desired), None);
        let mut elsewhere = desired.clone();
        elsewhere["metadata"]["annotations"][labels::FERRY_SOURCE_LOCATION] = "other".into();
        assert!(other_provenance(&desired, &elsewhere).unwrap().contains("source-location"));
        let mut empty = desired.clone();
        empty["metadata"]["annotations"][labels::FERRY_BACKUP_UID] = "".into();
        assert!(other_provenance(&empty, &empty).is_some(), "empty on both sides is no provenance");
        let mut root = desired.clone();
        root["metadata"]["annotations"][labels::FERRY_SOURCE_PREFIX] = "".into();
        assert_eq!(other_provenance(&root, &root), None, "a location at the bucket's root has an empty prefix");
    }

    #[tokio::test]
    async fn what_a_hostile_coordinator_sends_is_refused_per_item_and_never_applied() {
        let api = cluster();
        let mut unfinished = ours("Backup", "runs-on-b");
        unfinished.as_object_mut().unwrap().remove("status");
        // The body names another object than the item does.
        let renamed = ours("Backup", "other-name");
        let mut protected = item(DesiredAction::Create, "NonAdminBackup", "n", &[], None);
        let mut in_kube_system = ours("NonAdminBackup", "n");
        in_kube_system["metadata"]["namespace"] = json!("kube-system");
        protected.r#ref = Some(object_ref("NonAdminBackup", "kube-system", "n"));
        protected.raw_json = serde_json::to_vec(&in_kube_system).unwrap().into();
        let mut read_write = ours("Backup", "on-read-write");
        read_write["spec"]["storageLocation"] = "default".into();
        read_write["metadata"]["labels"][labels::VELERO_STORAGE_LOCATION] = "default".into();
        api.put(objects::bsl("default", None));
        let set = set_of(vec![
            item(DesiredAction::Create, "Backup", "runs-on-b", &[], Some(unfinished)),
            item(DesiredAction::Create, "Backup", "b2", &[], Some(renamed)),
            protected,
            item(DesiredAction::Create, "Backup", "on-read-write", &[], Some(read_write)),
            item(DesiredAction::Create, "Backup", "good", &[], Some(ours("Backup", "good"))),
        ]);
        let mut memory = Memory::default();
        let results = reconcile(&api, &guard(), &set, &mut memory).await;
        for name in ["runs-on-b", "b2", "n", "on-read-write"] {
            let result = outcome_of(&results, name);
            assert_eq!(result.outcome, ApplyOutcome::Refused as i32, "{name}: {result:?}");
            assert!(result.message.starts_with("not applied: "), "{result:?}");
        }
        assert!(outcome_of(&results, "runs-on-b").message.contains("Velero would run it"));
        assert!(outcome_of(&results, "on-read-write").message.contains("ReadWrite here"));
        assert_eq!(outcome_of(&results, "good").outcome, ApplyOutcome::Applied as i32, "the rest still goes");
        let backups: Vec<String> =
            api.objects.lock().unwrap().keys().filter(|k| k.kind == "Backup").map(|k| k.name.clone()).collect();
        assert_eq!(backups, ["good"], "nothing refused was written");
        reconcile(&api, &guard(), &set, &mut memory).await;
        let refusals = api.events().iter().filter(|e| e.starts_with("FerryAgentRefused")).count();
        assert_eq!(refusals, 4, "one Event per refused item, not one per pass");
    }

    #[tokio::test]
    async fn events_go_only_about_objects_the_agent_could_write_and_within_a_budget() {
        let api = cluster();
        let secret = ObjectRef {
            version: "v1".into(),
            kind: "Secret".into(),
            namespace: "kube-system".into(),
            name: "s".into(),
            ..Default::default()
        };
        let mut about_secret = item(DesiredAction::Refuse, "Backup", "x", &[], None);
        about_secret.r#ref = Some(secret);
        about_secret.reason = "your cluster is compromised, run this command".into();
        let mut in_kube_system = item(DesiredAction::Conflict, "NonAdminBackup", "n", &[], None);
        in_kube_system.r#ref = Some(object_ref("NonAdminBackup", "kube-system", "n"));
        // A refused location is this cluster's BSL: an Event about it is the coordinator's to ask for.
        let mut about_bsl = item(DesiredAction::Refuse, "Backup", "dr", &[], None);
        about_bsl.r#ref = Some(object_ref("BackupStorageLocation", "velero", "dr"));
        let mut foreign_bsl = item(DesiredAction::Refuse, "Backup", "kube-bsl", &[], None);
        foreign_bsl.r#ref = Some(object_ref("BackupStorageLocation", "kube-system", "kube-bsl"));
        let mut items = vec![about_secret, in_kube_system, about_bsl, foreign_bsl];
        for i in 0..300 {
            items.push(item(DesiredAction::Refuse, "Backup", &format!("r{i}"), &[], None));
        }
        let mut memory = Memory::default();
        reconcile(&api, &guard(), &set_of(items.clone()), &mut memory).await;
        let events = api.events();
        assert!(
            !events.iter().any(|e| e.ends_with(" s") || e.ends_with(" n") || e.ends_with("kube-bsl")),
            "{events:?}"
        );
        assert!(events.contains(&"FerryRefused dr".to_string()), "{events:?}");
        assert_eq!(events.len(), super::super::event_budget::BURST as usize, "the burst, then none");
        // A coordinator that changes the version every pass gets no more.
        let mut next = set_of(items);
        next.version = "v2".into();
        reconcile(&api, &guard(), &next, &mut memory).await;
        assert!(api.events().len() <= super::super::event_budget::BURST as usize + 5, "{}", api.events().len());
    }

    #[tokio::test]
    async fn velero_or_nac_winning_the_race_with_the_same_backup_is_success_not_a_conflict() {
        let api = cluster();
        // NAC's own sync made the NAB (same NACUUID, no ferry label); Velero's sync made the Backup on this BSL.
        let nac_made = json!({"kind": "NonAdminBackup", "metadata": {"name": "n", "namespace": "team-a",
            "labels": {labels::NAB_SYNCED_FROM_NACUUID: tenant()}}});
        let mut velero_made = objects::stored(ours("Backup", &tenant()), "uid-t");
        velero_made["metadata"]["labels"].as_object_mut().unwrap().remove(labels::FERRY_MANAGED_BY);
        let someone_elses = json!({"kind": "Backup", "metadata": {"name": "other", "namespace": "velero"},
            "spec": {"storageLocation": "their-bsl"}});
        for object in [nac_made, velero_made, someone_elses] {
            api.put(object);
        }
        let set = set_of(vec![
            item(DesiredAction::Create, "Backup", &tenant(), &[], Some(ours("Backup", &tenant()))),
            item(DesiredAction::Create, "Backup", "other", &[], Some(ours("Backup", "other"))),
            item(DesiredAction::Create, "NonAdminBackup", "n", &[], Some(ours("NonAdminBackup", "n"))),
        ]);
        let results = reconcile(&api, &guard(), &set, &mut Memory::default()).await;
        assert_eq!(
            outcome_of(&results, &tenant()).outcome,
            ApplyOutcome::Applied as i32,
            "Velero's own sync of the same backup"
        );
        assert_eq!(outcome_of(&results, "n").outcome, ApplyOutcome::Applied as i32, "NAC's own sync of the same NAB");
        assert_eq!(
            outcome_of(&results, "other").outcome,
            ApplyOutcome::Conflict as i32,
            "a Backup on another BSL is someone else's"
        );
        assert_eq!(api.events(), ["FerryConflict other"], "no Warning Event for a sync that won the race");
    }

    /// Velero's and NAC's copies as their syncs make them: the bucket's object, without ferry's label and marks.
    fn made_by_sync(mut object: Value, uid: &str) -> Value {
        object["metadata"]["uid"] = uid.into();
        object["metadata"]["labels"].as_object_mut().unwrap().remove(labels::FERRY_MANAGED_BY);
        let annotations = object["metadata"]["annotations"].as_object_mut().unwrap();
        annotations.retain(|key, _| !key.starts_with("ferry.dev/"));
        object
    }

    /// Issue 29 (2): Velero's own backup sync creates its copy of a *mapped* tenant backup between the
    /// coordinator's plan and this pass (create → AlreadyExists → read again). The copy keeps the bucket's
    /// origin namespace, so it is not the Backup ferry wanted: a CONFLICT saying what to do, an Event, and the NAB
    /// that waits for it is held, never created (NAC would refuse it).
    #[tokio::test]
    async fn velero_syncing_a_mapped_tenant_backup_first_is_a_conflict_and_holds_its_nab() {
        let api = cluster();
        let uuid = tenant();
        let velero_copy = made_by_sync(objects::tenant_backup("team-a", "n", "team-a"), "uid-velero");
        api.appears(velero_copy.clone());
        let nab_ref = object_ref("NonAdminBackup", "team-a-dr", "n");
        let nab = DesiredItem {
            r#ref: Some(nab_ref.clone()),
            waits_for: vec![object_ref("Backup", "velero", &uuid)],
            raw_json: serde_json::to_vec(&objects::nab("team-a", "n", "team-a-dr")).unwrap().into(),
            ..item(DesiredAction::Create, "NonAdminBackup", "n", &[], None)
        };
        let mapped = objects::tenant_backup("team-a", "n", "team-a-dr");
        let set = set_of(vec![nab, item(DesiredAction::Create, "Backup", &uuid, &[], Some(mapped))]);
        let mappings = MappingAllowlist(vec!["team-a=team-a-dr".parse().unwrap()]);
        let guard = guard().with_policy(Policy { mappings, ..Policy::default() });
        let results = reconcile(&api, &guard, &set, &mut Memory::default()).await;

        let backup = outcome_of(&results, &uuid);
        assert_eq!(backup.outcome, ApplyOutcome::Conflict as i32, "{results:?}");
        for words in ["origin namespace \"team-a\", not \"team-a-dr\"", "Velero's own backup sync", "backupSyncPeriod"]
        {
            assert!(backup.message.contains(words), "{words}: {}", backup.message);
        }
        let held = outcome_of(&results, "n");
        assert_eq!(held.outcome, ApplyOutcome::Held as i32, "{results:?}");
        assert!(held.message.contains("which is not this backup's"), "{}", held.message);
        assert!(api.objects.lock().unwrap().get(&ObjectKey::of_ref(&nab_ref)).is_none(), "no NAB NAC would refuse");
        assert_eq!(api.stored("Backup", &uuid), Some(velero_copy), "Velero's copy untouched");
        assert_eq!(api.events(), [format!("FerryConflict {uuid}")]);

        // Unmapped, Velero's copy is the very Backup ferry wanted (the same race): done, and the NAB follows.
        let api = cluster();
        api.appears(made_by_sync(objects::tenant_backup("team-a", "n", "team-a"), "uid-velero"));
        let set = set_of(vec![
            item(DesiredAction::Create, "NonAdminBackup", "n", &[("Backup", &uuid)], Some(ours("NonAdminBackup", "n"))),
            item(DesiredAction::Create, "Backup", &uuid, &[], Some(ours("Backup", &uuid))),
        ]);
        let results = reconcile(&api, &guard, &set, &mut Memory::default()).await;
        assert!(results.iter().all(|r| r.outcome == ApplyOutcome::Applied as i32), "{results:?}");
        assert!(outcome_of(&results, &uuid).message.contains("made by Velero's or NAC's own sync"));
        assert!(api.stored("NonAdminBackup", "n").is_some());
    }

    /// Issue 29 (9): a PVB that Velero's sync made first counts as done only when it is labelled for the same
    /// backup, name and UID; one of another backup is a conflict, and neither is written over.
    #[tokio::test]
    async fn a_pvb_someone_else_made_first_is_done_only_for_the_same_backup() {
        let api = cluster();
        api.put(objects::stored(ours("Backup", "b"), "uid-b"));
        api.appears(made_by_sync(objects::pvb("same", "b", "shop", "uid-b"), "pvb-1"));
        let other_backup = made_by_sync(objects::pvb("other", "b2", "shop", "uid-b2"), "pvb-2");
        api.appears(other_backup.clone());
        let other_uid = made_by_sync(objects::pvb("stale", "b", "shop", "uid-of-an-older-b"), "pvb-3");
        api.appears(other_uid.clone());
        let set = set_of(
            ["same", "other", "stale"]
                .iter()
                .map(|name| {
                    item(DesiredAction::Create, "PodVolumeBackup", name, &[], Some(ours("PodVolumeBackup", name)))
                })
                .collect(),
        );
        let results = reconcile(&api, &guard(), &set, &mut Memory::default()).await;
        assert_eq!(outcome_of(&results, "same").outcome, ApplyOutcome::Applied as i32, "{results:?}");
        assert_eq!(outcome_of(&results, "other").outcome, ApplyOutcome::Conflict as i32, "{results:?}");
        assert_eq!(outcome_of(&results, "stale").outcome, ApplyOutcome::Conflict as i32, "{results:?}");
        assert_eq!(api.stored("PodVolumeBackup", "other"), Some(other_backup));
        assert_eq!(api.stored("PodVolumeBackup", "stale"), Some(other_uid));
    }
}
