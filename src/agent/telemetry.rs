//! The agent's live metrics: counters and a histogram updated as the agent works (a stream opened, an apply pass
//! done), beside the gauges `health.rs` computes from the agent's view on the same page.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::client::Link;
use crate::exposition::{self, seconds_histogram};
use crate::grpc::convert::{REPORTED_OUTCOMES, outcome_counts};
use crate::grpc::proto::ItemResult;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// The agent's counters and histogram, and the registry that encodes them.
#[derive(Debug)]
pub struct AgentTelemetry {
    registry: Registry,
    connects: Counter,
    applies: Family<OutcomeLabels, Counter>,
    apply_duration: Histogram,
}

impl Default for AgentTelemetry {
    fn default() -> Self {
        Self::new()
    }
}

impl AgentTelemetry {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        exposition::register_build_info(&mut registry, "agent");
        let connects = Counter::default();
        let applies = Family::<OutcomeLabels, Counter>::default();
        // Every outcome from zero, so `increase()` and alerts see the first one.
        for outcome in REPORTED_OUTCOMES {
            let _ = applies.get_or_create(&OutcomeLabels { outcome });
        }
        let apply_duration = seconds_histogram();
        // Counter names go in without `_total`: the OpenMetrics encoder appends it to every sample.
        registry.register(
            "ferry_agent_connects",
            "Streams opened to the coordinator since start (more than one: reconnects)",
            connects.clone(),
        );
        registry.register(
            "ferry_agent_applies",
            "Items of every apply pass since start, by outcome (each pass goes over the whole DesiredSet, so an item \
             counts once per pass; ferry_agent_items has the last pass alone)",
            applies.clone(),
        );
        registry.register(
            "ferry_agent_apply_duration_seconds",
            "How long one apply pass over the DesiredSet took (checks, creates, deletes and the reads they need)",
            apply_duration.clone(),
        );
        Self { registry, connects, applies, apply_duration }
    }

    /// The link to the coordinator changed: the streams it opened since the last call are counted. The link counts
    /// them itself; this follows its count, so changes the watch channel folded into one are not lost.
    pub fn link_changed(&self, link: &Link) {
        let new = link.connects.saturating_sub(self.connects.get());
        if new > 0 {
            self.connects.inc_by(new);
        }
    }

    /// One apply pass ended after `elapsed` with these results.
    pub fn apply_pass(&self, results: &[ItemResult], elapsed: Duration) {
        for (outcome, count) in outcome_counts(results) {
            self.applies.get_or_create(&OutcomeLabels { outcome }).inc_by(count);
        }
        self.apply_duration.observe(elapsed.as_secs_f64());
    }

    /// What the page encodes after its gauges (`health::render`).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::health::{AgentView, render};
    use crate::grpc::convert::object_ref;
    use crate::grpc::proto::ApplyOutcome;

    #[test]
    fn page_has_gauges_counters_the_histogram_and_build_info() {
        let telemetry = AgentTelemetry::new();
        let mut link = Link { connected: true, connects: 1, ..Default::default() };
        telemetry.link_changed(&link);
        telemetry.link_changed(&link);
        link.connects = 3;
        telemetry.link_changed(&link);
        let result = |outcome: ApplyOutcome| ItemResult {
            r#ref: Some(object_ref("Backup", "velero", "b")),
            outcome: outcome as i32,
            message: String::new(),
        };
        let pass = [result(ApplyOutcome::Applied), result(ApplyOutcome::Held)];
        telemetry.apply_pass(&pass, Duration::from_millis(40));
        telemetry.apply_pass(&pass[..1], Duration::from_secs(3));
        let mut view = AgentView { listed: true, link, ..Default::default() };
        view.set_results(&pass[..1]);

        let page = render(&view, &telemetry).expect("encodes");
        let has = |line: &str| page.lines().any(|l| l == line);
        assert!(has("ferry_agent_connected 1"), "{page}");
        assert!(has("# TYPE ferry_agent_connects counter"), "{page}");
        assert!(has("ferry_agent_connects_total 3"), "the link's own count, each stream once: {page}");
        assert!(has("ferry_agent_applies_total{outcome=\"applied\"} 2"), "{page}");
        assert!(has("ferry_agent_applies_total{outcome=\"held\"} 1"), "{page}");
        assert!(has("ferry_agent_applies_total{outcome=\"failed\"} 0"), "{page}");
        assert!(has("ferry_agent_items{outcome=\"applied\"} 1"), "the last pass alone: {page}");
        assert!(has("ferry_agent_items{outcome=\"held\"} 0"), "{page}");
        assert!(has("ferry_agent_apply_duration_seconds_bucket{le=\"0.05\"} 1"), "{page}");
        assert!(has("ferry_agent_apply_duration_seconds_bucket{le=\"+Inf\"} 2"), "{page}");
        assert!(has("ferry_agent_apply_duration_seconds_count 2"), "{page}");
        assert!(
            has(&format!("ferry_build_info{{version=\"{}\",component=\"agent\"}} 1", env!("CARGO_PKG_VERSION"))),
            "{page}"
        );
    }
}
