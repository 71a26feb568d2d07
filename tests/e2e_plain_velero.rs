//! End to end on the real test bed: a plain-Velero target (docs/design.md §3 rule 7). Cluster `b` has Velero's
//! upstream CRDs and no OADP (no NonAdminBackup CRD), MinIO holds 20 Completed admin backups × 2 PVBs and two tenant (NAC)
//! backups, and `ferry coordinator` plus the agent of `b` run over mTLS with deploy/'s least-privilege RBAC.
//!
//! 0. b's BSL is read-write at first: b gets nothing (its Velero could delete a's backups), every backup is
//!    refused with the reason, and the BSL gets an Event; made ReadOnly, b gets everything:
//! 1. Backups and PVBs arrive, tenant backups as Backup CR + PVBs for admins (no NABs: there is no such API);
//!    `ferry status` shows `b` serving Velero (its version from the `velero` Deployment) without OADP.
//! 2. OADP's CRDs are installed at runtime: the agent starts watching NonAdminBackups without a restart, and
//!    the tenant NABs follow — onto the Backup CRs already there (no second Backup), in the mapped namespace
//!    once it exists.
//! 3. The NonAdminBackup CRD is removed again: the agent stops that watch cleanly, and nothing ferry made is
//!    touched.

#[path = "e2e_support/mod.rs"]
mod e2e;

use std::time::Duration;

use e2e::*;
use ferry::fixture;
use ferry::model::{BackupPhase, labels};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
const ADMIN_BACKUPS: usize = 20;

async fn count(api: &Api<kube::api::DynamicObject>) -> usize {
    api.list(&ListParams::default()).await.map(|l| l.items.len()).unwrap_or(0)
}

