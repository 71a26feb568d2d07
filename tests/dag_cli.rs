//! `ferry graph`, `ferry overlap` and `ferry plan --backup` as a user runs them, against buckets the fixture
//! writer made: the bundled example (tarballs in Velero's §2 layout) and a fresh bucket without tarballs
//! (resource-list fallback).

use std::path::Path;

use serde_json::Value;

const MANUAL: &str = "manual-2";
const APPS: &str = "apps-hourly-20261101060000";
const TEAM_A: &str = "team-a-nightly-0-95d9a714-3e7e-4d0b-a93f-337765bf80e0";
const TEAM_B: &str = "team-b-nightly-1-1483357a-89a1-436b-8e7a-8a577c1b49f4";

#[path = "cli_support/mod.rs"]
mod cli_support;

use cli_support::ferry;

fn stdout(out: &std::process::Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// A config over `bucket` (absolute) with an extra `dependencies` section.
fn config(dir: &Path, bucket: &Path, dependencies: &str) -> String {
    let path = dir.join("ferry.yaml");
    let text = format!(
        "locations:\n  - {{name: shared, url: 'file://{}', prefix: velero, sourceCluster: cluster-a}}\nclusters: []\n{dependencies}",
        bucket.display()
    );
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn example_bucket() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bucket")
}

/// A fixture-written bucket with resource lists and no tarballs in `dir`: its config, and a backup's name.
fn bucket_without_tarballs(dir: &Path) -> (String, String) {
    let bucket = dir.join("bucket");
    let out = ferry(&["fixture", "write", bucket.to_str().unwrap(), "--backups", "3", "--no-tarballs"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let name = std::fs::read_dir(bucket.join("velero/backups"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("manual-") || n.starts_with("hourly-"))
        .unwrap();
    (config(dir, &bucket, ""), name)
}

#[test]
fn graph_json_orders_the_example_backup_from_its_tarball() {
    let out = ferry(&["graph", MANUAL, "--config", "examples/ferry.yaml", "-o", "json"]);
    let graph: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(graph["source"], "tarball");
    assert_eq!(graph["key"], format!("velero/backups/{MANUAL}/{MANUAL}.tar.gz"));
    let objects = graph["objects"].as_array().unwrap();
    assert_eq!(objects.len(), 36, "each item once, the preferred-version copies skipped");
    let layer = |kind: &str, ns: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["namespace"] == ns)
            .map(|o| o["layer"].as_u64().unwrap())
            .unwrap()
    };
    // Namespace → Deployment → ReplicaSet → Pod; PV → PVC → Pod.
    assert_eq!(layer("Namespace", ""), 0);
    assert!(layer("Deployment", "team-a") < layer("ReplicaSet", "team-a"));
    assert!(layer("ReplicaSet", "team-a") < layer("Pod", "team-a"));
    assert!(layer("PersistentVolume", "") < layer("PersistentVolumeClaim", "team-a"));
    assert!(layer("PersistentVolumeClaim", "team-a") < layer("Pod", "team-a"));
    let pod = objects.iter().find(|o| o["kind"] == "Pod" && o["namespace"] == "team-a").unwrap();
    let waits: Vec<&str> = pod["waitsOn"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    assert!(waits.iter().any(|w| w.starts_with("ReplicaSet.apps team-a/web-") && w.ends_with("(ownerReference)")));
    assert!(waits.contains(&"PersistentVolumeClaim team-a/web-data (reference)"), "{waits:?}");
    assert_eq!(graph["neverReady"].as_array().unwrap().len(), 0);
    assert!(graph["holdAndRetry"]["holds"].as_u64().unwrap() > 0);
    let refused = graph["report"]["refusedPriorities"].as_array().unwrap();
    assert!(
        refused.iter().any(|r| r.as_str().unwrap().starts_with("priority pods < replicasets.apps would close a cycle"))
    );
    // The StorageClass is not in the backup: reported, not an error.
    let external = graph["report"]["external"].as_array().unwrap();
    assert!(external.iter().all(|e| e["target"].as_str().unwrap().starts_with("StorageClass.storage.k8s.io gp3-csi")));
}

#[test]
fn graph_table_and_dot() {
    let table = stdout(&ferry(&["graph", MANUAL, "--config", "examples/ferry.yaml"]));
    assert!(table.starts_with(&format!("BACKUP {MANUAL} (location shared, from tarball): 36 objects in ")), "{table}");
    assert!(table.contains("LAYER   KIND"), "{table}");
    assert!(table.contains("PRIORITIES NOT APPLIED (3):"), "{table}");
    let dot = stdout(&ferry(&["graph", MANUAL, "--config", "examples/ferry.yaml", "-o", "dot"]));
    assert!(dot.starts_with(&format!("digraph \"{MANUAL}\" {{")), "{dot}");
    assert!(dot.contains("[label=\"ownerReference\"]") && dot.contains("root -> n"), "{dot}");
    assert!(dot.trim_end().ends_with('}'));
}

#[test]
fn a_user_rule_that_closes_a_cycle_fails_with_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let deps =
        "dependencies:\n  priorities: \"namespaces\"\n  rules:\n    - {kind: Namespace, after: pods, selector: {}}\n";
    let cfg = config(dir.path(), &example_bucket(), deps);
    let out = ferry(&["graph", MANUAL, "--config", &cfg]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rule 1 (Namespace after pods) would close a cycle: Namespace "), "{err}");
    assert!(err.contains("→ (rule 1: Namespace after pods) → Pod "), "{err}");
    // The graph it could build is still printed, with the refusal.
    assert!(String::from_utf8_lossy(&out.stdout).contains("REFUSED RULES (1):"));

    // An acceptable rule orders, and a broken config is refused before anything is read.
    let deps = "dependencies:\n  rules:\n    - {kind: Deployment, after: secrets, selector: {namespace: team-a}}\n";
    let cfg = config(dir.path(), &example_bucket(), deps);
    let graph: Value =
        serde_json::from_str(&stdout(&ferry(&["graph", MANUAL, "--config", &cfg, "-o", "json"]))).unwrap();
    let deployment = graph["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["namespace"] == "team-a")
        .unwrap();
    assert!(
        deployment["waitsOn"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w == "(rule 1: Deployment[namespace=team-a] after secrets)")
    );
    let cfg = config(dir.path(), &example_bucket(), "dependencies:\n  priorities: \"a,-,b,-\"\n");
    let out = ferry(&["graph", MANUAL, "--config", &cfg]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("only one \"-\""));
}

#[test]
fn graph_falls_back_to_the_resource_list_and_names_missing_backups() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, name) = bucket_without_tarballs(dir.path());
    let graph: Value =
        serde_json::from_str(&stdout(&ferry(&["graph", &name, "--config", &cfg, "-o", "json"]))).unwrap();
    assert_eq!(graph["source"], "resource list");
    let objects = graph["objects"].as_array().unwrap();
    assert!(!objects.is_empty());
    // Without specs only namespaces and priorities order: pods still come after their namespace.
    let pod = objects.iter().find(|o| o["kind"] == "Pod").unwrap();
    assert!(pod["waitsOn"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().ends_with("(namespace)")));

    let out = ferry(&["graph", "no-such-backup", "--config", &cfg]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("\"no-such-backup\" has neither a tarball nor a resource list")
    );
}

#[test]
fn overlap_of_example_backups() {
    let out = ferry(&["overlap", MANUAL, APPS, TEAM_A, TEAM_B, "--config", "examples/ferry.yaml", "-o", "json"]);
    let o: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(o["parallelSafe"], false);
    let pairs = o["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 6);
    let pair = |a: &str, b: &str| pairs.iter().find(|p| p["a"] == a && p["b"] == b).unwrap();
    // The full backup shares the apps' objects with the apps backup; tenants' backups share nothing.
    let shared = pair(MANUAL, APPS)["shared"].as_array().unwrap();
    assert!(shared.iter().any(|s| s.as_str().unwrap().starts_with("Deployment.apps web-store/")));
    assert_eq!(pair(MANUAL, APPS)["parallelSafe"], false);
    assert_eq!(pair(TEAM_A, TEAM_B)["parallelSafe"], true);
    assert_eq!(pair(TEAM_A, TEAM_B)["veleroNamespaceLevelSafe"], true);
    let table = stdout(&ferry(&["overlap", TEAM_A, TEAM_B, "--config", "examples/ferry.yaml"]));
    assert!(table.starts_with("PARALLEL SAFE: yes\n"), "{table}");
    let out = ferry(&["overlap", MANUAL, "--config", "examples/ferry.yaml"]);
    assert!(!out.status.success(), "one backup is not an overlap question");
}

/// `ferry plan --backup`: the objects in apply order, layer by layer, each with what it waits on.
#[test]
fn plan_backup_lists_objects_in_apply_order_with_what_they_wait_on() {
    let out = ferry(&["plan", "--config", "examples/ferry.yaml", "--backup", MANUAL, "-o", "json"]);
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!((plan["action"].as_str(), plan["source"].as_str()), (Some("apply"), Some("tarball")));
    assert_eq!(plan["reasons"].as_array().unwrap().len(), 0);
    let objects = plan["objects"].as_array().unwrap();
    assert_eq!(objects.len(), 36);
    let layers: Vec<u64> = objects.iter().map(|o| o["layer"].as_u64().unwrap()).collect();
    assert!(layers.windows(2).all(|w| w[0] <= w[1]), "apply order is layer by layer: {layers:?}");
    assert_eq!(layers.iter().max().map(|l| l + 1), plan["layers"].as_u64());
    let position = |kind: &str, ns: &str| objects.iter().position(|o| o["kind"] == kind && o["namespace"] == ns);
    assert!(position("Namespace", "") < position("Deployment", "team-a"));
    assert!(position("ReplicaSet", "team-a") < position("Pod", "team-a"));
    let pod = &objects[position("Pod", "team-a").unwrap()];
    let waits: Vec<&str> = pod["waitsOn"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    assert!(waits.contains(&"PersistentVolumeClaim team-a/web-data (reference)"), "{waits:?}");
    assert!(waits.iter().any(|w| w.starts_with("ReplicaSet.apps team-a/web-") && w.ends_with("(ownerReference)")));

    let table = stdout(&ferry(&["plan", "--config", "examples/ferry.yaml", "--backup", MANUAL]));
    assert!(
        table.starts_with(&format!("BACKUP {MANUAL} (location shared, from tarball): apply 36 objects in ")),
        "{table}"
    );
    assert!(table.contains("WAITS ON") && table.contains("PersistentVolumeClaim team-a/web-data (reference)"));
    assert!(!table.contains("REFUSED"), "{table}");
    let yaml = stdout(&ferry(&["plan", "--config", "examples/ferry.yaml", "--backup", MANUAL, "-o", "yaml"]));
    assert!(yaml.contains("action: apply") && yaml.contains("waitsOn:"), "{yaml}");
}

/// A rule that would close a cycle refuses the backup in the plan, with the cycle; the plan itself succeeds.
#[test]
fn plan_backup_refuses_a_rule_that_closes_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let deps = "dependencies:\n  rules:\n    - {kind: Namespace, after: pods}\n";
    let cfg = config(dir.path(), &example_bucket(), deps);
    let out = ferry(&["plan", "--config", &cfg, "--backup", MANUAL, "-o", "json"]);
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(plan["action"], "refuse");
    let reasons: Vec<&str> = plan["reasons"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
    assert_eq!(reasons.len(), 1);
    assert!(reasons[0].starts_with("rule 1 (Namespace after pods) would close a cycle: Namespace "), "{reasons:?}");
    assert!(reasons[0].contains("→ (rule 1: Namespace after pods) → Pod "), "{reasons:?}");
    // The order shown is the one without the refused rule: Namespaces still come before their Pods.
    let objects = plan["objects"].as_array().unwrap();
    let position = |kind: &str, ns: &str| objects.iter().position(|o| o["kind"] == kind && o["namespace"] == ns);
    assert!(position("Namespace", "") < position("Pod", "team-a"));

    let table = stdout(&ferry(&["plan", "--config", &cfg, "--backup", MANUAL]));
    assert!(table.starts_with(&format!("BACKUP {MANUAL} (location shared, from tarball): refuse 36 objects")));
    assert!(table.contains("\nREFUSED: rule 1 (Namespace after pods) would close a cycle: Namespace "), "{table}");
    assert!(!table.contains("REFUSED RULES"), "the reason is said once: {table}");
}

#[test]
fn plan_backup_reads_resource_lists_and_names_missing_backups() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, name) = bucket_without_tarballs(dir.path());
    let out = ferry(&["plan", "--config", &cfg, "--backup", &name, "--location", "shared", "-o", "json"]);
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!((plan["source"].as_str(), plan["action"].as_str()), (Some("resource list"), Some("apply")));
    let pod = plan["objects"].as_array().unwrap().iter().find(|o| o["kind"] == "Pod").unwrap();
    assert!(pod["waitsOn"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().ends_with("(namespace)")));

    let out = ferry(&["plan", "--config", &cfg, "--backup", "no-such-backup"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("\"no-such-backup\" has neither a tarball nor a resource list")
    );
    let out = ferry(&["plan", "--config", &cfg, "--backup", &name, "--location", "elsewhere"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no location named \"elsewhere\""));
    let out = ferry(&["plan", "--config", &cfg, "--location", "shared"]);
    assert!(!out.status.success(), "--location only narrows --backup");
}
