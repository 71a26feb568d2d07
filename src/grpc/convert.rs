//! Between the protocol and the domain: a cluster's plan becomes the `DesiredSet` sent to its agent (with its
//! content-hash version), and an agent's `InventoryItem` becomes a parsed inventory object — or a rejection
//! naming what is wrong with it. [`ObjectKey`] keys an item or reference by the object's identity in a cluster,
//! on both ends.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::proto::{
    ApplyOutcome, ClusterApis, DesiredAction, DesiredItem, DesiredSet, InventoryItem, ItemResult, ObjectRef,
    ResourceType,
};
use crate::model::meta::FromObject;
use crate::model::{Backup, InventoryObject, Kind, NonAdminBackup, PodVolumeBackup, ServedApis};
use crate::plan::{Action, ClusterPlan, PlanItem, PlannedObject, Prerequisite};

/// Where a kind ferry plans lives: (group, version). `None` for kinds ferry does not know.
pub fn api_of(kind: &str) -> Option<(&'static str, &'static str)> {
    let split = |api_version: &'static str| api_version.split_once('/').unwrap_or(("", api_version));
    Some(match kind {
        "Namespace" => ("", "v1"),
        Backup::KIND | PodVolumeBackup::KIND | "BackupStorageLocation" => split(Backup::API_VERSION),
        NonAdminBackup::KIND => split(NonAdminBackup::API_VERSION),
        _ => return None,
    })
}

/// Identifies an object within one cluster (the API version is not part of an object's identity).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub group: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn of_item(item: &InventoryItem) -> Self {
        Self {
            group: item.group.clone(),
            kind: item.kind.clone(),
            namespace: item.namespace.clone(),
            name: item.name.clone(),
        }
    }

    pub fn of_ref(r: &ObjectRef) -> Self {
        Self { group: r.group.clone(), kind: r.kind.clone(), namespace: r.namespace.clone(), name: r.name.clone() }
    }
}

/// A reference to an object of a kind ferry plans.
pub fn object_ref(kind: &str, namespace: &str, name: &str) -> ObjectRef {
    let (group, version) = api_of(kind).unwrap_or_default();
    ObjectRef {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

/// The resource types an agent publishes, in the order the planner needs them.
pub fn watched_types() -> Vec<ResourceType> {
    ["Namespace", "BackupStorageLocation", Backup::KIND, PodVolumeBackup::KIND, NonAdminBackup::KIND]
        .into_iter()
        .map(|kind| {
            let (group, version) = api_of(kind).unwrap_or_default();
            ResourceType { group: group.into(), version: version.into(), kind: kind.into() }
        })
        .collect()
}

/// Whether a watched kind is one every target must serve (Velero's and the core Namespace) or optional (OADP's).
pub fn is_required(kind: &str) -> bool {
    kind != NonAdminBackup::KIND
}

/// The CRD name of a watched custom kind (`backups.velero.io`), for messages about a missing one.
pub fn crd_name(resource: &ResourceType) -> String {
    format!("{}s.{}", resource.kind.to_ascii_lowercase(), resource.group)
}

/// What the planner may rely on, from what an agent said. `None` (an agent older than `ClusterApis`) means
/// every kind is served, as such agents assumed.
pub fn served_apis(apis: Option<&ClusterApis>) -> ServedApis {
    let Some(apis) = apis else { return ServedApis::default() };
    let served =
        |kind: &str| apis.served.iter().any(|t| t.kind == kind && api_of(kind).is_some_and(|(g, _)| g == t.group));
    ServedApis {
        non_admin_backups: served(NonAdminBackup::KIND),
        missing_required: apis.missing_required.clone(),
        velero_version: Some(apis.velero_version.clone()).filter(|v| !v.is_empty()),
    }
}

/// An apply outcome as a metric label (the coordinator's and the agent's pages use the same names).
pub fn outcome_label(outcome: ApplyOutcome) -> &'static str {
    match outcome {
        ApplyOutcome::Applied => "applied",
        ApplyOutcome::Failed => "failed",
        ApplyOutcome::Conflict => "conflict",
        ApplyOutcome::Held => "held",
        ApplyOutcome::Refused => "refused",
        ApplyOutcome::Unspecified => "unknown",
    }
}

/// The outcomes agents report, as [`outcome_label`]s (`unknown` is never reported by a current agent).
pub const REPORTED_OUTCOMES: [&str; 5] = ["applied", "failed", "conflict", "held", "refused"];

/// The items of an apply pass (or of an agent's report) by [`outcome_label`].
pub fn outcome_counts(items: &[ItemResult]) -> BTreeMap<&'static str, u64> {
    let mut counts = BTreeMap::new();
    for item in items {
        let outcome = ApplyOutcome::try_from(item.outcome).unwrap_or(ApplyOutcome::Unspecified);
        *counts.entry(outcome_label(outcome)).or_default() += 1;
    }
    counts
}

