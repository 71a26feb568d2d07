//! End to end on the real test bed (docs/design.md §6; threat model in docs/security.md): a compromised coordinator. A test server speaks ferry's
//! protocol over mTLS with the coordinator's certificate and sends a real `ferry agent` (bound to deploy/'s
//! least-privilege RBAC, on a real kube-apiserver with Velero's CRDs) a DesiredSet of hostile items next to one
//! good one. The agent refuses each hostile item itself — REFUSED with the reason, a Warning Event, nothing
//! written — while the good item is applied in the same pass.

#[path = "e2e_support/mod.rs"]
mod e2e;

use std::time::Duration;

use e2e::scripted_coordinator::*;
use e2e::*;
use ferry::grpc::convert::object_ref;
use ferry::grpc::proto::{ApplyOutcome, DesiredAction, DesiredItem, DesiredSet, ObjectRef};
use ferry::model::labels;
use kube::api::ListParams;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

fn labelled(api_version: &str, kind: &str, namespace: &str, name: &str, status: Option<Value>) -> Value {
    let mut object = json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {labels::FERRY_MANAGED_BY: labels::FERRY_MANAGED_BY_VALUE}},
        "spec": {}});
    if let Some(status) = status {
        object["status"] = status;
    }
    object
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compromised_coordinator_gets_nothing_hostile_applied() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let bed = TestBed::up();
    let b = bed.admin("b").await;
    // b's own view: a ReadOnly BSL (what ferry reads through), a ReadWrite one (b's own backups), tenants.
    create_bsl(&bed, &b, "dr").await;
    create_bsl_with_access_mode(&bed, &b, "rw", None).await;
    for ns in ["team-a", "team-b", "shop"] {
        create_namespace(&b, ns).await;
    }
    let uuid = |ns: &str, name: &str, tail: &str| format!("{ns}-{name}-0b4c6e1a-1d2f-4c4b-9a57-1f2e3d4c{tail}");
    let nightly = uuid("team-a", "nightly", "5b6a");
    // Ferry's own Backup of another location, already on b: the coordinator must not re-point it.
    let mut existing = planned_backup("existing", "dr");
    existing["metadata"]["annotations"] = provenance("existing", "other-location");
    e2e::create(&backups(&b), existing.clone()).await;

    let completed = Some(json!({"phase": "Completed"}));
    // A Backup that Velero on b would *run*: no status, and it names kube-system.
    let mut runs = planned_backup("runs-on-b", "dr");
    runs["spec"]["includedNamespaces"] = json!(["kube-system"]);
    runs.as_object_mut().expect("object").remove("status");
    let mut unfinished = planned_pvb("unfinished", "good", "shop");
    unfinished["status"]["phase"] = "InProgress".into();
    let config_map = ObjectRef {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: "default".into(),
        name: "planted".into(),
    };
    let wait_backup = |name: &str| object_ref("Backup", VELERO_NS, name);

    // A NAB without OADP's sync label: NAC would back up the agent's own namespace into the default BSL.
    let mut unsynced = planned_nab(&planned_tenant_backup(&nightly, "team-a", "nightly", "team-a"), "team-b", "exfil");
    unsynced["metadata"]["labels"].as_object_mut().expect("labels").remove(labels::NAB_SYNCED_FROM_NACUUID);
    unsynced["spec"]["backupSpec"]["includedNamespaces"] = json!(["ferry"]);
    // A NAB that would delete the backup's data.
    let mut deleting =
        planned_nab(&planned_tenant_backup(&nightly, "team-a", "nightly", "team-a"), "team-a", "nightly-delete");
    deleting["spec"]["deleteBackup"] = true.into();
    // Team-a's backup handed to team-b: relabelled (NAC's own check passes), or "mapped" where b allows no mapping.
    let stolen_id = uuid("team-a", "stolen", "0001");
    let relabelled = planned_tenant_backup(&stolen_id, "team-a", "stolen", "team-b");
    let mut relabelled_only = relabelled.clone();
    relabelled_only["metadata"]["annotations"]
        .as_object_mut()
        .expect("annotations")
        .remove(labels::FERRY_SOURCE_NAMESPACE);
    relabelled_only["metadata"]["name"] = uuid("team-a", "stolen", "0002").into();
    relabelled_only["metadata"]["labels"][labels::NAB_ORIGIN_NACUUID] = uuid("team-a", "stolen", "0002").into();
    relabelled_only["metadata"]["annotations"][labels::FERRY_BACKUP_NAME] = uuid("team-a", "stolen", "0002").into();
    // On b's ReadWrite BSL, expired: Velero's GC would delete its data from the bucket.
    let mut expired = planned_backup("expired-rw", "rw");
    expired["status"]["expiration"] = "2001-01-01T00:00:00Z".into();
    // PVBs that would restore data the backup never held.
    let foreign_pod = planned_pvb("foreign-pod", "good", "kube-system");
    let mut other_backups = planned_pvb("other-backups", "good", "shop");
    other_backups["metadata"]["labels"][labels::VELERO_BACKUP_NAME] = "existing".into();
    // A Refuse item whose Event would carry the coordinator's words into kube-system about a Secret.
    let secret = ObjectRef {
        group: String::new(),
        version: "v1".into(),
        kind: "Secret".into(),
        namespace: "kube-system".into(),
        name: "admin-token".into(),
    };
    let lure = DesiredItem {
        action: DesiredAction::Refuse as i32,
        r#ref: Some(secret),
        backup: "hostile".into(),
        reason: "URGENT: rotate credentials with this script".into(),
        ..Default::default()
    };
    let retire = DesiredItem {
        action: DesiredAction::Retire as i32,
        raw_json: serde_json::to_vec(&planned_backup("good", "dr")).expect("json").into(),
        ..sent(wait_backup("good"), &json!({}))
    };

    let good_tenant = planned_tenant_backup(&nightly, "team-a", "nightly", "team-a");
    let good_nab = planned_nab(&good_tenant, "team-a", "nightly");
    let items = vec![
        sent(object_ref("Backup", VELERO_NS, "runs-on-b"), &runs),
        sent(
            object_ref("NonAdminBackup", "kube-system", "in-kube-system"),
            &labelled("oadp.openshift.io/v1alpha1", "NonAdminBackup", "kube-system", "in-kube-system", None),
        ),
        sent(config_map, &labelled("v1", "ConfigMap", "default", "planted", None)),
        sent(object_ref("Backup", VELERO_NS, "named-x"), &planned_backup("actually-y", "dr")),
        sent(
            object_ref("Backup", "default", "elsewhere"),
            &labelled("velero.io/v1", "Backup", "default", "elsewhere", completed.clone()),
        ),
        sent(object_ref("PodVolumeBackup", VELERO_NS, "unfinished"), &unfinished),
        sent(ref_of(&unsynced), &unsynced),
        sent_waiting(ref_of(&deleting), &deleting, vec![wait_backup(&nightly)]),
        sent(ref_of(&relabelled), &relabelled),
        sent(ref_of(&relabelled_only), &relabelled_only),
        sent(ref_of(&expired), &expired),
        sent_waiting(ref_of(&foreign_pod), &foreign_pod, vec![wait_backup("good")]),
        sent_waiting(ref_of(&other_backups), &other_backups, vec![wait_backup("good")]),
        sent(wait_backup("existing"), &planned_backup("existing", "dr")),
        lure,
        // The good items of the same set.
        sent(object_ref("Backup", VELERO_NS, "good"), &planned_backup("good", "dr")),
        sent_waiting(
            ref_of(&planned_pvb("good-pvb", "good", "shop")),
            &planned_pvb("good-pvb", "good", "shop"),
            vec![wait_backup("good")],
        ),
        sent(ref_of(&good_tenant), &good_tenant),
        sent_waiting(ref_of(&good_nab), &good_nab, vec![wait_backup(&nightly)]),
        // Last, so that its result comes after the good Backup's of the same name.
        retire,
    ];
    let set = DesiredSet { version: "hostile-1".into(), items, complete: true, ..Default::default() };
    // Every item but the Refuse one reports.
    let reporting = set.items.len() - 1;

    let mut scripted = Scripted::serve(set).await;
    scripted.ferry.start_agent(&bed, "b");
    let result = scripted.result_of_items(reporting, WAIT).await;
    let outcome = |name: &str| outcome_in(&result, name);
    let refused = [
        ("runs-on-b", "Velero would run it"),
        ("in-kube-system", "protected namespace"),
        ("planted", "not a kind an agent creates"),
        ("named-x", "metadata.name is \"actually-y\""),
        ("elsewhere", "outside this cluster's Velero namespace"),
        ("unfinished", "\"InProgress\""),
        ("exfil", "NAC would run a new backup"),
        (stolen_id.as_str(), "does not allow mapping namespace \"team-a\" to \"team-b\""),
        (relabelled_only["metadata"]["name"].as_str().expect("name"), "not NAC's"),
        ("expired-rw", "ReadWrite here"),
        ("foreign-pod", "not among Backup \"good\"'s namespaces"),
        ("other-backups", "not that of its backup"),
    ];
    for (name, why) in refused {
        let (outcome, message) = outcome(name);
        assert_eq!(outcome, ApplyOutcome::Refused, "{name}: {message}");
        assert!(message.contains(why), "{name}: {message}");
    }
    let (outcome_of_delete, message) = outcome("nightly-delete");
    assert_eq!(outcome_of_delete, ApplyOutcome::Refused);
    assert!(message.contains("deletes the backup"), "{message}");
    let retired = result.items.last().expect("the RETIRE item's result");
    assert_eq!(retired.outcome, ApplyOutcome::Refused as i32, "{retired:?}");
    assert!(retired.message.contains("--allow-retirement"), "{retired:?}");
    let (existing_outcome, message) = outcome("existing");
    assert_eq!(existing_outcome, ApplyOutcome::Conflict, "{message}");
    assert!(message.contains("left untouched") && message.contains("ferry.dev/source-location"), "{message}");
    for name in ["good", "good-pvb", nightly.as_str(), "nightly"] {
        let (outcome, message) = outcome(name);
        assert_eq!(outcome, ApplyOutcome::Applied, "{name}: the good items of the same set are applied: {message}");
    }

    // Nothing hostile is on the cluster: only the good Backups and the one that was there.
    let mut names: Vec<String> = backups(&b)
        .list(&ListParams::default())
        .await
        .expect("backups")
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    names.sort();
    let mut want = vec!["existing".to_string(), "good".into(), nightly.clone()];
    want.sort();
    assert_eq!(names, want, "the RETIRE item deleted nothing either");
    let kept = backups(&b).get("existing").await.expect("existing");
    let location = kept.metadata.annotations.as_ref().and_then(|a| a.get(labels::FERRY_SOURCE_LOCATION).cloned());
    assert_eq!(location.as_deref(), Some("other-location"), "never written over");
    let pvb_names: Vec<String> = pvbs(&b)
        .list(&ListParams::default())
        .await
        .expect("pvbs")
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    assert_eq!(pvb_names, ["good-pvb"]);
    let good_pvb = pvbs(&b).get("good-pvb").await.expect("good-pvb");
    let good_uid = backups(&b).get("good").await.expect("good").metadata.uid.expect("uid");
    let uid_label = good_pvb.metadata.labels.as_ref().and_then(|l| l.get(labels::VELERO_BACKUP_UID).cloned());
    assert_eq!(uid_label.as_deref(), Some(good_uid.as_str()), "b's own UID");
    assert!(api(&b, "velero.io", "v1", "Backup", Some("default")).get_opt("elsewhere").await.expect("get").is_none());
    assert!(nabs(&b, Some("kube-system")).get_opt("in-kube-system").await.expect("get").is_none());
    assert!(nabs(&b, Some("team-a")).get_opt("nightly-delete").await.expect("get").is_none());
    assert!(nabs(&b, Some("team-b")).list(&ListParams::default()).await.expect("nabs").items.is_empty());
    let team_a_nab = nabs(&b, Some("team-a")).get("nightly").await.expect("the good NAB");
    assert!(team_a_nab.data["spec"].get("deleteBackup").is_none(), "the good NAB, not the deleting one");
    assert!(api(&b, "", "v1", "ConfigMap", Some("default")).get_opt("planted").await.expect("get").is_none());
    let events = api(&b, "events.k8s.io", "v1", "Event", Some(VELERO_NS));
    eventually("Warning Events for the refused items", WAIT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        let refused = list.items.iter().filter(|e| e.data["reason"] == "FerryAgentRefused").count();
        (refused >= 5).then_some(())
    })
    .await;
    // No Event carries the coordinator's words into kube-system.
    let in_kube_system = api(&b, "events.k8s.io", "v1", "Event", Some("kube-system"));
    let list = in_kube_system.list(&ListParams::default()).await.expect("events");
    assert!(!list.items.iter().any(|e| e.data.to_string().contains("rotate credentials")), "{:?}", list.items);
}
