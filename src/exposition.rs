//! The OpenMetrics text that both `/metrics` pages serve (the coordinator's and the agent's), through
//! prometheus-client. Two kinds of metrics share a page: live counters and histograms, kept in a [`Registry`] and
//! updated where things happen, and gauges computed at scrape time from a snapshot of state (the coordinator's
//! status, the agent's view) by [`ScrapeGauges`], so those never drift from what `ferry status` shows.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

/// What `/metrics` answers with: the OpenMetrics text format that prometheus-client writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upper bounds (seconds) of every duration histogram: from a warm refresh or a small apply pass (tens of
/// milliseconds) to a cold listing of a large bucket or a slow API server (minutes).
const SECONDS_BUCKETS: [f64; 13] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];

/// A histogram of durations in seconds with ferry's buckets (a `fn` so a `Family` can construct one per label
/// set).
pub fn seconds_histogram() -> Histogram {
    Histogram::new(SECONDS_BUCKETS)
}

/// `ferry_build_info{version, component} 1`: which ferry a scrape came from (an OpenMetrics info metric; the
/// encoder appends `_info`).
pub fn register_build_info(registry: &mut Registry, component: &'static str) {
    let labels: Vec<(&'static str, &'static str)> =
        vec![("version", env!("CARGO_PKG_VERSION")), ("component", component)];
    registry.register(
        "ferry_build",
        "The ferry version and component (coordinator or agent) serving these metrics",
        Info::new(labels),
    );
}

/// A count as a gauge value (a count past `i64::MAX` cannot happen; it would show as the maximum).
pub fn gauge_count(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// One gauge family computed at scrape time: its name, help text and samples (labels, value).
#[derive(Debug, Clone, PartialEq)]
pub struct GaugeFamily {
    pub name: &'static str,
    pub help: &'static str,
    pub samples: Vec<(Vec<(&'static str, String)>, i64)>,
}

impl GaugeFamily {
    pub fn new(
        name: &'static str,
        help: &'static str,
        samples: impl IntoIterator<Item = (Vec<(&'static str, String)>, i64)>,
    ) -> Self {
        Self { name, help, samples: samples.into_iter().collect() }
    }
}

/// Gauges computed from a snapshot at scrape time, encoded as one family each (a family without samples still
/// has its HELP and TYPE lines, so a dashboard finds the name before any cluster connects).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScrapeGauges(pub Vec<GaugeFamily>);

impl Collector for ScrapeGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        for family in &self.0 {
            let mut metric = encoder.encode_descriptor(family.name, family.help, None, MetricType::Gauge)?;
            for (labels, value) in &family.samples {
                metric.encode_family(labels)?.encode_gauge(value)?;
            }
        }
        Ok(())
    }
}

/// The whole page: `gauges` (computed for this scrape), then everything `live` holds, then `# EOF`.
pub fn render(live: &Registry, gauges: ScrapeGauges) -> Result<String, fmt::Error> {
    // The gauges are a snapshot, so they go through a registry of their own, made for this one scrape.
    let mut scrape = Registry::default();
    scrape.register_collector(Box::new(gauges));
    let mut page = String::new();
    encode_registry(&mut page, &scrape)?;
    encode_registry(&mut page, live)?;
    encode_eof(&mut page)?;
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_live_metrics_and_eof_make_one_page() {
        let mut live = Registry::default();
        register_build_info(&mut live, "test");
        let gauges = ScrapeGauges(vec![
            GaugeFamily::new("ferry_plain", "No labels.", [(Vec::new(), 3)]),
            GaugeFamily::new(
                "ferry_labelled",
                "With a label that needs escaping.",
                [(vec![("cluster", "a\"b".to_string())], -1)],
            ),
            GaugeFamily::new("ferry_empty", "No samples yet.", []),
        ]);
        let page = render(&live, gauges).expect("encodes");
        assert!(page.contains("# HELP ferry_plain No labels.\n# TYPE ferry_plain gauge\nferry_plain 3\n"), "{page}");
        assert!(page.contains("ferry_labelled{cluster=\"a\\\"b\"} -1\n"), "{page}");
        assert!(page.contains("# TYPE ferry_empty gauge\n"), "{page}");
        let version = env!("CARGO_PKG_VERSION");
        assert!(page.contains("# TYPE ferry_build info\n"), "{page}");
        assert!(page.contains(&format!("ferry_build_info{{version=\"{version}\",component=\"test\"}} 1\n")), "{page}");
        assert!(page.ends_with("# EOF\n"), "{page}");
    }

    #[test]
    fn durations_land_in_their_buckets() {
        let mut live = Registry::default();
        let histogram = seconds_histogram();
        live.register("ferry_test_duration_seconds", "A duration", histogram.clone());
        histogram.observe(0.5);
        histogram.observe(400.0);
        let page = render(&live, ScrapeGauges::default()).expect("encodes");
        assert!(page.contains("ferry_test_duration_seconds_bucket{le=\"0.25\"} 0\n"), "{page}");
        assert!(page.contains("ferry_test_duration_seconds_bucket{le=\"0.5\"} 1\n"), "{page}");
        assert!(page.contains("ferry_test_duration_seconds_bucket{le=\"300.0\"} 1\n"), "{page}");
        assert!(page.contains("ferry_test_duration_seconds_bucket{le=\"+Inf\"} 2\n"), "{page}");
        assert!(page.contains("ferry_test_duration_seconds_count 2\n"), "{page}");
        assert!(page.contains("ferry_test_duration_seconds_sum 400.5\n"), "{page}");
    }
}
