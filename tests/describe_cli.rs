//! `ferry describe backup NAME --config` as a user runs it, offline: a bucket written by `ferry fixture write`,
//! two clusters with recorded inventories (one where the tenant backup is materialized, one where its
//! namespace does not exist yet), JSON, YAML and table output, and an unknown name.

use std::io::Read;
use std::path::Path;

use serde_json::{Value, json};

#[path = "cli_support/mod.rs"]
mod cli_support;

use cli_support::ferry;

const VELERO_NS: &str = "openshift-adp";

fn stdout(out: &std::process::Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).expect("UTF-8")
}

/// The tenant backup of a fresh fixture bucket (team-a's `nightly-0`) and its PVB file's entries.
fn tenant_backup(bucket: &Path) -> (String, Value, Vec<Value>) {
    let out = ferry(&[
        "fixture",
        "write",
        bucket.to_str().unwrap(),
        "--backups",
        "2",
        "--tenants",
        "team-a",
        "--no-tarballs",
        "--no-resource-lists",
    ]);
    stdout(&out);
    let name = std::fs::read_dir(bucket.join("velero/backups"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("team-a-nightly-0-"))
        .expect("a tenant backup");
    let dir = bucket.join("velero/backups").join(&name);
    let metadata: Value = serde_json::from_slice(&std::fs::read(dir.join("velero-backup.json")).unwrap()).unwrap();
    let gz = std::fs::read(dir.join(format!("{name}-podvolumebackups.json.gz"))).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz.as_slice()).read_to_string(&mut text).unwrap();
    let pvbs: Vec<Value> = serde_json::from_str(&text).unwrap();
    (name, metadata, pvbs)
}

fn bsl() -> Value {
    json!({"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": "dr-bsl", "namespace": VELERO_NS},
        "spec": {"provider": "aws", "accessMode": "ReadOnly",
            "objectStorage": {"bucket": "velero-backups", "prefix": "velero"}}})
}

fn write_list(path: &Path, items: Vec<Value>) {
    std::fs::write(path, serde_json::to_vec_pretty(&json!({"kind": "List", "items": items})).unwrap()).unwrap();
}

/// Cluster b as ferry left it: namespace, Backup CR (its own UID), PVBs and a NAB NAC attached to.
fn materialized(name: &str, metadata: &Value, pvbs: &[Value]) -> Vec<Value> {
    let mut backup = metadata.clone();
    backup["kind"] = json!("Backup");
    backup["metadata"]["namespace"] = json!(VELERO_NS);
    backup["metadata"]["uid"] = json!("uid-on-b");
    backup["metadata"]["labels"]["ferry.dev/managed-by"] = json!("ferry");
    backup["metadata"]["annotations"]["openshift.io/oadp-nab-origin-namespace"] = json!("team-a-dr");
    backup["spec"]["storageLocation"] = json!("dr-bsl");
    let mut items = vec![json!({"kind": "Namespace", "metadata": {"name": "team-a-dr"}}), bsl(), backup];
    for pvb in pvbs {
        let mut pvb = pvb.clone();
        pvb["kind"] = json!("PodVolumeBackup");
        pvb["metadata"]["namespace"] = json!(VELERO_NS);
        pvb["metadata"]["labels"]["velero.io/backup-uid"] = json!("uid-on-b");
        pvb["metadata"]["labels"]["ferry.dev/managed-by"] = json!("ferry");
        items.push(pvb);
    }
    items.push(json!({"apiVersion": "oadp.openshift.io/v1alpha1", "kind": "NonAdminBackup",
        "metadata": {"name": "nightly-0", "namespace": "team-a-dr",
            "labels": {"ferry.dev/managed-by": "ferry", "openshift.io/oadp-nab-synced-from-nacuuid": name}},
        "status": {"phase": "Created", "veleroBackup": {"nacuuid": name, "name": name, "namespace": VELERO_NS}}}));
    items
}

