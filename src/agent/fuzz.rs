//! Fuzz harness over the agent's [`Guard`]: whatever a coordinator sends, what the guard lets through is one of
//! ferry's own kinds, in a namespace the agent may write, waiting only for what it may wait for, with a body
//! that names exactly its item, carries ferry's label and (for Velero's kinds) a finished phase.

use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value, json};

use super::guard::{Guard, test_objects};
use crate::fuzz_input::{json_value, mutated_value, text};
use crate::grpc::convert::api_of;
use crate::grpc::proto::{DesiredItem, ObjectRef};
use crate::model::labels;
use crate::model::names::{invalid_namespace_name, invalid_object_name};

/// What an agent creates; then what it must not.
const OWN_KINDS: &[&str] = &["Backup", "PodVolumeBackup", "NonAdminBackup"];
const OTHER_KINDS: &[&str] = &["Namespace", "BackupStorageLocation", "Secret", "ClusterRoleBinding"];
const NAMESPACES: &[&str] =
    &["", "default", "kube-system", "kube-", "openshift-adp", "openshift-", "openshift", "team-a", "vault"];
const PHASES: &[&str] = &["Completed", "PartiallyFailed", "Failed", "InProgress", "New", ""];
const BACKUP_DONE: &[&str] = &["Completed", "PartiallyFailed", "Failed"];
const PVB_DONE: &[&str] = &["Completed", "Failed"];

/// The agent's Velero namespace and `--protected-namespaces`.
fn guard_config() -> impl Strategy<Value = (String, Vec<String>)> {
    let velero = prop_oneof![
        4 => select(&["velero", "openshift-adp"][..]).prop_map(str::to_string),
        1 => "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?",
    ];
    (velero, proptest::collection::vec(prop_oneof![Just("vault".to_string()), text()], 0..3))
}

fn object_ref(velero: String) -> impl Strategy<Value = ObjectRef> {
    let kind = prop_oneof![
        6 => select(OWN_KINDS).prop_map(str::to_string),
        1 => select(OTHER_KINDS).prop_map(str::to_string),
        1 => text(),
    ];
    kind.prop_flat_map(move |kind| {
        let (group, version) = api_of(&kind).unwrap_or_default();
        let api = prop_oneof![6 => Just((group.to_string(), version.to_string())), 1 => (text(), text())];
        // Where ferry puts objects of the kind: a tenant's namespace for a NonAdminBackup, else Velero's.
        let home = if kind == "NonAdminBackup" { "team-a".to_string() } else { velero.clone() };
        let namespace = prop_oneof![
            4 => Just(home),
            1 => Just(velero.clone()),
            2 => select(NAMESPACES).prop_map(str::to_string),
            1 => text(),
        ];
        let name = prop_oneof![4 => Just("daily-1".to_string()), 1 => Just(String::new()), 2 => text()];
        (api, namespace, name).prop_map(move |((group, version), namespace, name)| ObjectRef {
            group,
            version,
            kind: kind.clone(),
            namespace,
            name,
        })
    })
}

/// The body ferry would send for `r`, some of its values changed; or anything; or none.
fn body(r: &ObjectRef) -> impl Strategy<Value = Option<Value>> + use<> {
    let api_version = if r.group.is_empty() { r.version.clone() } else { format!("{}/{}", r.group, r.version) };
    let mut own = match r.kind.as_str() {
        "NonAdminBackup" => test_objects::nab("team-a", &r.name, &r.namespace),
        "PodVolumeBackup" => test_objects::pvb(&r.name, "daily-1", "shop", ""),
        _ => test_objects::backup(&r.name),
    };
    own["apiVersion"] = api_version.into();
    own["kind"] = r.kind.clone().into();
    own["metadata"]["namespace"] = r.namespace.clone().into();
    let kind = r.kind.clone();
    let with_phase = select(PHASES).prop_map(move |phase| {
        let mut body = own.clone();
        if kind != "NonAdminBackup" {
            body["status"] = json!({"phase": phase});
        }
        body
    });
    prop_oneof![
        2 => with_phase.clone().prop_map(Some),
        3 => with_phase.prop_flat_map(mutated_value).prop_map(Some),
        1 => json_value().prop_map(Some),
        1 => Just(None),
    ]
}

/// What an item waits for: mostly what ferry plans (a Namespace, a Backup in the Velero namespace).
fn waits_for(velero: String) -> impl Strategy<Value = Vec<ObjectRef>> {
    let planned = prop_oneof![
        Just(ObjectRef { version: "v1".into(), kind: "Namespace".into(), name: "team-a".into(), ..Default::default() }),
        Just(ObjectRef {
            group: "velero.io".into(),
            version: "v1".into(),
            kind: "Backup".into(),
            namespace: velero.clone(),
            name: "daily-1".into(),
        }),
    ];
    proptest::collection::vec(prop_oneof![4 => planned, 1 => object_ref(velero)], 0..3)
}

