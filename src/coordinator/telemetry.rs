//! The coordinator's live metrics: counters and histograms updated where things happen (a location refresh, an
//! agent stream opened or failed, an agent's results, an Ack with rejected items), beside the status-derived
//! gauges of [`metrics`](super::metrics) on the same page. Updating one is an atomic add, never under the hub's
//! lock. The pure parts are [`new_bad_objects`] and [`DeliveryClock`].

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::metrics;
use crate::catalog::LocationCatalog;
use crate::exposition::{self, seconds_histogram};
use crate::grpc::convert::{REPORTED_OUTCOMES, outcome_label};
use crate::grpc::proto::{ApplyOutcome, GetStatusResponse};

/// What `ferry_errors_total{kind}` counts: each kind is something the coordinator tells apart where it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A location refresh failed (listing or reading the bucket); the previous catalog was kept.
    Refresh,
    /// An object newly found bad in a refresh (corrupt gzip, truncated JSON, ...; one that was already bad in
    /// the previous refresh is not counted again).
    BadObject,
    /// An inventory item an agent published that the coordinator rejected (in the Ack the agent got).
    RejectedItem,
    /// An agent stream that ended with an error (not a clean close, not a replacement or shutdown).
    Stream,
    /// An item an agent reported as failed to apply.
    ApplyFailed,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 5] =
        [ErrorKind::Refresh, ErrorKind::BadObject, ErrorKind::RejectedItem, ErrorKind::Stream, ErrorKind::ApplyFailed];

    pub fn label(self) -> &'static str {
        match self {
            ErrorKind::Refresh => "refresh",
            ErrorKind::BadObject => "bad_object",
            ErrorKind::RejectedItem => "rejected_item",
            ErrorKind::Stream => "stream",
            ErrorKind::ApplyFailed => "apply_failed",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefreshLabels {
    location: String,
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LocationLabels {
    location: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabels {
    cluster: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RevokedLabels {
    identity: String,
    at: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApplyLabels {
    cluster: String,
    result: &'static str,
}

/// The coordinator's counters and histograms, and the registry that encodes them.
#[derive(Debug)]
pub struct Telemetry {
    registry: Registry,
    refreshes: Family<RefreshLabels, Counter>,
    refresh_duration: Family<LocationLabels, Histogram, fn() -> Histogram>,
    errors: Family<ErrorLabels, Counter>,
    connects: Family<ClusterLabels, Counter>,
    applies: Family<ApplyLabels, Counter>,
    revoked: Family<RevokedLabels, Counter>,
    delivery_latency: Histogram,
}

impl Telemetry {
    /// Every series of the configured clusters and locations starts at zero, so `increase()` and alerts see the
    /// first event, and a dashboard lists every cluster before its agent ever connects.
    pub fn new<'a>(clusters: impl IntoIterator<Item = &'a str>, locations: impl IntoIterator<Item = &'a str>) -> Self {
        let mut registry = Registry::default();
        exposition::register_build_info(&mut registry, "coordinator");
        let refreshes = Family::<RefreshLabels, Counter>::default();
        let refresh_duration = Family::<LocationLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            seconds_histogram as fn() -> Histogram,
        );
        let errors = Family::<ErrorLabels, Counter>::default();
        let connects = Family::<ClusterLabels, Counter>::default();
        let applies = Family::<ApplyLabels, Counter>::default();
        let revoked = Family::<RevokedLabels, Counter>::default();
        let delivery_latency = seconds_histogram();
        // Creating each series is the point here; the read guard `get_or_create` returns is dropped at once.
        for location in locations {
            for result in ["ok", "error"] {
                let _ = refreshes.get_or_create(&RefreshLabels { location: location.to_string(), result });
            }
            let _ = refresh_duration.get_or_create(&LocationLabels { location: location.to_string() });
        }
        for kind in ErrorKind::ALL {
            let _ = errors.get_or_create(&ErrorLabels { kind: kind.label() });
        }
        for cluster in clusters {
            let _ = connects.get_or_create(&ClusterLabels { cluster: cluster.to_string() });
            for result in REPORTED_OUTCOMES {
                let _ = applies.get_or_create(&ApplyLabels { cluster: cluster.to_string(), result });
            }
        }
        // Counter names go in without `_total`: the OpenMetrics encoder appends it to every sample.
        registry.register(
            "ferry_location_refreshes",
            "Location refreshes (list the bucket, fetch what changed), by result: ok, or error (the previous \
             catalog was kept)",
            refreshes.clone(),
        );
        registry.register(
            "ferry_location_refresh_duration_seconds",
            "How long one location refresh took, failed ones included",
            refresh_duration.clone(),
        );
        registry.register(
            "ferry_errors",
            "Errors by kind: refresh (a location refresh failed), bad_object (an object newly found bad in a \
             refresh), rejected_item (an inventory item an agent published was rejected), stream (an agent stream \
             ended with an error), apply_failed (an item an agent reported as failed to apply)",
            errors.clone(),
        );
        registry.register(
            "ferry_cluster_connects",
            "Agent streams the coordinator accepted, per cluster (more than one: reconnects)",
            connects.clone(),
        );
        registry.register(
            "ferry_cluster_applies",
            "Item results in the agents' reports for their current DesiredSet, by result (applied, failed, \
             conflict, held, refused); an agent reports every item of its set after each apply pass that changed \
             something, so this counts reports, not distinct objects",
            applies.clone(),
        );
        registry.register(
            "ferry_revoked_refusals",
            "Certificates refused because the revocation list names them, by identity (cluster/<name>, \
             operator/<name>) and where: handshake (TLS alert certificate_revoked), rpc (a call on a connection \
             opened before the revocation), stream (an open agent stream ended when the list changed)",
            revoked.clone(),
        );
        registry.register(
            "ferry_delivery_latency_seconds",
            "Seconds from the coordinator sending a DesiredSet version on an agent's stream (whole or as a delta) \
             to that agent's first report of results for that version: transfer, the agent's apply pass and its \
             report. A version superseded before its report arrives is not measured",
            delivery_latency.clone(),
        );
        Self { registry, refreshes, refresh_duration, errors, connects, applies, revoked, delivery_latency }
    }

    /// One location refresh ended after `elapsed`, with or without an error.
    pub fn refreshed(&self, location: &str, ok: bool, elapsed: Duration) {
        let result = if ok { "ok" } else { "error" };
        self.refreshes.get_or_create(&RefreshLabels { location: location.to_string(), result }).inc();
        let labels = LocationLabels { location: location.to_string() };
        self.refresh_duration.get_or_create(&labels).observe(elapsed.as_secs_f64());
        if !ok {
            self.error(ErrorKind::Refresh, 1);
        }
    }

    pub fn error(&self, kind: ErrorKind, count: u64) {
        if count > 0 {
            self.errors.get_or_create(&ErrorLabels { kind: kind.label() }).inc_by(count);
        }
    }

    /// The coordinator accepted a stream of `cluster`'s agent.
    pub fn connected(&self, cluster: &str) {
        self.connects.get_or_create(&ClusterLabels { cluster: cluster.to_string() }).inc();
    }

    /// An agent's report for its current set, counted by outcome (failed items also as `apply_failed` errors).
    pub fn applied(&self, cluster: &str, outcomes: &BTreeMap<ApplyOutcome, u64>) {
        for (&outcome, &count) in outcomes {
            let labels = ApplyLabels { cluster: cluster.to_string(), result: outcome_label(outcome) };
            self.applies.get_or_create(&labels).inc_by(count);
            if outcome == ApplyOutcome::Failed {
                self.error(ErrorKind::ApplyFailed, count);
            }
        }
    }

    /// A revoked certificate (of `identity`) was refused `at` the handshake, an rpc or an open stream.
    pub fn revoked(&self, identity: &str, at: &'static str) {
        self.revoked.get_or_create(&RevokedLabels { identity: identity.to_string(), at }).inc();
    }

    /// A set reached its agent and came back as results this long after it was sent ([`DeliveryClock`]).
    pub fn delivered(&self, latency: Duration) {
        self.delivery_latency.observe(latency.as_secs_f64());
    }

    /// The `/metrics` page: the gauges of `status`, then the counters and histograms.
    pub fn render(&self, status: &GetStatusResponse) -> Result<String, fmt::Error> {
        exposition::render(&self.registry, metrics::gauges(status))
    }
}

/// Objects bad in `current` that were not bad in `previous` (a coordinator that just started counts every bad
/// object once): a bad object stays in every refresh's errors until it is fixed, and must not count each time.
pub fn new_bad_objects(previous: Option<&LocationCatalog>, current: &LocationCatalog) -> u64 {
    let known: HashSet<&str> =
        previous.map(|p| p.errors.iter().map(|e| e.object.as_str()).collect()).unwrap_or_default();
    let fresh: HashSet<&str> =
        current.errors.iter().map(|e| e.object.as_str()).filter(|o| !known.contains(o)).collect();
    fresh.len() as u64
}

/// Matches one stream's sent DesiredSet versions to the agent's results: the agent reports results with the
/// version they are for, and its first report for the version last sent ends the measurement. Pure: the caller
/// passes the clock.
#[derive(Debug, Default)]
pub struct DeliveryClock {
    /// The version last sent and when it was first sent.
    pending: Option<(String, Instant)>,
}

impl DeliveryClock {
    /// A set of `version` was sent. Sending the same version again (after the agent asked for a resync) keeps the
    /// first time: the agent has not reported on it yet.
    pub fn sent(&mut self, version: &str, now: Instant) {
        if version.is_empty() || self.pending.as_ref().is_some_and(|(pending, _)| pending == version) {
            return;
        }
        self.pending = Some((version.to_string(), now));
    }

    /// The agent reported results for `version`: how long since that version was sent, if it is the one
    /// awaited (results for an older version, or a second report, measure nothing).
    pub fn reported(&mut self, version: &str, now: Instant) -> Option<Duration> {
        match &self.pending {
            Some((pending, sent)) if pending == version => {
                let latency = now.saturating_duration_since(*sent);
                self.pending = None;
                Some(latency)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{CatalogError, Location, StoreKind};
    use crate::grpc::proto::{ClusterStatus, LocationStatus};

    fn catalog(bad: &[&str]) -> LocationCatalog {
        let location = Location {
            name: "shared".into(),
            kind: StoreKind::S3,
            bucket: "velero-backups".into(),
            prefix: "velero".into(),
            source_cluster: "a".into(),
        };
        let mut catalog = LocationCatalog::empty(location);
        catalog.errors = bad
            .iter()
            .map(|o| CatalogError { location: "shared".into(), object: o.to_string(), error: "corrupt gzip".into() })
            .collect();
        catalog
    }

    #[test]
    fn a_bad_object_counts_once_until_it_is_fixed() {
        assert_eq!(new_bad_objects(None, &catalog(&["a", "b"])), 2, "a fresh coordinator counts what it finds");
        assert_eq!(new_bad_objects(Some(&catalog(&["a", "b"])), &catalog(&["a", "b"])), 0);
        assert_eq!(new_bad_objects(Some(&catalog(&["a", "b"])), &catalog(&["b", "c"])), 1);
        assert_eq!(new_bad_objects(Some(&catalog(&["b"])), &catalog(&[])), 0);
    }

    #[test]
    fn delivery_is_measured_from_the_first_send_to_the_first_report_of_that_version() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut clock = DeliveryClock::default();
        assert_eq!(clock.reported("v1", at(0)), None, "nothing was sent");
        clock.sent("v1", at(0));
        clock.sent("v1", at(50));
        assert_eq!(clock.reported("v0", at(60)), None, "a report on an older set");
        assert_eq!(clock.reported("v1", at(100)), Some(Duration::from_millis(100)), "a resend keeps the first time");
        assert_eq!(clock.reported("v1", at(200)), None, "only the first report counts");
        clock.sent("v2", at(300));
        clock.sent("v3", at(400));
        assert_eq!(clock.reported("v2", at(450)), None, "v2 was superseded before its report");
        assert_eq!(clock.reported("v3", at(500)), Some(Duration::from_millis(100)));
        clock.sent("", at(600));
        assert_eq!(clock.reported("", at(700)), None, "an empty set version is never measured");
    }

    #[test]
    fn page_has_gauges_counters_histograms_and_build_info() {
        let telemetry = Telemetry::new(["b", "c"], ["shared"]);
        telemetry.refreshed("shared", true, Duration::from_millis(30));
        telemetry.refreshed("shared", false, Duration::from_secs(2));
        telemetry.error(ErrorKind::BadObject, 2);
        telemetry.connected("b");
        telemetry.connected("b");
        telemetry.applied("b", &BTreeMap::from([(ApplyOutcome::Applied, 3), (ApplyOutcome::Failed, 1)]));
        telemetry.delivered(Duration::from_millis(700));
        let status = GetStatusResponse {
            clusters: vec![ClusterStatus { cluster: "b".into(), connected: true, ..Default::default() }],
            locations: vec![LocationStatus { name: "shared".into(), healthy: true, ..Default::default() }],
            ..Default::default()
        };
        let page = telemetry.render(&status).expect("encodes");
        let has = |line: &str| page.lines().any(|l| l == line);
        // The status-derived gauges, unchanged.
        assert!(has("ferry_cluster_connected{cluster=\"b\"} 1"), "{page}");
        assert!(has("ferry_location_healthy{location=\"shared\"} 1"), "{page}");
        // Counters: `_total` appended by the encoder, series of configured names start at zero.
        assert!(has("# TYPE ferry_location_refreshes counter"), "{page}");
        assert!(has("ferry_location_refreshes_total{location=\"shared\",result=\"ok\"} 1"), "{page}");
        assert!(has("ferry_location_refreshes_total{location=\"shared\",result=\"error\"} 1"), "{page}");
        assert!(has("ferry_errors_total{kind=\"refresh\"} 1"), "{page}");
        assert!(has("ferry_errors_total{kind=\"bad_object\"} 2"), "{page}");
        assert!(has("ferry_errors_total{kind=\"apply_failed\"} 1"), "{page}");
        assert!(has("ferry_errors_total{kind=\"stream\"} 0"), "{page}");
        assert!(has("ferry_cluster_connects_total{cluster=\"b\"} 2"), "{page}");
        assert!(has("ferry_cluster_connects_total{cluster=\"c\"} 0"), "{page}");
        assert!(has("ferry_cluster_applies_total{cluster=\"b\",result=\"applied\"} 3"), "{page}");
        assert!(has("ferry_cluster_applies_total{cluster=\"b\",result=\"failed\"} 1"), "{page}");
        assert!(has("ferry_cluster_applies_total{cluster=\"c\",result=\"held\"} 0"), "{page}");
        // Histograms.
        assert!(has("# TYPE ferry_location_refresh_duration_seconds histogram"), "{page}");
        assert!(has("ferry_location_refresh_duration_seconds_bucket{le=\"0.05\",location=\"shared\"} 1"), "{page}");
        assert!(has("ferry_location_refresh_duration_seconds_bucket{le=\"+Inf\",location=\"shared\"} 2"), "{page}");
        assert!(has("ferry_location_refresh_duration_seconds_count{location=\"shared\"} 2"), "{page}");
        assert!(has("ferry_delivery_latency_seconds_bucket{le=\"0.5\"} 0"), "{page}");
        assert!(has("ferry_delivery_latency_seconds_bucket{le=\"1.0\"} 1"), "{page}");
        assert!(has("ferry_delivery_latency_seconds_count 1"), "{page}");
        assert!(
            has(&format!("ferry_build_info{{version=\"{}\",component=\"coordinator\"}} 1", env!("CARGO_PKG_VERSION"))),
            "{page}"
        );
        assert!(page.ends_with("# EOF\n"), "{page}");
    }
}
