//! The user's whole journey, end to end with the real Velero server (v1.18.3) on both clusters of the bed:
//!
//! 1. On cluster `a`, a namespace `shop` holds a ConfigMap, Secret, ServiceAccount, Deployment, Service, PVC and a
//!    Pod mounting it. a's Velero backs it up (a Backup CR, as `velero backup create` makes) to MinIO → Completed.
//!    The bed runs no kubelet and so no node-agent: the test writes the PodVolumeBackup file a node-agent would
//!    have left (Velero's own shape) and has a's Velero initialize the namespace's kopia repository (a
//!    BackupRepository), which a file-system backup would have done. (On a ReadOnly location Velero refuses to
//!    create a repository, and without one it never creates a PodVolumeRestore.)
//! 2. ferry's coordinator and both agents (deploy/'s least-privilege RBAC) materialize the Backup and its PVB on `b`,
//!    whose BSL is ReadOnly with Velero's own sync off.
//! 3. `ferry restore shop-1 --cluster b` — twice at once — makes exactly one Restore with the mapping shop → shop-dr;
//!    b's Velero executes it. `--wait` follows that Restore rather than making another, and a later call reports it.
//! 4. Every object is in shop-dr with a's data, nothing in shop, and a PodVolumeRestore carries the PVB's snapshot
//!    ID. No node-agent runs, so Velero ends `PartiallyFailed` after `--fs-backup-timeout`, naming only that.
//!
//! Velero's controller-runtime metrics listener is fixed at `:8080`, so a's Velero is stopped before b's starts:
//! the journey needs a's only for the backup.

#[path = "e2e_support/mod.rs"]
mod e2e;

use std::process::{Command, Output};
use std::time::Duration;

use e2e::velero::VeleroServer;
use e2e::*;
use ferry::model::labels;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use object_store::ObjectStoreExt;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(120);
const SNAPSHOT_ID: &str = "9f3c1e7a5b2d48f6a0c4e8b1d7f2a6c3";
const BACKUP: &str = "shop-1";

fn ferry_restore(ferry: &Ferry, extra: &[&str]) -> Output {
    Command::new(FERRY)
        .args(["restore", BACKUP, "--cluster", "b", "--config"])
        .arg(ferry.config_path())
        .args(extra)
        .output()
        .expect("ferry restore")
}