/// A coordinator's item: a ref, what it waits for (often what ferry plans), a body.
fn case() -> impl Strategy<Value = ((String, Vec<String>), DesiredItem, ObjectRef, Option<Value>)> {
    guard_config().prop_flat_map(|(velero, extra)| {
        (Just((velero.clone(), extra)), object_ref(velero.clone()), waits_for(velero), any::<i32>()).prop_flat_map(
            |(config, r, waits_for, action)| {
                let item = DesiredItem { r#ref: Some(r.clone()), waits_for, action, ..Default::default() };
                (Just(config), Just(item), Just(r.clone()), body(&r))
            },
        )
    })
}

fn text_at<'v>(body: &'v Value, pointer: &str) -> Option<&'v str> {
    body.pointer(pointer).and_then(Value::as_str)
}

#[test]
fn what_ferry_sends_passes() {
    let guard = Guard::new("velero", &[]);
    let r = ObjectRef {
        group: "velero.io".into(),
        version: "v1".into(),
        kind: "Backup".into(),
        namespace: "velero".into(),
        name: "daily-1".into(),
    };
    let body = test_objects::backup("daily-1");
    assert_eq!(guard.refusal(&DesiredItem::default(), &r, Some(&body)), None);
}

proptest! {
    // Cheap, and most cases are refused: more of them, so that enough are let through to check.
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn the_guard_lets_through_only_ferrys_own_objects(((velero, extra), item, r, body) in case()) {
        let guard = Guard::new(&velero, &extra);
        if guard.refusal(&item, &r, body.as_ref()).is_some() {
            return Ok(());
        }
        prop_assert!(matches!(r.kind.as_str(), "Backup" | "PodVolumeBackup" | "NonAdminBackup"), "{:?}", r);
        prop_assert_eq!(api_of(&r.kind), Some((r.group.as_str(), r.version.as_str())));
        // Names go into request paths: only Kubernetes names, so no `/` or `?` can reach another resource.
        prop_assert!(invalid_object_name(&r.name).is_none() && invalid_namespace_name(&r.namespace).is_none(), "{:?}", r);
        if r.kind == "NonAdminBackup" {
            let ns = r.namespace.as_str();
            let protected = ns == "default" || ns.starts_with("kube-") || ns.starts_with("openshift-");
            prop_assert!(!ns.is_empty() && ns != velero && !protected && !extra.iter().any(|e| e == ns), "{:?}", r);
        } else {
            prop_assert_eq!(&r.namespace, &velero);
        }
        for w in &item.waits_for {
            let namespace = w.kind == "Namespace" && w.group.is_empty() && w.namespace.is_empty();
            let backup = matches!(w.kind.as_str(), "Backup" | "PodVolumeBackup") && w.group == "velero.io" && w.namespace == velero;
            prop_assert!(namespace || backup, "waits for {:?}", w);
            let invalid = if namespace { invalid_namespace_name(&w.name) } else { invalid_object_name(&w.name) };
            prop_assert!(invalid.is_none(), "waits for {:?}", w);
        }
        let Some(body) = body else { return Ok(()) };
        prop_assert_eq!(text_at(&body, "/metadata/name"), Some(r.name.as_str()), "{}", body);
        prop_assert_eq!(text_at(&body, "/metadata/namespace"), Some(r.namespace.as_str()), "{}", body);
        prop_assert_eq!(text_at(&body, "/kind"), Some(r.kind.as_str()));
        let api_version = format!("{}/{}", r.group, r.version);
        prop_assert_eq!(text_at(&body, "/apiVersion"), Some(api_version.as_str()));
        let label = format!("/metadata/labels/{}", labels::FERRY_MANAGED_BY.replace('/', "~1"));
        prop_assert_eq!(text_at(&body, &label), Some(labels::FERRY_MANAGED_BY_VALUE));
        if r.kind == "NonAdminBackup" {
            // The shape NAC treats as synced, never one that makes it run a backup or delete one's data.
            let sync = format!("/metadata/labels/{}", labels::NAB_SYNCED_FROM_NACUUID.replace('/', "~1"));
            prop_assert!(text_at(&body, &sync).is_some_and(|v| !v.is_empty()), "{}", body);
            prop_assert!(body.pointer("/spec/deleteBackup").is_none_or(|d| d == &json!(false) || d.is_null()), "{}", body);
        }
        if r.kind == "Backup" {
            prop_assert!(text_at(&body, "/spec/storageLocation").is_some_and(|v| !v.is_empty()), "{}", body);
            prop_assert!(body.pointer("/metadata/ownerReferences").is_none_or(|o| o == &json!([])), "{}", body);
        }
        let done = match r.kind.as_str() {
            "Backup" => BACKUP_DONE,
            "PodVolumeBackup" => PVB_DONE,
            _ => return Ok(()),
        };
        prop_assert!(text_at(&body, "/status/phase").is_some_and(|p| done.contains(&p)), "{}", body);
    }
}
