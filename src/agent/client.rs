//! The agent's link to the coordinator, as a library: one long-lived `Session` stream that survives everything
//! a network and a restarting coordinator can do to it.
//!
//! The client keeps its own copy of the cluster's inventory (what the caller last published), so that on every
//! (re)connect it sends `Hello` and a full `Snapshot` of each resource type without asking the caller; changes
//! made while disconnected are simply part of the next snapshot. It reconnects with jittered exponential
//! backoff (tonic's channels do not resume streams), sends heartbeats, and exposes the latest `DesiredSet` as a
//! watch channel. The real agent (kube reflectors) and the tests and benchmark all drive it the same way; what
//! goes over the wire (chunks, deltas, TLS, backoff) is [`crate::grpc`]'s.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::transport::{ClientTlsConfig, Endpoint};

use crate::grpc::backoff::{Backoff, unit_random};
use crate::grpc::chunks::{self, CHUNKED_DESIRED_SETS, DEFAULT_MAX_MESSAGE_BYTES};
use crate::grpc::convert::lifted_map;
use crate::grpc::coordinator_identity::{CoordinatorIdentity, StrictConnector, StrictError, strict_client_config};
use crate::grpc::identity::DEV_IDENTITY_HEADER;
use crate::grpc::proto::agent_message::Body as AgentBody;
use crate::grpc::proto::coordinator_message::Body as CoordinatorBody;
use crate::grpc::proto::federation_client::FederationClient;
use crate::grpc::proto::{
    AgentMessage, ApplyResult, ClusterApis, Delta, DesiredSet, Heartbeat, Hello, InventoryItem, ObjectRef,
    RejectedItem, ResourceType, Resync, Snapshot,
};
use crate::grpc::set_delta::{self, DESIRED_SET_DELTAS};
use crate::grpc::tls::{TlsFiles, client_tls_config};

/// How to reach the coordinator and how to behave on the stream.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// `https://host:port` (or `http://` with `--insecure-dev`); several, comma-separated, for coordinator
    /// replicas without a Service in front: each failed or refused connect moves on to the next (a standby
    /// refuses, so the agent settles on the leader).
    pub endpoint: String,
    /// mTLS: the CA, this agent's certificate and key. `None` only for `--insecure-dev`.
    pub tls: Option<ClientTlsConfig>,
    /// When set, the same from files read again on every connect (and the name to check the coordinator's
    /// certificate against), so that a renewed certificate is used without a restart; `tls` is then the
    /// fallback if the files cannot be read at that moment.
    pub tls_files: Option<(TlsFiles, Option<String>)>,
    /// What the coordinator's certificate must name besides the DNS name (`--coordinator-identity`); anything but
    /// [`CoordinatorIdentity::Any`] needs `tls_files`. The library's default is `Any`; `ferry agent`'s is
    /// `auto` (docs/security.md, "Coordinator identity").
    pub coordinator_identity: CoordinatorIdentity,
    /// `--insecure-dev` only: the identity to claim (`cluster/<name>`), since there is no certificate.
    pub dev_identity: Option<String>,
    pub heartbeat_interval: Duration,
    pub backoff: Backoff,
    pub software_version: String,
    pub capabilities: Vec<String>,
    pub max_message_bytes: usize,
    pub connect_timeout: Duration,
}

