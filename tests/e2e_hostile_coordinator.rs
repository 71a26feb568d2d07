//! End to end on the real test bed (docs/design.md §6; threat model in docs/security.md): a compromised coordinator. A test server speaks ferry's
//! protocol over mTLS with the coordinator's certificate and sends a real `ferry agent` (bound to deploy/'s
//! least-privilege RBAC, on a real kube-apiserver with Velero's CRDs) a DesiredSet of hostile items next to one
//! good one. The agent refuses each hostile item itself — REFUSED with the reason, a Warning Event, nothing
//! written — while the good item is applied in the same pass.

#[path = "e2e_support/mod.rs"]
mod e2e;

use std::pin::Pin;
use std::time::Duration;

use e2e::*;
use ferry::grpc::certs::{self, CertsSpec, Validity};
use ferry::grpc::convert::object_ref;
use ferry::grpc::proto::agent_message::Body as AgentBody;
use ferry::grpc::proto::coordinator_message::Body as CoordinatorBody;
use ferry::grpc::proto::federation_server::{Federation, FederationServer};
use ferry::grpc::proto::{
    AgentMessage, ApplyOutcome, ApplyResult, CoordinatorMessage, DesiredAction, DesiredItem, DesiredSet,
    GetStatusRequest, GetStatusResponse, ObjectRef, PlanRequest, PlanResponse,
};
use ferry::grpc::tls::{TlsFiles, server_tls_config};
use ferry::model::labels;
use kube::api::ListParams;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};

const WAIT: Duration = Duration::from_secs(60);

/// A coordinator that sends one fixed DesiredSet once the agent's snapshot is in, and forwards its results.
struct Hostile {
    set: DesiredSet,
    results: mpsc::UnboundedSender<ApplyResult>,
}

type Outbound = Pin<Box<dyn tokio_stream::Stream<Item = Result<CoordinatorMessage, Status>> + Send>>;

#[tonic::async_trait]
impl Federation for Hostile {
    type SessionStream = Outbound;

