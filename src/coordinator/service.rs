//! The coordinator's side of the protocol: the tonic `Federation` service over the [`Hub`].
//!
//! Every rpc starts by deriving the caller's role from its verified client certificate
//! ([`Authentication::caller`]) and asking [`authz`](crate::grpc::authz). An accepted `Session` then runs as its
//! own task (`session.rs`).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tonic::transport::CertificateDer;
use tonic::{Request, Response, Status, Streaming};

use super::hub::{Hub, HubError};
use super::legacy_volumes;
use super::session::{self, RevocationWatch, SessionStream};
use crate::bucket::Loader;
use crate::grpc::authz::{Rpc, authorize};
use crate::grpc::identity::{Authentication, Role};
use crate::grpc::proto::agent_message::Body as AgentBody;
use crate::grpc::proto::federation_server::{Federation, FederationServer};
use crate::grpc::proto::{
    AgentMessage, DescribeBackupRequest, DescribeBackupResponse, GetStatusRequest, GetStatusResponse, PlanRequest,
    PlanResponse,
};
use crate::grpc::revocation::RevocationList;
use crate::plan::PlanOptions;

/// How long a new stream may take to send its `Hello`.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

pub struct FederationService {
    hub: Arc<Hub>,
    authentication: Authentication,
    /// Flips to true on shutdown: sessions say goodbye and end.
    shutdown: watch::Receiver<bool>,
    /// Options for the `Plan` rpc (the clock is read per call).
    plan_options: PlanOptions,
    /// The locations' loaders, for what `DescribeBackup` reads on demand (a legacy backup's tarball).
    loaders: Arc<Vec<Loader>>,
    /// The coordinator's revocation list and the trust domain of its identities, when it has one.
    revocations: Option<(watch::Receiver<Arc<RevocationList>>, String)>,
}

impl FederationService {
    pub fn new(
        hub: Arc<Hub>,
        authentication: Authentication,
        shutdown: watch::Receiver<bool>,
        plan_options: PlanOptions,
    ) -> Self {
        Self { hub, authentication, shutdown, plan_options, loaders: Arc::new(Vec::new()), revocations: None }
    }

    /// The same service, able to read the locations on demand (`DescribeBackup`).
    pub fn with_loaders(mut self, loaders: Vec<Loader>) -> Self {
        self.loaders = Arc::new(loaders);
        self
    }

    /// The same service, refusing callers whose certificate `revocations` names (checked on every rpc, and an
    /// agent stream is ended when the list comes to name its certificate).
    pub fn with_revocations(mut self, revocations: watch::Receiver<Arc<RevocationList>>, trust_domain: String) -> Self {
        self.revocations = Some((revocations, trust_domain));
        self
    }