impl AgentConfig {
    pub fn new(endpoint: impl Into<String>, tls: Option<ClientTlsConfig>) -> Self {
        Self {
            endpoint: endpoint.into(),
            tls,
            dev_identity: None,
            tls_files: None,
            coordinator_identity: CoordinatorIdentity::Any,
            heartbeat_interval: Duration::from_secs(10),
            backoff: Backoff::default(),
            software_version: env!("CARGO_PKG_VERSION").into(),
            capabilities: vec![CHUNKED_DESIRED_SETS.into(), DESIRED_SET_DELTAS.into()],
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// The state of the link, for callers that report or wait on it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Link {
    /// A stream is open and its snapshots were sent.
    pub connected: bool,
    /// How many times a stream was opened.
    pub connects: u64,
    /// Why the last stream ended (or the last connect failed).
    pub last_error: Option<String>,
    /// Items the coordinator rejected in its most recent `Ack` that rejected anything.
    pub rejected: Vec<RejectedItem>,
    /// Acks received on the current stream.
    pub acks: u64,
}

enum Command {
    Snapshot(ResourceType, Vec<InventoryItem>),
    Upsert(Vec<InventoryItem>),
    Delete(Vec<ObjectRef>),
    Report(ApplyResult),
    Apis(ClusterApis),
}

/// A running agent client. Dropping it (or calling [`AgentClient::shutdown`]) closes the stream.
pub struct AgentClient {
    commands: mpsc::UnboundedSender<Command>,
    desired: watch::Receiver<Option<Arc<DesiredSet>>>,
    link: watch::Receiver<Link>,
    task: JoinHandle<()>,
}

impl AgentClient {
    /// Starts the client with the cluster's initial inventory (one entry per watched type, even if empty); it
    /// connects in the background and keeps reconnecting until shut down.
    pub fn spawn(config: AgentConfig, initial: Vec<(ResourceType, Vec<InventoryItem>)>) -> Self {
        Self::spawn_with_apis(config, initial, None)
    }

    /// As [`AgentClient::spawn`], saying in every `Hello` which kinds the cluster serves (`None`: not said,
    /// which the coordinator takes as every kind).
    pub fn spawn_with_apis(
        config: AgentConfig,
        initial: Vec<(ResourceType, Vec<InventoryItem>)>,
        apis: Option<ClusterApis>,
    ) -> Self {
        let (commands, rx) = mpsc::unbounded_channel();
        let (desired_tx, desired) = watch::channel(None);
        let (link_tx, link) = watch::channel(Link::default());
        let mut mirror = Mirror { apis, ..Mirror::default() };
        for (resource, items) in initial {
            mirror.apply(Command::Snapshot(resource, items));
        }
        let task = tokio::spawn(run(config, mirror, rx, desired_tx, link_tx));
        Self { commands, desired, link, task }
    }

    /// Replaces everything of `resource`'s type (sent as a `Snapshot`, and on every reconnect).
    pub fn publish_snapshot(&self, resource: ResourceType, items: Vec<InventoryItem>) {
        let _ = self.commands.send(Command::Snapshot(resource, items));
    }

    /// Objects created or changed (sent as a `Delta`).
    pub fn upsert(&self, items: Vec<InventoryItem>) {
        let _ = self.commands.send(Command::Upsert(items));
    }

    /// Objects that are gone (sent as a `Delta`).
    pub fn delete(&self, refs: Vec<ObjectRef>) {
        let _ = self.commands.send(Command::Delete(refs));
    }

    /// Reports what happened to a DesiredSet's items; the latest report is sent again after a reconnect.
    pub fn report(&self, result: ApplyResult) {
        let _ = self.commands.send(Command::Report(result));
    }

    /// Which kinds the cluster serves changed (sent as `ClusterApis`, and in every later `Hello`). Send it after
    /// the snapshot of a newly served kind, so that the coordinator holds its inventory before planning it.
    pub fn set_apis(&self, apis: ClusterApis) {
        let _ = self.commands.send(Command::Apis(apis));
    }

    /// The latest DesiredSet received (`None` before the first).
    pub fn desired(&self) -> watch::Receiver<Option<Arc<DesiredSet>>> {
        self.desired.clone()
    }

    pub fn link(&self) -> watch::Receiver<Link> {
        self.link.clone()
    }

    /// Closes the stream and stops reconnecting.
    pub async fn shutdown(self) {
        drop(self.commands);
        let _ = self.task.await;
    }

    /// Stops at once, as if the process were killed (for fault tests).
    pub fn abort(self) {
        self.task.abort();
    }
}

/// What the client last published, to resend on reconnect.
#[derive(Default)]
struct Mirror {
    /// Types in the order they were first published (the coordinator gets snapshots in that order).
    types: Vec<ResourceType>,
    /// Each item without its lifted labels and annotations ([`kept`]): they are in its JSON, and are lifted again
    /// when resent. Held for every object of the cluster, for as long as the agent runs.
    objects: BTreeMap<(String, String), BTreeMap<(String, String), InventoryItem>>,
    last_result: Option<ApplyResult>,
    /// What the cluster serves, for `Hello`.
    apis: Option<ClusterApis>,
}

impl Mirror {
    /// Applies a command and returns the message that tells the coordinator.
    fn apply(&mut self, command: Command) -> AgentBody {
        match command {
            Command::Snapshot(resource, items) => {
                let key = (resource.group.clone(), resource.kind.clone());
                if !self.types.iter().any(|t| t.group == resource.group && t.kind == resource.kind) {
                    self.types.push(resource.clone());
                }
                let objects = items.iter().map(|i| ((i.namespace.clone(), i.name.clone()), kept(i))).collect();
                self.objects.insert(key, objects);
                AgentBody::Snapshot(Snapshot { items, resource: Some(resource), last: true, more: false })
            }
            Command::Upsert(items) => {
                for item in &items {
                    let key = (item.group.clone(), item.kind.clone());
                    self.objects
                        .entry(key)
                        .or_default()
                        .insert((item.namespace.clone(), item.name.clone()), kept(item));
                }
                AgentBody::Delta(Delta { upserts: items, deletes: Vec::new() })
            }
            Command::Delete(refs) => {
                for r in &refs {
                    if let Some(objects) = self.objects.get_mut(&(r.group.clone(), r.kind.clone())) {
                        objects.remove(&(r.namespace.clone(), r.name.clone()));
                    }
                }
                AgentBody::Delta(Delta { upserts: Vec::new(), deletes: refs })
            }
            Command::Report(result) => {
                self.last_result = Some(result.clone());
                AgentBody::ApplyResult(result)
            }
            Command::Apis(apis) => {
                self.apis = Some(apis.clone());
                AgentBody::Apis(apis)
            }
        }
    }

    /// Every message that re-establishes the coordinator's view after a connect.
    fn resync_messages(&self) -> Vec<AgentBody> {
        let count = self.types.len();
        let mut messages: Vec<AgentBody> = self
            .types
            .iter()
            .enumerate()
            .map(|(index, t)| {
                let items = self.objects.get(&(t.group.clone(), t.kind.clone()));
                let items = items.map(|m| m.values().map(resent).collect()).unwrap_or_default();
                AgentBody::Snapshot(Snapshot {
                    items,
                    resource: Some(t.clone()),
                    last: index + 1 == count,
                    more: false,
                })
            })
            .collect();
        messages.extend(self.last_result.clone().map(AgentBody::ApplyResult));
        messages
    }
}

/// `item` as the mirror keeps it: without the labels and annotations lifted out of its JSON (~1 KB an object).
fn kept(item: &InventoryItem) -> InventoryItem {
    InventoryItem {
        group: item.group.clone(),
        version: item.version.clone(),
        kind: item.kind.clone(),
        namespace: item.namespace.clone(),
        name: item.name.clone(),
        uid: item.uid.clone(),
        resource_version: item.resource_version.clone(),
        labels: Default::default(),
        annotations: Default::default(),
        raw_json: item.raw_json.clone(),
    }
}

/// A kept item as it was sent: its labels and annotations lifted from its JSON again.
fn resent(item: &InventoryItem) -> InventoryItem {
    let Ok(object) = serde_json::from_slice::<serde_json::Value>(&item.raw_json) else { return item.clone() };
    InventoryItem {
        labels: lifted_map(&object, "/metadata/labels"),
        annotations: lifted_map(&object, "/metadata/annotations"),
        ..item.clone()
    }
}

/// How a stream ended.
enum Exit {
    /// The caller shut the client down.
    Shutdown,
    /// The stream or the connect failed; reconnect after a backoff.
    Lost(String),
}

async fn run(
    config: AgentConfig,
    mut mirror: Mirror,
    mut commands: mpsc::UnboundedReceiver<Command>,
    desired: watch::Sender<Option<Arc<DesiredSet>>>,
    link: watch::Sender<Link>,
) {
    let mut backoff = config.backoff.clone();
    let endpoints: Vec<&str> = config.endpoint.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
    let mut next = 0;
    loop {
        let endpoint = endpoints.get(next % endpoints.len().max(1)).copied().unwrap_or_default();
        match session(&config, endpoint, &mut mirror, &mut commands, &desired, &link, &mut backoff).await {
            Exit::Shutdown => return,
            Exit::Lost(error) => {
                next += 1;
                tracing::warn!(%endpoint, %error, "coordinator stream lost; reconnecting");
                link.send_modify(|l| {
                    l.connected = false;
                    l.last_error = Some(error);
                });
            }
        }
        // Keep taking the caller's changes while waiting: they go out with the next snapshot.
        let wait = tokio::time::sleep(backoff.next_delay(unit_random()));
        tokio::pin!(wait);
        loop {
            tokio::select! {
                _ = &mut wait => break,
                command = commands.recv() => match command {
                    Some(command) => { mirror.apply(command); }
                    None => return,
                },
            }
        }
    }
}

/// The connector that checks the coordinator's identity, from the files read now; `None` when any server
/// certificate of the CA will do. Unlike the plain path there is no fallback to files read before: a strict
/// agent never connects without the check.
fn strict_connector(config: &AgentConfig) -> Result<Option<StrictConnector>, StrictError> {
    if config.coordinator_identity == CoordinatorIdentity::Any {
        return Ok(None);
    }
    let (files, domain) = config.tls_files.as_ref().ok_or(StrictError::NoFiles)?;
    let Some(expected) = config.coordinator_identity.expected(files)? else { return Ok(None) };
    let tls = strict_client_config(files, &expected)?;
    StrictConnector::new(tls, domain.as_deref()).map(Some)
}

async fn session(
    config: &AgentConfig,
    endpoint_url: &str,
    mirror: &mut Mirror,
    commands: &mut mpsc::UnboundedReceiver<Command>,
    desired: &watch::Sender<Option<Arc<DesiredSet>>>,
    link: &watch::Sender<Link>,
    backoff: &mut Backoff,
) -> Exit {
    let tune = |endpoint: Endpoint| {
        endpoint
            .connect_timeout(config.connect_timeout)
            .http2_keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(true)
            .tcp_nodelay(true)
    };
    let endpoint = match Endpoint::from_shared(endpoint_url.to_string()) {
        Ok(endpoint) => tune(endpoint),
        Err(e) => return Exit::Lost(format!("invalid endpoint {endpoint_url:?}: {e}")),
    };
    let strict = match strict_connector(config) {
        Ok(strict) => strict,
        Err(e) => return Exit::Lost(format!("strict coordinator identity: {e}")),
    };
    let connected = match strict {
        Some(connector) => {
            // tonic adds TLS of its own to an https:// endpoint; the connector brings ours, so tonic dials the
            // http:// form while requests keep the https:// origin.
            let plain = match Endpoint::from_shared(endpoint_url.replacen("https://", "http://", 1)) {
                Ok(plain) => tune(plain).origin(endpoint.uri().clone()),
                Err(e) => return Exit::Lost(format!("invalid endpoint {endpoint_url:?}: {e}")),
            };
            plain.connect_with_connector(connector).await
        }
        None => {
            let reread = config.tls_files.as_ref().map(|(files, domain)| client_tls_config(files, domain.as_deref()));
            let tls = match reread {
                Some(Ok(tls)) => Some(tls),
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "cannot read the TLS files now; connecting with the ones read before");
                    config.tls.clone()
                }
                None => config.tls.clone(),
            };
            let endpoint = match tls {
                Some(tls) => match endpoint.tls_config(tls) {
                    Ok(endpoint) => endpoint,
                    Err(e) => return Exit::Lost(format!("TLS config: {e}")),
                },
                None => endpoint,
            };
            endpoint.connect().await
        }
    };
    let channel = match connected {
        Ok(channel) => channel,
        Err(e) => return Exit::Lost(format!("connect {endpoint_url}: {}", error_chain(&e))),
    };
    let mut client = FederationClient::new(channel)
        .max_decoding_message_size(config.max_message_bytes)
        .max_encoding_message_size(config.max_message_bytes);

