//! One agent stream on the coordinator: it reads the agent's messages into the hub and writes the cluster's
//! DesiredSet whenever it changes (whole, in chunks, or as a delta, as the agent's `Hello` allows), until the
//! agent goes away, a newer stream of the same cluster replaces it, or the coordinator shuts down (the last two
//! say `Goodbye` first).

use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use tokio::sync::{mpsc, watch};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use super::cluster::CheckedItems;
use super::held_set::HeldSet;
use super::hub::{Hub, HubError, Published, SessionHandle};
use super::telemetry::{DeliveryClock, ErrorKind};
use crate::grpc::chunks::{CHUNKED_DESIRED_SETS, budget, delta_budget, split_desired_set};
use crate::grpc::proto::agent_message::Body as AgentBody;
use crate::grpc::proto::coordinator_message::Body as CoordinatorBody;
use crate::grpc::proto::{Ack, AgentMessage, CoordinatorMessage, DesiredSet, Goodbye, Hello, Snapshot};
use crate::grpc::rate_limit::TokenBucket;
use crate::grpc::revocation::{RevocationList, Revoked};
use crate::grpc::set_delta::{self, DESIRED_SET_DELTAS};

/// What the coordinator sends on an agent stream.
pub type SessionStream = Pin<Box<dyn Stream<Item = Result<CoordinatorMessage, Status>> + Send>>;

/// What a stream needs to end itself when the revocation list comes to name its certificate.
pub struct RevocationWatch {
    pub list: watch::Receiver<Arc<RevocationList>>,
    /// The agent's certificate (DER), as verified when its connection was accepted.
    pub leaf: Vec<u8>,
    pub trust_domain: String,
}

/// Resolves once the list, changed, names the certificate; never without a list.
async fn newly_revoked(watch: &mut Option<RevocationWatch>) -> Revoked {
    let Some(watch) = watch else { return std::future::pending().await };
    loop {
        if watch.list.changed().await.is_err() {
            return std::future::pending().await;
        }
        let list = watch.list.borrow_and_update().clone();
        if let Some(revoked) = list.check(&watch.leaf, &watch.trust_domain) {
            return revoked;
        }
    }
}

/// Serves the stream of `cluster`'s agent, which said `hello`, as its own task; returns what to send it.
pub fn spawn(
    hub: Arc<Hub>,
    cluster: String,
    handle: SessionHandle,
    hello: &Hello,
    shutdown: watch::Receiver<bool>,
    inbound: Streaming<AgentMessage>,
    revocation: Option<RevocationWatch>,
) -> SessionStream {
    let (tx, rx) = mpsc::channel(16);
    let chunked_sets = hello.capabilities.iter().any(|c| c == CHUNKED_DESIRED_SETS);
    let delta_sets = hello.capabilities.iter().any(|c| c == DESIRED_SET_DELTAS);
    let session = SessionTask {
        hub,
        cluster,
        handle,
        tx,
        shutdown,
        ready: None,
        chunked_sets,
        delta_sets,
        sent: None,
        partial_snapshot: None,
        delivery: DeliveryClock::default(),
        revocation,
    };
    tokio::spawn(session.run(inbound));
    Box::pin(ReceiverStream::new(rx))
}

/// One agent stream.
struct SessionTask {
    hub: Arc<Hub>,
    cluster: String,
    handle: SessionHandle,
    tx: mpsc::Sender<Result<CoordinatorMessage, Status>>,
    shutdown: watch::Receiver<bool>,
    /// The inventory generation after the agent's last initial snapshot, once it arrived.
    ready: Option<u64>,
    /// The agent reassembles chunked DesiredSets (it said so in its Hello).
    chunked_sets: bool,
    /// The agent folds DesiredSet deltas (it said so in its Hello).
    delta_sets: bool,
    /// The set last sent on this stream: what the agent holds, and so the base of the next delta.
    sent: Option<Arc<HeldSet>>,
    /// The chunks so far of a snapshot sent in chunks (`Snapshot.more`).
    partial_snapshot: Option<Snapshot>,
    /// When the set last sent went out, until the agent reports results for it (`ferry_delivery_latency_seconds`).
    delivery: DeliveryClock,
    /// Ends the stream when its certificate is revoked (mTLS with a revocation list only).
    revocation: Option<RevocationWatch>,
}

