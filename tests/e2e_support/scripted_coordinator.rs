//! A coordinator that sends one fixed DesiredSet: a test server speaking ferry's protocol over mTLS with the
//! coordinator's certificate, for a real `ferry agent` on the bed. It plays a compromised coordinator
//! (tests/e2e_hostile_coordinator.rs) or an honest one whose plan the cluster has moved past
//! (tests/e2e_sync_races.rs); and the objects as ferry's planner makes them.

use std::pin::Pin;
use std::time::Duration;

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
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};

use super::{Ferry, PREFIX, VELERO_NS, logs_hint};

/// Sends `set` once the agent's snapshot is in, and forwards the agent's results.
struct ScriptedCoordinator {
    set: DesiredSet,
    results: mpsc::UnboundedSender<ApplyResult>,
}

type Outbound = Pin<Box<dyn tokio_stream::Stream<Item = Result<CoordinatorMessage, Status>> + Send>>;

#[tonic::async_trait]
impl Federation for ScriptedCoordinator {
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
        Err(Status::unimplemented("scripted"))
    }

    async fn plan(&self, _: Request<PlanRequest>) -> Result<Response<PlanResponse>, Status> {
        Err(Status::unimplemented("scripted"))
    }

    async fn describe_backup(
        &self,
        _: Request<ferry::grpc::proto::DescribeBackupRequest>,
    ) -> Result<Response<ferry::grpc::proto::DescribeBackupResponse>, Status> {
        Err(Status::unimplemented("scripted"))
    }
}

/// The scripted coordinator, serving; `ferry` holds its PKI and address, for [`Ferry::start_agent`].
pub struct Scripted {
    pub ferry: Ferry,
    results: mpsc::UnboundedReceiver<ApplyResult>,
    server: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

impl Scripted {
    /// Writes a demo PKI (as the real bed's) and serves `set` with the coordinator's certificate.
    pub async fn serve(set: DesiredSet) -> Self {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let dir = tempfile::Builder::new().prefix("ferry-e2e-scripted-").tempdir().expect("dir");
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
        let (results_tx, results) = mpsc::unbounded_channel();
        let service = FederationServer::new(ScriptedCoordinator { set, results: results_tx });
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .tls_config(tls)
                .expect("tls")
                .add_service(service)
                .serve_with_incoming(TcpListenerStream::new(listener)),
        );
        let ferry = Ferry {
            dir,
            coordinator: None,
            addr,
            agents: Default::default(),
            agent_metrics: Default::default(),
            status_page: None,
            status_page_listen: None,
            agent_args: Vec::new(),
        };
        Scripted { ferry, results, server }
    }