    let (out, out_rx) = mpsc::channel::<AgentMessage>(64);
    let hello = Hello {
        software_version: config.software_version.clone(),
        capabilities: config.capabilities.clone(),
        apis: mirror.apis.clone(),
    };
    let _ = out.send(AgentMessage { body: Some(AgentBody::Hello(hello)) }).await;
    let mut request = tonic::Request::new(ReceiverStream::new(out_rx));
    if let Some(identity) = &config.dev_identity {
        match MetadataValue::try_from(identity.as_str()) {
            Ok(value) => {
                request.metadata_mut().insert(DEV_IDENTITY_HEADER, value);
            }
            Err(e) => return Exit::Lost(format!("invalid dev identity {identity:?}: {e}")),
        }
    }
    let mut inbound = match client.session(request).await {
        Ok(response) => response.into_inner(),
        Err(status) => return Exit::Lost(format!("Session refused: {:?}: {}", status.code(), status.message())),
    };
    let budget = chunks::budget(config.max_message_bytes);
    // What is to be sent, queued here rather than awaited where it is made: the loop must keep reading what the
    // coordinator sends while the stream's send window is full. Awaiting each send, the agent stopped reading
    // while a burst of deltas waited for the coordinator, whose session was waiting for the agent to read its
    // acks and sets: both stopped for good (seen at 20,000 PVBs deleted at once; docs/performance.md).
    let mut outbox: VecDeque<AgentBody> = mirror.resync_messages().into_iter().flat_map(|b| split(b, budget)).collect();
    link.send_modify(|l| {
        l.connected = true;
        l.connects += 1;
        l.acks = 0;
    });