fn describe(config: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["describe", "backup"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--config", config.to_str().unwrap(), "--now", "2026-11-15T00:00:00Z"]);
    ferry(&all)
}

#[test]
fn describe_backup_offline_shows_the_bucket_and_every_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let bucket = dir.path().join("bucket");
    let (name, metadata, pvbs) = tenant_backup(&bucket);
    for cluster in ["b", "c"] {
        std::fs::create_dir(dir.path().join(cluster)).unwrap();
    }
    write_list(&dir.path().join("b/objects.json"), materialized(&name, &metadata, &pvbs));
    write_list(
        &dir.path().join("c/objects.json"),
        vec![json!({"kind": "Namespace", "metadata": {"name": "team-a"}}), bsl()],
    );
    let config = dir.path().join("ferry.yaml");
    std::fs::write(
        &config,
        format!(
            "locations:\n  - {{name: shared, url: 'file://{}', bucket: velero-backups, prefix: velero, sourceCluster: a}}\n\
             clusters:\n\
             \x20 - {{name: b, veleroNamespace: {VELERO_NS}, inventory: b, locations: [shared], oadp: true}}\n\
             \x20 - {{name: c, veleroNamespace: {VELERO_NS}, inventory: c, locations: [shared], oadp: true}}\n\
             namespaceMappings:\n\
             \x20 - {{from: a, to: b, namespaces: {{team-a: team-a-dr}}}}\n\
             \x20 - {{from: a, to: c, namespaces: {{team-a: team-a-dr}}}}\n",
            bucket.display()
        ),
    )
    .unwrap();

    let json: Value = serde_json::from_str(&stdout(&describe(&config, &[&name, "-o", "json"]))).expect("JSON");
    assert_eq!(json["name"], name.as_str());
    assert_eq!(json["caller"], Value::Null, "offline: no coordinator saw a caller");
    let backup = &json["backup"];
    assert_eq!(
        backup["locations"],
        json!([{"name": "shared", "sourceCluster": "a",
        "metadataKey": format!("velero/backups/{name}/velero-backup.json")}])
    );
    assert_eq!(backup["sourceCluster"], "a");
    assert_eq!(backup["phase"], "Completed");
    assert_eq!(backup["startTimestamp"], metadata["status"]["startTimestamp"]);
    assert_eq!(backup["completionTimestamp"], metadata["status"]["completionTimestamp"]);
    assert_eq!(backup["expiration"], metadata["status"]["expiration"]);
    assert_eq!(
        backup["owner"],
        json!({"kind": "tenant", "originNamespace": "team-a", "originName": "nightly-0", "nacuuid": name,
            "refusal": null})
    );
    assert_eq!(backup["includedNamespaces"], json!(["team-a"]));
    assert_eq!(backup["storageLocation"], "default");
    assert_eq!(backup["podVolumeBackupsKey"], format!("velero/backups/{name}/{name}-podvolumebackups.json.gz"));
    assert_eq!(backup["podVolumeBackupsError"], Value::Null);
    let listed = json["podVolumeBackups"].as_array().expect("PVBs");
    assert_eq!(listed.len(), 2);
    for (listed, pvb) in listed.iter().zip(&pvbs) {
        assert_eq!(listed["name"], pvb["metadata"]["name"]);
        assert_eq!(listed["podNamespace"], "team-a");
        assert_eq!(listed["podName"], pvb["spec"]["pod"]["name"]);
        assert_eq!(listed["volume"], pvb["spec"]["volume"]);
        assert_eq!(listed["snapshotId"], pvb["status"]["snapshotID"]);
        assert_eq!(listed["totalBytes"], pvb["status"]["progress"]["totalBytes"]);
        assert_eq!(listed["uploaderType"], "kopia");
    }

    let clusters = json["clusters"].as_array().expect("clusters");
    let names: Vec<&str> = clusters.iter().map(|c| c["cluster"].as_str().unwrap()).collect();
    assert_eq!(names, ["b", "c"]);
    let b = &clusters[0];
    assert_eq!(b["state"], "recorded");
    assert_eq!(
        b["backups"],
        json!([{"namespace": VELERO_NS, "name": name, "uid": "uid-on-b", "storageLocation": "dr-bsl",
            "phase": "Completed", "managedByFerry": true}])
    );
    let b_pvbs = b["podVolumeBackups"].as_array().expect("PVBs on b");
    assert_eq!(b_pvbs.len(), 2);
    for pvb in b_pvbs {
        assert_eq!(pvb["backupLabel"], name.as_str());
        assert_eq!(pvb["backupUidLabel"], "uid-on-b");
        assert_eq!(pvb["managedByFerry"], true);
    }
    assert_eq!(
        b["nonAdminBackups"],
        json!([{"namespace": "team-a-dr", "name": "nightly-0", "nacuuid": name, "phase": "Created",
            "veleroBackup": name, "managedByFerry": true}])
    );
    assert_eq!(b["planned"], json!([]), "materialized: nothing left to do");
    let c = &clusters[1];
    assert_eq!((c["backups"].as_array().unwrap().len(), c["nonAdminBackups"].as_array().unwrap().len()), (0, 0));
    let planned = c["planned"].as_array().expect("planned on c");
    assert_eq!(planned.len(), 1, "{planned:?}");
    assert_eq!(planned[0]["action"], "wait");
    assert_eq!(planned[0]["kind"], "NonAdminBackup");
    assert_eq!(planned[0]["namespace"], "team-a-dr");
    assert_eq!(planned[0]["name"], "nightly-0");
    assert_eq!(planned[0]["waitsFor"], json!(["Namespace team-a-dr"]));
    assert_eq!(planned[0]["outcome"], "pending", "offline: no agent reported");

    let yaml = stdout(&describe(&config, &[&name, "-o", "yaml"]));
    assert_eq!(serde_saphyr::from_str::<Value>(&yaml).expect("YAML"), json);

    let table = stdout(&describe(&config, &[&name]));
    assert!(table.starts_with(&format!("BACKUP\n  Name:                 {name}\n")), "{table}");
    assert!(table.contains("  Owner:                tenant team-a/nightly-0 (NACUUID "), "{table}");
    assert!(table.contains("\nPODVOLUMEBACKUPS (2)\n  NAME "), "{table}");
    assert!(table.contains("\nCLUSTER b (recorded, desired set "), "{table}");
    assert!(table.contains("\nCLUSTER c (recorded, desired set "), "{table}");
    let wait_row = table.lines().find(|l| l.trim_start().starts_with("wait ")).expect("c's wait row");
    assert!(wait_row.contains("NonAdminBackup") && wait_row.contains("waits for Namespace team-a-dr"), "{table}");

    let unknown = describe(&config, &["no-such-backup"]);
    assert!(!unknown.status.success());
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(stderr.contains("backup \"no-such-backup\" is in no location's catalog and on no cluster"), "{stderr}");
}

#[test]
fn an_unusable_pvb_file_is_named_with_its_error() {
    let out = ferry(&["describe", "backup", "corrupt-pvbs", "--config", "examples/ferry.yaml", "-o", "json"]);
    let json: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let key = "velero/backups/corrupt-pvbs/corrupt-pvbs-podvolumebackups.json.gz";
    assert_eq!(json["backup"]["podVolumeBackupsKey"], key);
    assert_eq!(json["backup"]["podVolumeBackupsError"], "not valid gzip: incomplete deflate stream");
    assert_eq!(json["podVolumeBackups"], json!([]));
    assert_eq!(json["bucketErrors"], json!([{"object": key, "error": "not valid gzip: incomplete deflate stream"}]));
    let planned = &json["clusters"][0]["planned"];
    assert_eq!(planned[0]["action"], "create", "the backup still arrives, without PVBs");
    assert!(planned[0]["reason"].as_str().unwrap_or_default().contains("is unusable"), "{planned}");
}
