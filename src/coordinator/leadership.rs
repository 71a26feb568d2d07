//! One active coordinator among replicas, chosen through a Kubernetes Lease (coordination.k8s.io/v1) the way
//! client-go's leaderelection does it: the holder renews the Lease every third of its duration; a standby takes
//! it over only after seeing it unchanged for a whole duration **by its own clock** (replicas' clocks are never
//! compared), with the Lease's resourceVersion guarding every write so two replicas cannot both win; a leader
//! that could not renew for two thirds of the duration stops leading before anyone may take over.
//!
//! A standby runs everything but serves no agent or operator (its catalogs stay warm, so a takeover is quick);
//! a replica that loses the Lease ends the process and restarts as a standby, so there is never a moment with
//! two replicas sending DesiredSets. [`step`] is the pure decision; [`run`] does the IO.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;

/// Which Lease, and who this replica is.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    pub lease: String,
    pub namespace: String,
    /// This replica's name in the Lease (the pod's name).
    pub identity: String,
    /// How long a Lease not renewed keeps its holder.
    pub lease_duration: Duration,
}

impl ElectionConfig {
    fn renew_interval(&self) -> Duration {
        self.lease_duration / 3
    }

    fn renew_deadline(&self) -> Duration {
        self.lease_duration * 2 / 3
    }
}

/// This replica's part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Not leading: serves nobody. `leader` is the holder it last saw, if any.
    Standby {
        leader: Option<String>,
    },
    Leader,
    /// Was leading and could not renew in time, or saw another holder: must stop now.
    Lost {
        reason: String,
    },
}

impl Role {
    pub fn is_leader(&self) -> bool {
        matches!(self, Role::Leader)
    }

    /// Why this replica does not serve (for `/readyz` and refused rpcs), or `None` when it leads.
    pub fn not_serving(&self) -> Option<String> {
        match self {
            Role::Leader => None,
            Role::Standby { leader: Some(leader) } => Some(format!("standby; the leader is {leader}")),
            Role::Standby { leader: None } => Some("standby; no leader yet".into()),
            Role::Lost { reason } => Some(format!("lost the leadership: {reason}")),
        }
    }
}

/// What of a Lease the decision reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseView {
    pub holder: Option<String>,
    /// The holder's last renewal as written (compared for change only, never against this replica's clock).
    pub renew_time: Option<String>,
    pub duration: Duration,
}

impl LeaseView {
    fn of(lease: &Lease, fallback: Duration) -> Self {
        let spec = lease.spec.clone().unwrap_or_default();
        Self {
            holder: spec.holder_identity.filter(|h| !h.is_empty()),
            renew_time: spec.renew_time.map(|t| t.0.to_string()),
            duration: spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(fallback, Duration::from_secs),
        }
    }
}

/// What to do with the Lease now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// No Lease yet: create it, holding it.
    Create,
    /// This replica holds it: renew.
    Renew,
    /// Free, released, or not renewed for a whole duration as this replica saw it: take it.
    TakeOver,
    /// Someone else holds it.
    Follow { leader: String },
}

/// The decision, from the Lease as read and how long this replica has seen it unchanged.
pub fn step(lease: Option<&LeaseView>, me: &str, unchanged_for: Duration) -> Step {
    let Some(lease) = lease else { return Step::Create };
    match &lease.holder {
        Some(holder) if holder == me => Step::Renew,
        None => Step::TakeOver,
        Some(_) if unchanged_for >= lease.duration => Step::TakeOver,
        Some(holder) => Step::Follow { leader: holder.clone() },
    }
}

/// When this replica first saw the Lease as it is now.
struct Observed {
    view: LeaseView,
    since: Instant,
}

