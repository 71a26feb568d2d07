//! End to end on the real test bed (issue 29, points 2 and 3): what the cluster holds moved on between the
//! coordinator's plan and the agent's apply, on a real kube-apiserver with Velero's CRDs, the agent bound to
//! deploy/'s RBAC.
//!
//! 1. Velero's own backup sync copied a *mapped* tenant backup first (the bucket's origin namespace, which NAC
//!    refuses for a NAB in the mapped namespace), and another backup's PVB holds a name the set plans again: a
//!    coordinator sends the set it planned before either existed. The agent reports the Backup as a conflict that
//!    says what to do, holds the PVB and the NAB that wait for it, and writes over nothing.
//! 2. The real coordinator: two backups in the bucket whose PVB files name one PVB. It is created once, for the
//!    first backup, and the second backup's is a reported conflict — in status and as an Event — never applied.

#[path = "e2e_support/mod.rs"]
mod e2e;

use std::time::Duration;

use e2e::scripted_coordinator::*;
use e2e::*;
use ferry::fixture;
use ferry::grpc::convert::object_ref;
use ferry::grpc::proto::{ApplyOutcome, DesiredSet};
use ferry::model::{BackupPhase, labels};
use kube::api::ListParams;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);

/// `object` as Velero's backup sync (or another controller) makes it from the bucket: no label or mark of ferry's.
fn made_by_sync(mut object: Value) -> Value {
    let meta = object["metadata"].as_object_mut().expect("metadata");
    if let Some(labels_map) = meta.get_mut("labels").and_then(Value::as_object_mut) {
        labels_map.remove(labels::FERRY_MANAGED_BY);
    }
    if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
        annotations.retain(|key, _| !key.starts_with("ferry.dev/"));
    }
    object
}

