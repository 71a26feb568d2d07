//! End to end on the real test bed: two kube-apiservers with Velero's upstream CRDs and the
//! NonAdminBackup CRD, a real MinIO, `ferry coordinator` and one `ferry agent` per cluster (each agent with a
//! client certificate bound to deploy/'s least-privilege ClusterRole), everything checked through the API
//! with kube-rs. The bucket is written the way Velero lays it out (ferry's fixture writer).
//!
//! Scenarios run in order on one bed (each builds on what the previous left): DR of a NAC backup, mapping and
//! `ferry restore`, namespaces before and after start, a backup Velero already synced, refusals and conflicts,
//! kill -9 and restart, a bucket outage; then the namespace-to-NAB latency with 1k backups in the bucket.

#[path = "e2e_support/mod.rs"]
mod e2e;

use std::time::{Duration, Instant};

use e2e::*;
use ferry::fixture::{self, FixtureSpec};
use ferry::model::{BackupPhase, labels};
use kube::api::ListParams;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

fn label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.pointer("/metadata/labels").and_then(|l| l.get(key)).and_then(Value::as_str)
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.pointer("/metadata/annotations").and_then(|l| l.get(key)).and_then(Value::as_str)
}

async fn get(api: &kube::Api<kube::api::DynamicObject>, name: &str) -> Option<Value> {
    api.get_opt(name).await.expect("get").map(|o| to_value(&o))
}

async fn pvbs_of(client: &kube::Client, backup: &str) -> Vec<Value> {
    let selector = format!("{}={}", labels::VELERO_BACKUP_NAME, ferry::model::names::velero_label_value(backup));
    let list = pvbs(client).list(&ListParams::default().labels(&selector)).await.expect("list PVBs");
    list.items.iter().map(to_value).collect()
}

async fn nabs_synced_from(client: &kube::Client, nacuuid: &str) -> Vec<Value> {
    let selector = format!("{}={nacuuid}", labels::NAB_SYNCED_FROM_NACUUID);
    let list = nabs(client, None).list(&ListParams::default().labels(&selector)).await.expect("list NABs");
    list.items.iter().map(to_value).collect()
}

