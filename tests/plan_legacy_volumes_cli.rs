//! `ferry plan --backup` of a backup from before Velero stored PVB files, as a user runs it against a bucket the
//! fixture writer made (`ferry fixture write --legacy-volumes`): its Pods' `snapshot.velero.io/<volume>`
//! annotations are shown as legacy volume backups, in the table and under `legacyVolumeBackups`.

use std::path::Path;

use serde_json::{Value, json};

#[path = "cli_support/mod.rs"]
mod cli_support;

use cli_support::ferry;

const LEGACY: &str = "legacy-restic";
/// The one regular backup `--backups 1` writes (it has a PVB file).
const REGULAR: &str = "hourly-20261101020000";

fn stdout(out: &std::process::Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// A fixture bucket with one regular and the legacy backup (3 volumes), and a config over it with `extra`.
fn legacy_bucket(dir: &Path, extra: &str) -> String {
    let bucket = dir.join("bucket");
    let args = ["fixture", "write", bucket.to_str().unwrap(), "--backups", "1", "--pvbs", "3", "--legacy-volumes"];
    stdout(&ferry(&args));
    let backup_dir = bucket.join("velero/backups").join(LEGACY);
    assert!(backup_dir.join(format!("{LEGACY}.tar.gz")).exists());
    assert!(!backup_dir.join(format!("{LEGACY}-podvolumebackups.json.gz")).exists(), "a legacy backup has no PVB file");
    let config = dir.join("ferry.yaml");
    std::fs::write(
        &config,
        format!(
            "locations:\n  - {{name: shared, url: 'file://{}', prefix: velero, sourceCluster: cluster-a}}\nclusters: []\n{extra}",
            bucket.display()
        ),
    )
    .unwrap();
    config.to_string_lossy().into_owned()
}

fn plan_json(config: &str, backup: &str) -> Value {
    serde_json::from_str(&stdout(&ferry(&["plan", "-c", config, "--backup", backup, "-o", "json"]))).unwrap()
}

#[test]
fn a_legacy_backup_shows_its_pod_annotations_as_volume_backups() {
    let dir = tempfile::tempdir().unwrap();
    let config = legacy_bucket(dir.path(), "");

    let plan = plan_json(&config, LEGACY);
    assert_eq!(plan["source"], "tarball");
    assert_eq!(plan["action"], "apply");
    let volume = |ns: &str, pod: &str, id: &str| json!({"podNamespace": ns, "podName": pod, "volume": "data", "snapshotId": id, "source": "podAnnotation"});
    assert_eq!(
        plan["legacyVolumeBackups"],
        json!([
            volume("inventory", "web-cxb44hw8cw-nbqgv", "338b93b5"),
            volume("web-store", "api-cwhtnsgk7z-9k6xw", "65438acb"),
            volume("web-store", "web-zk4vsfmtwc-w4wls", "847b830d"),
        ])
    );
    assert_eq!(plan["itemErrors"], json!([]));
    // Nothing is invented for them: the plan of one backup lists its objects, and none is a PodVolumeBackup.
    let objects = plan["objects"].as_array().unwrap();
    assert_eq!(objects.iter().filter(|o| o["kind"] == "Pod").count(), 3);
    assert!(objects.iter().all(|o| o["kind"] != "PodVolumeBackup"));

    let table = stdout(&ferry(&["plan", "-c", &config, "--backup", LEGACY]));
    let section = "\nLEGACY VOLUME BACKUPS (from pod annotations; Velero's restore reads them itself, no PodVolumeBackup \
                   is created):\n  \
                   POD NAMESPACE   POD                    VOLUME   SNAPSHOT ID\n  \
                   inventory       web-cxb44hw8cw-nbqgv   data     338b93b5\n  \
                   web-store       api-cwhtnsgk7z-9k6xw   data     65438acb\n  \
                   web-store       web-zk4vsfmtwc-w4wls   data     847b830d\n";
    assert!(table.contains(section), "{table}");

    // A backup with a PVB file has none, and no section.
    let plan = plan_json(&config, REGULAR);
    assert_eq!(plan["legacyVolumeBackups"], json!([]));
    let table = stdout(&ferry(&["plan", "-c", &config, "--backup", REGULAR]));
    assert!(!table.contains("LEGACY VOLUME BACKUPS"), "{table}");

    // YAML carries the same list.
    let yaml: Value =
        serde_saphyr::from_slice(&ferry(&["plan", "-c", &config, "--backup", LEGACY, "-o", "yaml"]).stdout).unwrap();
    assert_eq!(yaml["legacyVolumeBackups"], plan_json(&config, LEGACY)["legacyVolumeBackups"]);
}

#[test]
fn a_tarball_over_the_size_limit_is_an_item_error_not_an_empty_list_in_disguise() {
    let dir = tempfile::tempdir().unwrap();
    let config = legacy_bucket(dir.path(), "catalog:\n  maxObjectBytes: 1024\n");
    let plan = plan_json(&config, LEGACY);
    assert_eq!(plan["legacyVolumeBackups"], json!([]));
    let errors = plan["itemErrors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["path"], format!("velero/backups/{LEGACY}/{LEGACY}.tar.gz"));
    let error = errors[0]["error"].as_str().unwrap();
    assert!(error.starts_with("legacy volume backups not read: is "), "{error}");
    assert!(error.ends_with("bytes, over the limit of 1024 (catalog.maxObjectBytes); not downloaded"), "{error}");
}

#[test]
fn describe_shows_a_legacy_backups_volume_backups_and_nothing_for_a_regular_one() {
    let dir = tempfile::tempdir().unwrap();
    let config = legacy_bucket(dir.path(), "");
    let describe = |backup: &str, output: &[&str]| {
        let mut args = vec!["describe", "backup", backup, "--config", &config];
        args.extend_from_slice(output);
        stdout(&ferry(&args))
    };
    let json: Value = serde_json::from_str(&describe(LEGACY, &["-o", "json"])).unwrap();
    let volume = |ns: &str, pod: &str, id: &str| json!({"podNamespace": ns, "podName": pod, "volume": "data", "snapshotId": id, "source": "from pod annotation"});
    assert_eq!(
        json["legacyVolumeBackups"],
        json!([
            volume("inventory", "web-cxb44hw8cw-nbqgv", "338b93b5"),
            volume("web-store", "api-cwhtnsgk7z-9k6xw", "65438acb"),
            volume("web-store", "web-zk4vsfmtwc-w4wls", "847b830d"),
        ])
    );
    assert_eq!(json["podVolumeBackups"], json!([]));
    assert!(json.get("legacyVolumeBackupsError").is_none_or(Value::is_null), "{json}");
    let table = describe(LEGACY, &[]);
    assert!(table.contains("LEGACY VOLUME BACKUPS (3; from pod annotations"), "{table}");
    assert!(table.contains("web-store/web-zk4vsfmtwc-w4wls   data     847b830d      from pod annotation"), "{table}");

    let regular: Value = serde_json::from_str(&describe(REGULAR, &["-o", "json"])).unwrap();
    assert_eq!(regular["legacyVolumeBackups"], json!([]));
    assert_eq!(regular["podVolumeBackups"].as_array().map(Vec::len), Some(3));
    assert!(!describe(REGULAR, &[]).contains("LEGACY VOLUME BACKUPS"));
}