fn observe(observed: &mut Option<Observed>, view: &LeaseView, now: Instant) -> Duration {
    match observed {
        Some(o) if o.view == *view => now.duration_since(o.since),
        _ => {
            *observed = Some(Observed { view: view.clone(), since: now });
            Duration::ZERO
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ElectionError {
    #[error("lease {namespace}/{name}: {source}")]
    Api { namespace: String, name: String, source: kube::Error },
}

/// Campaigns for and holds the Lease, publishing this replica's role, until `shutdown` turns true (then a
/// held Lease is released so a standby takes over at once) or the leadership is lost (then returns after
/// publishing [`Role::Lost`]).
pub async fn run(
    api: Api<Lease>,
    config: ElectionConfig,
    role: watch::Sender<Role>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut observed: Option<Observed> = None;
    let mut last_renewal: Option<Instant> = None;
    loop {
        let outcome = attempt(&api, &config, &mut observed).await;
        let now = Instant::now();
        let leading = role.borrow().is_leader();
        match outcome {
            Ok(Attempt::Holding) => {
                if !leading {
                    tracing::info!(lease = %config.lease, identity = %config.identity, "became the leader");
                }
                last_renewal = Some(now);
                role.send_replace(Role::Leader);
            }
            Ok(Attempt::Following(leader)) if leading => {
                let reason = format!("the lease is now held by {leader}");
                tracing::error!(%reason, "lost the leadership");
                role.send_replace(Role::Lost { reason });
                return;
            }
            Ok(Attempt::Following(leader)) => {
                role.send_if_modified(|r| {
                    let next = Role::Standby { leader: Some(leader.clone()) };
                    let changed = *r != next;
                    *r = next;
                    changed
                });
            }
            Err(error) if leading => {
                let since = last_renewal.map_or(Duration::MAX, |t| now.duration_since(t));
                if since >= config.renew_deadline() {
                    let reason = format!("not renewed for {} ms: {error}", since.as_millis());
                    tracing::error!(%reason, "lost the leadership");
                    role.send_replace(Role::Lost { reason });
                    return;
                }
                tracing::warn!(%error, "lease renewal failed; retrying");
            }
            Err(error) => tracing::warn!(%error, "cannot read or take the lease; still a standby"),
        }
        tokio::select! {
            _ = tokio::time::sleep(config.renew_interval()) => {}
            _ = async { shutdown.wait_for(|stopping| *stopping).await.is_ok() } => {
                let leading = role.borrow().is_leader();
                if leading {
                    release(&api, &config).await;
                }
                return;
            }
        }
    }
}

enum Attempt {
    Holding,
    Following(String),
}

async fn attempt(
    api: &Api<Lease>,
    config: &ElectionConfig,
    observed: &mut Option<Observed>,
) -> Result<Attempt, ElectionError> {
    let error = |source| ElectionError::Api { namespace: config.namespace.clone(), name: config.lease.clone(), source };
    let current = api.get_opt(&config.lease).await.map_err(error)?;
    let view = current.as_ref().map(|l| LeaseView::of(l, config.lease_duration));
    let unchanged_for = view.as_ref().map_or(Duration::ZERO, |v| observe(observed, v, Instant::now()));
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let seconds = i32::try_from(config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
    match step(view.as_ref(), &config.identity, unchanged_for) {
        Step::Follow { leader } => Ok(Attempt::Following(leader)),
        Step::Create => {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(config.lease.clone()), ..Default::default() },
                spec: Some(LeaseSpec {
                    holder_identity: Some(config.identity.clone()),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            api.create(&PostParams::default(), &lease).await.map_err(error)?;
            Ok(Attempt::Holding)
        }
        step @ (Step::Renew | Step::TakeOver) => {
            // `current` is Some here (Create covers None); its resourceVersion makes the write conditional.
            let mut lease = current.unwrap_or_default();
            let spec = lease.spec.get_or_insert_with(Default::default);
            if step == Step::TakeOver {
                spec.holder_identity = Some(config.identity.clone());
                spec.acquire_time = Some(now.clone());
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            }
            spec.lease_duration_seconds = Some(seconds);
            spec.renew_time = Some(now);
            api.replace(&config.lease, &PostParams::default(), &lease).await.map_err(error)?;
            Ok(Attempt::Holding)
        }
    }
}

/// Gives the Lease up (holder cleared, as client-go does on a clean stop), so a standby need not wait.
async fn release(api: &Api<Lease>, config: &ElectionConfig) {
    let released = async {
        let mut lease = api.get(&config.lease).await?;
        let spec = lease.spec.get_or_insert_with(Default::default);
        if spec.holder_identity.as_deref() != Some(config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        api.replace(&config.lease, &PostParams::default(), &lease).await.map(|_| ())
    };
    match released.await {
        Ok(()) => tracing::info!(lease = %config.lease, "released the leadership"),
        Err(error) => tracing::warn!(%error, "could not release the lease; a standby takes over when it expires"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(holder: &str) -> LeaseView {
        LeaseView { holder: Some(holder.into()), renew_time: Some("t1".into()), duration: Duration::from_secs(15) }
    }

    #[test]
    fn no_lease_is_created_and_ones_own_is_renewed() {
        assert_eq!(step(None, "a", Duration::ZERO), Step::Create);
        assert_eq!(step(Some(&held_by("a")), "a", Duration::from_secs(60)), Step::Renew);
    }

    #[test]
    fn another_holder_is_followed_until_its_lease_stood_still_for_a_whole_duration() {
        let lease = held_by("b");
        assert_eq!(step(Some(&lease), "a", Duration::from_secs(14)), Step::Follow { leader: "b".into() });
        assert_eq!(step(Some(&lease), "a", Duration::from_secs(15)), Step::TakeOver);
    }

    #[test]
    fn a_released_lease_is_taken_at_once() {
        let lease = LeaseView { holder: None, renew_time: None, duration: Duration::from_secs(1) };
        assert_eq!(step(Some(&lease), "a", Duration::ZERO), Step::TakeOver);
    }

    #[test]
    fn the_clock_restarts_whenever_the_holder_renews() {
        let start = Instant::now();
        let mut observed = None;
        assert_eq!(observe(&mut observed, &held_by("b"), start), Duration::ZERO);
        assert_eq!(observe(&mut observed, &held_by("b"), start + Duration::from_secs(10)), Duration::from_secs(10));
        let renewed = LeaseView { renew_time: Some("t2".into()), ..held_by("b") };
        assert_eq!(observe(&mut observed, &renewed, start + Duration::from_secs(11)), Duration::ZERO);
        assert_eq!(observe(&mut observed, &renewed, start + Duration::from_secs(20)), Duration::from_secs(9));
    }

    #[test]
    fn a_leader_gives_up_before_a_standby_may_take_over() {
        let config = ElectionConfig {
            lease: "l".into(),
            namespace: "n".into(),
            identity: "a".into(),
            lease_duration: Duration::from_secs(15),
        };
        assert!(config.renew_deadline() < config.lease_duration);
        assert!(config.renew_interval() < config.renew_deadline());
    }
}
