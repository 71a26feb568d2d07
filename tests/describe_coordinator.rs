//! The `DescribeBackup` rpc on a real socket (127.0.0.1, mTLS): a coordinator in this process over the example
//! bucket, an agent client publishing cluster-b's recorded inventory and reporting results, and
//! `ferry describe backup` (the binary) asking as an operator; roles and unknown names.

#[path = "federation_support/mod.rs"]
mod support;

use std::time::Duration;

use ferry::grpc::proto::{ApplyOutcome, ApplyResult, DescribeBackupRequest, ItemResult};
use serde_json::{Value, json};
use support::*;
use tonic::Code;

const TEAM_A: &str = "team-a-nightly-0-95d9a714-3e7e-4d0b-a93f-337765bf80e0";
const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

fn describe(bed: &Bed, addr: std::net::SocketAddr, name: &str, output: &str) -> std::process::Output {
    std::process::Command::new(FERRY)
        .args(["describe", "backup", name, "-o", output])
        .args(["--coordinator", &format!("https://{addr}"), "--tls-server-name", "localhost"])
        .arg("--tls-ca")
        .arg(bed.pki("ca.pem"))
        .arg("--tls-cert")
        .arg(bed.pki("operator-admin.pem"))
        .arg("--tls-key")
        .arg(bed.pki("operator-admin-key.pem"))
        .env("FERRY_LOG", "warn")
        .output()
        .expect("run ferry describe")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_backup_over_mtls_shows_the_plan_and_the_agents_outcomes() {
    let bed = Bed::new();
    let coordinator = bed.start(fast_settings()).await;
    let agent = agent(bed.agent_config(coordinator.addr, "cluster-b"), &cluster_b_inventory());
    let desired = wait_desired(&agent, |d| d.complete && d.items.iter().any(|i| i.backup == TEAM_A)).await;

    // The agent created the Backup and holds the rest (PVBs wait for its UID, the NAB for its PVBs).
    let items: Vec<ItemResult> = desired
        .items
        .iter()
        .filter(|i| i.backup == TEAM_A)
        .map(|i| {
            let backup = i.r#ref.as_ref().is_some_and(|r| r.kind == "Backup");
            let (outcome, message) = match backup {
                true => (ApplyOutcome::Applied, String::new()),
                false => (ApplyOutcome::Held, "waits for the Backup's UID".to_string()),
            };
            ItemResult { r#ref: i.r#ref.clone(), outcome: outcome as i32, message }
        })
        .collect();
    assert_eq!(items.len(), 4, "Backup, two PVBs, NAB: {:?}", desired.items);
    agent.report(ApplyResult { desired_version: desired.version.clone(), items });

    let mut operator = bed.operator(coordinator.addr).await;
    let request = || DescribeBackupRequest { name: TEAM_A.into() };
    let mut reported = false;
    for _ in 0..200 {
        let d = operator.describe_backup(request()).await.expect("describe").into_inner();
        if d.clusters.first().is_some_and(|c| c.planned.iter().all(|i| i.outcome != ApplyOutcome::Unspecified as i32)) {
            reported = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(reported, "the agent's results reach the description");

    let out = describe(&bed, coordinator.addr, TEAM_A, "json");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json["caller"], "operator/admin");
    assert_eq!(json["backup"]["owner"]["kind"], "tenant");
    assert_eq!(json["backup"]["owner"]["originNamespace"], "team-a");
    assert_eq!(json["backup"]["owner"]["originName"], "nightly-0");
    assert_eq!(json["backup"]["sourceCluster"], "cluster-a");
    assert_eq!(json["podVolumeBackups"].as_array().map(Vec::len), Some(2));
    let clusters = json["clusters"].as_array().expect("clusters");
    assert_eq!(clusters.len(), 1, "cluster-c has no BSL: nothing of it there, nothing planned");
    let b = &clusters[0];
    assert_eq!(b["cluster"], "cluster-b");
    assert_eq!(b["state"], "connected");
    assert_eq!(b["desiredVersion"], desired.version.as_str());
    assert_eq!(b["backups"], json!([]), "the recorded inventory has no Backup CR of it yet");
    let planned = b["planned"].as_array().expect("planned");
    let rows: Vec<(&str, &str, &str)> = planned
        .iter()
        .map(|i| (i["action"].as_str().unwrap(), i["kind"].as_str().unwrap(), i["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        rows,
        [
            ("create", "Backup", "applied"),
            ("wait", "PodVolumeBackup", "held"),
            ("wait", "PodVolumeBackup", "held"),
            ("wait", "NonAdminBackup", "held")
        ]
    );
    assert_eq!(planned[0]["message"], Value::Null);
    assert_eq!(planned[1]["message"], "waits for the Backup's UID");
    assert_eq!(planned[1]["waitsFor"], json!([format!("Backup openshift-adp/{TEAM_A}")]));
    assert_eq!(planned[3]["namespace"], "team-a-dr", "mapped team-a → team-a-dr");

    let table = describe(&bed, coordinator.addr, TEAM_A, "table");
    let table = String::from_utf8_lossy(&table.stdout);
    for header in ["BACKUP\n", "\nPODVOLUMEBACKUPS (2)\n", "\nCLUSTER cluster-b (connected, desired set "] {
        assert!(table.contains(header), "{header:?} in {table}");
    }

    // Unknown names and agent certificates are refused.
    let unknown = operator.describe_backup(DescribeBackupRequest { name: "no-such-backup".into() }).await;
    assert_eq!(unknown.expect_err("unknown").code(), Code::NotFound);
    let out = describe(&bed, coordinator.addr, "no-such-backup", "json");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("NotFound"), "{}", String::from_utf8_lossy(&out.stderr));
    let mut as_agent = bed.client(coordinator.addr, "cluster-b").await;
    let denied = as_agent.describe_backup(request()).await.expect_err("agents may not describe");
    assert_eq!(denied.code(), Code::PermissionDenied);

    agent.shutdown().await;
    coordinator.shutdown().await.expect("shutdown");
}