/// `ferry describe backup NAME -o OUTPUT` as operator.
fn describe_backup(ferry: &Ferry, name: &str, output: &str) -> String {
    let pki = ferry.dir.path().join("pki");
    let out = std::process::Command::new(FERRY)
        .args(["describe", "backup", name, "-o", output, "--coordinator", &format!("https://{}", ferry.addr)])
        .args(["--tls-server-name", "localhost"])
        .arg("--tls-ca")
        .arg(pki.join("ca.pem"))
        .arg("--tls-cert")
        .arg(pki.join("operator-admin.pem"))
        .arg("--tls-key")
        .arg(pki.join("operator-admin-key.pem"))
        .output()
        .expect("ferry describe backup");
    assert!(out.status.success(), "ferry describe backup: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_end_to_end() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let bed = TestBed::up();
    let a = bed.admin("a").await;
    let b = bed.admin("b").await;

    // Cluster B reads the shared bucket through its BSL `dr-bsl`; cluster A is the source (no BSL needed).
    create_bsl(&bed, &b, "dr-bsl").await;
    for ns in ["team-a", "team-x"] {
        create_namespace(&a, ns).await;
    }
    // team-a exists on B before ferry starts (scenario 3, "before"); team-x exists too, to prove that a mapped
    // NAB does not land there.
    for ns in ["team-a", "team-x", "team-c", "team-y-dr"] {
        create_namespace(&b, ns).await;
    }

    let (dr, dr_backup, dr_pvbs) = nac_backup("team-a", "nightly", "95d9a714-3e7e-4d0b-a93f-337765bf80e0");
    let (mapped, mapped_backup, mapped_pvbs) = nac_backup("team-x", "nightly", "1483357a-89a1-436b-8e7a-8a577c1b49f4");
    let (conflicting, conflicting_backup, _) = nac_backup("team-c", "weekly", "cd035028-953a-490a-ac44-319f78ca13cb");
    let (absent, absent_backup, _) = nac_backup("team-z", "nightly", "6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f");
    // Tampered ownership: NAC marks for team-a, but the backup holds team-b.
    let (tampered, mut tampered_backup, _) = nac_backup("team-a", "stolen", "0b7c1e2a-5d4f-4e3a-9c8b-7a6f5e4d3c2b");
    tampered_backup["spec"]["includedNamespaces"] = json!(["team-b"]);
    // An admin backup whose Backup CR Velero's own sync already created on B (without its PVBs).
    let synced = "synced-by-velero";
    let synced_backup = fixture::admin_backup_json(synced, BackupPhase::Completed, "default");
    let synced_uid = synced_backup["metadata"]["uid"].as_str().unwrap_or_default().to_string();
    let synced_pvbs: Vec<Value> =
        (0..2).map(|i| fixture::pod_volume_backup_json(synced, &synced_uid, "shop", i)).collect();

    put_backup(&bed, &dr, &dr_backup, &dr_pvbs).await;
    put_backup(&bed, &mapped, &mapped_backup, &mapped_pvbs).await;
    put_backup(&bed, &conflicting, &conflicting_backup, &[]).await;
    put_backup(&bed, &absent, &absent_backup, &[]).await;
    put_backup(&bed, &tampered, &tampered_backup, &[]).await;
    put_backup(&bed, synced, &synced_backup, &synced_pvbs).await;

    let mut velero_synced = synced_backup.clone();
    for field in ["uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"] {
        velero_synced["metadata"].as_object_mut().expect("metadata").remove(field);
    }
    velero_synced["metadata"]["namespace"] = json!(VELERO_NS);
    velero_synced["metadata"]["labels"] = json!({labels::VELERO_STORAGE_LOCATION: "dr-bsl"});
    velero_synced["spec"]["storageLocation"] = json!("dr-bsl");
    let velero_made = to_value(&create(&backups(&b), velero_synced).await);

    // A mapped tenant backup (team-y → team-y-dr) that B's own Velero sync copied first, as it copies every
    // backup: with the bucket's unmapped origin namespace team-y, which NAC refuses for a NAB in team-y-dr.
    let (raced, raced_backup, _) = nac_backup("team-y", "nightly", "7d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6");
    put_backup(&bed, &raced, &raced_backup, &[]).await;
    let mut velero_raced = raced_backup.clone();
    for field in ["uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"] {
        velero_raced["metadata"].as_object_mut().expect("metadata").remove(field);
    }
    velero_raced["metadata"]["namespace"] = json!(VELERO_NS);
    velero_raced["metadata"]["labels"][labels::VELERO_STORAGE_LOCATION] = json!("dr-bsl");
    velero_raced["spec"]["storageLocation"] = json!("dr-bsl");
    create(&backups(&b), velero_raced).await;

    // The unrelated user NAB that holds the name ferry would use in team-c.
    let user_nab = to_value(
        &create(
            &nabs(&b, Some("team-c")),
            json!({"apiVersion": "oadp.openshift.io/v1alpha1", "kind": "NonAdminBackup",
                   "metadata": {"name": "weekly", "namespace": "team-c"},
                   "spec": {"backupSpec": {"includedNamespaces": ["team-c"]}}}),
        )
        .await,
    );

    let mut ferry =
        Ferry::start(&bed, "  - from: a\n    to: b\n    namespaces: {team-x: team-x-dr, team-y: team-y-dr}\n");
    // b allows the config's mappings itself: an agent accepts only the identity otherwise.
    ferry.agent_args = vec!["--allow-namespace-mapping".into(), "team-x=team-x-dr,team-y=team-y-dr".into()];
    ferry.start_agent(&bed, "a");
    ferry.start_agent(&bed, "b");

    // --- 1. DR of a NAC backup into the same-named namespace -------------------------------------------------
    let backup_b = eventually("Backup CR on B", WAIT, || async { get(&backups(&b), &dr).await }).await;
    assert_eq!(backup_b["spec"]["storageLocation"], "dr-bsl", "bound to B's BSL");
    assert_eq!(label(&backup_b, labels::VELERO_STORAGE_LOCATION), Some("dr-bsl"));
    assert_eq!(label(&backup_b, labels::FERRY_MANAGED_BY), Some("ferry"));
    assert_eq!(backup_b["status"]["phase"], "Completed");
    let b_uid = backup_b["metadata"]["uid"].as_str().expect("uid").to_string();
    assert_ne!(Some(b_uid.as_str()), dr_backup["metadata"]["uid"].as_str(), "B's own UID");
    let pvbs_b = eventually("PVBs on B", WAIT, || async {
        let found = pvbs_of(&b, &dr).await;
        (found.len() == 2).then_some(found)
    })
    .await;
    for pvb in &pvbs_b {
        assert_eq!(pvb["metadata"]["ownerReferences"][0]["uid"], b_uid.as_str(), "owner is B's Backup");
        assert_eq!(label(pvb, labels::VELERO_BACKUP_UID), Some(b_uid.as_str()));
        assert_eq!(pvb["spec"]["backupStorageLocation"], "dr-bsl");
    }
    let nab = eventually("NAB in team-a", WAIT, || async { get(&nabs(&b, Some("team-a")), "nightly").await }).await;
    assert_eq!(label(&nab, labels::NAB_SYNCED_FROM_NACUUID), Some(dr.as_str()));
    assert_eq!(label(&nab, labels::FERRY_MANAGED_BY), Some("ferry"));
    assert_eq!(nab["spec"]["backupSpec"]["includedNamespaces"], json!(["team-a"]));
    let created_events = api(&b, "events.k8s.io", "v1", "Event", Some("team-a"));
    eventually("an Event on the created NAB", WAIT, || async {
        let events = created_events.list(&ListParams::default()).await.ok()?;
        events
            .items
            .iter()
            .any(|e| e.data["reason"] == "FerryCreated" && e.data["regarding"]["name"] == "nightly")
            .then_some(())
    })
    .await;

    // --- 2. Mapping team-x → team-x-dr; 3. the namespace appears after start --------------------------------
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(get(&backups(&b), &mapped).await.is_none(), "no Backup CR before its NAB's namespace exists (GC coupling)");
    assert!(nabs_synced_from(&b, &mapped).await.is_empty());
    create_namespace(&b, "team-x-dr").await;
    let mapped_nab =
        eventually("NAB in team-x-dr", WAIT, || async { get(&nabs(&b, Some("team-x-dr")), "nightly").await }).await;
    assert_eq!(label(&mapped_nab, labels::NAB_SYNCED_FROM_NACUUID), Some(mapped.as_str()));
    assert!(annotation(&mapped_nab, labels::FERRY_RESTORE_HINT).is_some(), "mapped NABs say how to restore");
    assert!(get(&nabs(&b, Some("team-x")), "nightly").await.is_none(), "never in the source-named namespace");
    assert_eq!(nabs_synced_from(&b, &mapped).await.len(), 1);
    let mapped_b = get(&backups(&b), &mapped).await.expect("Backup CR with its NAB");
    assert_eq!(annotation(&mapped_b, labels::NAB_ORIGIN_NAMESPACE), Some("team-x-dr"), "NAC accepts it");
    assert_eq!(annotation(&mapped_b, labels::FERRY_SOURCE_NAMESPACE), Some("team-x"));
    let mapped_pvbs_b = eventually("mapped PVBs", WAIT, || async {
        let found = pvbs_of(&b, &mapped).await;
        (found.len() == 2).then_some(found)
    })
    .await;
    for pvb in &mapped_pvbs_b {
        assert_eq!(pvb["spec"]["pod"]["namespace"], "team-x", "Velero's restore matches PVBs by source namespace");
    }
    let mapped_events = api(&b, "events.k8s.io", "v1", "Event", Some("team-x-dr"));
    eventually("an Event saying the NAB is mapped", WAIT, || async {
        let events = mapped_events.list(&ListParams::default()).await.ok()?;
        events.items.iter().any(|e| e.data["reason"] == "FerryNamespaceMapped").then_some(())
    })
    .await;

    // `ferry describe backup` shows the mapped backup everywhere: its PVBs from the bucket, and on B the
    // Backup CR ferry made, its PVBs and the NAB in team-x-dr (once B's agent has published them).
    let mapped_uid = mapped_b["metadata"]["uid"].as_str().expect("uid").to_string();
    let described = eventually("describe shows the mapped backup on B", WAIT, || async {
        let json: Value = serde_json::from_str(&describe_backup(&ferry, &mapped, "json")).expect("describe JSON");
        let on_b = json["clusters"].as_array()?.iter().find(|c| c["cluster"] == "b")?.clone();
        let complete = on_b["backups"].as_array()?.len() == 1
            && on_b["podVolumeBackups"].as_array()?.len() == 2
            && on_b["nonAdminBackups"].as_array()?.len() == 1;
        complete.then_some((json, on_b))
    })
    .await;
    let (json, on_b) = described;
    let mut listed: Vec<&str> =
        json["podVolumeBackups"].as_array().expect("PVBs").iter().map(|p| p["name"].as_str().unwrap()).collect();
    let mut written: Vec<&str> = mapped_pvbs.iter().map(|p| p["metadata"]["name"].as_str().unwrap()).collect();
    listed.sort();
    written.sort();
    assert_eq!(listed, written, "the PVB file's entries");
    assert!(json["podVolumeBackups"].as_array().unwrap().iter().all(|p| p["podNamespace"] == "team-x"));
    assert_eq!(json["backup"]["owner"]["kind"], "tenant");
    assert_eq!(json["backup"]["owner"]["originNamespace"], "team-x");
    assert_eq!(json["backup"]["sourceCluster"], "a");
    let cr = &on_b["backups"][0];
    assert_eq!((cr["name"].as_str(), cr["uid"].as_str()), (Some(mapped.as_str()), Some(mapped_uid.as_str())));
    assert_eq!(cr["storageLocation"], "dr-bsl");
    assert_eq!(cr["managedByFerry"], true, "ferry's label");
    for pvb in on_b["podVolumeBackups"].as_array().unwrap() {
        assert_eq!(pvb["backupLabel"], mapped.as_str());
        assert_eq!(pvb["backupUidLabel"], mapped_uid.as_str());
        assert_eq!(pvb["managedByFerry"], true);
    }
    let nab = &on_b["nonAdminBackups"][0];
    assert_eq!((nab["namespace"].as_str(), nab["name"].as_str()), (Some("team-x-dr"), Some("nightly")));
    assert_eq!(nab["nacuuid"], mapped.as_str());
    assert_eq!(nab["managedByFerry"], true);
    let table = describe_backup(&ferry, &mapped, "table");
    for header in ["BACKUP\n", "\nPODVOLUMEBACKUPS (2)\n", "\nCLUSTER b (connected, desired set "] {
        assert!(table.contains(header), "{header:?} in {table}");
    }

    let restore = std::process::Command::new(FERRY)
        .args(["restore", &mapped, "--cluster", "b", "--name", "mapped-restore", "--config"])
        .arg(ferry.config_path())
        .output()
        .expect("ferry restore");
    assert!(restore.status.success(), "ferry restore: {}", String::from_utf8_lossy(&restore.stderr));
    let restore_obj = get(&api(&b, "velero.io", "v1", "Restore", Some(VELERO_NS)), "mapped-restore")
        .await
        .expect("the Restore exists");
    assert_eq!(restore_obj["spec"]["namespaceMapping"], json!({"team-x": "team-x-dr"}));
    assert_eq!(restore_obj["spec"]["backupName"], mapped.as_str());
    let identity = std::process::Command::new(FERRY)
        .args(["restore", &dr, "--cluster", "b", "--config"])
        .arg(ferry.config_path())
        .output()
        .expect("ferry restore");
    assert!(identity.status.success());
    let said = String::from_utf8_lossy(&identity.stdout);
    // The bed's OADP has NonAdminBackups but no NonAdminRestore CRD: only an admin's Velero restore works there.
    assert!(said.contains(&format!("velero restore create --from-backup {dr} -n {VELERO_NS}")), "{said}");
    assert!(said.contains("serves no NonAdminRestores") && said.contains("no Restore created"), "{said}");

    // `--wait` follows the Restore until a terminal phase. No Velero server runs on the bed, so the test writes
    // the progress and phase as Velero would (Velero's Restore CRD has no status subresource).
    let mut waiting = std::process::Command::new(FERRY)
        .args([
            "restore",
            &mapped,
            "--cluster",
            "b",
            "--name",
            "waited-restore",
            "--wait",
            "--timeout",
            "60s",
            "--config",
        ])
        .arg(ferry.config_path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("ferry restore --wait");
    let restores = api(&b, "velero.io", "v1", "Restore", Some(VELERO_NS));
    eventually("the waited Restore exists", WAIT, || async { get(&restores, "waited-restore").await }).await;
    let patch = |status: Value| kube::api::Patch::Merge(json!({"status": status}));
    let params = kube::api::PatchParams::default();
    restores
        .patch(
            "waited-restore",
            &params,
            &patch(json!({"phase": "InProgress", "progress": {"itemsRestored": 3, "totalItems": 9}})),
        )
        .await
        .expect("progress");
    tokio::time::sleep(Duration::from_secs(3)).await;
    restores
        .patch(
            "waited-restore",
            &params,
            &patch(json!({"phase": "Completed", "progress": {"itemsRestored": 9, "totalItems": 9}})),
        )
        .await
        .expect("completed");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = waiting.try_wait().expect("wait") {
            break status;
        }
        assert!(started.elapsed() < WAIT, "ferry restore --wait did not end");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut printed = String::new();
    std::io::Read::read_to_string(&mut waiting.stdout.take().expect("stdout"), &mut printed).expect("read");
    assert!(status.success(), "{printed}");
    assert!(printed.contains("phase InProgress  items 3/9"), "{printed}");
    assert!(printed.contains("phase Completed  items 9/9"), "{printed}");

    // Idempotent: a plain `ferry restore` of the same backup reports the newest Restore there and makes none;
    // `--name` of that request's Restore reports it too; `--new` makes another; a name taken by another is refused.
    let ferry_restore = |extra: &[&str]| {
        std::process::Command::new(FERRY)
            .args(["restore", &mapped, "--cluster", "b", "--config"])
            .arg(ferry.config_path())
            .args(extra)
            .output()
            .expect("ferry restore")
    };
    let ferrys_restores = || async {
        let list = restores.list(&kube::api::ListParams::default()).await.expect("list Restores");
        list.items.iter().filter(|r| r.data["spec"]["backupName"] == mapped.as_str()).count()
    };
    assert_eq!(ferrys_restores().await, 2);
    let again = ferry_restore(&[]);
    let said = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{said}");
    assert!(said.contains(&format!("Restore {VELERO_NS}/waited-restore of backup {mapped}")), "the newest: {said}");
    assert!(said.contains("already exists (phase Completed, created ") && said.contains("--new"), "{said}");
    let named = ferry_restore(&["--name", "mapped-restore"]);
    assert!(named.status.success() && String::from_utf8_lossy(&named.stdout).contains("already exists"));
    assert_eq!(ferrys_restores().await, 2, "no Restore made for a request that has one");
    let new = ferry_restore(&["--new"]);
    let said = String::from_utf8_lossy(&new.stdout);
    assert!(new.status.success(), "{said}");
    assert!(said.contains(&format!("Restore {VELERO_NS}/{mapped}-ferry-")) && said.contains(" created: "), "{said}");
    assert_eq!(ferrys_restores().await, 3, "--new made another");
    let foreign = json!({"apiVersion": "velero.io/v1", "kind": "Restore",
                         "metadata": {"name": "someone-elses", "namespace": VELERO_NS},
                         "spec": {"backupName": dr}});
    create(&restores, foreign).await;
    let taken = ferry_restore(&["--name", "someone-elses"]);
    let stderr = String::from_utf8_lossy(&taken.stderr);
    assert!(!taken.status.success(), "a name taken by another Restore is refused");
    assert!(stderr.contains("Restore someone-elses exists and is not ferry's restore of backup"), "{stderr}");
    assert_eq!(ferrys_restores().await, 3);

    // --- 4. A backup Velero already synced (Backup CR, no PVBs) gets its PVBs ---------------------------------
    let synced_pvbs_b = eventually("PVBs of the Velero-synced backup", WAIT, || async {
        let found = pvbs_of(&b, synced).await;
        (found.len() == 2).then_some(found)
    })
    .await;
    let velero_uid = velero_made["metadata"]["uid"].as_str().expect("uid");
    for pvb in &synced_pvbs_b {
        assert_eq!(pvb["metadata"]["ownerReferences"][0]["uid"], velero_uid);
    }
    let still = get(&backups(&b), synced).await.expect("still there");
    assert_eq!(still["metadata"]["resourceVersion"], velero_made["metadata"]["resourceVersion"], "not modified");
    assert_eq!(label(&still, labels::FERRY_MANAGED_BY), None);

    // --- 5. Refusals and conflicts ----------------------------------------------------------------------------
    assert!(get(&backups(&b), &tampered).await.is_none(), "tampered ownership: no Backup CR");
    assert!(nabs_synced_from(&b, &tampered).await.is_empty(), "tampered ownership: no NAB");
    let refused = status_items(&ferry, &tampered);
    assert!(
        refused.iter().any(|i| i["action"] == "refuse" && !i["reason"].as_str().unwrap_or_default().is_empty()),
        "{refused:?}"
    );
    let user_nab_now = get(&nabs(&b, Some("team-c")), "weekly").await.expect("user NAB");
    assert_eq!(user_nab_now["metadata"]["resourceVersion"], user_nab["metadata"]["resourceVersion"], "untouched");
    assert_eq!(label(&user_nab_now, labels::FERRY_MANAGED_BY), None);
    let conflict_items = eventually("conflict reported", WAIT, || async {
        let items = status_items(&ferry, &conflicting);
        items
            .iter()
            .any(|i| i["kind"] == "NonAdminBackup" && (i["outcome"] == "conflict" || i["action"] == "conflict"))
            .then_some(items)
    })
    .await;
    assert!(!conflict_items.is_empty());
    assert!(get(&backups(&b), &absent).await.is_none(), "target namespace absent: no Backup CR either");

    // Velero's unmapped sync of a mapped backup is named as such, with the fix, in status and in an Event.
    let raced_items = eventually("Velero's unmapped sync reported", WAIT, || async {
        let items = status_items(&ferry, &raced);
        items
            .iter()
            .any(|i| i["action"] == "conflict" && i["reason"].as_str().unwrap_or_default().contains("Velero's own"))
            .then_some(items)
    })
    .await;
    let reason = raced_items.iter().find(|i| i["action"] == "conflict").map(|i| i["reason"].to_string());
    assert!(reason.as_deref().unwrap_or_default().contains("--backup-sync-period=0"), "{raced_items:?}");
    let raced_events = api(&b, "events.k8s.io", "v1", "Event", Some("team-y-dr"));
    eventually("a FerryConflict Event in team-y-dr", WAIT, || async {
        let events = raced_events.list(&ListParams::default()).await.ok()?;
        events
            .items
            .iter()
            .any(|e| e.data["reason"] == "FerryConflict" && e.data["note"].to_string().contains("Velero's own"))
            .then_some(())
    })
    .await;
    assert!(nabs_synced_from(&b, &raced).await.is_empty(), "no NAB that NAC would refuse");
    // And in `ferry describe backup`, beside the backup's other items on b.
    let described = describe_backup(&ferry, &raced, "json");
    assert!(described.contains("Velero's own backup sync") && described.contains("backupSyncPeriod"), "{described}");
    // The admin follows the advice: deletes the unmapped CR; ferry re-creates it mapped, and the NAB follows.
    backups(&b).delete(&raced, &Default::default()).await.expect("delete Velero's unmapped Backup");
    let remapped = eventually("the raced backup re-created mapped", WAIT, || async {
        get(&backups(&b), &raced).await.filter(|b| annotation(b, labels::NAB_ORIGIN_NAMESPACE) == Some("team-y-dr"))
    })
    .await;
    assert_eq!(label(&remapped, labels::FERRY_MANAGED_BY), Some("ferry"));
    eventually("the raced backup's NAB in team-y-dr", WAIT, || async {
        get(&nabs(&b, Some("team-y-dr")), "nightly").await
    })
    .await;

    // --- 6. kill -9 the coordinator and B's agent mid-apply; restart; converge without duplicates -----------
    let (late, late_backup, late_pvbs) = nac_backup("team-a", "hourly", "2a3b4c5d-6e7f-4a8b-9c0d-1e2f3a4b5c6d");
    put_backup(&bed, &late, &late_backup, &late_pvbs).await;
    eventually("apply under way", WAIT, || async { get(&backups(&b), &late).await }).await;
    let addr = ferry.addr.clone();
    ferry.kill_coordinator();
    ferry.kill_agent("b");
    ferry.start_coordinator(&bed, Some(&addr));
    ferry.start_agent(&bed, "b");
    eventually("late NAB after restart", WAIT, || async { get(&nabs(&b, Some("team-a")), "hourly").await }).await;
    eventually("late PVBs after restart", WAIT, || async { (pvbs_of(&b, &late).await.len() == 2).then_some(()) }).await;
    for nacuuid in [&dr, &mapped, &late, &raced] {
        assert_eq!(nabs_synced_from(&b, nacuuid).await.len(), 1, "exactly one NAB for {nacuuid}");
    }
    let ours = backups(&b)
        .list(&ListParams::default().labels(&format!("{}=ferry", labels::FERRY_MANAGED_BY)))
        .await
        .expect("list");
    let mut names: Vec<String> = ours.items.iter().filter_map(|o| o.metadata.name.clone()).collect();
    names.sort();
    // The raced backup's CR is ferry's since its admin deleted Velero's unmapped copy.
    let mut expected = vec![dr.clone(), mapped.clone(), late.clone(), raced.clone()];
    expected.sort();
    assert_eq!(names, expected, "ferry's Backups on B, once each{}", logs_hint(&ferry));

    // --- 7. Bucket outage: nothing deleted, status says unhealthy, recovery converges -----------------------
    let before = ours.items.len();
    let minio = MinioProcess::capture(&bed);
    minio.stop();
    let unhealthy = eventually("location unhealthy", Duration::from_secs(90), || async {
        let status = ferry.status(None);
        (status["locations"][0]["healthy"] == false).then_some(status)
    })
    .await;
    assert!(!unhealthy["locations"][0]["message"].as_str().unwrap_or_default().is_empty());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let during = backups(&b)
        .list(&ListParams::default().labels(&format!("{}=ferry", labels::FERRY_MANAGED_BY)))
        .await
        .expect("list");
    assert_eq!(during.items.len(), before, "nothing deleted during the outage");
    assert_eq!(nabs_synced_from(&b, &dr).await.len(), 1);
    minio.start(&bed);
    eventually("location healthy again", Duration::from_secs(90), || async {
        (ferry.status(None)["locations"][0]["healthy"] == true).then_some(())
    })
    .await;
    let (after, after_backup, after_pvbs) =
        nac_backup("team-a", "after-outage", "3b4c5d6e-7f8a-4b9c-8d0e-2f3a4b5c6d7e");
    put_backup(&bed, &after, &after_backup, &after_pvbs).await;
    eventually("a backup written after the outage arrives", WAIT, || async {
        get(&nabs(&b, Some("team-a")), "after-outage").await
    })
    .await;

    // --- 8. Latency: namespace created → NAB present, with 1k backups in the bucket ---------------------------
    let runs = 20;
    let mut tenants: Vec<String> = (0..1000 - runs).map(|i| format!("idle-{i}")).collect();
    tenants.extend((0..runs).map(|i| format!("lat-{i}")));
    let spec = FixtureSpec {
        backups: 1000,
        tenant_namespaces: tenants,
        nac_every: 1,
        pvbs_per_backup: 1,
        tarballs: false,
        resource_lists: false,
        seed: 7,
        ..FixtureSpec::default()
    };
    fixture::write(&bed.store(), &spec, 32).await.expect("1k backups");
    // Wait until the catalog holds them (status counts backups).
    eventually("1k backups in the catalog", Duration::from_secs(120), || async {
        let count = ferry.status(None)["locations"][0]["backups"].as_u64().unwrap_or(0);
        (count >= 1000).then_some(())
    })
    .await;
    let mut latencies = Vec::new();
    for i in 0..runs {
        let ns = format!("lat-{i}");
        let started = Instant::now();
        create_namespace(&b, &ns).await;
        let list = nabs(&b, Some(&ns));
        eventually("NAB in the new namespace", WAIT, || async {
            (!list.list(&ListParams::default()).await.ok()?.items.is_empty()).then_some(())
        })
        .await;
        latencies.push(started.elapsed());
    }
    latencies.sort();
    let p = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    println!(
        "namespace → NAB latency over {runs} runs, 1k backups in the bucket: p50 {} ms, p99 {} ms, max {} ms",
        p(0.5).as_millis(),
        p(0.99).as_millis(),
        latencies[latencies.len() - 1].as_millis()
    );
    assert!(p(0.99) < Duration::from_secs(5), "p99 {:?}", p(0.99));
}
