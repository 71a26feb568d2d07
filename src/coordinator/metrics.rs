//! The coordinator's gauges, computed at scrape time from the same status the `GetStatus` rpc returns (one source
//! of truth for operators and dashboards). Pure: [`gauges`] only reads the status; the page is put together by
//! [`Telemetry::render`](super::telemetry::Telemetry::render) beside the live counters and histograms.

use crate::exposition::{GaugeFamily, ScrapeGauges, gauge_count};
use crate::grpc::convert::served_apis;
use crate::grpc::proto::{ClusterStatus, GetStatusResponse, LocationStatus};

/// Reads one count of a cluster's status.
type CountOf = fn(&ClusterStatus) -> u64;

/// Every status-derived gauge family, in the order the page lists them.
pub fn gauges(status: &GetStatusResponse) -> ScrapeGauges {
    let flag = |b: bool| i64::from(b);
    let cluster = |c: &ClusterStatus| vec![("cluster", c.cluster.clone())];
    let clusters = &status.clusters;
    let per_cluster = |name: &'static str, help: &'static str, value: fn(&ClusterStatus) -> i64| {
        GaugeFamily::new(name, help, clusters.iter().map(|c| (cluster(c), value(c))))
    };
    let mut families = vec![
        per_cluster("ferry_cluster_connected", "1 when the cluster's agent has a stream open.", |c| {
            i64::from(c.connected)
        }),
        per_cluster(
            "ferry_cluster_stale",
            "1 when the agent's stream is open but it missed too many heartbeats.",
            |c| i64::from(c.stale),
        ),
        per_cluster(
            "ferry_cluster_seconds_since_heartbeat",
            "Seconds since the agent's last message (-1: never).",
            |c| c.seconds_since_heartbeat,
        ),
        per_cluster(
            "ferry_cluster_last_heartbeat_timestamp_seconds",
            "Unix time of the agent's last message, a heartbeat or any other (0: never).",
            |c| c.last_heartbeat_unix,
        ),
        per_cluster("ferry_cluster_inventory_objects", "Objects in the cluster's published inventory.", |c| {
            gauge_count(c.inventory_items)
        }),
    ];
    // Only clusters whose agent said what it serves (an older agent's cluster is assumed to serve everything).
    let told = || clusters.iter().filter_map(|c| c.apis.as_ref().map(|a| (c, a)));
    families.push(GaugeFamily::new(
        "ferry_cluster_oadp",
        "1 when the cluster serves OADP's NonAdminBackups (tenant backups become NonAdminBackups there).",
        told().map(|(c, a)| (cluster(c), flag(served_apis(Some(a)).non_admin_backups))),
    ));
    families.push(GaugeFamily::new(
        "ferry_cluster_missing_crds",
        "Velero CRDs the cluster lacks (nothing is materialized there until they exist).",
        told().map(|(c, a)| (cluster(c), gauge_count(a.missing_required.len() as u64))),
    ));
    families.push(per_cluster(
        "ferry_cluster_refused_storage_locations",
        "BSLs through which the cluster gets nothing: read-write on another cluster's location, or not granted.",
        |c| gauge_count(c.refused_storage_locations),
    ));
    let counts: [(&str, CountOf); 10] = [
        ("desired", |c| c.desired),
        ("applied", |c| c.applied),
        ("failed", |c| c.failed),
        ("refused", |c| c.refused),
        ("waiting", |c| c.waiting),
        ("held", |c| c.held),
        ("conflict", |c| c.conflicts),
        ("agent_refused", |c| c.agent_refused),
        ("retire", |c| c.retiring),
        ("would_retire", |c| c.would_retire),
    ];
    families.push(GaugeFamily::new(
        "ferry_cluster_items",
        "Items of the cluster's current DesiredSet, by state.",
        clusters.iter().flat_map(|c| {
            counts.iter().map(move |(state, count)| {
                (vec![("cluster", c.cluster.clone()), ("state", state.to_string())], gauge_count(count(c)))
            })
        }),
    ));
    let location = |l: &LocationStatus| vec![("location", l.name.clone())];
    let locations = &status.locations;
    let per_location = |name: &'static str, help: &'static str, value: fn(&LocationStatus) -> i64| {
        GaugeFamily::new(name, help, locations.iter().map(|l| (location(l), value(l))))
    };
    families.extend([
        per_location(
            "ferry_location_healthy",
            "1 when the location's last refresh succeeded with a complete listing.",
            |l| i64::from(l.healthy),
        ),
        per_location("ferry_location_backups", "Backups in the location's catalog.", |l| gauge_count(l.backups)),
        per_location(
            "ferry_location_bad_objects",
            "Objects skipped as bad input (corrupt gzip, truncated JSON, ...) in the last refresh.",
            |l| gauge_count(l.errors.len() as u64),
        ),
        per_location(
            "ferry_location_foreign_folders",
            "Directories under backups/ without velero-backup.json (half-written, or not Velero's): not backups.",
            |l| gauge_count(l.foreign_folders),
        ),
        per_location(
            "ferry_location_collision",
            "1 while more than one cluster (or one other than sourceCluster) writes to the location: nothing new is \
             materialized from it.",
            |l| i64::from(!l.collision.is_empty()),
        ),
        per_location(
            "ferry_location_insecure_tls",
            "1 when the location is read without checking its server's TLS certificate (insecureSkipTLSVerify).",
            |l| i64::from(l.insecure_skip_tls_verify),
        ),
        per_location(
            "ferry_location_last_refresh_timestamp_seconds",
            "Unix time of the last successful refresh (0: never).",
            |l| l.last_refresh_unix,
        ),
    ]);
    ScrapeGauges(families)
}

