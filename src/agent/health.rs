//! The agent's plain-HTTP side port: `/healthz` (the process serves), `/readyz` (its cluster's inventory is
//! listed and its stream to the coordinator is open) and `/metrics` (OpenMetrics text: gauges of the link, the
//! served kinds and the last apply pass, computed from [`AgentView`] at scrape time, beside the live counters and
//! histograms of [`AgentTelemetry`]). The gauges are derived purely from the view; only [`serve`] does IO. No TLS
//! and nothing beyond counts and kind names: bind it to a port only the cluster's monitoring reaches.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::client::Link;
use super::telemetry::AgentTelemetry;
use crate::exposition::{self, GaugeFamily, ScrapeGauges, gauge_count};
use crate::grpc::convert::{REPORTED_OUTCOMES, outcome_counts, watched_types};
use crate::grpc::proto::{ClusterApis, ItemResult};

/// What the agent shows about itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentView {
    /// The first list of every served required kind is done (the agent has something true to publish).
    pub listed: bool,
    pub link: Link,
    pub apis: ClusterApis,
    /// Outcomes of the last apply pass, by outcome name.
    pub outcomes: BTreeMap<&'static str, u64>,
}

impl AgentView {
    /// Counts the outcomes of an apply pass.
    pub fn set_results(&mut self, items: &[ItemResult]) {
        self.outcomes = outcome_counts(items);
    }
}

/// Ready once listed and connected; otherwise why not.
pub fn readiness(view: &AgentView) -> Result<(), String> {
    match (view.listed, view.link.connected) {
        (true, true) => Ok(()),
        (false, _) => Err("the cluster's inventory is not listed yet".into()),
        (true, false) => Err(match &view.link.last_error {
            Some(error) => format!("not connected to the coordinator: {error}"),
            None => "not connected to the coordinator yet".into(),
        }),
    }
}

/// The `/metrics` page: the gauges of `view`, then the counters and the histogram of `telemetry`.
pub fn render(view: &AgentView, telemetry: &AgentTelemetry) -> Result<String, std::fmt::Error> {
    exposition::render(telemetry.registry(), gauges(view))
}

/// The gauges of the agent's page, from its view (the counters and histograms are in [`AgentTelemetry`]).
pub fn gauges(view: &AgentView) -> ScrapeGauges {
    let flag = |b: bool| i64::from(b);
    ScrapeGauges(vec![
        GaugeFamily::new(
            "ferry_agent_connected",
            "1 while the stream to the coordinator is open.",
            [(Vec::new(), flag(view.link.connected))],
        ),
        GaugeFamily::new(
            "ferry_agent_inventory_listed",
            "1 once the cluster's inventory was listed.",
            [(Vec::new(), flag(view.listed))],
        ),
        GaugeFamily::new(
            "ferry_agent_serves",
            "1 for each of ferry's kinds the cluster serves and the agent watches.",
            watched_types().into_iter().map(|t| {
                let served = view.apis.served.iter().any(|s| s.kind == t.kind && s.group == t.group);
                (vec![("kind", t.kind)], flag(served))
            }),
        ),
        GaugeFamily::new(
            "ferry_agent_missing_crds",
            "Velero CRDs the cluster lacks.",
            [(Vec::new(), gauge_count(view.apis.missing_required.len() as u64))],
        ),
        GaugeFamily::new(
            "ferry_agent_items",
            "Items of the last apply pass, by outcome.",
            REPORTED_OUTCOMES
                .into_iter()
                .map(|o| (vec![("outcome", o.to_string())], gauge_count(view.outcomes.get(o).copied().unwrap_or(0)))),
        ),
    ])
}

/// Serves until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    view: watch::Receiver<AgentView>,
    telemetry: Arc<AgentTelemetry>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_page))
        .with_state(Served { view, telemetry });
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

/// What the handlers read.
#[derive(Clone)]
struct Served {
    view: watch::Receiver<AgentView>,
    telemetry: Arc<AgentTelemetry>,
}

async fn readyz(State(Served { view, .. }): State<Served>) -> impl IntoResponse {
    match readiness(&view.borrow()) {
        Ok(()) => (StatusCode::OK, "ready\n".to_string()),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {reason}\n")),
    }
}