/// The DesiredSet for a cluster's plan. `complete` is false when some location's catalog is missing or stale
/// (see the proto); the version covers it, so a set that becomes complete is sent again.
pub fn desired_set(plan: &ClusterPlan, complete: bool) -> DesiredSet {
    // The items without their objects first: the version hashes each item's fields and its object's digest
    // (computed once per pass however many clusters carry it, plan/template.rs), never the object's bytes.
    let mut items: Vec<DesiredItem> = plan.items.iter().map(desired_item).collect();
    nabs_wait_for_their_pvbs(&mut items);
    let objects: Vec<Option<&PlannedObject>> = plan.items.iter().map(object_sent).collect();
    let digests: Vec<Option<[u8; 32]>> = objects.iter().map(|o| o.map(PlannedObject::digest)).collect();
    let version = version_of(&items, &digests, complete);
    for (item, object) in items.iter_mut().zip(objects) {
        if let Some(object) = object {
            item.raw_json = object.json();
        }
    }
    DesiredSet { version, items, complete, ..Default::default() }
}

/// The object an item carries on the wire: for CREATE, WAIT (a template) and RETIRE (the preconditions).
fn object_sent(item: &PlanItem) -> Option<&PlannedObject> {
    match item.action {
        Action::Create | Action::Wait | Action::Retire => item.object.as_ref(),
        _ => None,
    }
}

/// docs/design.md §4's apply order is Backup → PVBs → NAB: NAC counts a backup's PVBs into the NAB's status when it
/// attaches, so a NAB also waits for every PVB of its backup that the set creates.
fn nabs_wait_for_their_pvbs(items: &mut [DesiredItem]) {
    let applied =
        |i: &DesiredItem| matches!(DesiredAction::try_from(i.action), Ok(DesiredAction::Create | DesiredAction::Wait));
    let mut pvbs: std::collections::HashMap<&str, Vec<ObjectRef>> = std::collections::HashMap::new();
    for item in items.iter().filter(|i| applied(i)) {
        if let Some(r) = item.r#ref.as_ref().filter(|r| r.kind == PodVolumeBackup::KIND) {
            pvbs.entry(item.backup.as_str()).or_default().push(r.clone());
        }
    }
    if pvbs.is_empty() {
        return;
    }
    let pvbs: std::collections::HashMap<String, Vec<ObjectRef>> =
        pvbs.into_iter().map(|(backup, refs)| (backup.to_string(), refs)).collect();
    for item in items.iter_mut().filter(|i| applied(i)) {
        if item.r#ref.as_ref().is_some_and(|r| r.kind == NonAdminBackup::KIND)
            && let Some(refs) = pvbs.get(&item.backup)
        {
            item.waits_for.extend(refs.iter().cloned());
        }
    }
}

fn desired_item(item: &PlanItem) -> DesiredItem {
    let action = match item.action {
        Action::Create => DesiredAction::Create,
        Action::Wait => DesiredAction::Wait,
        Action::Conflict => DesiredAction::Conflict,
        Action::Refuse => DesiredAction::Refuse,
        Action::Retire => DesiredAction::Retire,
        Action::WouldRetire => DesiredAction::WouldRetire,
    };
    let (waits_for, waits_for_condition) = match &item.waits_for {
        Some(Prerequisite::Namespace { name }) => (vec![object_ref("Namespace", "", name)], String::new()),
        Some(p @ (Prerequisite::TerminalPhase | Prerequisite::ReadablePodVolumeBackups { .. })) => {
            (Vec::new(), p.to_string())
        }
        Some(p) => {
            let (namespace, name) = p.backup().unwrap_or_default();
            (vec![object_ref(Backup::KIND, namespace, name)], String::new())
        }
        None => (Vec::new(), String::new()),
    };
    DesiredItem {
        action: action as i32,
        r#ref: Some(object_ref(&item.kind, &item.namespace, &item.name)),
        backup: item.backup.clone(),
        reason: item.reason.clone().unwrap_or_default(),
        waits_for,
        // Set by `desired_set` once the version is computed.
        raw_json: bytes::Bytes::new(),
        waits_for_condition,
    }
}

