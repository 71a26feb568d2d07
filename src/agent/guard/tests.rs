//! The guard's allowlist, case by case: what ferry plans passes, and each hostile variation is refused with its
//! reason (each case fails when its check is removed).

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::test_objects::{self as objects, BSL, nacuuid, stored};
use super::*;
use crate::grpc::convert::object_ref;

fn guard() -> Guard {
    Guard::new("velero", &["vault".to_string()])
}

fn mapping_guard() -> Guard {
    let mappings = MappingAllowlist(vec!["team-a=team-a-dr".parse().expect("valid")]);
    guard().with_policy(Policy { mappings, ..Policy::default() })
}

fn ref_of(body: &Value) -> ObjectRef {
    let text = |p: &str| body.pointer(p).and_then(Value::as_str).unwrap_or_default();
    object_ref(text("/kind"), text("/metadata/namespace"), text("/metadata/name"))
}

fn item_for(body: &Value, waits: Vec<ObjectRef>) -> DesiredItem {
    DesiredItem { r#ref: Some(ref_of(body)), waits_for: waits, ..Default::default() }
}

/// The first step alone.
fn sent(guard: &Guard, body: &Value, waits: Vec<ObjectRef>) -> Option<String> {
    guard.refusal(&item_for(body, waits), &ref_of(body), Some(body))
}

fn now() -> SystemTime {
    SystemTime::now()
}

/// Both steps, with `backup` and `location` as read from the cluster.
fn judged(guard: &Guard, body: &Value, backup: Option<&Value>, location: Option<&Value>) -> Option<String> {
    let r = ref_of(body);
    sent(guard, body, vec![]).or_else(|| guard.related_refusal(&r, body, Related { backup, location }, now()))
}

fn read_only() -> Value {
    objects::bsl(BSL, Some("ReadOnly"))
}

fn expect(why: Option<String>, fragment: &str, what: &str) {
    let why = why.unwrap_or_else(|| panic!("{what}: accepted"));
    assert!(why.contains(fragment), "{what}: {why}");
}

#[test]
fn what_ferry_plans_passes() {
    let g = guard();
    let bsl = read_only();
    let admin = objects::backup("daily-1");
    assert_eq!(judged(&g, &admin, None, Some(&bsl)), None, "an admin Backup");
    let tenant = objects::tenant_backup("team-a", "nightly", "team-a");
    assert_eq!(judged(&g, &tenant, None, Some(&bsl)), None, "a tenant Backup");
    let live = stored(tenant.clone(), "uid-t");
    let pvb = objects::pvb("p1", &nacuuid("team-a", "nightly"), "team-a", "uid-t");
    assert_eq!(judged(&g, &pvb, Some(&live), Some(&bsl)), None, "its PVB");
    let nab = objects::nab("team-a", "nightly", "team-a");
    let waits =
        vec![object_ref("Namespace", "", "team-a"), object_ref("Backup", "velero", &nacuuid("team-a", "nightly"))];
    assert_eq!(sent(&g, &nab, waits), None, "its NAB, waiting for the Backup");
    assert_eq!(judged(&g, &nab, Some(&live), Some(&bsl)), None, "its NAB");
    assert_eq!(g.refusal(&item_for(&admin, vec![]), &ref_of(&admin), None), None, "a template-less wait");

    let m = mapping_guard();
    let mapped = objects::tenant_backup("team-a", "nightly", "team-a-dr");
    assert_eq!(judged(&m, &mapped, None, Some(&bsl)), None, "a mapped tenant Backup, mapping allowed here");
    let mapped_nab = objects::nab("team-a", "nightly", "team-a-dr");
    assert_eq!(judged(&m, &mapped_nab, Some(&stored(mapped, "u")), Some(&bsl)), None, "its NAB");
}

#[test]
fn what_the_guard_needs_read_is_the_backup_and_its_location() {
    let g = guard();
    let uuid = nacuuid("team-a", "nightly");
    let needs = g.needs(&ref_of(&objects::backup("b1")), &objects::backup("b1"));
    assert_eq!(needs, Needs { backup: None, location: Some(object_ref("BackupStorageLocation", "velero", BSL)) });
    let pvb = objects::pvb("p1", "b1", "shop", "");
    assert_eq!(g.needs(&ref_of(&pvb), &pvb).backup, Some(object_ref("Backup", "velero", "b1")));
    let nab = objects::nab("team-a", "nightly", "team-a");
    assert_eq!(g.needs(&ref_of(&nab), &nab).backup, Some(object_ref("Backup", "velero", &uuid)));
}

#[test]
fn shapes_a_hostile_coordinator_sends_are_refused_with_the_reason() {
    // (what, item ref, what it waits for, body, expected reason)
    type Case = (&'static str, ObjectRef, Vec<ObjectRef>, Option<Value>, &'static str);
    let secret = |ns: &str| ObjectRef {
        group: String::new(),
        version: "v1".into(),
        kind: "Secret".into(),
        namespace: ns.into(),
        name: "s".into(),
    };
    let renamed = objects::backup("other");
    let mut moved = objects::nab("team-a", "n", "team-a");
    moved["metadata"]["namespace"] = "kube-system".into();
    let mut of_another_kind = objects::pvb("b1", "b0", "shop", "");
    of_another_kind["metadata"]["name"] = "b1".into();
    let mut without_status = objects::backup("b1");
    without_status.as_object_mut().unwrap().remove("status");
    let mut in_progress = objects::pvb("p", "b1", "shop", "");
    in_progress["status"]["phase"] = "InProgress".into();
    let path = objects::backup("b1/status");
    let cases: Vec<Case> = vec![
        ("other kind", object_ref("Namespace", "", "evil"), vec![], None, "not a kind an agent creates"),
        ("a Secret", secret("velero"), vec![], None, "not a kind"),
        ("Backup elsewhere", object_ref("Backup", "kube-system", "b"), vec![], None, "outside this cluster's Velero"),
        ("NAB in kube-system", object_ref("NonAdminBackup", "kube-system", "n"), vec![], None, "protected"),
        ("NAB in velero", object_ref("NonAdminBackup", "velero", "n"), vec![], None, "Velero/OADP namespace"),
        ("NAB in listed", object_ref("NonAdminBackup", "vault", "n"), vec![], None, "protectedNamespaces"),
        ("NAB in default", object_ref("NonAdminBackup", "default", "n"), vec![], None, "protected"),
        ("no name", object_ref("Backup", "velero", ""), vec![], None, "not a valid object name"),
        (
            "a name that is a path",
            object_ref("Backup", "velero", "b1/status"),
            vec![],
            Some(path),
            "not a valid object",
        ),
        ("NAB namespace a path", object_ref("NonAdminBackup", "a/b", "n"), vec![], None, "not a valid namespace"),
        (
            "waits for a path",
            object_ref("NonAdminBackup", "team-a", "n"),
            vec![object_ref("Namespace", "", "team-a/secrets/s")],
            None,
            "not a valid name",
        ),
        ("body renamed", object_ref("Backup", "velero", "b1"), vec![], Some(renamed), "metadata.name is \"other\""),
        ("body moved", object_ref("NonAdminBackup", "team-a", "n"), vec![], Some(moved), "metadata.namespace is"),
        (
            "body of another kind",
            object_ref("Backup", "velero", "b1"),
            vec![],
            Some(of_another_kind),
            "kind is \"PodVolumeBackup\"",
        ),
        (
            "Backup without status",
            object_ref("Backup", "velero", "b1"),
            vec![],
            Some(without_status),
            "Velero would run",
        ),
        ("PVB in progress", object_ref("PodVolumeBackup", "velero", "p"), vec![], Some(in_progress), "\"InProgress\""),
        (
            "waits for a Secret",
            object_ref("NonAdminBackup", "team-a", "n"),
            vec![secret("team-a")],
            None,
            "neither a Namespace nor a Backup",
        ),
    ];
    for (what, r, waits, b, expected) in cases {
        let item = DesiredItem { r#ref: Some(r.clone()), waits_for: waits, ..Default::default() };
        expect(guard().refusal(&item, &r, b.as_ref()), expected, what);
    }
}

/// `edit` applied to a copy of `body`.
fn edited(body: &Value, edit: impl FnOnce(&mut Value)) -> Value {
    let mut copy = body.clone();
    edit(&mut copy);
    copy
}

#[test]
fn every_object_carries_ferrys_marks_and_nothing_that_outlives_them() {
    let b = objects::backup("b1");
    let unlabelled = edited(&b, |b| b["metadata"]["labels"] = json!({}));
    expect(sent(&guard(), &unlabelled, vec![]), "lacks ferry's label", "unlabelled");
    for key in crate::model::provenance::ANNOTATION_KEYS {
        let without = edited(&b, |b| {
            b["metadata"]["annotations"].as_object_mut().unwrap().remove(key);
        });
        expect(sent(&guard(), &without, vec![]), key, "no provenance");
    }
    let empty_uid = edited(&b, |b| b["metadata"]["annotations"][labels::FERRY_BACKUP_UID] = "".into());
    expect(sent(&guard(), &empty_uid, vec![]), labels::FERRY_BACKUP_UID, "an empty backup UID");
    let numeric_prefix = edited(&b, |b| b["metadata"]["annotations"][labels::FERRY_SOURCE_PREFIX] = json!(7));
    expect(sent(&guard(), &numeric_prefix, vec![]), labels::FERRY_SOURCE_PREFIX, "a prefix that is no string");
    let empty_prefix = edited(&b, |b| b["metadata"]["annotations"][labels::FERRY_SOURCE_PREFIX] = "".into());
    assert_eq!(sent(&guard(), &empty_prefix, vec![]), None, "a location at the bucket's root has no prefix");
    let finalized = edited(&b, |b| b["metadata"]["finalizers"] = json!(["example.com/hold"]));
    expect(sent(&guard(), &finalized, vec![]), "finalizers", "finalizers");
}

#[test]
fn a_backup_is_ferrys_own_bound_to_its_location_with_consistent_tenant_marks() {
    let g = guard();
    let b = objects::backup("b1");
    let cases = [
        (
            "named for another backup",
            edited(&b, |b| b["metadata"]["annotations"][labels::FERRY_BACKUP_NAME] = "b2".into()),
            "not its own name",
        ),
        (
            "owned",
            edited(&b, |b| b["metadata"]["ownerReferences"] = json!([{"kind": "ConfigMap", "name": "x"}])),
            "ownerReferences",
        ),
        ("no location", edited(&b, |b| b["spec"]["storageLocation"] = "".into()), "storageLocation is empty"),
        (
            "label of another location",
            edited(&b, |b| b["metadata"]["labels"][labels::VELERO_STORAGE_LOCATION] = "default".into()),
            "not its spec.storageLocation",
        ),
        (
            "source namespace without tenant marks",
            edited(&b, |b| b["metadata"]["annotations"][labels::FERRY_SOURCE_NAMESPACE] = "team-a".into()),
            "no tenant marks",
        ),
    ];
    for (what, body, fragment) in cases {
        expect(sent(&g, &body, vec![]), fragment, what);
    }
    // Another tenant's backup, its origin namespace rewritten to land in team-b (NonAdminDownloadRequest there
    // would read team-a's data).
    let crossed = objects::tenant_backup("team-a", "nightly", "team-b");
    let relabelled = edited(&crossed, |b| {
        b["metadata"]["annotations"].as_object_mut().unwrap().remove(labels::FERRY_SOURCE_NAMESPACE);
    });
    expect(sent(&g, &relabelled, vec![]), "not NAC's", "tenant marks crossed");
    expect(
        sent(&g, &crossed, vec![]),
        "does not allow mapping namespace \"team-a\" to \"team-b\"",
        "mapped, not allowed",
    );
    expect(sent(&mapping_guard(), &crossed, vec![]), "does not allow mapping", "only the pair allowed here");
    let into_kube = objects::tenant_backup("team-a", "nightly", "kube-public");
    expect(sent(&mapping_guard(), &into_kube, vec![]), "protected", "mapped into a protected namespace");
    // The Velero namespace is never a tenant's, not even by the identity mapping.
    let in_velero = objects::tenant_backup("velero", "nightly", "velero");
    expect(sent(&g, &in_velero, vec![]), "Velero/OADP namespace", "a tenant backup of the Velero namespace");
    let wider = edited(&objects::tenant_backup("team-a", "nightly", "team-a"), |b| {
        b["spec"]["includedNamespaces"] = json!(["team-a", "velero"]);
    });
    expect(sent(&g, &wider, vec![]), "exactly its own namespace", "a tenant backup of more namespaces");
}

#[test]
fn a_backup_lands_only_on_a_read_only_location_of_this_cluster() {
    let b = objects::backup("b1");
    let read_write = objects::bsl(BSL, None);
    expect(judged(&guard(), &b, None, None), "does not exist on this cluster", "no such BSL");
    expect(judged(&guard(), &b, None, Some(&read_write)), "ReadWrite here", "a ReadWrite BSL");
    let risky = guard().with_policy(Policy { allow_read_write_locations: true, ..Policy::default() });
    assert_eq!(judged(&risky, &b, None, Some(&read_write)), None, "accepted where the cluster opted in");
    let expired = edited(&b, |b| b["status"]["expiration"] = "2001-01-01T00:00:00Z".into());
    expect(judged(&risky, &expired, None, Some(&read_write)), "garbage collection would delete", "expired, ReadWrite");
    assert_eq!(judged(&guard(), &expired, None, Some(&read_only())), None, "Velero's GC skips ReadOnly BSLs");
    let garbled = edited(&b, |b| b["status"]["expiration"] = "soon".into());
    expect(judged(&risky, &garbled, None, Some(&read_write)), "unreadable status.expiration", "garbled expiration");
    let soon = SystemTime::now() + Duration::from_secs(3600);
    let later = edited(&b, |b| b["status"]["expiration"] = humantime::format_rfc3339(soon).to_string().into());
    assert_eq!(judged(&risky, &later, None, Some(&read_write)), None, "not expired yet");
}

#[test]
fn a_pvb_belongs_to_exactly_the_backup_it_waits_for() {
    let g = guard();
    let bsl = read_only();
    let live = stored(objects::backup("b1"), "uid-1");
    let p = objects::pvb("p1", "b1", "shop", "uid-1");
    let sent_cases = [
        (
            "label of another backup",
            edited(&p, |p| p["metadata"]["labels"][labels::VELERO_BACKUP_NAME] = "b2".into()),
            "not that of its backup",
        ),
        (
            "no UID label",
            edited(&p, |p| {
                p["metadata"]["labels"].as_object_mut().unwrap().remove(labels::VELERO_BACKUP_UID);
            }),
            "lacks the label",
        ),
        (
            "owned by another",
            edited(&p, |p| p["metadata"]["ownerReferences"][0]["name"] = "b2".into()),
            "is not its backup",
        ),
        (
            "owned by a ConfigMap",
            edited(&p, |p| p["metadata"]["ownerReferences"][0]["kind"] = "ConfigMap".into()),
            "is not its backup",
        ),
    ];
    for (what, body, fragment) in sent_cases {
        expect(sent(&g, &body, vec![]), fragment, what);
    }
    expect(sent(&g, &p, vec![object_ref("Backup", "velero", "b2")]), "not its own backup", "waits for another");
    let related_cases = [
        (
            "UID of another",
            edited(&p, |p| p["metadata"]["labels"][labels::VELERO_BACKUP_UID] = "uid-2".into()),
            "not the UID",
        ),
        (
            "owner UID of another",
            edited(&p, |p| p["metadata"]["ownerReferences"][0]["uid"] = "uid-2".into()),
            "is not Backup",
        ),
        ("another BSL", edited(&p, |p| p["spec"]["backupStorageLocation"] = "default".into()), "not its Backup's"),
        ("another namespace's pod", edited(&p, |p| p["spec"]["pod"]["namespace"] = "vault".into()), "not among Backup"),
    ];
    for (what, body, fragment) in related_cases {
        expect(judged(&g, &body, Some(&live), Some(&bsl)), fragment, what);
    }
    expect(judged(&g, &p, None, Some(&bsl)), "does not exist", "no Backup");
    let no_uid = objects::backup("b1");
    expect(judged(&g, &p, Some(&no_uid), Some(&bsl)), "no UID yet", "Backup without UID");
    let rw = objects::bsl(BSL, None);
    expect(judged(&g, &p, Some(&live), Some(&rw)), "ReadWrite here", "a local backup on a ReadWrite BSL");
}

#[test]
fn a_nab_is_synced_to_exactly_its_backup_and_never_runs_or_deletes_one() {
    let g = guard();
    let bsl = read_only();
    let live = stored(objects::tenant_backup("team-a", "nightly", "team-a"), "uid-t");
    let n = objects::nab("team-a", "nightly", "team-a");
    let sent_cases = [
        (
            "no sync label",
            edited(&n, |n| {
                n["metadata"]["labels"].as_object_mut().unwrap().remove(labels::NAB_SYNCED_FROM_NACUUID);
            }),
            "NAC would run a new backup",
        ),
        (
            "synced to another backup",
            edited(&n, |n| n["metadata"]["labels"][labels::NAB_SYNCED_FROM_NACUUID] = nacuuid("team-b", "x").into()),
            "is not its backup",
        ),
        ("deleteBackup", edited(&n, |n| n["spec"]["deleteBackup"] = true.into()), "deletes the backup"),
        ("another spec field", edited(&n, |n| n["spec"]["schedule"] = "* * * * *".into()), "spec.schedule"),
        ("a status", edited(&n, |n| n["status"] = json!({"phase": "Created"})), "only NAC writes"),
        ("mapped, not allowed", objects::nab("team-a", "nightly", "team-b"), "does not allow mapping"),
    ];
    for (what, body, fragment) in sent_cases {
        expect(sent(&g, &body, vec![]), fragment, what);
    }
    expect(
        sent(&g, &n, vec![object_ref("Backup", "velero", "daily-1")]),
        "not the Backup its sync label",
        "waits for another",
    );
    assert!(
        sent(&g, &edited(&n, |n| n["spec"]["deleteBackup"] = false.into()), vec![]).is_none(),
        "false is no delete"
    );

    expect(judged(&g, &n, None, Some(&bsl)), "does not exist on this cluster", "no Backup");
    let backup_cases = [
        (
            "Backup of another NACUUID",
            edited(&live, |b| b["metadata"]["labels"][labels::NAB_ORIGIN_NACUUID] = "x".into()),
            "label openshift.io/oadp-nab-origin-nacuuid",
        ),
        (
            "Backup of another namespace",
            edited(&live, |b| b["metadata"]["annotations"][labels::NAB_ORIGIN_NAMESPACE] = "team-b".into()),
            "annotation openshift.io/oadp-nab-origin-namespace",
        ),
        (
            "Backup of another name",
            edited(&live, |b| b["metadata"]["annotations"][labels::NAB_ORIGIN_NAME] = "other".into()),
            "oadp-nab-origin-name",
        ),
        (
            "Backup with hooks",
            edited(&live, |b| b["spec"]["hooks"] = json!({"resources": []})),
            "lacks its Backup's spec.hooks",
        ),
    ];
    for (what, backup, fragment) in backup_cases {
        expect(judged(&g, &n, Some(&backup), Some(&bsl)), fragment, what);
    }
    let spec_cases = [
        (
            "hooks the Backup lacks",
            edited(&n, |n| n["spec"]["backupSpec"]["hooks"] = json!({"resources": [{"name": "x"}]})),
            "spec.backupSpec.hooks differs",
        ),
        (
            "other namespaces",
            edited(&n, |n| n["spec"]["backupSpec"]["includedNamespaces"] = json!(["team-a", "velero"])),
            "includedNamespaces differs",
        ),
        (
            "a NABSL it does not use",
            edited(&n, |n| n["spec"]["backupSpec"]["storageLocation"] = "theirs".into()),
            "not the NonAdminBackupStorageLocation",
        ),
    ];
    for (what, body, fragment) in spec_cases {
        expect(judged(&g, &body, Some(&live), Some(&bsl)), fragment, what);
    }
    let newer_field = edited(&n, |n| n["spec"]["backupSpec"]["someFutureField"] = true.into());
    assert_eq!(judged(&g, &newer_field, Some(&live), Some(&bsl)), None, "a field this cluster's CRD pruned");

    // Team-a's backup relabelled as team-b's, with a NAB in team-b: NAC's check (origin namespace) passes, the
    // NACUUID does not.
    let stolen_backup = edited(&live, |b| b["metadata"]["annotations"][labels::NAB_ORIGIN_NAMESPACE] = "team-b".into());
    let stolen_nab = edited(&objects::nab("team-a", "nightly", "team-b"), |n| {
        n["metadata"]["annotations"].as_object_mut().unwrap().remove(labels::FERRY_SOURCE_NAMESPACE);
    });
    expect(judged(&g, &stolen_nab, Some(&stolen_backup), Some(&bsl)), "was not generated by NAC for team-b", "stolen");
    // Mapped by a Backup whose source mark names team-a, into a namespace this cluster does not allow.
    let mapped_backup = stored(objects::tenant_backup("team-a", "nightly", "team-b"), "u");
    let mapped_nab =
        edited(&stolen_nab, |n| n["metadata"]["annotations"][labels::FERRY_SOURCE_NAMESPACE] = "team-a".into());
    expect(judged(&mapping_guard(), &mapped_nab, Some(&mapped_backup), Some(&bsl)), "does not allow", "mapped here");
    // The NAB and its Backup disagree about the source.
    let allowed_backup = stored(objects::tenant_backup("team-a", "nightly", "team-a-dr"), "u");
    let unmarked_nab = edited(&objects::nab("team-a", "nightly", "team-a-dr"), |n| {
        n["metadata"]["annotations"].as_object_mut().unwrap().remove(labels::FERRY_SOURCE_NAMESPACE);
    });
    let m = guard().with_policy(Policy {
        mappings: MappingAllowlist(vec!["team-a=team-a-dr".parse().unwrap()]),
        ..Policy::default()
    });
    expect(
        judged(&m, &unmarked_nab, Some(&allowed_backup), Some(&bsl)),
        "its Backup says \"team-a\"",
        "sources differ",
    );
}

#[test]
fn a_nab_names_the_nabsl_its_backups_location_belongs_to() {
    let g = guard();
    let live = stored(objects::tenant_backup("team-a", "nightly", "team-a"), "uid-t");
    let n = edited(&objects::nab("team-a", "nightly", "team-a"), |n| {
        n["spec"]["backupSpec"]["storageLocation"] = "mine".into()
    });
    let mut nac_bsl = read_only();
    nac_bsl["metadata"]["labels"] = json!({labels::OADP: labels::OADP_VALUE, labels::MANAGED_BY: labels::NAC_MANAGED_BY_VALUE,
        labels::NABSL_ORIGIN_NACUUID: "team-a-mine-x"});
    nac_bsl["metadata"]["annotations"] =
        json!({labels::NABSL_ORIGIN_NAMESPACE: "team-a", labels::NABSL_ORIGIN_NAME: "mine"});
    assert_eq!(judged(&g, &n, Some(&live), Some(&nac_bsl)), None);
    let theirs = edited(&nac_bsl, |b| b["metadata"]["annotations"][labels::NABSL_ORIGIN_NAMESPACE] = "team-b".into());
    expect(judged(&g, &n, Some(&live), Some(&theirs)), "not the NonAdminBackupStorageLocation", "another's NABSL");
}
