//! End to end on the real test bed: guarded retirement (docs/design.md §3 rule 5), `retirement.mode: delete`, on two
//! real kube-apiservers and MinIO, the agent with deploy/'s RBAC.
//!
//! 1. An admin backup (2 PVBs) and a tenant backup (NAC, 2 PVBs) arrive on b, beside objects ferry must never
//!    retire: a user's NonAdminBackup of the same name in another namespace, a user's Backup, and a Backup
//!    labelled ferry's but without provenance (as an older ferry made them).
//! 2. The admin backup's folder is deleted from the bucket; once its absence is counted but before the grace
//!    period ends, MinIO stops. The grace period passes during the outage: nothing is deleted (a location
//!    whose refresh fails is never retired from). MinIO comes back: the Backup and its PVBs are retired.
//! 3. B's agent is stopped, the tenant backup's folder deleted: while b is disconnected its plan holds no
//!    retirement at all. The agent comes back: the NAB goes first, then (no NAC runs on the bed to do it)
//!    the Backup CR and its PVBs.
//! 4. Everything that is not ferry's with a whole provenance, and the backup still in the bucket, is untouched.

#[path = "e2e_support/mod.rs"]
mod e2e;

use std::time::Duration;

use e2e::*;
use ferry::fixture;
use ferry::model::{BackupPhase, labels};
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
const GRACE: Duration = Duration::from_secs(8);

async fn exists(api: &kube::Api<kube::api::DynamicObject>, name: &str) -> bool {
    api.get_opt(name).await.expect("get").is_some()
}

async fn pvbs_of(client: &kube::Client, backup: &str) -> usize {
    let selector = format!("{}={backup}", labels::VELERO_BACKUP_NAME);
    pvbs(client).list(&ListParams::default().labels(&selector)).await.expect("list").items.len()
}