impl SessionTask {
    async fn run(mut self, mut inbound: Streaming<AgentMessage>) {
        let end = self.serve(&mut inbound).await;
        match &end {
            End::AgentClosed => tracing::info!(cluster = %self.cluster, session = self.handle.id, "agent disconnected"),
            End::Error(status) => {
                self.hub.telemetry.error(ErrorKind::Stream, 1);
                tracing::warn!(cluster = %self.cluster, session = self.handle.id, error = %status.message(), "agent stream failed");
                // Tell the agent why (e.g. a message over the size limit), if it still listens.
                let _ = self.tx.send(Err(status.clone())).await;
            }
            End::Goodbye(reason) => {
                tracing::info!(cluster = %self.cluster, session = self.handle.id, %reason, "ending agent stream");
                let goodbye = CoordinatorBody::Goodbye(Goodbye { reason: reason.clone() });
                let _ = self.tx.send(Ok(CoordinatorMessage { body: Some(goodbye) })).await;
            }
        }
        self.hub.close_session(&self.cluster, self.handle.id);
    }

    async fn serve(&mut self, inbound: &mut Streaming<AgentMessage>) -> End {
        let mut rate = TokenBucket::new(self.hub.settings.max_messages_per_second, std::time::Instant::now());
        loop {
            tokio::select! {
                message = inbound.message() => match message {
                    Ok(Some(message)) => {
                        // Over its rate, the stream is read later: the agent slows down, nobody else does.
                        let wait = rate.take(std::time::Instant::now());
                        if !wait.is_zero() {
                            tokio::time::sleep(wait).await;
                        }
                        if let Err(end) = self.handle_message(message).await {
                            return end;
                        }
                    }
                    Ok(None) => return End::AgentClosed,
                    Err(status) => return End::Error(status),
                },
                changed = self.handle.desired.changed() => {
                    if changed.is_err() {
                        return End::Goodbye("the coordinator is shutting down".into());
                    }
                    let published = self.handle.desired.borrow_and_update().clone();
                    if let Err(end) = self.send_desired(&published).await {
                        return end;
                    }
                }
                _ = self.handle.current_session.changed() => {
                    if *self.handle.current_session.borrow() != self.handle.id {
                        return End::Goodbye(format!("replaced by a newer stream of cluster {}", self.cluster));
                    }
                }
                _ = self.shutdown.changed() => return End::Goodbye("the coordinator is shutting down".into()),
                revoked = newly_revoked(&mut self.revocation) => {
                    self.hub.telemetry.revoked(&revoked.identity, "stream");
                    tracing::warn!(cluster = %self.cluster, session = self.handle.id, identity = %revoked.identity,
                        serial = %revoked.serial, by = revoked.by, "ending the stream of a revoked certificate");
                    return End::Goodbye(format!("{revoked}: ending the stream"));
                }
            }
        }
    }

    /// Sends the published set if the agent does not hold it yet: whole on the stream's first send (and after
    /// a `Resync`), as a delta against the set last sent when the agent folds deltas.
    async fn send_desired(&mut self, published: &Published) -> Result<(), End> {
        // Only sets planned from the whole inventory the agent sent on connecting: one planned a moment before
        // its last snapshot arrived was planned from part of it.
        if self.ready.is_none_or(|ready| published.generation < ready) {
            return Ok(());
        }
        let desired = &published.set;
        if self.sent.as_ref().is_some_and(|sent| !sent.version.is_empty() && sent.version == desired.version) {
            return Ok(());
        }
        let budget = budget(self.hub.settings.max_message_bytes);
        let parts = match (&self.sent, self.delta_sets) {
            (Some(sent), true) => {
                let change = set_delta::change(&**sent, &**desired, delta_budget(self.hub.settings.max_message_bytes));
                match set_delta::is_delta(&change) {
                    true => vec![change],
                    false => self.whole(desired, budget),
                }
            }
            _ => self.whole(desired, budget),
        };
        self.sent = Some(desired.clone());
        for part in parts {
            let message = CoordinatorMessage { body: Some(CoordinatorBody::DesiredSet(part)) };
            self.tx.send(Ok(message)).await.map_err(|_| End::AgentClosed)?;
        }
        // Timed from the last part being queued on the stream (tonic writes it as the agent reads): waiting for a
        // slow agent to read it counts as delivery.
        self.delivery.sent(&desired.version, std::time::Instant::now());
        Ok(())
    }

    /// The whole set as messages: in chunks when too large for one, to an agent that can take them.
    fn whole(&self, desired: &HeldSet, budget: usize) -> Vec<DesiredSet> {
        match self.chunked_sets {
            true => split_desired_set(desired.message(), budget),
            false => vec![desired.message()],
        }
    }