/// Content hash (hex SHA-256) of the items, in order. The planner is deterministic, so equal inputs give equal
/// versions; the encoding is length-prefixed so that no two different sets hash the same bytes.
/// The content version: SHA-256 over every item, its object counted by its own digest (so the object's bytes
/// are hashed once per pass, not once per cluster). `digests[i]` is item i's object digest, if it carries one.
/// `items` come without their objects (`raw_json` empty), so each is encoded as is.
fn version_of(items: &[DesiredItem], digests: &[Option<[u8; 32]>], complete: bool) -> String {
    let mut hasher = Sha256::new();
    hasher.update([u8::from(complete)]);
    let no_object = Sha256::digest([]);
    let mut encoded = Vec::with_capacity(256);
    for (item, digest) in items.iter().zip(digests) {
        debug_assert!(item.raw_json.is_empty(), "versions hash objects by digest");
        encoded.clear();
        prost::Message::encode(item, &mut encoded).unwrap_or_default();
        hasher.update((encoded.len() as u64).to_le_bytes());
        hasher.update(&encoded);
        match digest {
            Some(digest) => hasher.update(digest),
            None => hasher.update(no_object),
        }
    }
    let digest = hasher.finalize();
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Why an inventory item was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ItemError {
    #[error("kind {0:?} is not one ferry watches")]
    UnknownKind(String),
    #[error("item of kind {found:?} inside a snapshot of {expected:?}")]
    WrongType { found: String, expected: String },
    #[error("raw_json is not a JSON object: {0}")]
    NotJson(String),
    #[error("raw_json says {field} {found:?} but the item says {claimed:?}")]
    Mismatch { field: &'static str, found: String, claimed: String },
    #[error("{kind} {name:?} is malformed: {reason}")]
    Malformed { kind: String, name: String, reason: String },
    #[error("{0}")]
    TooLarge(String),
}

/// Kubernetes' own limits: an object the API server would never return comes from a broken or hostile agent.
const MAX_NAME: usize = 253;
const MAX_NAMESPACE: usize = 63;
const MAX_LABEL_KEY: usize = 317; // a 253-character prefix, '/', a 63-character name
const MAX_LABEL_VALUE: usize = 63;
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;
/// etcd's default request limit is 1.5 MiB: no stored object is larger.
const MAX_OBJECT_BYTES: usize = 3 * 512 * 1024;

/// Why an item is larger than any real object, or `None`.
fn out_of_bounds(item: &InventoryItem) -> Option<String> {
    let what = || format!("{} {:?}", item.kind, item.name.chars().take(MAX_NAME).collect::<String>());
    let fields = [
        ("metadata.name", item.name.len(), MAX_NAME),
        ("metadata.namespace", item.namespace.len(), MAX_NAMESPACE),
        ("kind", item.kind.len(), MAX_NAME),
        ("group", item.group.len(), MAX_NAME),
        ("metadata.uid", item.uid.len(), MAX_NAME),
        ("metadata.resourceVersion", item.resource_version.len(), MAX_NAME),
        ("raw_json", item.raw_json.len(), MAX_OBJECT_BYTES),
    ];
    if let Some((field, len, max)) = fields.iter().find(|(_, len, max)| len > max) {
        return Some(format!("{}: {field} is {len} bytes, more than Kubernetes allows ({max})", what()));
    }
    if let Some((k, v)) = item.labels.iter().find(|(k, v)| k.len() > MAX_LABEL_KEY || v.len() > MAX_LABEL_VALUE) {
        return Some(format!(
            "{}: label {:?} ({} bytes) = {} bytes, more than Kubernetes allows",
            what(),
            k.chars().take(64).collect::<String>(),
            k.len(),
            v.len()
        ));
    }
    let annotations: usize = item.annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    (annotations > MAX_ANNOTATIONS_BYTES).then(|| {
        format!(
            "{}: annotations are {annotations} bytes, more than Kubernetes allows ({MAX_ANNOTATIONS_BYTES})",
            what()
        )
    })
}

/// Checks an inventory item against its own raw JSON and parses it. The lifted metadata must agree with the
/// JSON: the coordinator plans from the JSON, and disagreeing copies mean a broken agent.
pub fn inventory_object(item: &InventoryItem) -> Result<InventoryObject, ItemError> {
    if let Some(reason) = out_of_bounds(item) {
        return Err(ItemError::TooLarge(reason));
    }
    let Some((group, _)) = api_of(&item.kind) else {
        return Err(ItemError::UnknownKind(item.kind.clone()));
    };
    if item.group != group {
        return Err(ItemError::Mismatch { field: "group", found: group.into(), claimed: item.group.clone() });
    }
    // Read from the text, no tree built: a thousand agents' snapshots are a million of these.
    let text = std::str::from_utf8(&item.raw_json).map_err(|e| ItemError::NotJson(e.to_string()))?;
    let FromObject(identity) =
        serde_json::from_str::<FromObject<Identity>>(text).map_err(|e| ItemError::NotJson(e.to_string()))?;
    let checks = [
        ("metadata.name", identity.metadata.name, &item.name),
        ("metadata.namespace", identity.metadata.namespace, &item.namespace),
    ];
    for (field, found, claimed) in checks {
        let found = found.unwrap_or_default();
        if found != claimed {
            return Err(ItemError::Mismatch { field, found: found.into(), claimed: claimed.clone() });
        }
    }
    if let Some(kind) = identity.kind
        && kind != item.kind
    {
        return Err(ItemError::Mismatch { field: "kind", found: kind.into(), claimed: item.kind.clone() });
    }
    let malformed = |reason: String| ItemError::Malformed { kind: item.kind.clone(), name: item.name.clone(), reason };
    match InventoryObject::parse_view(&item.kind, text) {
        Ok(Some(object)) => Ok(object),
        Ok(None) => Err(ItemError::UnknownKind(item.kind.clone())),
        Err(e) => Err(malformed(e.to_string())),
    }
}

/// What an inventory item's JSON says it is: its kind, name and namespace, borrowed from the text (a
/// Kubernetes kind or name never needs an escape; one that has one is refused). Read from a JSON object only.
#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct Identity<'a> {
    kind: Option<&'a str>,
    #[serde(borrow, deserialize_with = "crate::model::meta::struct_from_object")]
    metadata: IdentityMeta<'a>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct IdentityMeta<'a> {
    name: Option<&'a str>,
    namespace: Option<&'a str>,
}

/// An inventory item for an object's JSON, with its metadata lifted out (what agents send).
pub fn inventory_item(kind: &str, raw: &Value) -> InventoryItem {
    let (group, version) = api_of(kind).unwrap_or_default();
    let text = |pointer: &str| raw.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_string();
    let map = |pointer: &str| lifted_map(raw, pointer);
    InventoryItem {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        namespace: text("/metadata/namespace"),
        name: text("/metadata/name"),
        uid: text("/metadata/uid"),
        resource_version: text("/metadata/resourceVersion"),
        labels: map("/metadata/labels"),
        annotations: map("/metadata/annotations"),
        raw_json: serde_json::to_vec(raw).unwrap_or_default(),
    }
}

/// `metadata.labels` or `metadata.annotations` (`pointer`) of `raw`, lifted as an inventory item carries them.
pub fn lifted_map(raw: &Value, pointer: &str) -> HashMap<String, String> {
    raw.pointer(pointer)
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan_item(action: Action, waits_for: Option<Prerequisite>) -> PlanItem {
        PlanItem {
            action,
            kind: "PodVolumeBackup".into(),
            namespace: "velero".into(),
            name: "p1".into(),
            backup: "b1".into(),
            reason: None,
            waits_for,
            object: Some(json!({"kind": "PodVolumeBackup"}).into()),
        }
    }

    #[test]
    fn versions_are_content_hashes() {
        let a = ClusterPlan { cluster: "x".into(), items: vec![plan_item(Action::Create, None)] };
        let b = ClusterPlan { cluster: "y".into(), items: vec![plan_item(Action::Create, None)] };
        assert_eq!(desired_set(&a, true).version, desired_set(&b, true).version, "same content, same version");
        assert_ne!(desired_set(&a, true).version, desired_set(&a, false).version);
        let waiting = ClusterPlan {
            cluster: "x".into(),
            items: vec![plan_item(
                Action::Wait,
                Some(Prerequisite::Backup { namespace: "velero".into(), name: "b1".into() }),
            )],
        };
        let set = desired_set(&waiting, true);
        assert_ne!(set.version, desired_set(&a, true).version);
        assert_eq!(set.version.len(), 64);
        let item = &set.items[0];
        assert_eq!(item.waits_for, vec![object_ref("Backup", "velero", "b1")]);
        assert_eq!(item.waits_for[0].group, "velero.io");
        assert!(!item.raw_json.is_empty(), "a WAIT item carries its template");
    }

    #[test]
    fn refusals_carry_no_object_and_conditions_are_words() {
        let mut refused = plan_item(Action::Refuse, None);
        refused.reason = Some("no".into());
        let phase = plan_item(Action::Wait, Some(Prerequisite::TerminalPhase));
        let set = desired_set(&ClusterPlan { cluster: "x".into(), items: vec![refused, phase] }, true);
        assert!(set.items[0].raw_json.is_empty());
        assert_eq!(set.items[0].reason, "no");
        assert!(set.items[1].waits_for.is_empty());
        assert!(set.items[1].waits_for_condition.contains("terminal phase"));
    }

    #[test]
    fn inventory_items_are_checked_against_their_json() {
        let ns = json!({"kind": "Namespace", "metadata": {"name": "team-a"}});
        let item = inventory_item("Namespace", &ns);
        assert_eq!(
            inventory_object(&item),
            Ok(InventoryObject::Namespace { name: "team-a".into(), terminating: false })
        );

        let mut lying = item.clone();
        lying.name = "team-b".into();
        assert!(matches!(inventory_object(&lying), Err(ItemError::Mismatch { field: "metadata.name", .. })));

        let mut garbage = item.clone();
        garbage.raw_json = b"{not json".to_vec();
        assert!(matches!(inventory_object(&garbage), Err(ItemError::NotJson(_))));

        let mut config_map = item.clone();
        config_map.kind = "ConfigMap".into();
        assert_eq!(inventory_object(&config_map), Err(ItemError::UnknownKind("ConfigMap".into())));

        let bad_backup = json!({"kind": "Backup", "metadata": {"name": "b", "namespace": "velero"},
                                "status": {"phase": "Exploded"}});
        let err = inventory_object(&inventory_item("Backup", &bad_backup)).unwrap_err().to_string();
        assert!(err.contains("Backup \"b\"") && err.contains("Exploded"), "{err}");
    }

    #[test]
    fn items_larger_than_any_real_object_are_refused_before_parsing() {
        let ns = json!({"kind": "Namespace", "metadata": {"name": "team-a"}});
        type Mutation = Box<dyn Fn(&mut InventoryItem)>;
        let cases: Vec<(&str, Mutation)> = vec![
            ("metadata.name", Box::new(|i| i.name = "n".repeat(254))),
            ("metadata.namespace", Box::new(|i| i.namespace = "n".repeat(64))),
            ("raw_json", Box::new(|i| i.raw_json = vec![b' '; 2 * 1024 * 1024])),
            ("label", Box::new(|i| drop(i.labels.insert("k".into(), "v".repeat(64))))),
            ("annotations", Box::new(|i| drop(i.annotations.insert("a".into(), "v".repeat(300 * 1024))))),
        ];
        for (field, mutate) in cases {
            let mut item = inventory_item("Namespace", &ns);
            mutate(&mut item);
            let err = inventory_object(&item).unwrap_err();
            assert!(matches!(err, ItemError::TooLarge(_)), "{field}: {err}");
            assert!(err.to_string().contains(field), "{field}: {err}");
        }
    }

    #[test]
    fn a_nab_waits_for_its_backups_pvbs_too() {
        let item = |kind: &str, name: &str, backup: &str, action: Action| PlanItem {
            action,
            kind: kind.into(),
            namespace: if kind == "NonAdminBackup" { "team-a".into() } else { "velero".into() },
            name: name.into(),
            backup: backup.into(),
            reason: None,
            waits_for: Some(Prerequisite::Backup { namespace: "velero".into(), name: backup.into() }),
            object: Some(json!({}).into()),
        };
        let plan = ClusterPlan {
            cluster: "b".into(),
            items: vec![
                item("Backup", "b1", "b1", Action::Create),
                item("PodVolumeBackup", "p1", "b1", Action::Wait),
                item("PodVolumeBackup", "p2", "b1", Action::Refuse),
                item("PodVolumeBackup", "q1", "b2", Action::Wait),
                item("NonAdminBackup", "nightly", "b1", Action::Wait),
            ],
        };
        let set = desired_set(&plan, true);
        let waits: Vec<&str> = set.items[4].waits_for.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            waits,
            ["b1", "p1"],
            "its Backup and its PVBs to be created; not a refused one, not another backup's"
        );
    }
}
