//! One pass of applying a DesiredSet to the cluster: in dependency order, each item is created if absent,
//! re-applied if it is ferry's (never for NABs: create-only, NAC rewrites their spec), reported as a conflict if
//! an object of that name is not ferry's, or held while what it waits for is missing. The cluster is behind the
//! [`ClusterApi`] trait (`cluster_api.rs`) so this logic reads the same against the real API server
//! (`kube_api.rs`, e2e tests) and in unit tests.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

use futures::StreamExt;

use serde_json::Value;

use super::cluster_api::{ApiError, ClusterApi, describe};
use super::guard::Guard;
use super::order::apply_layers;
use crate::grpc::convert::ObjectKey;
use crate::grpc::proto::{ApplyOutcome, DesiredAction, DesiredItem, DesiredSet, ItemResult, ObjectRef};
use crate::model::labels;
use crate::model::ownership::is_ferry_managed_json;

/// What the agent remembers between passes: which Events it already recorded, so a held or refused item
/// does not produce one Event per retry.
#[derive(Debug, Default)]
pub struct Memory {
    events: HashSet<(String, ObjectKey, String)>,
    /// What this agent last applied to each of ferry's objects (hash of the desired JSON): an unchanged
    /// object is not sent again on every pass.
    applied: HashMap<ObjectKey, u64>,
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
    /// UID from the create response, not from the watch).
    live: Mutex<HashMap<ObjectKey, Value>>,
    memory: Mutex<&'a mut Memory>,
    /// What was created, per backup and namespace, for one Event each (not one per object).
    created: Mutex<BTreeMap<(String, String), Created>>,
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
        self.live.lock().unwrap_or_else(|p| p.into_inner()).get(key).cloned()
    }

    fn remember(&self, r: &ObjectRef, object: Value) {
        self.live.lock().unwrap_or_else(|p| p.into_inner()).insert(ObjectKey::of_ref(r), object);
    }

    fn applied(&self, key: &ObjectKey) -> Option<u64> {
        self.memory.lock().unwrap_or_else(|p| p.into_inner()).applied.get(key).copied()
    }

    fn set_applied(&self, key: ObjectKey, hash: u64) {
        self.memory.lock().unwrap_or_else(|p| p.into_inner()).applied.insert(key, hash);
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
    futures::stream::iter(created)
        .for_each_concurrent(concurrency.max(1), |((backup, _), c)| async move {
            let note = format!("created by ferry from backup {backup} ({}): {}", c.source, c.objects.join(", "));
            api.event(&c.about, c.uid.as_deref(), "FerryCreated", &note, false).await;
        })
        .await;
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
            if pass.first_time(&r, reason) {
                let note = format!("backup {}: {}", item.backup, item.reason);
                api.event(&r, None, reason, &note, true).await;
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
        let note = format!("not applied: {why}");
        if pass.first_time(r, "FerryAgentRefused") {
            tracing::warn!(object = %describe(r), reason = %why, "refused an item from the coordinator");
            api.event(r, None, "FerryAgentRefused", &note, true).await;
        }
        return (ApplyOutcome::Refused, note);
    }
    // Prerequisites first: everything it waits for must exist (the Backup must have a UID).
    let mut backup_uid = None;
    for prerequisite in &item.waits_for {
        let key = ObjectKey::of_ref(prerequisite);
        let found = match pass.live(&key) {
            Some(v) => Some(v),
            None => match api.get(prerequisite).await {
                Ok(found) => found,
                Err(e) => return (ApplyOutcome::Failed, format!("reading {}: {e}", describe(prerequisite))),
            },
        };
        let Some(found) = found else {
            return (ApplyOutcome::Held, format!("waits for {}", describe(prerequisite)));
        };
        if prerequisite.kind == "Backup" {
            backup_uid = found.pointer("/metadata/uid").and_then(Value::as_str).map(str::to_string);
        }
        pass.remember(prerequisite, found);
    }
    let Some(mut object) = body else {
        let why =
            if item.waits_for_condition.is_empty() { item.reason.clone() } else { item.waits_for_condition.clone() };
        return (ApplyOutcome::Held, format!("nothing to apply yet: {why}"));
    };
    if let Some(uid) = &backup_uid
        && r.kind == "PodVolumeBackup"
    {
        fill_backup_uid(&mut object, uid);
    }

    let existing = match api.get(r).await {
        Ok(existing) => existing,
        Err(e) => return (ApplyOutcome::Failed, format!("reading {}: {e}", describe(r))),
    };
    let outcome = match existing {
        Some(existing) => update_existing(api, pass, r, &object, existing).await,
        None => match api.create(r, &object).await {
            Ok(created) => {
                pass.set_applied(ObjectKey::of_ref(r), content_hash(&object));
                pass.record_created(item, r, &created, &object);
                if let Some(hint) = annotation(&object, labels::FERRY_RESTORE_HINT) {
                    let uid = created.pointer("/metadata/uid").and_then(Value::as_str);
                    api.event(r, uid, "FerryNamespaceMapped", &hint, true).await;
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
        api.event(r, None, "FerryApplyFailed", &outcome.1, true).await;
    }
    outcome
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
        let note = format!(
            "{} exists and is not ferry's (no {}={} label); left untouched",
            describe(r),
            labels::FERRY_MANAGED_BY,
            labels::FERRY_MANAGED_BY_VALUE
        );
        if pass.first_time(r, "FerryConflict") {
            api.event(r, uid.as_deref(), "FerryConflict", &note, true).await;
        }
        pass.remember(r, existing);
        return (ApplyOutcome::Conflict, note);
    }
    // NAC rewrites a synced NAB's spec with defaults; re-applying ours would fight it forever.
    if r.kind == "NonAdminBackup" {
        pass.remember(r, existing);
        return (ApplyOutcome::Applied, String::new());
    }
    let key = ObjectKey::of_ref(r);
    let hash = content_hash(desired);
    if pass.applied(&key) == Some(hash) {
        pass.remember(r, existing);
        return (ApplyOutcome::Applied, String::new());
    }
    match api.apply(r, desired).await {
        Ok(applied) => {
            pass.set_applied(key, hash);
            pass.remember(r, applied);
            (ApplyOutcome::Applied, String::new())
        }
        Err(e) => (ApplyOutcome::Failed, e.to_string()),
    }
}

/// Whether an object someone else made is the very object ferry wanted: a Backup of the same name bound to the
/// same storage location; a NAB in the same namespace synced from the same NACUUID; a PVB labelled for the same
/// backup (name and UID).
fn same_backup(r: &ObjectRef, desired: &Value, existing: &Value) -> bool {
    let text = |v: &Value, pointer: &str| v.pointer(pointer).and_then(Value::as_str).map(str::to_string);
    let label = |v: &Value, key: &str| {
        v.pointer("/metadata/labels").and_then(|l| l.get(key)).and_then(Value::as_str).map(str::to_string)
    };
    let same = |a: Option<String>, b: Option<String>| a.is_some() && a == b;
    match r.kind.as_str() {
        "Backup" => same(text(desired, "/spec/storageLocation"), text(existing, "/spec/storageLocation")),
        "NonAdminBackup" => {
            same(label(desired, labels::NAB_SYNCED_FROM_NACUUID), label(existing, labels::NAB_SYNCED_FROM_NACUUID))
                && text(existing, "/metadata/namespace").as_deref() == Some(r.namespace.as_str())
        }
        "PodVolumeBackup" => {
            same(label(desired, labels::VELERO_BACKUP_NAME), label(existing, labels::VELERO_BACKUP_NAME))
                && same(label(desired, labels::VELERO_BACKUP_UID), label(existing, labels::VELERO_BACKUP_UID))
        }
        _ => false,
    }
}

fn content_hash(object: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    object.to_string().hash(&mut hasher);
    hasher.finish()
}

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

fn annotation(object: &Value, key: &str) -> Option<String> {
    object.pointer("/metadata/annotations").and_then(|a| a.get(key)).and_then(Value::as_str).map(str::to_string)
}

fn source_of(object: &Value) -> String {
    let cluster = annotation(object, labels::FERRY_SOURCE_CLUSTER)
        .or_else(|| {
            object
                .pointer("/metadata/labels")
                .and_then(|l| l.get(labels::FERRY_SOURCE_CLUSTER))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| "?".into());
    format!("source cluster {cluster}")
}

#[cfg(test)]
mod tests {
    use super::*;
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
            if objects.contains_key(&ObjectKey::of_ref(r)) {
                return Err(ApiError::AlreadyExists);
            }
            let mut created = object.clone();
            created["metadata"]["uid"] = json!(format!("uid-{}", r.name));
            objects.insert(ObjectKey::of_ref(r), created.clone());
            Ok(created)
        }
        async fn apply(&self, r: &ObjectRef, object: &Value) -> Result<Value, ApiError> {
            self.objects.lock().unwrap().insert(ObjectKey::of_ref(r), object.clone());
            Ok(object.clone())
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

    /// An object as ferry plans it (labelled, finished status for Velero's kinds).
    fn ours(kind: &str, name: &str) -> Value {
        let r = object_ref(kind, ns_of(kind), name);
        let mut object = json!({"apiVersion": format!("{}/{}", r.group, r.version), "kind": kind,
               "metadata": {"name": name, "namespace": ns_of(kind),
               "labels": {labels::FERRY_MANAGED_BY: labels::FERRY_MANAGED_BY_VALUE, labels::VELERO_BACKUP_UID: ""},
               "ownerReferences": [{"apiVersion": "velero.io/v1", "kind": "Backup", "name": "b", "uid": ""}]}});
        if kind != "NonAdminBackup" {
            object["status"] = json!({"phase": "Completed"});
        }
        object
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

    #[tokio::test]
    async fn one_layer_is_applied_concurrently_within_the_bound_and_created_objects_get_one_event_per_backup() {
        let api = Memo { create_delay: Some(std::time::Duration::from_millis(20)), ..Default::default() };
        let mut items = vec![item(DesiredAction::Create, "Backup", "b", &[], Some(ours("Backup", "b")))];
        for i in 0..12 {
            let name = format!("p{i}");
            items.push(item(
                DesiredAction::Create,
                "PodVolumeBackup",
                &name,
                &[("Backup", "b")],
                Some(ours("PodVolumeBackup", &name)),
            ));
        }
        items.push(item(
            DesiredAction::Create,
            "NonAdminBackup",
            "n",
            &[("Backup", "b")],
            Some(ours("NonAdminBackup", "n")),
        ));
        let set = DesiredSet { version: "v1".into(), items, ..Default::default() };
        let results = reconcile_with(&api, &guard(), &set, &mut Memory::default(), 4).await;
        assert_eq!(results.len(), 14);
        assert!(results.iter().all(|r| r.outcome == ApplyOutcome::Applied as i32), "{results:?}");
        // Results in the set's order, whatever order they finished in.
        let names: Vec<&str> = results.iter().map(|r| r.r#ref.as_ref().unwrap().name.as_str()).collect();
        assert_eq!(names[0], "b");
        assert_eq!(names[13], "n");
        let most = api.most_in_flight.load(std::sync::atomic::Ordering::SeqCst);
        assert!(most > 1 && most <= 4, "{most} creates in flight at once");
        // Every PVB took its Backup's UID from the create response of the same pass.
        let objects = api.objects.lock().unwrap();
        let pvb = &objects[&ObjectKey::of_ref(&object_ref("PodVolumeBackup", "velero", "p7"))];
        assert_eq!(pvb["metadata"]["ownerReferences"][0]["uid"], "uid-b");
        // One FerryCreated per backup and namespace (velero: the Backup and its 12 PVBs; team-a: the NAB).
        let events = api.events.lock().unwrap();
        let mut created: Vec<&String> = events.iter().filter(|e| e.starts_with("FerryCreated")).collect();
        created.sort();
        assert_eq!(created, ["FerryCreated b", "FerryCreated n"], "{events:?}");
    }

    #[tokio::test]
    async fn retire_deletes_only_the_very_object_planned_on() {
        let api = Memo::default();
        let provenance = json!({labels::FERRY_SOURCE_LOCATION: "shared", labels::FERRY_SOURCE_BUCKET: "bkt",
            labels::FERRY_SOURCE_PREFIX: "velero", labels::FERRY_BACKUP_NAME: "b", labels::FERRY_BACKUP_UID: "src"});
        let mut ferrys = ours("Backup", "gone");
        ferrys["metadata"]["uid"] = json!("u1");
        ferrys["metadata"]["resourceVersion"] = json!("5");
        ferrys["metadata"]["annotations"] = provenance;
        let mut users = ferrys.clone();
        users["metadata"]["name"] = json!("users");
        users["metadata"]["labels"] = json!({});
        let mut edited = ferrys.clone();
        edited["metadata"]["name"] = json!("edited");
        for object in [&ferrys, &users, &edited] {
            let name = object["metadata"]["name"].as_str().unwrap();
            api.objects
                .lock()
                .unwrap()
                .insert(ObjectKey::of_ref(&object_ref("Backup", "velero", name)), object.clone());
        }
        // The coordinator planned "edited" at resourceVersion 4: it changed since.
        let mut planned_edited = edited.clone();
        planned_edited["metadata"]["resourceVersion"] = json!("4");
        let set = DesiredSet {
            version: "v1".into(),
            items: vec![
                item(DesiredAction::Retire, "Backup", "gone", &[], Some(ferrys)),
                item(DesiredAction::Retire, "Backup", "users", &[], Some(users)),
                item(DesiredAction::Retire, "Backup", "edited", &[], Some(planned_edited)),
                item(DesiredAction::WouldRetire, "Backup", "edited", &[], None),
            ],
            ..Default::default()
        };
        let results = reconcile(&api, &guard(), &set, &mut Memory::default()).await;
        let outcome = |name: &str| {
            results.iter().find(|r| r.r#ref.as_ref().unwrap().name == name).map(|r| (r.outcome, r.message.clone()))
        };
        assert_eq!(outcome("gone").unwrap().0, ApplyOutcome::Applied as i32);
        assert_eq!(outcome("users").unwrap().0, ApplyOutcome::Conflict as i32);
        assert!(outcome("edited").unwrap().1.contains("resourceVersion"), "{:?}", outcome("edited"));
        let left: Vec<String> = api.objects.lock().unwrap().keys().map(|k| k.name.clone()).collect();
        assert!(!left.contains(&"gone".to_string()) && left.len() == 2, "{left:?}");
        assert_eq!(results.len(), 3, "report-mode items are not acted on");
        assert!(api.events.lock().unwrap().contains(&"FerryRetired gone".to_string()));
    }

    #[tokio::test]
    async fn one_pass_creates_the_backup_then_its_pvbs_with_its_uid() {
        let api = Memo::default();
        let set = DesiredSet {
            version: "v1".into(),
            items: vec![
                item(
                    DesiredAction::Wait,
                    "PodVolumeBackup",
                    "p1",
                    &[("Backup", "b")],
                    Some(ours("PodVolumeBackup", "p1")),
                ),
                item(DesiredAction::Create, "Backup", "b", &[], Some(ours("Backup", "b"))),
            ],
            complete: true,
            more: false,
            ..Default::default()
        };
        let results = reconcile(&api, &guard(), &set, &mut Memory::default()).await;
        assert!(results.iter().all(|r| r.outcome == ApplyOutcome::Applied as i32), "{results:?}");
        let pvb = api.get(&object_ref("PodVolumeBackup", "velero", "p1")).await.unwrap().unwrap();
        assert_eq!(pvb["metadata"]["ownerReferences"][0]["uid"], "uid-b");
        assert_eq!(pvb["metadata"]["labels"][labels::VELERO_BACKUP_UID], "uid-b");
    }

    #[tokio::test]
    async fn missing_prerequisites_hold_and_foreign_objects_conflict() {
        let api = Memo::default();
        let foreign = json!({"kind": "NonAdminBackup", "metadata": {"name": "n", "namespace": "team-a"}});
        api.objects
            .lock()
            .unwrap()
            .insert(ObjectKey::of_ref(&object_ref("NonAdminBackup", "team-a", "n")), foreign.clone());
        let set = DesiredSet {
            version: "v1".into(),
            items: vec![
                item(
                    DesiredAction::Wait,
                    "PodVolumeBackup",
                    "p1",
                    &[("Backup", "absent")],
                    Some(ours("PodVolumeBackup", "p1")),
                ),
                item(DesiredAction::Create, "NonAdminBackup", "n", &[], Some(ours("NonAdminBackup", "n"))),
                item(DesiredAction::Refuse, "Backup", "tampered", &[], None),
            ],
            complete: true,
            more: false,
            ..Default::default()
        };
        let mut memory = Memory::default();
        let results = reconcile(&api, &guard(), &set, &mut memory).await;
        let outcome = |name: &str| results.iter().find(|r| r.r#ref.as_ref().unwrap().name == name).map(|r| r.outcome);
        assert_eq!(outcome("p1"), Some(ApplyOutcome::Held as i32));
        assert_eq!(outcome("n"), Some(ApplyOutcome::Conflict as i32));
        assert_eq!(outcome("tampered"), None, "refusals are not applied");
        let stored = api.get(&object_ref("NonAdminBackup", "team-a", "n")).await.unwrap().unwrap();
        assert_eq!(stored, foreign, "the foreign object is untouched");
        // A second pass records no second Event for the same things.
        reconcile(&api, &guard(), &set, &mut memory).await;
        let events = api.events.lock().unwrap().clone();
        assert_eq!(events, ["FerryConflict n", "FerryRefused tampered"], "{events:?}");
    }

    #[tokio::test]
    async fn our_nabs_are_never_reapplied() {
        let api = Memo::default();
        let mut rewritten = ours("NonAdminBackup", "n");
        rewritten["spec"] = json!({"backupSpec": {"defaulted": true}});
        api.objects
            .lock()
            .unwrap()
            .insert(ObjectKey::of_ref(&object_ref("NonAdminBackup", "team-a", "n")), rewritten.clone());
        let set = DesiredSet {
            version: "v1".into(),
            items: vec![item(DesiredAction::Create, "NonAdminBackup", "n", &[], Some(ours("NonAdminBackup", "n")))],
            complete: true,
            more: false,
            ..Default::default()
        };
        let results = reconcile(&api, &guard(), &set, &mut Memory::default()).await;
        assert_eq!(results[0].outcome, ApplyOutcome::Applied as i32);
        assert_eq!(api.get(&object_ref("NonAdminBackup", "team-a", "n")).await.unwrap().unwrap(), rewritten);
    }

    #[tokio::test]
    async fn what_a_hostile_coordinator_sends_is_refused_per_item_and_never_applied() {
        let api = Memo::default();
        let mut unfinished = ours("Backup", "runs-on-b");
        unfinished.as_object_mut().unwrap().remove("status");
        // The body names another object than the item does.
        let renamed = ours("Backup", "other-name");
        let mut protected = item(DesiredAction::Create, "NonAdminBackup", "n", &[], None);
        let mut in_kube_system = ours("NonAdminBackup", "n");
        in_kube_system["metadata"]["namespace"] = json!("kube-system");
        protected.r#ref = Some(object_ref("NonAdminBackup", "kube-system", "n"));
        protected.raw_json = serde_json::to_vec(&in_kube_system).unwrap().into();
        let set = DesiredSet {
            version: "v1".into(),
            items: vec![
                item(DesiredAction::Create, "Backup", "runs-on-b", &[], Some(unfinished)),
                item(DesiredAction::Create, "Backup", "b2", &[], Some(renamed)),
                protected,
                item(DesiredAction::Create, "Backup", "good", &[], Some(ours("Backup", "good"))),
            ],
            complete: true,
            more: false,
            ..Default::default()
        };
        let mut memory = Memory::default();
        let results = reconcile(&api, &guard(), &set, &mut memory).await;
        let outcome = |name: &str| results.iter().find(|r| r.r#ref.as_ref().unwrap().name == name).unwrap().clone();
        for name in ["runs-on-b", "b2", "n"] {
            let result = outcome(name);
            assert_eq!(result.outcome, ApplyOutcome::Refused as i32, "{name}: {result:?}");
            assert!(result.message.starts_with("not applied: "), "{result:?}");
        }
        assert!(outcome("runs-on-b").message.contains("Velero would run it"));
        assert_eq!(outcome("good").outcome, ApplyOutcome::Applied as i32, "the rest of the set still goes");
        let stored: Vec<String> = api.objects.lock().unwrap().keys().map(|k| k.name.clone()).collect();
        assert_eq!(stored, ["good"], "nothing refused was written");
        reconcile(&api, &guard(), &set, &mut memory).await;
        let refusals = api.events.lock().unwrap().iter().filter(|e| e.starts_with("FerryAgentRefused")).count();
        assert_eq!(refusals, 3, "one Event per refused item, not one per pass");
    }

    #[tokio::test]
    async fn velero_or_nac_winning_the_race_with_the_same_backup_is_success_not_a_conflict() {
        let api = Memo::default();
        // NAC's own sync made the NAB (same NACUUID, no ferry label); Velero's sync made the Backup on this BSL.
        let nac_made = json!({"kind": "NonAdminBackup", "metadata": {"name": "n", "namespace": "team-a",
            "labels": {labels::NAB_SYNCED_FROM_NACUUID: "team-a-n-uuid"}}});
        let velero_made = json!({"kind": "Backup", "metadata": {"name": "b", "namespace": "velero"},
            "spec": {"storageLocation": "dr-bsl"}, "status": {"phase": "Completed"}});
        let someone_elses = json!({"kind": "Backup", "metadata": {"name": "other", "namespace": "velero"},
            "spec": {"storageLocation": "their-bsl"}});
        {
            let mut objects = api.objects.lock().unwrap();
            objects.insert(ObjectKey::of_ref(&object_ref("NonAdminBackup", "team-a", "n")), nac_made);
            objects.insert(ObjectKey::of_ref(&object_ref("Backup", "velero", "b")), velero_made);
            objects.insert(ObjectKey::of_ref(&object_ref("Backup", "velero", "other")), someone_elses);
        }
        let mut nab = ours("NonAdminBackup", "n");
        nab["metadata"]["labels"][labels::NAB_SYNCED_FROM_NACUUID] = json!("team-a-n-uuid");
        let mut backup = ours("Backup", "b");
        backup["spec"] = json!({"storageLocation": "dr-bsl"});
        let mut other = ours("Backup", "other");
        other["spec"] = json!({"storageLocation": "dr-bsl"});
        let set = DesiredSet {
            version: "v1".into(),
            items: vec![
                item(DesiredAction::Create, "Backup", "b", &[], Some(backup)),
                item(DesiredAction::Create, "Backup", "other", &[], Some(other)),
                item(DesiredAction::Create, "NonAdminBackup", "n", &[], Some(nab)),
            ],
            complete: true,
            more: false,
            ..Default::default()
        };
        let results = reconcile(&api, &guard(), &set, &mut Memory::default()).await;
        let outcome = |name: &str| results.iter().find(|r| r.r#ref.as_ref().unwrap().name == name).unwrap().outcome;
        assert_eq!(outcome("b"), ApplyOutcome::Applied as i32, "Velero's own sync of the same backup");
        assert_eq!(outcome("n"), ApplyOutcome::Applied as i32, "NAC's own sync of the same NAB");
        assert_eq!(outcome("other"), ApplyOutcome::Conflict as i32, "a Backup on another BSL is someone else's");
        let events = api.events.lock().unwrap().clone();
        assert_eq!(events, ["FerryConflict other"], "no Warning Event for a sync that won the race");
    }
}