fn text(out: &Output) -> String {
    format!("stdout:\n{}\nstderr:\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

async fn get(api: &Api<DynamicObject>, name: &str) -> Option<Value> {
    api.get_opt(name).await.ok().flatten().map(|o| to_value(&o))
}

/// The namespace `shop` on `a`, with one object of each kind a workload has.
async fn create_shop(a: &kube::Client) {
    create_namespace(a, "shop").await;
    let pod_spec = json!({
        "serviceAccountName": "shop-sa",
        "containers": [{"name": "web", "image": "nginx:1.27", "envFrom": [{"configMapRef": {"name": "shop-config"}}],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]});
    let objects = [
        ("", "ServiceAccount", json!({"metadata": {"name": "shop-sa"}})),
        ("", "ConfigMap", json!({"metadata": {"name": "shop-config"}, "data": {"greeting": "hello-from-a"}})),
        ("", "Secret", json!({"metadata": {"name": "shop-secret"}, "stringData": {"password": "s3cret-from-a"}})),
        (
            "",
            "PersistentVolumeClaim",
            json!({"metadata": {"name": "data"},
                   "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        ),
        (
            "",
            "Service",
            json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}),
        ),
        (
            "apps",
            "Deployment",
            json!({"metadata": {"name": "web"},
                   "spec": {"selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec.clone()}}}),
        ),
        ("", "Pod", json!({"metadata": {"name": "web-0", "labels": {"app": "web"}}, "spec": pod_spec})),
    ];
    for (group, kind, mut object) in objects {
        object["apiVersion"] = if group.is_empty() { "v1".into() } else { format!("{group}/v1") }.into();
        object["kind"] = kind.into();
        object["metadata"]["namespace"] = "shop".into();
        create(&api(a, group, "v1", kind, Some("shop")), object).await;
    }
}

/// b's BSL on the bed's bucket: ReadOnly, and Velero's own sync off (it would race ferry: docs/operations.md §3).
async fn create_reader_bsl(bed: &TestBed, client: &kube::Client, name: &str) {
    create_bsl(bed, client, name).await;
    let bsls = api(client, "velero.io", "v1", "BackupStorageLocation", Some(VELERO_NS));
    let no_sync = json!({"spec": {"backupSyncPeriod": "0s"}});
    bsls.patch(name, &PatchParams::default(), &Patch::Merge(&no_sync)).await.expect("turn b's sync off");
}

async fn phase(api: &Api<DynamicObject>, name: &str) -> String {
    get(api, name)
        .await
        .and_then(|o| o.pointer("/status/phase").and_then(Value::as_str).map(String::from))
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_velero_took_on_a_restores_with_velero_on_b_into_a_mapped_namespace() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let bed = TestBed::up_with_plain_velero(&["a", "b"]);
    let (a, b) = (bed.admin("a").await, bed.admin("b").await);

    // 1. The workload on a, and a's Velero backing it up.
    create_shop(&a).await;
    create_bsl_with_access_mode(&bed, &a, "default", None).await;
    let velero_a = VeleroServer::start(&bed, "a", &[]);
    let bsls_a = api(&a, "velero.io", "v1", "BackupStorageLocation", Some(VELERO_NS));
    eventually("a's BSL Available", WAIT, || async { (phase(&bsls_a, "default").await == "Available").then_some(()) })
        .await;
    let backups_a = backups(&a);
    create(
        &backups_a,
        json!({"apiVersion": "velero.io/v1", "kind": "Backup", "metadata": {"name": BACKUP, "namespace": VELERO_NS},
               "spec": {"includedNamespaces": ["shop"], "storageLocation": "default", "ttl": "720h0m0s",
                        "snapshotVolumes": false, "defaultVolumesToFsBackup": false}}),
    )
    .await;
    let backup_a = eventually("a's Velero completes the backup", WAIT, || async {
        let backup = get(&backups_a, BACKUP).await?;
        let phase = backup.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default().to_string();
        assert!(
            !matches!(phase.as_str(), "Failed" | "FailedValidation" | "PartiallyFailed"),
            "backup ended {phase}: {backup}\n{}",
            velero_a.log_tail(30)
        );
        (phase == "Completed").then_some(backup)
    })
    .await;
    // The kopia repository of the namespace, as a file-system backup would have initialized it.
    let repos_a = api(&a, "velero.io", "v1", "BackupRepository", Some(VELERO_NS));
    create(
        &repos_a,
        json!({"apiVersion": "velero.io/v1", "kind": "BackupRepository",
               "metadata": {"name": "shop-default-kopia", "namespace": VELERO_NS,
                            "labels": {"velero.io/volume-namespace": "shop", "velero.io/storage-location": "default",
                                       "velero.io/repository-type": "kopia"}},
               "spec": {"volumeNamespace": "shop", "backupStorageLocation": "default", "repositoryType": "kopia",
                        "maintenanceFrequency": "1h0m0s"}}),
    )
    .await;
    let repo = eventually("a's kopia repository for shop Ready", WAIT, || async {
        let repo = get(&repos_a, "shop-default-kopia").await?;
        let phase = repo.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default();
        assert_ne!(phase, "NotReady", "{repo}\n{}", velero_a.log_tail(30));
        (phase == "Ready").then_some(repo)
    })
    .await;
    let store = bed.store();
    let kopia_prefix = object_store::path::Path::from(format!("{PREFIX}/kopia/shop/").as_str());
    let listed = store.objects.list_with_delimiter(Some(&kopia_prefix)).await.expect("list the kopia repository");
    assert!(!listed.objects.is_empty(), "a's Velero wrote the repository under {kopia_prefix}");
    // The PVB file a node-agent's backup would have left: Velero's shape (from an informer: no apiVersion/kind).
    let pod = get(&api(&a, "", "v1", "Pod", Some("shop")), "web-0").await.expect("the Pod");
    let pvc = get(&api(&a, "", "v1", "PersistentVolumeClaim", Some("shop")), "data").await.expect("the PVC");
    let uid = |o: &Value| o["metadata"]["uid"].as_str().unwrap_or_default().to_string();
    let backup_uid = uid(&backup_a);
    // What a node-agent's PVB carries (the repository's identifier; empty where Velero set none, as for kopia).
    let repo_identifier = repo["spec"]["resticIdentifier"].as_str().unwrap_or_default();
    eprintln!("a's BackupRepository: {repo}");
    let pvb = json!({
        "metadata": {"name": "shop-1-7xk2p", "generateName": "shop-1-", "namespace": VELERO_NS,
                     "uid": "0d6f3c2e-8a41-4f7b-9c55-3e2a1b0c9d8e",
                     "labels": {"velero.io/backup-name": BACKUP, "velero.io/backup-uid": backup_uid,
                                "velero.io/pvc-uid": uid(&pvc)},
                     "annotations": {"velero.io/pvc-name": "data"},
                     "ownerReferences": [{"apiVersion": "velero.io/v1", "kind": "Backup", "name": BACKUP,
                                          "uid": backup_uid, "controller": true}]},
        "spec": {"node": "node-1", "pod": {"kind": "Pod", "namespace": "shop", "name": "web-0", "uid": uid(&pod)},
                 "volume": "data", "backupStorageLocation": "default",
                 "repoIdentifier": repo_identifier, "uploaderType": "kopia",
                 "tags": {"backup": BACKUP, "backup-uid": backup_uid, "ns": "shop", "pod": "web-0",
                          "pod-uid": uid(&pod), "pvc-uid": uid(&pvc), "volume": "data"}},
        "status": {"phase": "Completed", "path": format!("/host_pods/{}/volumes/kubernetes.io~csi/pvc-data/mount", uid(&pod)),
                   "snapshotID": SNAPSHOT_ID, "startTimestamp": backup_a["status"]["startTimestamp"],
                   "completionTimestamp": backup_a["status"]["completionTimestamp"],
                   "progress": {"totalBytes": 1048576, "bytesDone": 1048576}}
    });
    let key =
        object_store::path::Path::from(format!("{PREFIX}/backups/{BACKUP}/{BACKUP}-podvolumebackups.json.gz").as_str());
    store.objects.put(&key, gzip_json(&json!([pvb])).into()).await.expect("write the PVB file");
    velero_a.stop();

    // 2. b: a ReadOnly BSL without Velero's sync, the tenant namespace the operator made, and what Velero's pod
    //    volume restore looks up (its Deployment and the node-agent DaemonSet, which never run here).
    create_reader_bsl(&bed, &b, "dr").await;
    create_namespace(&b, "shop-dr").await;
    let pod_template = |name: &str| {
        json!({"selector": {"matchLabels": {"name": name}},
               "template": {"metadata": {"labels": {"name": name}},
                            "spec": {"containers": [{"name": name, "image": "velero/velero:v1.18.3"}]}}})
    };
    create(
        &api(&b, "apps", "v1", "Deployment", Some(VELERO_NS)),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "velero", "namespace": VELERO_NS},
               "spec": pod_template("velero")}),
    )
    .await;
    create(
        &api(&b, "apps", "v1", "DaemonSet", Some(VELERO_NS)),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "node-agent", "namespace": VELERO_NS},
               "spec": pod_template("node-agent")}),
    )
    .await;
    let mut ferry = Ferry::start(&bed, "  - {from: a, to: b, namespaces: {shop: shop-dr}}");
    ferry.start_agent(&bed, "a");
    ferry.start_agent(&bed, "b");
    let backup_b = eventually("ferry's Backup on b", WAIT, || async { get(&backups(&b), BACKUP).await }).await;
    assert_eq!(backup_b["spec"]["storageLocation"], "dr", "bound to b's own BSL");
    assert_eq!(backup_b["metadata"]["labels"][labels::FERRY_MANAGED_BY], labels::FERRY_MANAGED_BY_VALUE);
    let pvb_b = poll(WAIT, || async {
        let list = pvbs(&b).list(&ListParams::default()).await.ok()?;
        list.items.first().map(to_value)
    })
    .await
    .unwrap_or_else(|| {
        let status = ferry.status(Some("b"));
        panic!("no PVB on b after {WAIT:?}; status: {status}{}", logs_hint(&ferry))
    });
    assert_eq!(pvb_b["status"]["snapshotID"], SNAPSHOT_ID);
    assert_eq!(pvb_b["metadata"]["labels"]["velero.io/backup-uid"], uid(&backup_b), "b's Backup's UID");
    let velero_b = VeleroServer::start(&bed, "b", &["--fs-backup-timeout", "20s"]);
    let bsls_b = api(&b, "velero.io", "v1", "BackupStorageLocation", Some(VELERO_NS));
    eventually("b's BSL Available", WAIT, || async { (phase(&bsls_b, "dr").await == "Available").then_some(()) }).await;

    // 3. Two `ferry restore` at once: one Restore.
    let (first, second) = std::thread::scope(|s| {
        let first = s.spawn(|| ferry_restore(&ferry, &[]));
        let second = s.spawn(|| ferry_restore(&ferry, &[]));
        (first.join().expect("first"), second.join().expect("second"))
    });
    assert!(first.status.success(), "{}", text(&first));
    assert!(second.status.success(), "{}", text(&second));
    let outputs = format!("{}{}", String::from_utf8_lossy(&first.stdout), String::from_utf8_lossy(&second.stdout));
    assert_eq!(
        outputs.matches(" created: backup shop-1 with namespace mapping shop → shop-dr").count(),
        1,
        "{outputs}"
    );
    assert_eq!(outputs.matches("already exists").count(), 1, "{outputs}");
    let restores = api(&b, "velero.io", "v1", "Restore", Some(VELERO_NS));
    let all = restores.list(&ListParams::default()).await.expect("list Restores");
    assert_eq!(
        all.items.len(),
        1,
        "one Restore: {:?}",
        all.items.iter().map(|r| r.metadata.name.clone()).collect::<Vec<_>>()
    );
    let restore_name = all.items[0].metadata.name.clone().expect("a name");
    let restore = to_value(&all.items[0]);
    assert_eq!(restore["spec"]["namespaceMapping"], json!({"shop": "shop-dr"}));
    assert_eq!(restore["spec"]["backupName"], BACKUP);

    // `--wait` follows the Restore there, executed by b's Velero, to its end.
    let waited = ferry_restore(&ferry, &["--wait", "--timeout", "5m"]);
    let waited_text = text(&waited);
    eprintln!("ferry restore --wait said:\n{waited_text}");
    assert!(waited_text.contains(&format!("Restore velero/{restore_name} of backup shop-1")), "{waited_text}");
    assert!(waited_text.contains("already exists") && waited_text.contains("following it"), "{waited_text}");
    let final_phase = phase(&restores, &restore_name).await;
    assert!(
        matches!(final_phase.as_str(), "Completed" | "PartiallyFailed"),
        "{final_phase}: {waited_text}\n{}",
        velero_b.log_tail(40)
    );
    if final_phase == "PartiallyFailed" {
        assert!(!waited.status.success(), "a PartiallyFailed restore is not a success: {waited_text}");
        assert!(waited_text.contains("ended in phase PartiallyFailed"), "{waited_text}");
    }
    // Velero's results in the bucket: the one error is the pod volume restore that no node-agent ran.
    let results_key = format!("{PREFIX}/restores/{restore_name}/restore-{restore_name}-results.gz");
    let results = store.objects.get(&object_store::path::Path::from(results_key.as_str())).await;
    let results = results.unwrap_or_else(|e| panic!("{results_key}: {e}")).bytes().await.expect("read results");
    let mut results_text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&results[..]), &mut results_text).expect("gunzip");
    let results: Value = serde_json::from_str(&results_text).expect("results JSON");
    eprintln!("b's Velero's restore results: {results}");
    let errors: Vec<String> = ["velero", "cluster"]
        .iter()
        .flat_map(|k| results["errors"][k].as_array().cloned().unwrap_or_default())
        .chain(
            results["errors"]["namespaces"]
                .as_object()
                .into_iter()
                .flat_map(|m| m.values())
                .flat_map(|v| v.as_array().cloned().unwrap_or_default()),
        )
        .filter_map(|e| e.as_str().map(String::from))
        .collect();
    let timed_out = |e: &String| e.contains("timed out waiting for all PodVolumeRestores to complete");
    assert!(errors.iter().all(timed_out), "only the pod volume restore, which no node-agent runs, fails: {results}");
    assert_eq!(errors.is_empty(), final_phase == "Completed", "{results}");
    assert_eq!(restores.list(&ListParams::default()).await.expect("list").items.len(), 1, "--wait made no Restore");

    // 4. Everything in shop-dr, with a's data; nothing in shop.
    let ns = Some("shop-dr");
    let restored = |group: &'static str, kind: &'static str, name: &'static str| {
        let api = api(&b, group, "v1", kind, ns);
        async move { get(&api, name).await.unwrap_or_else(|| panic!("{kind} shop-dr/{name} restored")) }
    };
    let config = restored("", "ConfigMap", "shop-config").await;
    assert_eq!(config["data"]["greeting"], "hello-from-a");
    let secret = restored("", "Secret", "shop-secret").await;
    assert_eq!(secret["data"]["password"], "czNjcmV0LWZyb20tYQ==", "s3cret-from-a");
    for (group, kind, name) in [
        ("", "ServiceAccount", "shop-sa"),
        ("apps", "Deployment", "web"),
        ("", "Service", "web"),
        ("", "PersistentVolumeClaim", "data"),
    ] {
        let object = restored(group, kind, name).await;
        assert_eq!(object["metadata"]["labels"]["velero.io/restore-name"], restore_name.as_str(), "{kind}: {object}");
    }
    let pod_b = restored("", "Pod", "web-0").await;
    assert_eq!(pod_b["metadata"]["labels"]["velero.io/restore-name"], restore_name.as_str());
    let init: Vec<&str> =
        pod_b["spec"]["initContainers"].as_array().into_iter().flatten().filter_map(|c| c["name"].as_str()).collect();
    assert!(init.contains(&"restore-wait"), "Velero's pod volume restore added its init container: {init:?}");
    let namespaces = api(&b, "", "v1", "Namespace", None);
    assert!(get(&namespaces, "shop").await.is_none(), "nothing restored into the source namespace on b");
    let selector = format!("velero.io/restore-name={restore_name}");
    for kind in ["ConfigMap", "Secret", "ServiceAccount", "Service", "PersistentVolumeClaim", "Pod"] {
        let everywhere =
            api(&b, "", "v1", kind, None).list(&ListParams::default().labels(&selector)).await.expect("list");
        let outside: Vec<_> =
            everywhere.items.iter().filter(|o| o.metadata.namespace.as_deref() != Some("shop-dr")).collect();
        assert!(outside.is_empty(), "{kind} restored outside shop-dr: {outside:?}");
    }
    let pvrs = api(&b, "velero.io", "v1", "PodVolumeRestore", Some(VELERO_NS));
    let pvr = eventually("a PodVolumeRestore", WAIT, || async {
        let list = pvrs.list(&ListParams::default().labels(&selector)).await.ok()?;
        list.items.first().map(to_value)
    })
    .await;
    assert_eq!(pvr["spec"]["snapshotID"], SNAPSHOT_ID, "{pvr}");
    assert_eq!(pvr["spec"]["pod"]["namespace"], "shop-dr", "{pvr}");
    assert_eq!(pvr["spec"]["pod"]["name"], "web-0", "{pvr}");
    assert_eq!(pvr["spec"]["volume"], "data", "{pvr}");
    assert_eq!(pvr["spec"]["backupStorageLocation"], "dr", "{pvr}");
    assert_eq!(pvr["spec"]["sourceNamespace"], "shop", "{pvr}");

    // A later `ferry restore` reports the finished Restore and makes none.
    let again = ferry_restore(&ferry, &[]);
    let again_text = text(&again);
    assert!(again.status.success(), "{again_text}");
    assert!(again_text.contains(&format!("already exists (phase {final_phase}, created ")), "{again_text}");
    assert!(again_text.contains("--new restores again"), "{again_text}");
    assert_eq!(restores.list(&ListParams::default()).await.expect("list").items.len(), 1, "no second Restore");
    // b's Velero never synced a's bucket itself: the only Backup there is ferry's.
    let on_b = backups(&b).list(&ListParams::default()).await.expect("list");
    assert_eq!(on_b.items.len(), 1);
    let status = ferry.status(Some("b"));
    assert_eq!(status["clusters"][0]["failed"], 0, "{status}");
    drop(velero_b);
}
