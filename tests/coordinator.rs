//! The coordinator and the agent client on real sockets (127.0.0.1, mTLS): desired sets, authorization,
//! identity, bad input, liveness, replacement, kills and restarts.

#[path = "federation_support/mod.rs"]
mod support;

use std::time::{Duration, Instant, SystemTime};

use ferry::coordinator::Settings;
use ferry::coordinator::cluster::Liveness;
use ferry::grpc::convert::{inventory_item, watched_types};
use ferry::grpc::proto::{
    AgentMessage, ApplyOutcome, ApplyResult, CoordinatorMessage, DesiredAction, DesiredSet, GetStatusRequest, Hello,
    InventoryItem, ItemResult, PlanRequest, Resync, Snapshot,
};
use ferry::plan::{PlanOptions, plan_cluster};
use serde_json::json;
use support::*;
use tokio_stream::StreamExt as _;
use tonic::Code;

fn namespaces(names: &[&str]) -> Vec<InventoryItem> {
    names.iter().map(|n| inventory_item("Namespace", &json!({"kind": "Namespace", "metadata": {"name": n}}))).collect()
}

/// The coordinator's `/metrics` page as it is now, and the value of one sample on it.
fn metric(coordinator: &ferry::coordinator::RunningCoordinator, series: &str) -> Option<f64> {
    let status = coordinator.hub.status(None, SystemTime::now()).expect("status");
    let page = coordinator.hub.telemetry.render(&status).expect("metrics page");
    page.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn namespace_type() -> ferry::grpc::proto::ResourceType {
    watched_types().into_iter().find(|t| t.kind == "Namespace").expect("namespace type")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_gets_the_same_set_ferry_plan_computes_and_status_reports_its_results() {
    let bed = Bed::new();
    let coordinator = bed.start(fast_settings()).await;
    let agent = agent(bed.agent_config(coordinator.addr, "cluster-b"), &cluster_b_inventory());
    let desired = wait_desired(&agent, |d| d.complete && !d.items.is_empty()).await;

    // The same inputs through the offline planner give the same items (the coordinator adds transport only).
    let loaded = bed.config();
    let store = ferry::bucket::open(&loaded.store_config(&loaded.config.locations[0])).expect("store");
    let location = loaded.location(&loaded.config.locations[0], store.kind, &store.bucket);
    let catalog = ferry::bucket::Loader::new(store, location, 4).refresh(None).await.expect("catalog");
    let cluster = coordinator.hub.plan_now("cluster-b", &PlanOptions::default()).expect("plan");
    assert_eq!(cluster.version, desired.version, "a Plan rpc now computes what was sent");
    let mut state = ferry::plan::ClusterState {
        name: "cluster-b".into(),
        velero_namespace: "openshift-adp".into(),
        granted_locations: ["shared".to_string()].into(),
        ..Default::default()
    };
    let mut inventory = ferry::model::Inventory::default();
    for entry in std::fs::read_dir(example().join("inventories/cluster-b")).expect("dir") {
        let doc = serde_json::from_slice(&std::fs::read(entry.expect("entry").path()).expect("read")).expect("json");
        inventory.add_document(doc).expect("inventory");
    }
    state.inventory = inventory;
    let offline = plan_cluster(&[catalog], &state, &loaded.mappings, &PlanOptions::default());
    let offline = ferry::grpc::convert::desired_set(&offline, true);
    assert_eq!(offline.version, desired.version);
    assert!(desired.items.iter().any(|i| i.action == DesiredAction::Create as i32));

    // The agent reports results; the operator sees them.
    let created: Vec<ItemResult> = desired
        .items
        .iter()
        .filter(|i| i.action == DesiredAction::Create as i32)
        .map(|i| ItemResult { r#ref: i.r#ref.clone(), outcome: ApplyOutcome::Applied as i32, message: String::new() })
        .collect();
    let applied = created.len() as u64;
    agent.report(ApplyResult { desired_version: desired.version.clone(), items: created });
    let mut operator = bed.operator(coordinator.addr).await;
    let mut status = None;
    for _ in 0..100 {
        let s =
            operator.get_status(GetStatusRequest { cluster: "cluster-b".into() }).await.expect("status").into_inner();
        if s.clusters[0].applied == applied {
            status = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = status.expect("applied results show in status");
    assert_eq!(status.caller, "operator/admin");
    let b = &status.clusters[0];
    assert!(b.connected && !b.stale);
    assert_eq!(b.desired_version, desired.version);
    assert!(b.inventory_items > 0 && b.refused > 0, "{b:?}");
    assert!(!b.backups.is_empty(), "per-backup detail with a cluster filter");
    assert!(status.locations[0].healthy);
    assert!(!status.locations[0].errors.is_empty(), "the example bucket's bad objects are reported by key");

    agent.shutdown().await;
    coordinator.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_are_enforced() {
    let bed = Bed::new();
    let coordinator = bed.start(fast_settings()).await;

    // An operator certificate cannot open an agent stream.
    let operator_as_agent = agent(bed.agent_config(coordinator.addr, "operator-admin"), &[]);
    let link = wait_link(&operator_as_agent, |l| l.last_error.is_some()).await;
    let error = link.last_error.unwrap_or_default();
    assert!(error.contains("PermissionDenied") && error.contains("only agent certificates"), "{error}");
    operator_as_agent.abort();

    // A cluster the coordinator does not serve is refused.
    let intruder = agent(bed.agent_config(coordinator.addr, "intruder"), &[]);
    let error = wait_link(&intruder, |l| l.last_error.is_some()).await.last_error.unwrap_or_default();
    assert!(error.contains("PermissionDenied") && error.contains("not in the coordinator's config"), "{error}");
    intruder.abort();

    // An agent certificate cannot call the operator rpcs.
    let mut as_agent = bed.client(coordinator.addr, "cluster-b").await;
    let denied = as_agent.get_status(GetStatusRequest::default()).await.expect_err("agent may not read status");
    assert_eq!(denied.code(), Code::PermissionDenied);
    let denied = as_agent.plan(PlanRequest { cluster: "cluster-b".into() }).await.expect_err("agent may not plan");
    assert_eq!(denied.code(), Code::PermissionDenied);

    // The operator may.
    let mut operator = bed.operator(coordinator.addr).await;
    let plan = operator.plan(PlanRequest { cluster: "cluster-b".into() }).await.expect("operator plans");
    assert!(plan.into_inner().desired_set.is_some());
    let missing = operator.plan(PlanRequest { cluster: "nope".into() }).await.expect_err("unknown cluster");
    assert_eq!(missing.code(), Code::NotFound);
    coordinator.shutdown().await.expect("shutdown");
}

/// The wire form of an agent that claims, inside its messages, to be another cluster. ferry's protocol has no
/// such field; an agent built against a tampered proto can still put one on the wire (unknown field 100), and
/// the coordinator must ignore it: the certificate decides.
mod claiming {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Hello {
        #[prost(string, tag = "1")]
        pub software_version: String,
        #[prost(string, tag = "100")]
        pub cluster: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AgentMessage {
        #[prost(message, optional, tag = "1")]
        pub hello: Option<Hello>,
        #[prost(message, optional, tag = "2")]
        pub snapshot: Option<ferry::grpc::proto::Snapshot>,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_is_the_certificate_and_claims_in_messages_are_ignored() {
    let bed = Bed::new();
    let coordinator = bed.start(fast_settings()).await;
    let channel = bed.channel(coordinator.addr, "cluster-b").await;
    let messages = vec![
        claiming::AgentMessage {
            hello: Some(claiming::Hello { software_version: "evil".into(), cluster: "cluster-c".into() }),
            snapshot: None,
        },
        claiming::AgentMessage {
            hello: None,
            snapshot: Some(Snapshot {
                items: namespaces(&["claimed"]),
                resource: Some(namespace_type()),
                last: true,
                more: false,
            }),
        },
    ];
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("ready");
    let codec = tonic_prost::ProstCodec::<claiming::AgentMessage, CoordinatorMessage>::default();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/ferry.v1.Federation/Session");
    let stream = tokio_stream::iter(messages).chain(tokio_stream::pending());
    let response = grpc.streaming(tonic::Request::new(stream), path, codec).await.expect("session opens");
    let mut inbound = response.into_inner();
    // The snapshot is acknowledged, then the desired set of cluster-b (from the certificate) arrives.
    let _ = tokio::time::timeout(Duration::from_secs(5), inbound.message()).await.expect("ack in time");
    eventually("the inventory lands on cluster-b", || coordinator.hub.inventory_len("cluster-b") == 1).await;
    assert_eq!(coordinator.hub.inventory_len("cluster-c"), 0, "the claimed cluster is untouched");
    assert_eq!(coordinator.hub.liveness("cluster-c", SystemTime::now()), Some(Liveness::Disconnected));
    drop(inbound);
    coordinator.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_item_is_rejected_with_a_reason_and_the_stream_survives() {
    let bed = Bed::new();
    let coordinator = bed.start(fast_settings()).await;
    let mut items = namespaces(&["team-a-dr", "broken", "team-b"]);
    items[1].raw_json = b"{\"metadata\": {\"name\": \"broken\"".to_vec();
    let agent = agent(bed.agent_config(coordinator.addr, "cluster-b"), &[(namespace_type(), items)]);
    let link = wait_link(&agent, |l| !l.rejected.is_empty()).await;
    assert_eq!(link.rejected.len(), 1);
    let rejected = &link.rejected[0];
    assert_eq!(rejected.r#ref.as_ref().map(|r| r.name.as_str()), Some("broken"));
    assert!(rejected.reason.contains("not a JSON object"), "{}", rejected.reason);
    assert_eq!(coordinator.hub.inventory_len("cluster-b"), 2, "the good items were taken");
    assert_eq!(metric(&coordinator, "ferry_errors_total{kind=\"rejected_item\"}"), Some(1.0));

    // Same stream, later: a delta still works.
    agent.upsert(namespaces(&["later"]));
    eventually("the delta lands", || coordinator.hub.inventory_len("cluster-b") == 3).await;
    assert_eq!(agent.link().borrow().connects, 1, "no reconnect was needed");
    agent.shutdown().await;
    coordinator.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_is_refused_with_a_clear_error_and_others_are_unaffected() {
    let bed = Bed::new();
    let settings = Settings { max_message_bytes: 64 * 1024, ..fast_settings() };
    let coordinator = bed.start(settings).await;
    // Many small items travel in chunks under the limit; one item larger than the limit cannot be cut.
    let annotation = "x".repeat(80 * 1024);
    let huge = json!({"kind": "Namespace", "metadata": {"name": "huge", "annotations": {"note": annotation}}});
    let oversized = agent(
        bed.agent_config(coordinator.addr, "cluster-b"),
        &[(namespace_type(), vec![inventory_item("Namespace", &huge)])],
    );
    let error = wait_link(&oversized, |l| l.last_error.is_some()).await.last_error.unwrap_or_default();
    assert!(error.contains("too large") || error.contains("OutOfRange"), "{error}");
    assert!(error.contains("65536"), "the limit is named: {error}");
    oversized.abort();

    let fine = agent(bed.agent_config(coordinator.addr, "cluster-c"), &[(namespace_type(), namespaces(&["x"]))]);
    wait_desired(&fine, |_| true).await;
    fine.shutdown().await;
    coordinator.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_stream_of_the_same_cluster_replaces_the_first() {
    let bed = Bed::new();
    let coordinator = bed.start(fast_settings()).await;
    let mut first_config = bed.agent_config(coordinator.addr, "cluster-b");
    // The first agent must not win the stream back while the test looks.
    first_config.backoff = ferry::grpc::backoff::Backoff::new(Duration::from_secs(60), Duration::from_secs(60));
    let first = agent(first_config, &[(namespace_type(), namespaces(&["from-first", "also-first"]))]);
    wait_desired(&first, |_| true).await;
    assert_eq!(coordinator.hub.inventory_len("cluster-b"), 2);

    let second =
        agent(bed.agent_config(coordinator.addr, "cluster-b"), &[(namespace_type(), namespaces(&["from-second"]))]);
    let error = wait_link(&first, |l| !l.connected && l.last_error.is_some()).await.last_error.unwrap_or_default();
    assert!(error.contains("replaced by a newer stream of cluster cluster-b"), "{error}");
    wait_desired(&second, |_| true).await;
    // Replaced, not merged: only the second stream's snapshot counts.
    eventually("second snapshot replaces the first", || coordinator.hub.inventory_len("cluster-b") == 1).await;
    first.abort();
    second.shutdown().await;
    coordinator.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_agent_goes_stale_and_a_killed_one_disconnected() {
    let bed = Bed::new();
    let settings =
        Settings { heartbeat_interval: Duration::from_millis(100), stale_after_missed: 3, ..fast_settings() };
    let coordinator = bed.start(settings).await;
    let mut silent = bed.agent_config(coordinator.addr, "cluster-b");
    silent.heartbeat_interval = Duration::from_secs(3600);
    let silent = agent(silent, &[(namespace_type(), namespaces(&["a"]))]);
    wait_desired(&silent, |_| true).await;
    assert_eq!(coordinator.hub.liveness("cluster-b", SystemTime::now()), Some(Liveness::Live));
    eventually("stale after 3 missed heartbeats", || {
        coordinator.hub.liveness("cluster-b", SystemTime::now()) == Some(Liveness::Stale)
    })
    .await;
    let mut operator = bed.operator(coordinator.addr).await;
    let status = operator.get_status(GetStatusRequest::default()).await.expect("status").into_inner();
    let b = status.clusters.iter().find(|c| c.cluster == "cluster-b").expect("b");
    assert!(b.connected && b.stale);

    let beating = agent(bed.agent_config(coordinator.addr, "cluster-c"), &[(namespace_type(), namespaces(&["c"]))]);
    wait_desired(&beating, |_| true).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        coordinator.hub.liveness("cluster-c", SystemTime::now()),
        Some(Liveness::Live),
        "heartbeats keep it live"
    );

    // Killed mid-stream: the coordinator notices the connection drop; the inventory and set are kept.
    let version = beating.desired().borrow().as_ref().map(|d| d.version.clone());
    beating.abort();
    eventually("killed agent shows disconnected", || {
        coordinator.hub.liveness("cluster-c", SystemTime::now()) == Some(Liveness::Disconnected)
    })
    .await;
    assert_eq!(coordinator.hub.inventory_len("cluster-c"), 1, "inventory is kept for the next connect");
    let status =
        operator.get_status(GetStatusRequest { cluster: "cluster-c".into() }).await.expect("status").into_inner();
    assert_eq!(Some(status.clusters[0].desired_version.clone()), version);
    silent.abort();
    coordinator.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_coordinator_restart_agents_reconnect_and_converge_on_the_same_set() {
    let bed = Bed::new();
    let coordinator = bed.start(fast_settings()).await;
    let addr = coordinator.addr;
    let agent = agent(bed.agent_config(addr, "cluster-b"), &cluster_b_inventory());
    let before = wait_desired(&agent, |d| d.complete && !d.items.is_empty()).await;
    let mut link = agent.link();

    let started = Instant::now();
    coordinator.shutdown().await.expect("shutdown");
    assert!(started.elapsed() < Duration::from_secs(3), "graceful shutdown took {:?}", started.elapsed());
    let error = wait_link(&agent, |l| !l.connected).await.last_error.unwrap_or_default();
    assert!(error.contains("goodbye") && error.contains("shutting down"), "{error}");

    let restarted = bed.start_on(addr, fast_settings()).await;
    link.wait_for(|l| l.connects >= 2 && l.connected).await.expect("reconnects");
    // The new coordinator knows nothing but what the agent resent and the bucket holds, and plans the same set:
    // same version, so an agent that applied it has nothing to apply twice.
    eventually("inventory rebuilt", || restarted.hub.inventory_len("cluster-b") > 0).await;
    let after = wait_desired(&agent, |d| d.complete).await;
    assert_eq!(after.version, before.version);
    agent.shutdown().await;
    restarted.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_backup_in_the_bucket_and_a_new_namespace_each_produce_a_new_set() {
    let bed = Bed::new();
    let coordinator = bed.start(fast_settings()).await;
    // Cluster-b without its tenant namespace team-a-dr (mapped from team-a on cluster-a).
    let mut inventory = cluster_b_inventory();
    for (_, items) in &mut inventory {
        items.retain(|i| !(i.kind == "Namespace" && i.name == "team-a-dr"));
    }
    let agent = agent(bed.agent_config(coordinator.addr, "cluster-b"), &inventory);
    let waits_for_namespace = |d: &ferry::grpc::proto::DesiredSet| {
        d.items.iter().any(|i| i.waits_for.iter().any(|w| w.kind == "Namespace" && w.name == "team-a-dr"))
    };
    let first = wait_desired(&agent, |d| d.complete && !d.items.is_empty()).await;
    assert!(waits_for_namespace(&first), "a team-a NAB waits for team-a-dr");

    // A backup lands in the bucket (written the way Velero lays it out).
    let backups = bed.path().join("bucket/velero/backups");
    let template = backups.join("manual-2");
    let fresh = backups.join("manual-3");
    std::fs::create_dir_all(&fresh).expect("mkdir");
    let mut metadata: serde_json::Value =
        serde_json::from_slice(&std::fs::read(template.join("velero-backup.json")).expect("read")).expect("json");
    metadata["metadata"]["name"] = json!("manual-3");
    std::fs::write(fresh.join("velero-backup.json"), serde_json::to_vec(&metadata).expect("json")).expect("write");
    let with_backup = wait_desired(&agent, |d| d.items.iter().any(|i| i.backup == "manual-3")).await;
    assert_ne!(with_backup.version, first.version);

    // The tenant namespace appears on the cluster: the backup's Backup CR becomes a create, and its NAB in
    // team-a-dr now waits only for that Backup and its PVBs (Backup → PVBs → NAB), no namespace.
    agent.upsert(namespaces(&["team-a-dr"]));
    let after = wait_desired(&agent, |d| !waits_for_namespace(d)).await;
    let nab = after
        .items
        .iter()
        .find(|i| i.r#ref.as_ref().is_some_and(|r| r.kind == "NonAdminBackup" && r.namespace == "team-a-dr"))
        .expect("a NAB in team-a-dr");
    let backup_created = after.items.iter().any(|i| {
        i.backup == nab.backup
            && i.action == DesiredAction::Create as i32
            && i.r#ref.as_ref().is_some_and(|r| r.kind == "Backup")
    });
    assert!(backup_created, "{after:#?}");
    assert!(nab.waits_for.iter().all(|w| w.kind == "Backup" || w.kind == "PodVolumeBackup"), "{nab:?}");
    assert!(nab.waits_for.iter().any(|w| w.kind == "Backup"), "{nab:?}");
    agent.shutdown().await;
    coordinator.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_for_an_old_version_are_not_counted() {
    let bed = Bed::new();
    let coordinator = bed.start(fast_settings()).await;
    let agent = agent(bed.agent_config(coordinator.addr, "cluster-b"), &cluster_b_inventory());
    let desired = wait_desired(&agent, |d| d.complete && !d.items.is_empty()).await;
    let item = desired.items.iter().find(|i| i.action == DesiredAction::Create as i32).expect("a create");
    let r = item.r#ref.clone().expect("ref");
    let result = |version: &str| ApplyResult {
        desired_version: version.into(),
        items: vec![ItemResult {
            r#ref: Some(r.clone()),
            outcome: ApplyOutcome::Failed as i32,
            message: "boom".into(),
        }],
    };
    agent.report(result("an-old-version"));
    agent.report(result(&desired.version));
    eventually("result recorded", || coordinator.hub.result_of("cluster-b", &r).is_some()).await;
    assert_eq!(coordinator.hub.result_of("cluster-b", &r).as_deref(), Some("APPLY_OUTCOME_FAILED"));
    // Nor measured: the report on the old version neither counts nor ends the set's delivery; the current one does.
    let failed = "ferry_cluster_applies_total{cluster=\"cluster-b\",result=\"failed\"}";
    assert_eq!(metric(&coordinator, failed), Some(1.0));
    assert_eq!(metric(&coordinator, "ferry_errors_total{kind=\"apply_failed\"}"), Some(1.0));
    assert_eq!(metric(&coordinator, "ferry_delivery_latency_seconds_count"), Some(1.0));
    agent.shutdown().await;
    coordinator.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_an_agent_says_its_cluster_serves_decides_whether_it_gets_non_admin_backups() {
    use ferry::agent::discovery::ApiState;
    let bed = Bed::new();
    let coordinator = bed.start(fast_settings()).await;
    // A plain-Velero cluster: the same inventory without the NonAdminBackup kind, as its agent would publish it.
    let inventory: Vec<_> = cluster_b_inventory().into_iter().filter(|(t, _)| t.kind != "NonAdminBackup").collect();
    let mut apis = ApiState::default();
    let velero: std::collections::BTreeSet<String> =
        ["BackupStorageLocation", "Backup", "PodVolumeBackup"].into_iter().map(String::from).collect();
    apis.observe(&velero);
    for (t, _) in &inventory {
        apis.mark_listed(&t.kind);
    }
    apis.set_velero_version(Some("v1.18.3".into()));
    let client = ferry::agent::client::AgentClient::spawn_with_apis(
        bed.agent_config(coordinator.addr, "cluster-b"),
        inventory,
        Some(apis.cluster_apis()),
    );
    let is_nab = |i: &ferry::grpc::proto::DesiredItem| i.r#ref.as_ref().is_some_and(|r| r.kind == "NonAdminBackup");
    let plain = wait_desired(&client, |d| d.complete && !d.items.is_empty()).await;
    assert!(!plain.items.iter().any(is_nab), "no NonAdminBackups for a cluster without OADP");
    let reasons: Vec<&str> = plain.items.iter().map(|i| i.reason.as_str()).collect();
    assert!(reasons.iter().any(|r| r.contains("serves no NonAdminBackups")), "{reasons:?}");
    let mut operator = bed.operator(coordinator.addr).await;
    let status = operator.get_status(GetStatusRequest { cluster: String::new() }).await.expect("status").into_inner();
    let b = status.clusters.iter().find(|c| c.cluster == "cluster-b").expect("cluster-b");
    let said = b.apis.as_ref().expect("status carries what the agent said");
    assert_eq!(said.velero_version, "v1.18.3");
    assert!(!said.served.iter().any(|t| t.kind == "NonAdminBackup"));

    // OADP appears: the agent publishes the kind's first list, then says it serves it.
    let nab_kind = watched_types().into_iter().find(|t| t.kind == "NonAdminBackup").expect("NAB type");
    let nab_items = cluster_b_inventory().into_iter().find(|(t, _)| t.kind == "NonAdminBackup").expect("NABs").1;
    let mut with_oadp = velero.clone();
    with_oadp.insert("NonAdminBackup".into());
    apis.observe(&with_oadp);
    client.publish_snapshot(nab_kind, nab_items);
    assert!(apis.mark_listed("NonAdminBackup"));
    client.set_apis(apis.cluster_apis());
    let oadp = wait_desired(&client, |d| d.complete && d.items.iter().any(is_nab)).await;
    assert_ne!(oadp.version, plain.version);
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_and_desired_sets_over_the_message_limit_go_in_chunks() {
    use prost::Message;
    let bed = Bed::new();
    let limit = 24 * 1024;
    let coordinator = bed.start(Settings { max_message_bytes: limit, ..fast_settings() }).await;
    let mut inventory = cluster_b_inventory();
    // 5,000 namespaces: some 20 times the message limit in one snapshot.
    let names: Vec<String> = (0..5000).map(|i| format!("ns-{i:04}")).collect();
    let slot = inventory.iter_mut().find(|(t, _)| t.kind == "Namespace").expect("namespaces");
    slot.1.extend(namespaces(&names.iter().map(String::as_str).collect::<Vec<_>>()));
    let total: usize = inventory.iter().map(|(_, items)| items.len()).sum();
    let mut config = bed.agent_config(coordinator.addr, "cluster-b");
    config.max_message_bytes = limit;
    let client = agent(config, &inventory);
    let desired = wait_desired(&client, |d| d.complete && !d.items.is_empty()).await;
    assert_eq!(coordinator.hub.inventory_len("cluster-b"), total, "every chunk of the snapshot arrived");
    let whole = coordinator.hub.plan_now("cluster-b", &PlanOptions::default()).expect("plan");
    assert!(whole.encoded_len() > limit, "the test needs a set over the limit: {} bytes", whole.encoded_len());
    assert_eq!(desired.version, whole.version);
    assert_eq!(desired.items.len(), whole.items.len(), "the agent reassembled the whole set");
    assert!(client.link().borrow().last_error.is_none(), "no stream was lost on the size limit");
    client.shutdown().await;
    coordinator.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clusters_inventory_is_capped_and_the_excess_is_rejected_with_the_reason() {
    let bed = Bed::new();
    let coordinator = bed.start(Settings { max_inventory_items: 100, ..fast_settings() }).await;
    let names: Vec<String> = (0..150).map(|i| format!("ns-{i:03}")).collect();
    let inventory = vec![(namespace_type(), namespaces(&names.iter().map(String::as_str).collect::<Vec<_>>()))];
    let client = agent(bed.agent_config(coordinator.addr, "cluster-b"), &inventory);
    let link = wait_link(&client, |l| !l.rejected.is_empty()).await;
    assert_eq!(link.rejected.len(), 50);
    assert!(link.rejected[0].reason.contains("maxInventoryItems (100)"), "{}", link.rejected[0].reason);
    assert_eq!(coordinator.hub.inventory_len("cluster-b"), 100);
    client.shutdown().await;
    coordinator.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_agent_is_slowed_to_its_rate_while_other_clusters_keep_flowing() {
    let bed = Bed::new();
    let rate = 50;
    let coordinator = bed.start(Settings { max_messages_per_second: rate, ..fast_settings() }).await;
    let flooder = agent(bed.agent_config(coordinator.addr, "cluster-c"), &[(namespace_type(), Vec::new())]);
    wait_link(&flooder, |l| l.connected).await;
    let started = Instant::now();
    for i in 0..2000 {
        flooder.upsert(namespaces(&[&format!("flood-{i}")]));
    }
    // Meanwhile cluster-b connects and gets its set as usual.
    let b = agent(bed.agent_config(coordinator.addr, "cluster-b"), &cluster_b_inventory());
    let desired = wait_desired(&b, |d| d.complete && !d.items.is_empty()).await;
    assert!(started.elapsed() < Duration::from_secs(5), "cluster-b waited {:?} behind the flood", started.elapsed());
    assert!(!desired.items.is_empty());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let processed = flooder.link().borrow().acks;
    let seconds = started.elapsed().as_secs_f64();
    let ceiling = (f64::from(rate) * (seconds + 1.0)) as u64 + 5;
    assert!(processed <= ceiling, "{processed} messages taken in {seconds:.1} s at {rate}/s (ceiling {ceiling})");
    assert!(processed >= u64::from(rate) / 2, "the flooder is slowed, not cut off: {processed}");
    flooder.abort();
    b.shutdown().await;
    coordinator.shutdown().await.expect("shutdown");
}

/// A raw agent stream: Hello with `capabilities`, then cluster-b's snapshots; returns the sender (to send more)
/// and the coordinator's messages.
async fn raw_session(
    bed: &Bed,
    addr: std::net::SocketAddr,
    capabilities: &[&str],
) -> (tokio::sync::mpsc::Sender<AgentMessage>, tonic::Streaming<CoordinatorMessage>) {
    use ferry::grpc::proto::agent_message::Body;
    let channel = bed.channel(addr, "cluster-b").await;
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let hello = Hello { capabilities: capabilities.iter().map(|c| c.to_string()).collect(), ..Default::default() };
    tx.send(AgentMessage { body: Some(Body::Hello(hello)) }).await.expect("hello");
    let inventory = cluster_b_inventory();
    let count = inventory.len();
    for (i, (resource, items)) in inventory.into_iter().enumerate() {
        let snapshot = Snapshot { items, resource: Some(resource), last: i + 1 == count, more: false };
        tx.send(AgentMessage { body: Some(Body::Snapshot(snapshot)) }).await.expect("snapshot");
    }
    let mut client = ferry::grpc::proto::federation_client::FederationClient::new(channel);
    let inbound = client.session(tokio_stream::wrappers::ReceiverStream::new(rx)).await.expect("session").into_inner();
    (tx, inbound)
}

/// The next DesiredSet on a raw stream (acks skipped).
/// The next set on the stream: a delta, or a whole set with its chunks put together.
async fn next_set(inbound: &mut tonic::Streaming<CoordinatorMessage>) -> DesiredSet {
    use ferry::grpc::proto::coordinator_message::Body;
    let mut partial = None;
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), inbound.message())
            .await
            .expect("a message in time")
            .expect("stream healthy")
            .expect("stream open");
        if let Some(Body::DesiredSet(chunk)) = message.body
            && let Some(set) = ferry::grpc::chunks::assemble(&mut partial, chunk)
        {
            return set;
        }
    }
}

fn sorted(mut items: Vec<ferry::grpc::proto::DesiredItem>) -> Vec<ferry::grpc::proto::DesiredItem> {
    items.sort_by_key(|i| i.r#ref.as_ref().map(|r| (r.kind.clone(), r.namespace.clone(), r.name.clone())));
    items
}

/// Writes backup `name` into the example bucket, copied from manual-2 (the way Velero lays it out).
fn land_backup(bed: &Bed, name: &str) {
    let backups = bed.path().join("bucket/velero/backups");
    let fresh = backups.join(name);
    std::fs::create_dir_all(&fresh).expect("mkdir");
    let mut metadata: serde_json::Value =
        serde_json::from_slice(&std::fs::read(backups.join("manual-2/velero-backup.json")).expect("read"))
            .expect("json");
    metadata["metadata"]["name"] = json!(name);
    std::fs::write(fresh.join("velero-backup.json"), serde_json::to_vec(&metadata).expect("json")).expect("write");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_goes_as_a_delta_to_agents_that_fold_it_and_whole_to_others_and_after_a_resync() {
    use ferry::grpc::chunks::CHUNKED_DESIRED_SETS;
    use ferry::grpc::proto::agent_message::Body;
    use ferry::grpc::set_delta::{self, DESIRED_SET_DELTAS};
    let bed = Bed::new();
    let coordinator = bed.start(fast_settings()).await;
    let (tx, mut inbound) = raw_session(&bed, coordinator.addr, &[CHUNKED_DESIRED_SETS, DESIRED_SET_DELTAS]).await;
    let mut first = next_set(&mut inbound).await;
    assert!(!set_delta::is_delta(&first), "the first set on a stream is whole");
    // Until the bucket's catalog is in, sets follow it (as deltas).
    while !first.complete || first.items.len() <= 3 {
        let next = next_set(&mut inbound).await;
        first = match set_delta::is_delta(&next) {
            true => set_delta::fold(Some(&first), next).expect("folds"),
            false => next,
        };
    }

    // One backup lands: the agent gets that backup's items only, against the set it holds.
    land_backup(&bed, "manual-3");
    let delta = next_set(&mut inbound).await;
    assert_eq!(delta.base_version, first.version);
    assert!(!delta.items.is_empty() && delta.items.iter().all(|i| i.backup == "manual-3"), "{delta:#?}");
    assert!(delta.items.len() < first.items.len());
    let folded = set_delta::fold(Some(&first), delta.clone()).expect("folds onto the held set");
    let whole = coordinator.hub.plan_now("cluster-b", &PlanOptions::default()).expect("plan");
    assert_eq!(folded.version, whole.version);
    assert_eq!(sorted(folded.items.clone()), sorted(whole.items.clone()), "the fold is the whole set");

    // An agent that cannot fold asks again: the whole set comes, on the same stream.
    let resync = Resync { held_version: "lost".into(), reason: "test".into() };
    tx.send(AgentMessage { body: Some(Body::Resync(resync)) }).await.expect("resync");
    let again = next_set(&mut inbound).await;
    assert!(!set_delta::is_delta(&again));
    assert_eq!((again.version.as_str(), again.items.len()), (whole.version.as_str(), whole.items.len()));
    drop((tx, inbound));

    // An agent without the capability gets the whole set on every change.
    let (tx, mut inbound) = raw_session(&bed, coordinator.addr, &[CHUNKED_DESIRED_SETS]).await;
    let _ = next_set(&mut inbound).await;
    land_backup(&bed, "manual-4");
    let changed = next_set(&mut inbound).await;
    assert!(!set_delta::is_delta(&changed));
    assert!(
        changed.items.iter().any(|i| i.backup == "manual-4") && changed.items.iter().any(|i| i.backup != "manual-4")
    );

    // And the agent client folds what it gets into the same set the coordinator plans.
    drop((tx, inbound));
    let client = agent(bed.agent_config(coordinator.addr, "cluster-b"), &cluster_b_inventory());
    let _ = wait_desired(&client, |d| d.items.iter().any(|i| i.backup == "manual-4")).await;
    land_backup(&bed, "manual-5");
    let folded = wait_desired(&client, |d| d.items.iter().any(|i| i.backup == "manual-5")).await;
    let whole = coordinator.hub.plan_now("cluster-b", &PlanOptions::default()).expect("plan");
    assert_eq!(folded.version, whole.version);
    assert_eq!(sorted(folded.items.clone()), sorted(whole.items.clone()));
    client.shutdown().await;
    coordinator.shutdown().await.expect("shutdown");
}