/// The actions `ferry status --cluster b` shows for `backup`'s items.
fn actions_on_b(ferry: &Ferry, backup: &str) -> Vec<String> {
    status_items(ferry, backup).iter().map(|i| i["action"].as_str().unwrap_or_default().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retirement_deletes_only_what_is_proven_gone_and_only_ferrys() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let bed = TestBed::up();
    let b = bed.admin("b").await;
    create_bsl(&bed, &b, "dr-bsl").await;
    for ns in ["team-a", "team-u"] {
        create_namespace(&b, ns).await;
    }

    let admin = "expires-soon";
    let admin_backup = fixture::admin_backup_json(admin, BackupPhase::Completed, "default");
    let admin_uid = admin_backup["metadata"]["uid"].as_str().unwrap_or_default().to_string();
    let admin_pvbs: Vec<Value> =
        (0..2).map(|i| fixture::pod_volume_backup_json(admin, &admin_uid, "shop", i)).collect();
    let kept = "kept";
    let kept_backup = fixture::admin_backup_json(kept, BackupPhase::Completed, "default");
    let (tenant, tenant_backup, tenant_pvbs) = nac_backup("team-a", "nightly", "3c2b1a09-8f7e-4d6c-9b5a-4e3d2c1b0a9f");
    put_backup(&bed, admin, &admin_backup, &admin_pvbs).await;
    put_backup(&bed, kept, &kept_backup, &[]).await;
    put_backup(&bed, &tenant, &tenant_backup, &tenant_pvbs).await;

    // Not ferry's, or not with a whole provenance: never retired, whatever the bucket holds.
    let user_nab = create(
        &nabs(&b, Some("team-u")),
        json!({"apiVersion": "oadp.openshift.io/v1alpha1", "kind": "NonAdminBackup",
               "metadata": {"name": "nightly", "namespace": "team-u"},
               "spec": {"backupSpec": {"includedNamespaces": ["team-u"]}}}),
    )
    .await;
    let user_backup = json!({"apiVersion": "velero.io/v1", "kind": "Backup",
        "metadata": {"name": "users-own", "namespace": VELERO_NS},
        "spec": {"storageLocation": "dr-bsl"}, "status": {"phase": "Completed"}});
    let older_ferry = json!({"apiVersion": "velero.io/v1", "kind": "Backup",
        "metadata": {"name": "made-by-older-ferry", "namespace": VELERO_NS,
                     "labels": {labels::FERRY_MANAGED_BY: labels::FERRY_MANAGED_BY_VALUE},
                     "annotations": {labels::FERRY_SOURCE_LOCATION: "shared", labels::FERRY_BACKUP_NAME: "gone-long-ago"}},
        "spec": {"storageLocation": "dr-bsl"}, "status": {"phase": "Completed"}});
    for object in [user_backup, older_ferry] {
        let object: kube::api::DynamicObject = serde_json::from_value(object).expect("object");
        backups(&b).create(&PostParams::default(), &object).await.expect("create");
    }

    let retirement = format!("retirement: {{mode: delete, confirmations: 2, grace: {}s}}", GRACE.as_secs());
    let mut ferry = Ferry::start_with(&bed, "  []", &retirement);
    // The member cluster consents to deletions too: its agent's flag, and deploy/rbac/retirement/ (the bed's
    // default RBAC, deploy/rbac/, lets the agent delete nothing).
    create_rbac_files(&b, &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/rbac/retirement")).await;
    ferry.agent_args = vec!["--allow-retirement".into()];
    ferry.start_agent(&bed, "b");

    // --- 1. Everything arrives -----------------------------------------------------------------------------
    eventually("the backups, PVBs and NAB on b", WAIT, || async {
        let all = exists(&backups(&b), admin).await
            && exists(&backups(&b), kept).await
            && exists(&backups(&b), &tenant).await
            && pvbs_of(&b, admin).await == 2
            && pvbs_of(&b, &tenant).await == 2
            && exists(&nabs(&b, Some("team-a")), "nightly").await;
        all.then_some(())
    })
    .await;
    let made = backups(&b).get(admin).await.expect("ferry's Backup");
    let made = serde_json::to_value(&made).expect("json");
    for key in [labels::FERRY_SOURCE_BUCKET, labels::FERRY_SOURCE_PREFIX, labels::FERRY_BACKUP_UID] {
        assert!(made["metadata"]["annotations"].get(key).is_some(), "provenance {key} on ferry's Backup: {made}");
    }
    assert_eq!(made["metadata"]["annotations"][labels::FERRY_BACKUP_UID], admin_uid.as_str());

    // --- 2. Deleted from the bucket, then a bucket outage longer than the grace period -----------------------
    delete_backup_folder(&bed, admin).await;
    // Two complete listings without it (refresh every 1 s), well before the grace period ends.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(exists(&backups(&b), admin).await, "not before the grace period");
    let minio = MinioProcess::capture(&bed);
    minio.stop();
    tokio::time::sleep(GRACE + Duration::from_secs(4)).await;
    assert!(exists(&backups(&b), admin).await, "a failing location never retires anything{}", logs_hint(&ferry));
    assert_eq!(pvbs_of(&b, admin).await, 2, "nor its PVBs");
    let healthy = ferry.status(None)["locations"][0]["healthy"].clone();
    assert_eq!(healthy, false, "the outage shows");
    minio.start(&bed);
    eventually("the deleted backup's Backup CR and PVBs retired", WAIT, || async {
        (!exists(&backups(&b), admin).await && pvbs_of(&b, admin).await == 0).then_some(())
    })
    .await;
    let events = api(&b, "events.k8s.io", "v1", "Event", Some(VELERO_NS));
    eventually("a FerryRetired Event", WAIT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| e.data["reason"] == "FerryRetired" && e.data["regarding"]["name"] == admin)
            .then_some(())
    })
    .await;

    // --- 3. A disconnected cluster is never retired on -----------------------------------------------------
    ferry.kill_agent("b");
    eventually("b disconnected", WAIT, || async {
        (ferry.status(Some("b"))["clusters"][0]["state"] == "disconnected").then_some(())
    })
    .await;
    delete_backup_folder(&bed, &tenant).await;
    tokio::time::sleep(GRACE + Duration::from_secs(4)).await;
    let planned = actions_on_b(&ferry, &tenant);
    assert!(
        !planned.iter().any(|a| a.contains("retire")),
        "no retirement planned for a disconnected cluster: {planned:?}"
    );
    assert!(exists(&nabs(&b, Some("team-a")), "nightly").await);
    ferry.start_agent(&bed, "b");
    eventually("the tenant's NAB, then its Backup CR and PVBs, retired", WAIT, || async {
        let gone = !exists(&nabs(&b, Some("team-a")), "nightly").await
            && !exists(&backups(&b), &tenant).await
            && pvbs_of(&b, &tenant).await == 0;
        gone.then_some(())
    })
    .await;

    // --- 4. What is not proven gone, or not ferry's with a whole provenance, is untouched -------------------
    assert!(exists(&backups(&b), kept).await, "a backup still in the bucket stays");
    assert!(exists(&backups(&b), "users-own").await, "a user's Backup stays");
    assert!(exists(&backups(&b), "made-by-older-ferry").await, "ferry's label without provenance: stays");
    let user_nab_now = nabs(&b, Some("team-u")).get("nightly").await.expect("the user's NAB of the same name");
    assert_eq!(user_nab_now.metadata.resource_version, user_nab.metadata.resource_version, "untouched");
    ferry.kill_agent("b");
}