    async fn session(&self, request: Request<Streaming<AgentMessage>>) -> Result<Response<Outbound>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(16);
        let (set, results) = (self.set.clone(), self.results.clone());
        tokio::spawn(async move {
            let mut sent = false;
            while let Ok(Some(message)) = inbound.message().await {
                match message.body {
                    Some(AgentBody::Snapshot(snapshot)) if snapshot.last && !sent => {
                        sent = true;
                        let body = Some(CoordinatorBody::DesiredSet(set.clone()));
                        if tx.send(Ok(CoordinatorMessage { body })).await.is_err() {
                            return;
                        }
                    }
                    Some(AgentBody::ApplyResult(result)) => {
                        let _ = results.send(result);
                    }
                    _ => {}
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn get_status(&self, _: Request<GetStatusRequest>) -> Result<Response<GetStatusResponse>, Status> {
        Err(Status::unimplemented("hostile"))
    }

    async fn plan(&self, _: Request<PlanRequest>) -> Result<Response<PlanResponse>, Status> {
        Err(Status::unimplemented("hostile"))
    }

    async fn describe_backup(
        &self,
        _: Request<ferry::grpc::proto::DescribeBackupRequest>,
    ) -> Result<Response<ferry::grpc::proto::DescribeBackupResponse>, Status> {
        Err(Status::unimplemented("hostile"))
    }
}

fn labelled(api_version: &str, kind: &str, namespace: &str, name: &str, status: Option<Value>) -> Value {
    let mut object = json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {labels::FERRY_MANAGED_BY: labels::FERRY_MANAGED_BY_VALUE}},
        "spec": {}});
    if let Some(status) = status {
        object["status"] = status;
    }
    object
}

fn create(r: ObjectRef, body: &Value) -> DesiredItem {
    DesiredItem {
        action: DesiredAction::Create as i32,
        r#ref: Some(r),
        backup: "hostile".into(),
        raw_json: serde_json::to_vec(body).expect("json").into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compromised_coordinator_gets_nothing_hostile_applied() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let bed = TestBed::up();
    let b = bed.admin("b").await;

    let completed = Some(json!({"phase": "Completed"}));
    // A Backup that Velero on b would *run*: no status, and it names kube-system.
    let mut runs = labelled("velero.io/v1", "Backup", VELERO_NS, "runs-on-b", None);
    runs["spec"] = json!({"includedNamespaces": ["kube-system"], "storageLocation": "default"});
    let config_map = ObjectRef {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: "default".into(),
        name: "planted".into(),
    };
    let items = vec![
        create(object_ref("Backup", VELERO_NS, "runs-on-b"), &runs),
        create(
            object_ref("NonAdminBackup", "kube-system", "nightly"),
            &labelled("oadp.openshift.io/v1alpha1", "NonAdminBackup", "kube-system", "nightly", None),
        ),
        create(config_map, &labelled("v1", "ConfigMap", "default", "planted", None)),
        create(
            object_ref("Backup", VELERO_NS, "named-x"),
            &labelled("velero.io/v1", "Backup", VELERO_NS, "actually-y", completed.clone()),
        ),
        create(
            object_ref("Backup", "default", "elsewhere"),
            &labelled("velero.io/v1", "Backup", "default", "elsewhere", completed.clone()),
        ),
        create(
            object_ref("PodVolumeBackup", VELERO_NS, "unfinished"),
            &labelled("velero.io/v1", "PodVolumeBackup", VELERO_NS, "unfinished", Some(json!({"phase": "InProgress"}))),
        ),
        create(
            object_ref("Backup", VELERO_NS, "good"),
            &labelled("velero.io/v1", "Backup", VELERO_NS, "good", completed),
        ),
    ];
    let set = DesiredSet { version: "hostile-1".into(), items, complete: true, ..Default::default() };

    // The coordinator's certificate and the agents' from the same demo PKI as the real bed uses.
    let dir = tempfile::Builder::new().prefix("ferry-e2e-hostile-").tempdir().expect("dir");
    certs::write_all(&CertsSpec {
        out: dir.path().join("pki"),
        trust_domain: "ferry.local".into(),
        clusters: vec!["a".into(), "b".into()],
        operators: vec![],
        coordinator_sans: vec![],
        validity: Validity::days_from_now(1),
    })
    .expect("pki");
    let pki = dir.path().join("pki");
    let tls = server_tls_config(&TlsFiles {
        ca: pki.join("ca.pem"),
        cert: pki.join("coordinator.pem"),
        key: pki.join("coordinator-key.pem"),
    })
    .expect("server tls");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let (results_tx, mut results) = mpsc::unbounded_channel();
    let service = FederationServer::new(Hostile { set, results: results_tx });
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .tls_config(tls)
            .expect("tls")
            .add_service(service)
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );

    let mut ferry = Ferry {
        dir,
        coordinator: None,
        addr,
        agents: Default::default(),
        agent_metrics: Default::default(),
        status_page: None,
        status_page_listen: None,
    };
    ferry.start_agent(&bed, "b");

    let result = tokio::time::timeout(WAIT, async {
        loop {
            let result = results.recv().await.expect("the agent reports");
            if result.items.len() == 7 {
                return result;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no results in time:{}", logs_hint(&ferry)));
    let outcome = |name: &str| {
        let item = result.items.iter().find(|i| i.r#ref.as_ref().is_some_and(|r| r.name == name)).expect(name);
        (ApplyOutcome::try_from(item.outcome).expect("outcome"), item.message.clone())
    };
    let expected = [
        ("runs-on-b", "Velero would run it"),
        ("nightly", "protected namespace"),
        ("planted", "not a kind an agent creates"),
        ("named-x", "metadata.name is \"actually-y\""),
        ("elsewhere", "outside this cluster's Velero namespace"),
        ("unfinished", "\"InProgress\""),
    ];
    for (name, why) in expected {
        let (outcome, message) = outcome(name);
        assert_eq!(outcome, ApplyOutcome::Refused, "{name}: {message}");
        assert!(message.contains(why), "{name}: {message}");
    }
    assert_eq!(outcome("good").0, ApplyOutcome::Applied, "the good item of the same set is applied");

    // Nothing hostile is on the cluster: only the good Backup exists.
    let names: Vec<String> = backups(&b)
        .list(&ListParams::default())
        .await
        .expect("backups")
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    assert_eq!(names, ["good"]);
    assert!(api(&b, "velero.io", "v1", "Backup", Some("default")).get_opt("elsewhere").await.expect("get").is_none());
    assert!(pvbs(&b).get_opt("unfinished").await.expect("get").is_none());
    assert!(nabs(&b, Some("kube-system")).get_opt("nightly").await.expect("get").is_none());
    assert!(api(&b, "", "v1", "ConfigMap", Some("default")).get_opt("planted").await.expect("get").is_none());
    let events = api(&b, "events.k8s.io", "v1", "Event", Some(VELERO_NS));
    eventually("Warning Events for the refused items", WAIT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        let refused = list.items.iter().filter(|e| e.data["reason"] == "FerryAgentRefused").count();
        (refused >= 3).then_some(())
    })
    .await;
    server.abort();
}