    async fn handle_message(&mut self, message: AgentMessage) -> Result<(), End> {
        let now = SystemTime::now();
        let mut body = message.body;
        if let Some(AgentBody::Snapshot(chunk)) = body {
            match self.assemble_snapshot(chunk) {
                Some(snapshot) => body = Some(AgentBody::Snapshot(snapshot)),
                None => {
                    let ack = Ack { of: "snapshot chunk".into(), rejected: Vec::new() };
                    let ack = CoordinatorMessage { body: Some(CoordinatorBody::Ack(ack)) };
                    return self.tx.send(Ok(ack)).await.map_err(|_| End::AgentClosed);
                }
            }
        }
        let (hub, cluster, id) = (&self.hub, self.cluster.as_str(), self.handle.id);
        let ack = match body {
            Some(AgentBody::Snapshot(snapshot)) => {
                let resource = snapshot.resource.clone().unwrap_or_default();
                // Parsing and checking every item is the costly part: done here, not under the hub's lock.
                let checked = CheckedItems::of_snapshot(&resource, &snapshot.items);
                hub.snapshot(cluster, id, now, &resource, checked, snapshot.last).map(|(ack, generation)| {
                    if snapshot.last && self.ready.is_none() {
                        self.ready = Some(generation);
                    }
                    ack
                })
            }
            Some(AgentBody::Delta(delta)) => {
                hub.delta(cluster, id, now, CheckedItems::of_delta(&delta.upserts), &delta.deletes)
            }
            Some(AgentBody::ApplyResult(result)) => {
                if let Some(latency) = self.delivery.reported(&result.desired_version, std::time::Instant::now()) {
                    hub.telemetry.delivered(latency);
                }
                hub.apply_result(cluster, id, now, &result)
            }
            Some(AgentBody::Apis(apis)) => {
                tracing::info!(%cluster, served = ?apis.served.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
                    missing = ?apis.missing_required, "cluster APIs changed");
                hub.apis(cluster, id, now, &apis)
            }
            Some(AgentBody::Heartbeat(_)) => return hub.heartbeat(cluster, id, now).map_err(replaced),
            Some(AgentBody::Resync(resync)) => {
                tracing::warn!(%cluster, held = %resync.held_version, reason = %resync.reason,
                    "the agent could not fold a delta; sending the whole set");
                self.sent = None;
                let published = self.handle.desired.borrow().clone();
                return self.send_desired(&published).await;
            }
            Some(AgentBody::Hello(_)) => {
                return Err(End::Error(Status::invalid_argument("Hello may only be the first message")));
            }
            None => return Err(End::Error(Status::invalid_argument("empty AgentMessage"))),
        }
        .map_err(replaced)?;
        if !ack.rejected.is_empty() {
            hub.telemetry.error(ErrorKind::RejectedItem, ack.rejected.len() as u64);
            tracing::warn!(%cluster, of = %ack.of, rejected = ack.rejected.len(), first = %ack.rejected[0].reason, "inventory items rejected");
        }
        let message = CoordinatorMessage { body: Some(CoordinatorBody::Ack(ack)) };
        self.tx.send(Ok(message)).await.map_err(|_| End::AgentClosed)
    }

    /// Takes one snapshot message; returns the whole snapshot once its final chunk is in. A chunk of another
    /// type than the one being assembled starts over; chunks past the cluster's inventory cap are not kept
    /// (the final apply rejects what is over it anyway).
    fn assemble_snapshot(&mut self, chunk: Snapshot) -> Option<Snapshot> {
        let cap = self.hub.settings.max_inventory_items.saturating_add(1);
        let mut snapshot = match self.partial_snapshot.take() {
            Some(mut partial) if partial.resource == chunk.resource => {
                let room = cap.saturating_sub(partial.items.len());
                partial.items.extend(chunk.items.into_iter().take(room));
                partial.last = chunk.last;
                partial.more = chunk.more;
                partial
            }
            _ => chunk,
        };
        if snapshot.more {
            self.partial_snapshot = Some(snapshot);
            return None;
        }
        snapshot.more = false;
        Some(snapshot)
    }
}

fn replaced(error: HubError) -> End {
    End::Goodbye(error.to_string())
}

/// Why a session ended.
enum End {
    AgentClosed,
    Error(Status),
    Goodbye(String),
}