    let mut partial_set = None;
    let mut heartbeat = tokio::time::interval(config.heartbeat_interval);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    heartbeat.tick().await;
    loop {
        tokio::select! {
            message = inbound.message() => match message {
                Ok(Some(message)) => match message.body {
                    Some(CoordinatorBody::DesiredSet(chunk)) => {
                        // A set arrived: the session is healthy, so the next loss starts the backoff afresh.
                        backoff.reset();
                        let Some(set) = chunks::assemble(&mut partial_set, chunk) else { continue };
                        let held = desired.borrow().clone();
                        if !set_delta::is_delta(&set) {
                            desired.send_replace(Some(Arc::new(set_delta::share_held(held.as_deref(), set))));
                            continue;
                        }
                        match set_delta::fold(held.as_deref(), set) {
                            Ok(set) => {
                                desired.send_replace(Some(Arc::new(set)));
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "cannot fold the coordinator's delta; asking for the whole set");
                                let held_version = held.map(|h| h.version.clone()).unwrap_or_default();
                                outbox.push_back(AgentBody::Resync(Resync { held_version, reason: e.to_string() }));
                            }
                        }
                    }
                    Some(CoordinatorBody::Ack(ack)) => link.send_modify(|l| {
                        l.acks += 1;
                        if !ack.rejected.is_empty() {
                            l.rejected = ack.rejected;
                        }
                    }),
                    Some(CoordinatorBody::Goodbye(goodbye)) => {
                        return Exit::Lost(format!("the coordinator said goodbye: {}", goodbye.reason));
                    }
                    None => {}
                },
                Ok(None) => return Exit::Lost("the coordinator closed the stream".into()),
                Err(status) => return Exit::Lost(format!("{:?}: {}", status.code(), status.message())),
            },
            permit = out.reserve(), if !outbox.is_empty() => match (permit, outbox.pop_front()) {
                (Ok(permit), body) => permit.send(AgentMessage { body }),
                (Err(_), _) => return Exit::Lost("the stream closed while sending".into()),
            },
            command = commands.recv() => match command {
                Some(command) => outbox.extend(split(mirror.apply(command), budget)),
                None => return Exit::Shutdown,
            },
            _ = heartbeat.tick() => {
                // Any message says the agent is alive: a heartbeat only when nothing else is on its way.
                if outbox.is_empty() {
                    outbox.push_back(AgentBody::Heartbeat(Heartbeat {}));
                }
            }
        }
    }
}

