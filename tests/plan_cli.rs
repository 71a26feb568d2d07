//! `ferry plan` as a user runs it: the bundled example, output formats, exit codes.

use serde_json::Value;

#[path = "cli_support/mod.rs"]
mod cli_support;

use cli_support::ferry;

fn plan_json() -> Value {
    let out = ferry(&["plan", "--config", "examples/ferry.yaml", "-o", "json", "--now", "2026-11-15T00:00:00Z"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[test]
fn the_example_plans_with_the_documented_shape() {
    let plan = plan_json();
    let clusters = plan["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 1);
    assert_eq!(clusters[0]["cluster"], "cluster-b");
    let items = clusters[0]["items"].as_array().unwrap();
    for item in items {
        for key in ["action", "kind", "namespace", "name", "backup", "reason", "waitsFor", "object"] {
            assert!(item.get(key).is_some(), "item lacks {key}: {item}");
        }
    }
    let count = |action: &str| items.iter().filter(|i| i["action"] == action).count();
    assert!(count("create") > 0 && count("wait") > 0 && count("refuse") == 1 && count("conflict") == 1);
    // The tenant's NABs land only in the mapped namespace.
    for nab in items.iter().filter(|i| i["kind"] == "NonAdminBackup" && i["action"] != "conflict") {
        assert_eq!(nab["namespace"], "team-a-dr", "{nab}");
    }
    // A Backup that Velero already synced (without PVBs) gets its PVBs with the target's UID.
    let repaired: Vec<_> = items.iter().filter(|i| i["backup"] == "hourly-20261101020000").collect();
    assert!(repaired.iter().all(|i| i["kind"] == "PodVolumeBackup" && i["action"] == "create"));
    assert_eq!(repaired[0]["object"]["metadata"]["ownerReferences"][0]["uid"], "0e3a5f7c-91d2-4b8e-a6f4-3c2d1e0f9a8b");
    // The corrupt PVB file costs its PVBs only: the backup is planned, and says why it has none.
    let corrupt: Vec<_> = items.iter().filter(|i| i["backup"] == "corrupt-pvbs").collect();
    assert_eq!(corrupt.len(), 1, "{corrupt:?}");
    assert_eq!((corrupt[0]["action"].as_str(), corrupt[0]["kind"].as_str()), (Some("create"), Some("Backup")));
    assert!(corrupt[0]["reason"].as_str().unwrap().contains("corrupt-pvbs-podvolumebackups.json.gz is unusable"));
    // Two bad objects; the folder without velero-backup.json (half-written) is not one of them: not a backup.
    let errors = plan["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(!errors.iter().any(|e| e["object"].as_str().unwrap().contains("half-written")), "{errors:?}");
    for e in errors {
        assert_eq!(e["location"], "shared");
        assert!(e["object"].as_str().unwrap().starts_with("velero/backups/"));
    }
}

#[test]
fn yaml_and_table_say_the_same() {
    let out = ferry(&["plan", "--config", "examples/ferry.yaml", "-o", "yaml", "--now", "2026-11-15T00:00:00Z"]);
    assert!(out.status.success());
    let yaml: Value = serde_saphyr::from_slice(&out.stdout).expect("YAML");
    assert_eq!(yaml, plan_json());
    let out = ferry(&["plan", "--config", "examples/ferry.yaml"]);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.starts_with("CLUSTER cluster-b: "), "{table}");
    assert!(table.contains("ERRORS: 2 object(s) skipped"), "{table}");
}

#[test]
fn config_and_location_errors_exit_non_zero_with_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let bad_key = dir.path().join("bad.yaml");
    std::fs::write(&bad_key, "locations: []\nclusters: []\nlocatoins: []\n").unwrap();
    let out = ferry(&["plan", "--config", bad_key.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("locatoins"));

    let unreachable = dir.path().join("unreachable.yaml");
    std::fs::write(
        &unreachable,
        "locations:\n  - {name: gone, url: s3://nothing, sourceCluster: a, endpoint: 'http://127.0.0.1:9', region: us-east-1, allowHttp: true}\nclusters: []\n",
    )
    .unwrap();
    let out = ferry(&["plan", "--config", unreachable.to_str().unwrap()]);
    assert!(!out.status.success(), "an unreadable location is an error, never an empty plan");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("location \"gone\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The example's config, reading the example bucket, with cluster B's inventory copied without its
/// NonAdminBackup list (a plain-Velero cluster), and `extra` appended to the cluster's entry.
fn plain_velero_plan(extra: &str) -> Value {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("inventory");
    std::fs::create_dir(&inventory).unwrap();
    for file in ["backups.json", "backupstoragelocations.json", "namespaces.json"] {
        std::fs::copy(root.join("inventories/cluster-b").join(file), inventory.join(file)).unwrap();
    }
    let config = dir.path().join("ferry.yaml");
    std::fs::write(
        &config,
        format!(
            "locations:\n  - {{name: shared, url: 'file://{}', bucket: velero-backups, prefix: velero, sourceCluster: cluster-a}}\n\
             clusters:\n  - name: cluster-b\n    veleroNamespace: openshift-adp\n    inventory: inventory\n    locations: [shared]\n{extra}\
             namespaceMappings:\n  - {{from: cluster-a, to: cluster-b, namespaces: {{team-a: team-a-dr}}}}\n",
            root.join("bucket").display()
        ),
    )
    .unwrap();
    let out = ferry(&["plan", "--config", config.to_str().unwrap(), "-o", "json", "--now", "2026-11-15T00:00:00Z"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[test]
fn an_inventory_without_non_admin_backups_plans_a_plain_velero_target() {
    let plan = plain_velero_plan("");
    let items = plan["clusters"][0]["items"].as_array().unwrap();
    assert!(items.iter().all(|i| i["kind"] != "NonAdminBackup"), "no NABs for a cluster without OADP");
    // Tenant backups still arrive, as Backup CRs (admins restore them with `ferry restore`) with their PVBs.
    let tenant: Vec<&Value> = items
        .iter()
        .filter(|i| i["kind"] == "Backup" && i["action"] == "create")
        .filter(|i| i["object"]["metadata"]["labels"]["openshift.io/oadp-nab-origin-nacuuid"].is_string())
        .collect();
    assert!(!tenant.is_empty(), "{items:?}");
    for backup in &tenant {
        let reason = backup["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("serves no NonAdminBackups") && reason.contains("ferry restore"), "{reason}");
    }
    let tenant_pvbs = items
        .iter()
        .filter(|i| i["kind"] == "PodVolumeBackup" && tenant.iter().any(|b| b["backup"] == i["backup"]))
        .count();
    assert!(tenant_pvbs > 0, "their PVBs come too");

    // The same inventory, said to be an OADP cluster in the config: the tenant NABs are planned again.
    let plan = plain_velero_plan("    oadp: true\n");
    let items = plan["clusters"][0]["items"].as_array().unwrap();
    assert!(items.iter().any(|i| i["kind"] == "NonAdminBackup" && i["namespace"] == "team-a-dr"));
}