fn resource_version(object: &Value) -> String {
    object["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string()
}

async fn events_about(client: &kube::Client, namespace: &str, name: &str, reason: &str) -> Vec<Value> {
    let events = api(client, "events.k8s.io", "v1", "Event", Some(namespace));
    let list = events.list(&ListParams::default()).await.expect("events");
    list.items.iter().map(to_value).filter(|e| e["reason"] == reason && e["regarding"]["name"] == name).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_planned_before_velero_synced_a_mapped_backup_holds_its_nab_and_writes_over_nothing() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let bed = TestBed::up();
    let b = bed.admin("b").await;
    create_bsl(&bed, &b, "dr").await;
    for ns in ["team-a-dr", "shop"] {
        create_namespace(&b, ns).await;
    }
    // Velero's copy of team-a's backup, made by b's own backup sync before the set arrives.
    let nacuuid = "team-a-nightly-0b4c6e1a-1d2f-4c4b-9a57-1f2e3d4c5b6a";
    let mapped = planned_tenant_backup(nacuuid, "team-a", "nightly", "team-a-dr");
    let velero_copy = to_value(
        &create(&backups(&b), made_by_sync(planned_tenant_backup(nacuuid, "team-a", "nightly", "team-a"))).await,
    );
    // Backup "first" and its PVB "shared-pvb", made by ferry in an earlier pass.
    let first = to_value(&create(&backups(&b), planned_backup("first", "dr")).await);
    let first_uid = first["metadata"]["uid"].as_str().expect("uid").to_string();
    let mut first_pvb = planned_pvb("shared-pvb", "first", "shop");
    first_pvb["metadata"]["labels"][labels::VELERO_BACKUP_UID] = first_uid.as_str().into();
    first_pvb["metadata"]["ownerReferences"][0]["uid"] = first_uid.as_str().into();
    let first_pvb = to_value(&create(&pvbs(&b), first_pvb).await);

    let wait_backup = |name: &str| object_ref("Backup", VELERO_NS, name);
    let tenant_pvb = planned_pvb("nightly-pvb", nacuuid, "team-a");
    let nab = planned_nab(&mapped, "team-a-dr", "nightly");
    let second_pvb = planned_pvb("shared-pvb", "second", "shop");
    let items = vec![
        sent(ref_of(&mapped), &mapped),
        sent_waiting(ref_of(&tenant_pvb), &tenant_pvb, vec![wait_backup(nacuuid)]),
        sent_waiting(ref_of(&nab), &nab, vec![wait_backup(nacuuid)]),
        sent(wait_backup("second"), &planned_backup("second", "dr")),
        sent_waiting(ref_of(&second_pvb), &second_pvb, vec![wait_backup("second")]),
    ];
    let reporting = items.len();
    let set = DesiredSet { version: "planned-before".into(), items, complete: true, ..Default::default() };
    let mut scripted = Scripted::serve(set).await;
    scripted.ferry.agent_args = vec!["--allow-namespace-mapping".into(), "team-a=team-a-dr".into()];
    scripted.ferry.start_agent(&bed, "b");
    let result = scripted.result_of_items(reporting, WAIT).await;

    let (outcome, message) = outcome_in(&result, nacuuid);
    assert_eq!(outcome, ApplyOutcome::Conflict, "{message}");
    for words in ["origin namespace \"team-a\", not \"team-a-dr\"", "Velero's own backup sync", "backupSyncPeriod"] {
        assert!(message.contains(words), "{words}: {message}");
    }
    for name in ["nightly-pvb", "nightly"] {
        let (outcome, message) = outcome_in(&result, name);
        assert_eq!(outcome, ApplyOutcome::Held, "{name}: {message}");
        assert!(message.contains("which is not this backup's"), "{name}: {message}");
    }
    assert_eq!(outcome_in(&result, "second").0, ApplyOutcome::Applied);
    let (outcome, message) = outcome_in(&result, "shared-pvb");
    assert_eq!(outcome, ApplyOutcome::Conflict, "{message}");
    assert!(message.contains(labels::FERRY_BACKUP_NAME) && message.contains("left untouched"), "{message}");

    // On b: no NAB NAC would refuse, no PVB on Velero's copy, and nothing written over.
    assert!(nabs(&b, Some("team-a-dr")).list(&ListParams::default()).await.expect("nabs").items.is_empty());
    assert!(pvbs(&b).get_opt("nightly-pvb").await.expect("get").is_none());
    let copy_now = to_value(&backups(&b).get(nacuuid).await.expect("Velero's copy"));
    assert_eq!(resource_version(&copy_now), resource_version(&velero_copy), "Velero's copy untouched");
    let shared_now = to_value(&pvbs(&b).get("shared-pvb").await.expect("first's PVB"));
    assert_eq!(resource_version(&shared_now), resource_version(&first_pvb), "first's PVB untouched");
    assert_eq!(shared_now["metadata"]["labels"][labels::VELERO_BACKUP_NAME], "first");
    eventually("a FerryConflict Event on Velero's copy", WAIT, || async {
        let found = events_about(&b, VELERO_NS, nacuuid, "FerryConflict").await;
        found.iter().any(|e| e["note"].as_str().unwrap_or_default().contains("backupSyncPeriod")).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_backups_naming_one_pvb_get_it_once_for_the_first_and_a_reported_conflict() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let bed = TestBed::up();
    let b = bed.admin("b").await;
    create_bsl(&bed, &b, "dr-bsl").await;
    let backup_of = |name: &str| {
        let backup = fixture::admin_backup_json(name, BackupPhase::Completed, "default");
        let uid = backup["metadata"]["uid"].as_str().unwrap_or_default().to_string();
        (backup, uid)
    };
    let (first, first_uid) = backup_of("first");
    let (second, second_uid) = backup_of("second");
    let first_pvb = fixture::pod_volume_backup_json("first", &first_uid, "shop", 0);
    let shared = first_pvb["metadata"]["name"].as_str().expect("name").to_string();
    // The second backup's file names the first one's PVB (labelled for the second backup) beside its own.
    let mut borrowed = fixture::pod_volume_backup_json("second", &second_uid, "shop", 0);
    borrowed["metadata"]["name"] = shared.as_str().into();
    let own = fixture::pod_volume_backup_json("second", &second_uid, "shop", 1);
    let own_name = own["metadata"]["name"].as_str().expect("name").to_string();
    put_backup(&bed, "first", &first, &[first_pvb]).await;
    put_backup(&bed, "second", &second, &[borrowed, own]).await;

    let mut ferry = Ferry::start(&bed, "  []");
    ferry.start_agent(&bed, "b");
    eventually("both Backups and the PVBs on b", WAIT, || async {
        backups(&b).get_opt("first").await.ok()??;
        backups(&b).get_opt("second").await.ok()??;
        pvbs(&b).get_opt(&own_name).await.ok()??;
        pvbs(&b).get_opt(&shared).await.ok()?
    })
    .await;
    let conflict = eventually("the second backup's PVB reported as a conflict in status", WAIT, || async {
        let items = status_items(&ferry, "second");
        items.into_iter().find(|i| i["kind"] == "PodVolumeBackup" && i["name"] == shared && i["action"] == "conflict")
    })
    .await;
    // Planned against the bucket, then (once the first backup's PVB is there) against the cluster.
    let reason = conflict["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("backup \"first\"'s PVB file too") || reason.contains("belongs to another backup"),
        "{reason}"
    );
    let stored = to_value(&pvbs(&b).get(&shared).await.expect("the PVB"));
    assert_eq!(stored["metadata"]["labels"][labels::VELERO_BACKUP_NAME], "first", "the first backup's: {stored}");
    assert_eq!(stored["metadata"]["annotations"][labels::FERRY_BACKUP_NAME], "first");
    // The first plan already held both backups: the conflict was planned, never left to the agent's create race.
    eventually("a FerryConflict Event on the PVB with the plan's reason", WAIT, || async {
        let found = events_about(&b, VELERO_NS, &shared, "FerryConflict").await;
        let planned = |e: &Value| e["note"].as_str().unwrap_or_default().contains("backup \"first\"'s PVB file too");
        found.iter().any(planned).then_some(())
    })
    .await;
    // Passes later, still the first backup's, never rewritten.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = to_value(&pvbs(&b).get(&shared).await.expect("the PVB"));
    assert_eq!(resource_version(&later), resource_version(&stored), "{}", logs_hint(&ferry));
}