/// Ready when at least one location has been read successfully, or is being served as a cold load reads it
/// (or none is configured): one bucket that is down must not take the whole federation out of service, and a
/// bucket of 100,000 backups must not keep agents away until its last one is read. A location never read is simply absent from the
/// desired sets, which are then marked incomplete (nothing is ever deleted on them); its health is in
/// `ferry_location_healthy` and `ferry status`. Returns the reason when not ready.
pub fn readiness(status: &GetStatusResponse) -> Result<(), String> {
    let read = |l: &&LocationStatus| l.last_refresh_unix != 0 || l.pending != 0;
    if status.locations.is_empty() || status.locations.iter().any(|l| read(&l)) {
        return Ok(());
    }
    let names: Vec<&str> = status.locations.iter().map(|l| l.name.as_str()).collect();
    Err(format!("no location read yet: {}", names.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;

    fn render(status: &GetStatusResponse) -> String {
        crate::exposition::render(&Registry::default(), gauges(status)).expect("encodes")
    }

    #[test]
    fn gauges_of_clusters_and_locations() {
        let status = GetStatusResponse {
            caller: String::new(),
            clusters: vec![ClusterStatus {
                cluster: "b".into(),
                connected: true,
                desired: 3,
                applied: 2,
                seconds_since_heartbeat: 4,
                last_heartbeat_unix: 1_700_000_000,
                refused_storage_locations: 1,
                apis: Some(crate::grpc::proto::ClusterApis {
                    served: crate::grpc::convert::watched_types()
                        .into_iter()
                        .filter(|t| t.kind != "NonAdminBackup")
                        .collect(),
                    missing_required: vec!["backups.velero.io".into()],
                    velero_version: String::new(),
                }),
                ..Default::default()
            }],
            locations: vec![LocationStatus { name: "sh\"ared".into(), healthy: false, ..Default::default() }],
            ..Default::default()
        };
        let text = render(&status);
        assert!(text.contains("ferry_cluster_connected{cluster=\"b\"} 1\n"), "{text}");
        assert!(text.contains("ferry_cluster_items{cluster=\"b\",state=\"applied\"} 2\n"));
        assert!(text.contains("ferry_location_healthy{location=\"sh\\\"ared\"} 0\n"));
        assert!(text.contains("ferry_location_collision{location=\"sh\\\"ared\"} 0\n"), "{text}");
        assert!(text.contains("# TYPE ferry_cluster_stale gauge\n"));
        assert!(text.contains("ferry_cluster_oadp{cluster=\"b\"} 0\n"), "{text}");
        assert!(text.contains("ferry_cluster_refused_storage_locations{cluster=\"b\"} 1\n"), "{text}");
        assert!(text.contains("ferry_cluster_missing_crds{cluster=\"b\"} 1\n"), "{text}");
        assert!(text.contains("ferry_cluster_seconds_since_heartbeat{cluster=\"b\"} 4\n"), "{text}");
        assert!(text.contains("ferry_cluster_last_heartbeat_timestamp_seconds{cluster=\"b\"} 1700000000\n"), "{text}");
        assert!(text.contains("ferry_location_last_refresh_timestamp_seconds{location=\"sh\\\"ared\"} 0\n"), "{text}");
        assert_eq!(readiness(&status), Err("no location read yet: sh\"ared".into()));
    }

    /// insecureSkipTLSVerify is never silent: a gauge per location, 1 only where it is on.
    #[test]
    fn a_location_without_certificate_checks_is_flagged() {
        let location = |name: &str, insecure: bool| LocationStatus {
            name: name.into(),
            insecure_skip_tls_verify: insecure,
            ..Default::default()
        };
        let status = GetStatusResponse {
            locations: vec![location("checked", false), location("test-bed", true)],
            ..Default::default()
        };
        let text = render(&status);
        assert!(text.contains("# TYPE ferry_location_insecure_tls gauge\n"), "{text}");
        assert!(text.contains("ferry_location_insecure_tls{location=\"test-bed\"} 1\n"), "{text}");
        assert!(text.contains("ferry_location_insecure_tls{location=\"checked\"} 0\n"), "{text}");
    }

    #[test]
    fn one_readable_location_is_enough_to_be_ready() {
        let location =
            |name: &str, read: i64| LocationStatus { name: name.into(), last_refresh_unix: read, ..Default::default() };
        let mut status = GetStatusResponse {
            locations: vec![location("down", 0), location("up", 1_700_000_000)],
            ..Default::default()
        };
        assert_eq!(readiness(&status), Ok(()));
        status.locations.pop();
        assert!(readiness(&status).is_err());
        status.locations.clear();
        assert_eq!(readiness(&status), Ok(()), "nothing to read: nothing to wait for");
    }
}