/// A message as what goes on the wire: a snapshot too large for one message becomes chunks.
fn split(body: AgentBody, budget: usize) -> Vec<AgentBody> {
    match body {
        AgentBody::Snapshot(snapshot) => {
            chunks::split_snapshot(snapshot, budget).into_iter().map(AgentBody::Snapshot).collect()
        }
        other => vec![other],
    }
}

/// An error and its sources on one line (tonic's transport errors hide the cause in the chain).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::convert::{inventory_item, watched_types};

    /// The mirror keeps items without their lifted labels and annotations, and resends them exactly as sent.
    #[test]
    fn the_mirror_resends_what_was_sent_and_keeps_less() {
        let backup = serde_json::json!({"apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": "daily-1", "namespace": "velero", "uid": "u1", "resourceVersion": "7",
                "labels": {"velero.io/storage-location": "dr"}, "annotations": {"ferry.dev/backup-name": "daily-1"}},
            "spec": {"storageLocation": "dr"}});
        let sent = inventory_item("Backup", &backup);
        assert!(!sent.labels.is_empty() && !sent.annotations.is_empty());
        let resource = watched_types().into_iter().find(|t| t.kind == "Backup").expect("watched");
        let mut mirror = Mirror::default();
        mirror.apply(Command::Snapshot(resource, vec![sent.clone()]));
        let upserted = InventoryItem { name: "daily-2".into(), ..inventory_item("Backup", &backup) };
        mirror.apply(Command::Upsert(vec![upserted]));
        let held = mirror.objects.values().flat_map(|m| m.values());
        assert!(held.clone().all(|i| i.labels.is_empty() && i.annotations.is_empty()), "kept without the maps");
        assert_eq!(held.count(), 2);
        let resent: Vec<InventoryItem> = mirror
            .resync_messages()
            .into_iter()
            .flat_map(|m| match m {
                AgentBody::Snapshot(s) => s.items,
                _ => Vec::new(),
            })
            .collect();
        assert_eq!(resent[0], sent, "resent as it was sent");
        assert_eq!(resent[1].labels, sent.labels);
    }
}