    /// The caller, refused when its certificate is revoked. The handshake already refuses revoked certificates;
    /// this catches a connection opened before its certificate was revoked, which may still start rpcs.
    fn caller<T>(&self, request: &Request<T>) -> Result<(Role, Option<RevocationWatch>), Status> {
        let role = self.authentication.caller(request)?;
        let Some((list, trust_domain)) = &self.revocations else { return Ok((role, None)) };
        let leaf = request.peer_certs().and_then(|chain| chain.first().map(|c: &CertificateDer<'static>| c.to_vec()));
        let Some(leaf) = leaf else { return Ok((role, None)) };
        if let Some(revoked) = list.borrow().check(&leaf, trust_domain) {
            self.hub.telemetry.revoked(&revoked.identity, "rpc");
            tracing::warn!(identity = %revoked.identity, serial = %revoked.serial, by = revoked.by,
                "refused an rpc of a revoked certificate");
            return Err(Status::permission_denied(revoked.to_string()));
        }
        let watch = RevocationWatch { list: list.clone(), leaf, trust_domain: trust_domain.clone() };
        Ok((role, Some(watch)))
    }

    /// The tonic service with ferry's message size limits on both directions.
    pub fn into_server(self) -> FederationServer<Self> {
        let limit = self.hub.settings.max_message_bytes;
        FederationServer::new(self).max_decoding_message_size(limit).max_encoding_message_size(limit)
    }

    /// Refuses every rpc on a replica that does not lead: an agent then tries its next coordinator address
    /// (or, behind a Service, reaches the leader, the only ready replica).
    fn serving(&self) -> Result<(), Status> {
        match self.hub.role.borrow().not_serving() {
            None => Ok(()),
            Some(reason) => Err(Status::unavailable(reason)),
        }
    }
}

#[tonic::async_trait]
impl Federation for FederationService {
    type SessionStream = SessionStream;

    async fn session(&self, request: Request<Streaming<AgentMessage>>) -> Result<Response<SessionStream>, Status> {
        self.serving()?;
        let (role, revocation) = self.caller(&request)?;
        let cluster = authorize(&role, Rpc::Session)?.unwrap_or_default().to_string();
        if !self.hub.knows(&cluster) {
            return Err(Status::permission_denied(HubError::UnknownCluster(cluster).to_string()));
        }
        let mut inbound = request.into_inner();
        let hello = match tokio::time::timeout(HELLO_TIMEOUT, inbound.message()).await {
            Ok(Ok(Some(AgentMessage { body: Some(AgentBody::Hello(hello)) }))) => hello,
            Ok(Err(status)) => return Err(status),
            Err(_) => return Err(Status::deadline_exceeded("no Hello within 10 s")),
            Ok(Ok(_)) => return Err(Status::invalid_argument("the first message of a Session must be Hello")),
        };
        let handle = self.hub.open_session(&cluster, &hello, SystemTime::now()).map_err(hub_status)?;
        tracing::info!(%cluster, session = handle.id, version = %hello.software_version, "agent connected");
        let outbound =
            session::spawn(self.hub.clone(), cluster, handle, &hello, self.shutdown.clone(), inbound, revocation);
        Ok(Response::new(outbound))
    }

    async fn get_status(&self, request: Request<GetStatusRequest>) -> Result<Response<GetStatusResponse>, Status> {
        self.serving()?;
        let (role, _) = self.caller(&request)?;
        authorize(&role, Rpc::GetStatus)?;
        let filter = Some(request.get_ref().cluster.as_str()).filter(|c| !c.is_empty());
        let mut status = self.hub.status(filter, SystemTime::now()).map_err(hub_status)?;
        status.caller = role.to_string();
        Ok(Response::new(status))
    }

    async fn plan(&self, request: Request<PlanRequest>) -> Result<Response<PlanResponse>, Status> {
        self.serving()?;
        let (role, _) = self.caller(&request)?;
        authorize(&role, Rpc::Plan)?;
        let options = PlanOptions { now: SystemTime::now(), ..self.plan_options.clone() };
        let hub = self.hub.clone();
        let cluster = request.into_inner().cluster;
        // Planning is CPU work; keep it off the threads that serve the streams.
        let desired = tokio::task::spawn_blocking(move || hub.plan_now(&cluster, &options))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(hub_status)?;
        Ok(Response::new(PlanResponse { desired_set: Some(desired) }))
    }

    async fn describe_backup(
        &self,
        request: Request<DescribeBackupRequest>,
    ) -> Result<Response<DescribeBackupResponse>, Status> {
        self.serving()?;
        let (role, _) = self.caller(&request)?;
        authorize(&role, Rpc::DescribeBackup)?;
        let name = &request.get_ref().name;
        if name.is_empty() {
            return Err(Status::invalid_argument("DescribeBackupRequest.name is empty"));
        }
        let mut described =
            self.hub.describe_backup(name, SystemTime::now()).map_err(|e| Status::not_found(e.to_string()))?;
        described.caller = role.to_string();
        legacy_volumes::add_legacy_volume_backups(&mut described, &self.loaders).await;
        Ok(Response::new(described))
    }
}

fn hub_status(error: HubError) -> Status {
    match error {
        HubError::UnknownCluster(_) => Status::not_found(error.to_string()),
        HubError::Replaced(_) => Status::aborted(error.to_string()),
    }
}