async fn metrics_page(State(Served { view, telemetry }): State<Served>) -> impl IntoResponse {
    // A copy, so the watch channel is not held while encoding.
    let view = view.borrow().clone();
    match render(&view, &telemetry) {
        Ok(page) => (StatusCode::OK, [(header::CONTENT_TYPE, exposition::CONTENT_TYPE)], page).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("encoding the metrics: {e}")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::convert::object_ref;
    use crate::grpc::proto::ApplyOutcome;

    #[test]
    fn readiness_needs_the_inventory_and_the_stream() {
        let mut view = AgentView::default();
        assert!(readiness(&view).unwrap_err().contains("not listed"));
        view.listed = true;
        view.link.last_error = Some("connect refused".into());
        assert!(readiness(&view).unwrap_err().contains("connect refused"));
        view.link.connected = true;
        assert_eq!(readiness(&view), Ok(()));
    }

    #[test]
    fn gauges_show_link_kinds_and_outcomes() {
        let mut view = AgentView { listed: true, ..Default::default() };
        view.link.connected = true;
        view.apis.served = watched_types().into_iter().filter(|t| t.kind != "NonAdminBackup").collect();
        let result = |outcome: ApplyOutcome| ItemResult {
            r#ref: Some(object_ref("Backup", "velero", "b")),
            outcome: outcome as i32,
            message: String::new(),
        };
        view.set_results(&[
            result(ApplyOutcome::Applied),
            result(ApplyOutcome::Applied),
            result(ApplyOutcome::Refused),
        ]);
        let text = exposition::render(&Default::default(), gauges(&view)).expect("encodes");
        assert!(text.contains("ferry_agent_connected 1\n"), "{text}");
        assert!(text.contains("ferry_agent_inventory_listed 1\n"), "{text}");
        assert!(text.contains("ferry_agent_missing_crds 0\n"), "{text}");
        assert!(text.contains("ferry_agent_serves{kind=\"Backup\"} 1\n"), "{text}");
        assert!(text.contains("ferry_agent_serves{kind=\"NonAdminBackup\"} 0\n"), "{text}");
        assert!(text.contains("ferry_agent_items{outcome=\"applied\"} 2\n"), "{text}");
        assert!(text.contains("ferry_agent_items{outcome=\"refused\"} 1\n"), "{text}");
    }

    /// `GET path` on a real socket: the whole response.
    async fn get(addr: std::net::SocketAddr, path: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await.expect("write");
        let mut response = String::new();
        stream.read_to_string(&mut response).await.expect("read");
        response
    }

    #[tokio::test]
    async fn the_port_serves_openmetrics_health_and_readiness() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (view, view_rx) = watch::channel(AgentView::default());
        let telemetry = Arc::new(AgentTelemetry::new());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, view_rx, telemetry.clone(), async move {
            let _ = stopped.await;
        }));

        let code = |response: &str| response.split_whitespace().nth(1).unwrap_or_default().to_string();
        assert_eq!(code(&get(addr, "/healthz").await), "200");
        let response = get(addr, "/readyz").await;
        assert!(code(&response) == "503" && response.contains("not listed"), "{response}");
        view.send_modify(|v| {
            v.listed = true;
            v.link = Link { connected: true, connects: 1, ..Default::default() };
        });
        telemetry.link_changed(&view.borrow().link);
        assert_eq!(code(&get(addr, "/readyz").await), "200");

        let response = get(addr, "/metrics").await;
        let (head, page) = response.split_once("\r\n\r\n").expect("head and body");
        assert_eq!(code(head), "200", "{head}");
        let content_type = format!("content-type: {}", exposition::CONTENT_TYPE);
        assert!(head.lines().any(|h| h.eq_ignore_ascii_case(&content_type)), "{head}");
        assert!(page.contains("\nferry_agent_connected 1\n"), "{page}");
        assert!(page.contains("\nferry_agent_connects_total 1\n"), "{page}");
        assert!(page.contains("\nferry_agent_apply_duration_seconds_count 0\n"), "{page}");
        assert!(page.contains("ferry_build_info{"), "{page}");
        assert!(page.ends_with("# EOF\n"), "{page}");

        let _ = stop.send(());
        server.await.expect("joins").expect("serves until stopped");
    }
}