    /// The agent's first result with `reporting` items (REFUSE and CONFLICT items of a set get none).
    pub async fn result_of_items(&mut self, reporting: usize, wait: Duration) -> ApplyResult {
        let results = &mut self.results;
        tokio::time::timeout(wait, async {
            loop {
                let result = results.recv().await.expect("the agent reports");
                if result.items.len() == reporting {
                    return result;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no results in time:{}", logs_hint(&self.ferry)))
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The outcome and message of the item about `name` in `result`.
pub fn outcome_in(result: &ApplyResult, name: &str) -> (ApplyOutcome, String) {
    let item = result.items.iter().find(|i| i.r#ref.as_ref().is_some_and(|r| r.name == name)).expect(name);
    (ApplyOutcome::try_from(item.outcome).expect("outcome"), item.message.clone())
}

pub fn provenance(backup: &str, location: &str) -> Value {
    json!({labels::FERRY_SOURCE_CLUSTER: "a", labels::FERRY_SOURCE_LOCATION: location,
        labels::FERRY_SOURCE_BUCKET: "velero-backups", labels::FERRY_SOURCE_PREFIX: PREFIX,
        labels::FERRY_BACKUP_NAME: backup, labels::FERRY_BACKUP_UID: format!("uid-on-a-{backup}")})
}

/// A Backup as ferry plans it: of namespace `shop`, finished, on BSL `bsl`, with ferry's label and provenance.
pub fn planned_backup(name: &str, bsl: &str) -> Value {
    json!({"apiVersion": "velero.io/v1", "kind": "Backup",
        "metadata": {"name": name, "namespace": VELERO_NS,
            "labels": {labels::FERRY_MANAGED_BY: labels::FERRY_MANAGED_BY_VALUE, labels::VELERO_STORAGE_LOCATION: bsl},
            "annotations": provenance(name, "shared")},
        "spec": {"includedNamespaces": ["shop"], "storageLocation": bsl, "ttl": "720h0m0s"},
        "status": {"phase": "Completed", "expiration": "2099-01-01T00:00:00Z"}})
}

/// A tenant's Backup as ferry plans it, `placed_in` its (mapped) origin namespace.
pub fn planned_tenant_backup(nacuuid: &str, ns: &str, name: &str, placed_in: &str) -> Value {
    let mut backup = planned_backup(nacuuid, "dr");
    backup["spec"]["includedNamespaces"] = json!([ns]);
    let meta = &mut backup["metadata"];
    meta["labels"][labels::OADP] = labels::OADP_VALUE.into();
    meta["labels"][labels::MANAGED_BY] = labels::NAC_MANAGED_BY_VALUE.into();
    meta["labels"][labels::NAB_ORIGIN_NACUUID] = nacuuid.into();
    meta["annotations"][labels::NAB_ORIGIN_NAME] = name.into();
    meta["annotations"][labels::NAB_ORIGIN_NAMESPACE] = placed_in.into();
    if placed_in != ns {
        meta["annotations"][labels::FERRY_SOURCE_NAMESPACE] = ns.into();
    }
    backup
}

/// The synced NAB of a tenant Backup planned by [`planned_tenant_backup`].
pub fn planned_nab(backup: &Value, namespace: &str, name: &str) -> Value {
    let nacuuid = backup["metadata"]["name"].as_str().expect("name");
    let mut spec = backup["spec"].clone();
    spec["storageLocation"] = "".into();
    json!({"apiVersion": "oadp.openshift.io/v1alpha1", "kind": "NonAdminBackup",
        "metadata": {"name": name, "namespace": namespace,
            "labels": {labels::NAB_SYNCED_FROM_NACUUID: nacuuid, labels::FERRY_MANAGED_BY: labels::FERRY_MANAGED_BY_VALUE},
            "annotations": provenance(nacuuid, "shared")},
        "spec": {"backupSpec": spec}})
}

/// A PVB of `backup` (on BSL dr) for a pod in `pod_ns`, waiting for the Backup's UID.
pub fn planned_pvb(name: &str, backup: &str, pod_ns: &str) -> Value {
    json!({"apiVersion": "velero.io/v1", "kind": "PodVolumeBackup",
        "metadata": {"name": name, "namespace": VELERO_NS,
            "labels": {labels::FERRY_MANAGED_BY: labels::FERRY_MANAGED_BY_VALUE, labels::VELERO_BACKUP_NAME: backup,
                labels::VELERO_BACKUP_UID: ""},
            "annotations": provenance(backup, "shared"),
            "ownerReferences": [{"apiVersion": "velero.io/v1", "kind": "Backup", "name": backup, "uid": "",
                "controller": true}]},
        "spec": {"backupStorageLocation": "dr", "node": "node-a", "pod": {"kind": "Pod", "namespace": pod_ns, "name": "web-0"},
            "volume": "data", "snapshotID": "0123abcd", "repoIdentifier": "s3:http://minio/velero/kopia/shop",
            "uploaderType": "kopia"},
        "status": {"phase": "Completed"}})
}

pub fn sent(r: ObjectRef, body: &Value) -> DesiredItem {
    DesiredItem {
        action: DesiredAction::Create as i32,
        r#ref: Some(r),
        backup: "hostile".into(),
        raw_json: serde_json::to_vec(body).expect("json").into(),
        ..Default::default()
    }
}

pub fn sent_waiting(r: ObjectRef, body: &Value, waits: Vec<ObjectRef>) -> DesiredItem {
    DesiredItem { action: DesiredAction::Wait as i32, waits_for: waits, ..sent(r, body) }
}

pub fn ref_of(body: &Value) -> ObjectRef {
    let text = |p: &str| body.pointer(p).and_then(Value::as_str).unwrap_or_default();
    object_ref(text("/kind"), text("/metadata/namespace"), text("/metadata/name"))
}
