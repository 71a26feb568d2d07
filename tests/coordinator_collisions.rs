//! Writer collisions on real sockets: agents of two clusters report their BSLs over mTLS; a read-write BSL of
//! a cluster other than the location's sourceCluster stops the location for every cluster until it turns
//! read-only (docs/design.md §3 rule 6).

#[path = "federation_support/mod.rs"]
mod support;

use ferry::grpc::convert::{inventory_item, watched_types};
use ferry::grpc::proto::{
    DescribeBackupRequest, DesiredAction, DesiredSet, GetStatusRequest, InventoryItem, LocationStatus,
};
use serde_json::json;
use support::*;

fn bsl(name: &str, mode: &str) -> InventoryItem {
    let bsl = json!({"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": name, "namespace": "openshift-adp", "uid": format!("uid-{name}")},
        "spec": {"provider": "aws", "default": true, "accessMode": mode,
            "objectStorage": {"bucket": "velero-backups", "prefix": "velero"}}});
    inventory_item("BackupStorageLocation", &bsl)
}

fn creates(d: &DesiredSet) -> usize {
    d.items.iter().filter(|i| i.action == DesiredAction::Create as i32).count()
}

fn collision_item(d: &DesiredSet) -> Option<&str> {
    d.items
        .iter()
        .find(|i| i.action == DesiredAction::Refuse as i32 && i.reason.starts_with("collision:"))
        .map(|i| i.reason.as_str())
}

async fn location(
    operator: &mut ferry::grpc::proto::federation_client::FederationClient<tonic::transport::Channel>,
    until: impl Fn(&LocationStatus) -> bool,
) -> LocationStatus {
    for _ in 0..500 {
        let status = operator.get_status(GetStatusRequest::default()).await.expect("status").into_inner();
        if let Some(l) = status.locations.into_iter().find(|l| l.name == "shared")
            && until(&l)
        {
            return l;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("location status in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_write_bsl_of_another_cluster_stops_the_location_everywhere_until_it_is_read_only() {
    let bed = Bed::new();
    let coordinator = bed.start(fast_settings()).await;
    let mut operator = bed.operator(coordinator.addr).await;
    // cluster-b reads "shared" (written by cluster-a) through its ReadOnly dr-bsl.
    let reader = agent(bed.agent_config(coordinator.addr, "cluster-b"), &cluster_b_inventory());
    let before = wait_desired(&reader, |d| d.complete && creates(d) > 0).await;
    assert!(collision_item(&before).is_none());

    // cluster-c's Velero writes into the same bucket prefix: a collision (its writer is not cluster-a).
    let mut c_inventory: Vec<_> = watched_types().into_iter().map(|t| (t, Vec::new())).collect();
    if let Some(slot) = c_inventory.iter_mut().find(|(t, _)| t.kind == "BackupStorageLocation") {
        slot.1.push(bsl("default", "ReadWrite"));
    }
    let writer = agent(bed.agent_config(coordinator.addr, "cluster-c"), &c_inventory);
    let status = location(&mut operator, |l| !l.collision.is_empty()).await;
    assert_eq!(status.writers, ["cluster-c"]);
    assert!(status.collision.contains("not by its sourceCluster cluster-a"), "{}", status.collision);
    let held = wait_desired(&reader, |d| collision_item(d).is_some()).await;
    assert_eq!(creates(&held), 0, "nothing new is materialized from a collided location: {held:#?}");
    assert!(collision_item(&held).is_some_and(|r| r.contains("cluster-c (BSL default)")), "{held:#?}");
    // `ferry describe backup` says so in the backup's location section.
    let described = operator
        .describe_backup(DescribeBackupRequest { name: "manual-2".into() })
        .await
        .expect("describe")
        .into_inner();
    let locations = described.bucket.expect("in the bucket").locations;
    assert!(locations[0].collision.starts_with("collision: location \"shared\""), "{locations:?}");

    // cluster-b's BSL turns read-write as well: two writers.
    reader.upsert(vec![bsl("dr-bsl", "")]);
    let status = location(&mut operator, |l| l.writers.len() == 2).await;
    assert_eq!(status.writers, ["cluster-b", "cluster-c"]);
    assert!(status.collision.contains("is written by 2 clusters"), "{}", status.collision);

    // Both turn read-only: resolved, and cluster-b's set creates again.
    reader.upsert(vec![bsl("dr-bsl", "ReadOnly")]);
    writer.upsert(vec![bsl("default", "ReadOnly")]);
    let status = location(&mut operator, |l| l.collision.is_empty()).await;
    assert!(status.writers.is_empty());
    let resumed = wait_desired(&reader, |d| collision_item(d).is_none() && creates(d) > 0).await;
    assert!(creates(&resumed) > 0);

    reader.shutdown().await;
    writer.shutdown().await;
    coordinator.shutdown().await.expect("shutdown");
}