/// A stream where both sides send more than the transport holds before they read: the agent must keep reading.
#[cfg(test)]
mod full_duplex_tests {
    use std::pin::Pin;

    use tokio_stream::wrappers::TcpListenerStream;
    use tonic::{Request, Response, Status, Streaming};

    use super::*;
    use crate::grpc::convert::{inventory_item, watched_types};
    use crate::grpc::proto::federation_server::{Federation, FederationServer};
    use crate::grpc::proto::{
        CoordinatorMessage, DescribeBackupRequest, DescribeBackupResponse, DesiredItem, GetStatusRequest,
        GetStatusResponse, PlanRequest, PlanResponse,
    };

    /// Bytes each side sends before it reads anything: far more than HTTP/2's windows and both channels hold.
    const FLOOD_BYTES: usize = 24 << 20;

    /// A coordinator that, as the real one can, sends everything it has before it reads what the agent sent:
    /// `FLOOD_BYTES` of sets, then it reads until the agent's snapshot is whole.
    struct SendsFirst {
        snapshot_read: mpsc::UnboundedSender<()>,
    }

    type Outbound = Pin<Box<dyn tokio_stream::Stream<Item = Result<CoordinatorMessage, Status>> + Send>>;

    #[tonic::async_trait]
    impl Federation for SendsFirst {
        type SessionStream = Outbound;

