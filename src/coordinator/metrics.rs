//! Prometheus text exposition of the coordinator's state, rendered from the same status the `GetStatus` rpc
//! returns (one source of truth for operators and dashboards). Pure.

use std::fmt::Write;

use crate::grpc::convert::served_apis;
use crate::grpc::proto::{ClusterStatus, GetStatusResponse};

/// Reads one count of a cluster's status.
type CountOf = fn(&ClusterStatus) -> u64;

/// The metrics page (text format 0.0.4).
pub fn render(status: &GetStatusResponse) -> String {
    let mut out = String::new();
    let mut family = |name: &str, help: &str, samples: Vec<(String, f64)>| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    let cluster = |c: &str| format!("{{cluster=\"{}\"}}", escape(c));
    let clusters = &status.clusters;
    family(
        "ferry_cluster_connected",
        "1 when the cluster's agent has a stream open.",
        clusters.iter().map(|c| (cluster(&c.cluster), f64::from(u8::from(c.connected)))).collect(),
    );
    family(
        "ferry_cluster_stale",
        "1 when the agent's stream is open but it missed too many heartbeats.",
        clusters.iter().map(|c| (cluster(&c.cluster), f64::from(u8::from(c.stale)))).collect(),
    );
    family(
        "ferry_cluster_seconds_since_heartbeat",
        "Seconds since the agent's last message (-1: never).",
        clusters.iter().map(|c| (cluster(&c.cluster), c.seconds_since_heartbeat as f64)).collect(),
    );
    family(
        "ferry_cluster_inventory_objects",
        "Objects in the cluster's published inventory.",
        clusters.iter().map(|c| (cluster(&c.cluster), c.inventory_items as f64)).collect(),
    );
    // Only clusters whose agent said what it serves (an older agent's cluster is assumed to serve everything).
    let told = || clusters.iter().filter_map(|c| c.apis.as_ref().map(|a| (c, a)));
    family(
        "ferry_cluster_oadp",
        "1 when the cluster serves OADP's NonAdminBackups (tenant backups become NonAdminBackups there).",
        told()
            .map(|(c, a)| (cluster(&c.cluster), f64::from(u8::from(served_apis(Some(a)).non_admin_backups))))
            .collect(),
    );
    family(
        "ferry_cluster_missing_crds",
        "Velero CRDs the cluster lacks (nothing is materialized there until they exist).",
        told().map(|(c, a)| (cluster(&c.cluster), a.missing_required.len() as f64)).collect(),
    );
    family(
        "ferry_cluster_refused_storage_locations",
        "BSLs through which the cluster gets nothing: read-write on another cluster's location, or not granted.",
        clusters.iter().map(|c| (cluster(&c.cluster), c.refused_storage_locations as f64)).collect(),
    );
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
    family(
        "ferry_cluster_items",
        "Items of the cluster's current DesiredSet, by state.",
        clusters
            .iter()
            .flat_map(|c| {
                counts.iter().map(move |(state, count)| {
                    (format!("{{cluster=\"{}\",state=\"{state}\"}}", escape(&c.cluster)), count(c) as f64)
                })
            })
            .collect(),
    );
    let location = |l: &str| format!("{{location=\"{}\"}}", escape(l));
    let locations = &status.locations;
    family(
        "ferry_location_healthy",
        "1 when the location's last refresh succeeded with a complete listing.",
        locations.iter().map(|l| (location(&l.name), f64::from(u8::from(l.healthy)))).collect(),
    );
    family(
        "ferry_location_backups",
        "Backups in the location's catalog.",
        locations.iter().map(|l| (location(&l.name), l.backups as f64)).collect(),
    );
    family(
        "ferry_location_bad_objects",
        "Objects skipped as bad input (corrupt gzip, truncated JSON, ...) in the last refresh.",
        locations.iter().map(|l| (location(&l.name), l.errors.len() as f64)).collect(),
    );
    family(
        "ferry_location_foreign_folders",
        "Directories under backups/ without velero-backup.json (half-written, or not Velero's): not backups.",
        locations.iter().map(|l| (location(&l.name), l.foreign_folders as f64)).collect(),
    );
    family(
        "ferry_location_collision",
        "1 while more than one cluster (or one other than sourceCluster) writes to the location: nothing new is \
         materialized from it.",
        locations.iter().map(|l| (location(&l.name), f64::from(u8::from(!l.collision.is_empty())))).collect(),
    );
    family(
        "ferry_location_last_refresh_timestamp_seconds",
        "Unix time of the last successful refresh (0: never).",
        locations.iter().map(|l| (location(&l.name), l.last_refresh_unix as f64)).collect(),
    );
    out
}

/// Ready when at least one location has been read successfully (or none is configured): one bucket that is
/// down must not take the whole federation out of service. A location never read is simply absent from the
/// desired sets, which are then marked incomplete (nothing is ever deleted on them); its health is in
/// `ferry_location_healthy` and `ferry status`. Returns the reason when not ready.
pub fn readiness(status: &GetStatusResponse) -> Result<(), String> {
    let read = |l: &&crate::grpc::proto::LocationStatus| l.last_refresh_unix != 0;
    if status.locations.is_empty() || status.locations.iter().any(|l| read(&l)) {
        return Ok(());
    }
    let names: Vec<&str> = status.locations.iter().map(|l| l.name.as_str()).collect();
    Err(format!("no location read yet: {}", names.join(", ")))
}

fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::proto::LocationStatus;

    #[test]
    fn renders_clusters_and_locations() {
        let status = GetStatusResponse {
            caller: String::new(),
            clusters: vec![ClusterStatus {
                cluster: "b".into(),
                connected: true,
                desired: 3,
                applied: 2,
                seconds_since_heartbeat: 4,
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
        assert_eq!(readiness(&status), Err("no location read yet: sh\"ared".into()));
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
