//! Two coordinator replicas with leader election on the real test bed: one Lease on a real
//! kube-apiserver, both replicas reading the same MinIO bucket, B's agent given both addresses. Only the leader
//! serves (the standby is not ready and refuses the agent); kill -9 the leader → the standby takes the Lease
//! after it stood still for its duration, B's agent settles on it, nothing already applied is made again, and
//! the new leader materializes what lands next.

#[path = "e2e_support/mod.rs"]
mod e2e;

use std::time::{Duration, Instant};

use e2e::*;
use ferry::fixture;
use ferry::model::BackupPhase;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::ListParams;

const WAIT: Duration = Duration::from_secs(60);
const LEASE: &str = "ferry-coordinator-e2e-ha";
/// Short, so the test waits seconds, not the default 15 s.
const LEASE_DURATION: Duration = Duration::from_secs(4);
/// What the failover may take after the kill: the Lease's duration (the standby must see it stand still that
/// long), a renew interval, and the agent's reconnect backoff.
const FAILOVER_BOUND: Duration = Duration::from_secs(15);

/// A coordinator replica, killed when dropped (a failing assertion must not leave it holding the bed).
struct Replica(std::process::Child);

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    let lease = leases.get_opt(LEASE).await.ok()??;
    lease.spec?.holder_identity.filter(|h| !h.is_empty())
}

async fn uid_on(client: &kube::Client, name: &str) -> Option<String> {
    backups(client).get_opt(name).await.expect("get").and_then(|b| b.metadata.uid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_takes_over_when_the_leader_is_killed_and_nothing_is_applied_twice() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let bed = TestBed::up();
    let a = bed.admin("a").await;
    let b = bed.admin("b").await;
    create_bsl(&bed, &b, "dr-bsl").await;
    let leases: Api<Lease> = Api::namespaced(a.clone(), "default");
    let _ = leases.delete(LEASE, &Default::default()).await;

    let first = "ha-before-failover";
    put_backup(&bed, first, &fixture::admin_backup_json(first, BackupPhase::Completed, "default"), &[]).await;

    let mut ferry = Ferry::prepare_with(&bed, "  []", "");
    let kubeconfig = bed.admin_kubeconfig("a");
    let seconds = format!("{}s", LEASE_DURATION.as_secs());
    let mut replica = |identity: &'static str| {
        let args = [
            "--metrics-listen",
            "127.0.0.1:0",
            "--leader-election-lease",
            LEASE,
            "--leader-election-namespace",
            "default",
            "--leader-election-identity",
            identity,
            "--lease-duration",
            &seconds,
            "--kubeconfig",
            kubeconfig.to_str().expect("utf-8 path"),
        ];
        let (child, addr, metrics) = ferry.spawn_coordinator(&bed, "127.0.0.1:0", &args, identity);
        (Replica(child), addr, metrics)
    };
    let (one, one_addr, one_metrics) = replica("coordinator-1");
    let leader = eventually("a leader", WAIT, || async { holder(&leases).await }).await;
    let (two, two_addr, two_metrics) = replica("coordinator-2");
    assert_eq!(leader, "coordinator-1", "the first replica up takes the free Lease");

    // --- 1. Only the leader serves --------------------------------------------------------------------------
    let (code, body) = eventually("the standby names the leader", WAIT, || async {
        let (code, body) = http_get(&two_metrics, "/readyz");
        body.contains("standby; the leader is").then_some((code, body))
    })
    .await;
    assert_eq!(code, 503, "a standby is not ready: {body}");
    assert!(body.contains("coordinator-1"), "the standby names the leader: {body}");
    assert_eq!(http_get(&two_metrics, "/healthz").0, 200, "a standby is alive");
    eventually("the leader ready", WAIT, || async { (http_get(&one_metrics, "/readyz").0 == 200).then_some(()) }).await;

    // The agent is given the standby first: refused there, it settles on the leader.
    ferry.addr = format!("{two_addr},{one_addr}");
    ferry.start_agent(&bed, "b");
    let first_uid = eventually("the first backup on b", WAIT, || async { uid_on(&b, first).await }).await;
    ferry.addr = one_addr.clone();
    assert_eq!(ferry.status(Some("b"))["clusters"][0]["state"], "connected", "B is connected to the leader");

    // --- 2. kill -9 the leader ------------------------------------------------------------------------------
    drop(one);
    let killed = Instant::now();
    eventually("coordinator-2 holds the Lease", WAIT, || async {
        (holder(&leases).await.as_deref() == Some("coordinator-2")).then_some(())
    })
    .await;
    ferry.addr = two_addr.clone();
    let status = eventually("B connected to the new leader", WAIT, || async {
        let (code, _) = http_get(&two_metrics, "/readyz");
        if code != 200 {
            return None;
        }
        let status = ferry.status(Some("b"));
        (status["clusters"][0]["state"] == "connected").then_some(status)
    })
    .await;
    let failover = killed.elapsed();
    eprintln!("failover: {} ms from kill -9 to B connected to the new leader", failover.as_millis());
    assert!(failover < FAILOVER_BOUND, "failover took {failover:?} (bound {FAILOVER_BOUND:?}): {status}");

    // --- 3. Nothing applied twice; the new leader serves what lands next ------------------------------------
    assert_eq!(uid_on(&b, first).await.as_deref(), Some(first_uid.as_str()), "the Backup was not made again");
    let made = backups(&b).list(&ListParams::default()).await.expect("list").items;
    assert_eq!(made.iter().filter(|o| o.metadata.name.as_deref() == Some(first)).count(), 1);
    let second = "ha-after-failover";
    put_backup(&bed, second, &fixture::admin_backup_json(second, BackupPhase::Completed, "default"), &[]).await;
    eventually("the second backup on b, through coordinator-2", WAIT, || async { uid_on(&b, second).await }).await;

    // --- 4. A clean stop releases the Lease at once ---------------------------------------------------------
    let mut two = two;
    let stopped = Instant::now();
    // SIGTERM, as Kubernetes stops a pod.
    let _ = std::process::Command::new("kill").args(["-TERM", &two.0.id().to_string()]).status();
    let _ = two.0.wait();
    let released = holder(&leases).await;
    assert_eq!(released, None, "a leader stopping cleanly gives the Lease up");
    assert!(stopped.elapsed() < Duration::from_secs(10), "the stop took {:?}", stopped.elapsed());
    let _ = logs_hint(&ferry);
}