        async fn session(&self, request: Request<Streaming<AgentMessage>>) -> Result<Response<Outbound>, Status> {
            let mut inbound = request.into_inner();
            let (tx, rx) = mpsc::channel(16);
            let done = self.snapshot_read.clone();
            tokio::spawn(async move {
                let json = bytes::Bytes::from(vec![b' '; 256 << 10]);
                for i in 0..FLOOD_BYTES / json.len() {
                    let item = DesiredItem { raw_json: json.clone(), ..Default::default() };
                    let set = DesiredSet { version: format!("v{i}"), items: vec![item], ..Default::default() };
                    let message = CoordinatorMessage { body: Some(CoordinatorBody::DesiredSet(set)) };
                    if tx.send(Ok(message)).await.is_err() {
                        return;
                    }
                }
                while let Ok(Some(message)) = inbound.message().await {
                    if let Some(AgentBody::Snapshot(snapshot)) = message.body
                        && snapshot.last
                        && snapshot.resource.as_ref().is_some_and(|r| r.kind == "Backup")
                    {
                        let _ = done.send(());
                    }
                }
            });
            Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
        }

        async fn get_status(&self, _: Request<GetStatusRequest>) -> Result<Response<GetStatusResponse>, Status> {
            Err(Status::unimplemented("test"))
        }

        async fn plan(&self, _: Request<PlanRequest>) -> Result<Response<PlanResponse>, Status> {
            Err(Status::unimplemented("test"))
        }

        async fn describe_backup(
            &self,
            _: Request<DescribeBackupRequest>,
        ) -> Result<Response<DescribeBackupResponse>, Status> {
            Err(Status::unimplemented("test"))
        }
    }

    /// The deadlock found at 20,000 PVBs deleted at once: the agent awaited each send and so stopped reading,
    /// while the coordinator's session awaited the agent reading its sets and acks. Here both sides send
    /// `FLOOD_BYTES` before reading; the agent's snapshot must still arrive whole, and its latest set too.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_agent_keeps_reading_while_its_own_sends_wait_for_the_coordinator() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (snapshot_read, mut read) = mpsc::unbounded_channel();
        let service = FederationServer::new(SendsFirst { snapshot_read }).max_decoding_message_size(64 << 20);
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(TcpListenerStream::new(listener)),
        );
        let backups = watched_types().into_iter().find(|t| t.kind == "Backup").expect("Backup type");
        let filler = "x".repeat(200 << 10);
        let items: Vec<InventoryItem> = (0..FLOOD_BYTES / filler.len())
            .map(|i| {
                let backup = serde_json::json!({"apiVersion": "velero.io/v1", "kind": "Backup",
                    "metadata": {"name": format!("b{i}"), "namespace": "velero", "uid": format!("u{i}"),
                        "annotations": {"filler": filler}}});
                inventory_item("Backup", &backup)
            })
            .collect();
        let mut config = AgentConfig::new(format!("http://{addr}"), None);
        config.dev_identity = Some("cluster/b".into());
        let client = AgentClient::spawn(config, vec![(backups, items)]);
        let within = Duration::from_secs(60);
        tokio::time::timeout(within, read.recv()).await.expect("the snapshot arrived whole: no deadlock");
        let mut desired = client.desired();
        let last = format!("v{}", FLOOD_BYTES / (256 << 10) - 1);
        let latest = tokio::time::timeout(within, desired.wait_for(|s| s.as_ref().is_some_and(|s| s.version == last)));
        latest.await.expect("every set was read").expect("client running");
        client.shutdown().await;
        server.abort();
    }
}