/// The status JSON of cluster `b` (without per-backup detail).
fn status_of_b(ferry: &Ferry) -> Value {
    let status = ferry.status(None);
    status["clusters"].as_array().into_iter().flatten().find(|c| c["cluster"] == "b").cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_velero_target_then_oadp_installed_at_runtime() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let bed = TestBed::up_with_plain_velero(&["b"]);
    let b = bed.admin("b").await;

    // b's BSL on a's bucket is read-write at first (accessMode unset, as `velero backup-location create` leaves it).
    create_bsl_with_access_mode(&bed, &b, "dr-bsl", None).await;
    create_namespace(&b, "team-a").await;
    // Velero itself (the bed runs no kubelet, so it never starts: only its image tag is read).
    let deployments = api(&b, "apps", "v1", "Deployment", Some(VELERO_NS));
    create(
        &deployments,
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "velero", "namespace": VELERO_NS},
               "spec": {"selector": {"matchLabels": {"deploy": "velero"}},
                        "template": {"metadata": {"labels": {"deploy": "velero"}},
                                     "spec": {"containers": [{"name": "velero", "image": "velero/velero:v1.18.3"}]}}}}),
    )
    .await;

    for i in 0..ADMIN_BACKUPS {
        let name = format!("daily-{i:02}");
        let backup = fixture::admin_backup_json(&name, BackupPhase::Completed, "default");
        let uid = backup["metadata"]["uid"].as_str().unwrap_or_default().to_string();
        let pvbs: Vec<Value> = (0..2).map(|p| fixture::pod_volume_backup_json(&name, &uid, "shop", p)).collect();
        put_backup(&bed, &name, &backup, &pvbs).await;
    }
    let (same, same_backup, same_pvbs) = nac_backup("team-a", "nightly", "5a0c6a7e-2f0b-4b7e-9a55-0e1f2d3c4b5a");
    let (mapped, mapped_backup, mapped_pvbs) = nac_backup("team-x", "nightly", "c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f");
    put_backup(&bed, &same, &same_backup, &same_pvbs).await;
    put_backup(&bed, &mapped, &mapped_backup, &mapped_pvbs).await;
    let all_backups = ADMIN_BACKUPS + 2;

    let mut ferry = Ferry::start(&bed, "  - {from: a, to: b, namespaces: {team-x: team-x-dr}}");
    ferry.agent_args = vec!["--allow-namespace-mapping".into(), "team-x=team-x-dr".into()];
    ferry.start_agent(&bed, "b");

    // 0. Through a read-write BSL, b's Velero could delete a's backups, and b counts as a second writer of a's
    //    location: a collision. ferry gives b nothing, and says why, once (not once per backup).
    let status = eventually("b's read-write BSL refused", WAIT, || async {
        let status = status_of_b(&ferry);
        (status["refusedStorageLocations"] == 1).then_some(status)
    })
    .await;
    assert_eq!(count(&backups(&b)).await, 0, "{status}");
    assert_eq!(status["refused"], 1, "one refusal on the BSL, not one per backup: {status}");
    let detail = ferry.status(Some("b"));
    let reasons: Vec<String> = detail["clusters"][0]["backups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|b| b["items"].as_array().cloned().unwrap_or_default())
        .filter_map(|i| i["reason"].as_str().map(String::from))
        .collect();
    assert!(
        reasons.iter().all(|r| r.starts_with("collision:")
            && r.contains(&format!("{all_backups} backups of it are held back"))
            && r.contains("accessMode unset (ReadWrite)")),
        "{reasons:?}"
    );
    let location = &detail["locations"][0];
    assert_eq!(location["writers"], json!(["b"]), "{location}");
    assert!(location["collision"].as_str().is_some_and(|c| !c.is_empty()), "{location}");
    let events = api(&b, "events.k8s.io", "v1", "Event", Some(VELERO_NS));
    eventually("an Event on the read-write BSL", WAIT, || async {
        let events = events.list(&ListParams::default()).await.ok()?;
        events
            .items
            .iter()
            .any(|e| {
                e.data["reason"] == "FerryRefused"
                    && e.data["regarding"]["kind"] == "BackupStorageLocation"
                    && e.data["regarding"]["name"] == "dr-bsl"
            })
            .then_some(())
    })
    .await;
    assert_eq!(count(&backups(&b)).await, 0, "still nothing on b");
    let bsls = api(&b, "velero.io", "v1", "BackupStorageLocation", Some(VELERO_NS));
    let read_only = json!({"spec": {"accessMode": "ReadOnly"}});
    bsls.patch("dr-bsl", &PatchParams::default(), &Patch::Merge(&read_only)).await.expect("make the BSL ReadOnly");
    eventually("the collision cleared", WAIT, || async {
        let location = ferry.status(None)["locations"][0].clone();
        location.get("collision").is_none_or(|c| c.as_str().is_none_or(str::is_empty)).then_some(())
    })
    .await;

    // 1. Everything arrives on a cluster without OADP; tenant backups as Backup CRs + PVBs, for admins.
    eventually(&format!("{all_backups} Backups and {} PVBs on b", 2 * all_backups), WAIT, || async {
        let (backups, pvbs) = (count(&backups(&b)).await, count(&pvbs(&b)).await);
        (backups == all_backups && pvbs == 2 * all_backups).then_some(())
    })
    .await;
    let tenant_cr = backups(&b).get(&mapped).await.expect("tenant Backup CR");
    let tenant_cr = to_value(&tenant_cr);
    assert_eq!(
        tenant_cr["metadata"]["annotations"][labels::NAB_ORIGIN_NAMESPACE],
        "team-x-dr",
        "shaped as on an OADP cluster, so that a NAB in the mapped namespace can attach later"
    );
    assert_eq!(tenant_cr["metadata"]["labels"][labels::FERRY_MANAGED_BY], labels::FERRY_MANAGED_BY_VALUE);
    assert!(nabs(&b, None).list(&ListParams::default()).await.is_err(), "b serves no NonAdminBackups");
    // `ferry restore` into team-x-dr, which does not exist yet: refused unless Velero may create it.
    let restore = |extra: &[&str]| {
        std::process::Command::new(FERRY)
            .args(["restore", &mapped, "--cluster", "b", "--name", "into-missing", "--config"])
            .arg(ferry.config_path())
            .args(extra)
            .output()
            .expect("ferry restore")
    };
    let refused = restore(&[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "a restore into a namespace that does not exist is refused");
    assert!(stderr.contains("namespace team-x-dr does not exist") && stderr.contains("--create-namespace"), "{stderr}");
    let restores = api(&b, "velero.io", "v1", "Restore", Some(VELERO_NS));
    assert!(restores.get_opt("into-missing").await.expect("get").is_none(), "no Restore created");
    let allowed = restore(&["--create-namespace"]);
    assert!(allowed.status.success(), "{}", String::from_utf8_lossy(&allowed.stderr));
    let made = restores.get("into-missing").await.expect("the Restore exists with --create-namespace");
    assert_eq!(to_value(&made)["spec"]["namespaceMapping"], json!({"team-x": "team-x-dr"}));
    let apis = eventually("status shows b's APIs", WAIT, || async {
        let apis = status_of_b(&ferry)["apis"].clone();
        (apis["veleroVersion"] == "v1.18.3").then_some(apis)
    })
    .await;
    assert_eq!(apis["oadp"], false, "{apis}");
    assert_eq!(apis["summary"], "velero v1.18.3, no oadp", "{apis}");
    assert_eq!(apis["missingRequired"], json!([]), "{apis}");
    let status = status_of_b(&ferry);
    assert_eq!(status["failed"], 0, "{status}");
    assert_eq!(status["state"], "connected", "{status}");
    // The agent's own side port says the same: connected, ready, no NonAdminBackup kind.
    let agent_http = ferry.agent_metrics["b"].clone();
    assert_eq!(http_get(&agent_http, "/healthz").0, 200);
    assert_eq!(http_get(&agent_http, "/readyz").0, 200, "listed and connected");
    let (_, metrics) = http_get(&agent_http, "/metrics");
    assert!(metrics.contains("ferry_agent_connected 1\n"), "{metrics}");
    assert!(metrics.contains("ferry_agent_serves{kind=\"Backup\"} 1\n"), "{metrics}");
    assert!(metrics.contains("ferry_agent_serves{kind=\"NonAdminBackup\"} 0\n"), "{metrics}");
    let agent_log = ferry.log_text("agent-b");
    assert!(!agent_log.contains("404 page not found"), "no watch of a kind b does not serve:{}", logs_hint(&ferry));

    // 2. OADP is installed at runtime: the agent watches NABs without a restart and the tenant NABs follow.
    let installed = bed.install_oadp_crds("b").await;
    assert!(installed.iter().any(|n| n == "nonadminbackups.oadp.openshift.io"), "{installed:?}");
    let nab = eventually("the tenant NAB in team-a", WAIT, || async {
        nabs(&b, Some("team-a")).get_opt("nightly").await.ok().flatten()
    })
    .await;
    let nab = to_value(&nab);
    assert_eq!(nab["metadata"]["labels"][labels::NAB_SYNCED_FROM_NACUUID], same.as_str(), "shaped as synced");
    let early = nabs(&b, Some("team-x-dr")).get_opt("nightly").await.expect("get");
    assert!(early.is_none(), "team-x-dr does not exist yet: ferry never creates tenant namespaces");
    create_namespace(&b, "team-x-dr").await;
    eventually("the mapped tenant NAB in team-x-dr", WAIT, || async {
        nabs(&b, Some("team-x-dr")).get_opt("nightly").await.ok().flatten()
    })
    .await;
    assert_eq!(count(&backups(&b)).await, all_backups, "the NABs attached to the Backup CRs: none created twice");
    assert!(ferry.agents.get_mut("b").expect("agent b").try_wait().expect("agent").is_none(), "never restarted");
    let apis = eventually("status shows OADP on b", WAIT, || async {
        let apis = status_of_b(&ferry)["apis"].clone();
        (apis["oadp"] == true).then_some(apis)
    })
    .await;
    assert_eq!(apis["summary"], "velero v1.18.3, oadp", "{apis}");
    let (_, metrics) = http_get(&agent_http, "/metrics");
    assert!(metrics.contains("ferry_agent_serves{kind=\"NonAdminBackup\"} 1\n"), "{metrics}");

    // 3. The NonAdminBackup CRD goes away: its watch stops cleanly; ferry's Backups and PVBs stay.
    let crds: Api<CustomResourceDefinition> = Api::all(b.clone());
    crds.delete("nonadminbackups.oadp.openshift.io", &DeleteParams::default()).await.expect("delete CRD");
    eventually("status shows b without OADP again", WAIT, || async {
        (status_of_b(&ferry)["apis"]["oadp"] == false).then_some(())
    })
    .await;
    assert!(
        ferry.log_text("agent-b").contains("no longer serves this kind"),
        "the agent saw the CRD go:{}",
        logs_hint(&ferry)
    );
    assert_eq!(count(&backups(&b)).await, all_backups);
    assert_eq!(count(&pvbs(&b)).await, 2 * all_backups);
    let status = status_of_b(&ferry);
    assert_eq!(status["failed"], 0, "{status}");

    // 4. A cluster without one of Velero's CRDs: its agent connects anyway and the missing CRD is named.
    let a = bed.admin("a").await;
    let crds_a: Api<CustomResourceDefinition> = Api::all(a.clone());
    crds_a.delete("podvolumebackups.velero.io", &DeleteParams::default()).await.expect("delete CRD");
    eventually("PodVolumeBackups gone from a's API", WAIT, || async {
        let resources = a.list_api_group_resources("velero.io/v1").await.ok()?;
        (!resources.resources.iter().any(|r| r.kind == "PodVolumeBackup")).then_some(())
    })
    .await;
    ferry.start_agent(&bed, "a");
    let status = eventually("status names a's missing CRD", WAIT, || async {
        let status = ferry.status(None);
        let a = status["clusters"].as_array()?.iter().find(|c| c["cluster"] == "a")?.clone();
        (a["apis"]["missingRequired"] == json!(["podvolumebackups.velero.io"])).then_some(a)
    })
    .await;
    assert_eq!(status["apis"]["summary"], "MISSING podvolumebackups.velero.io", "{status}");
    assert!(ferry.log_text("agent-a").contains("lacks Velero CRDs"), "the agent says so in its log");
}
