//! The agent's plain-HTTP side port: `/healthz` (the process serves), `/readyz` (its cluster's inventory is
//! listed and its stream to the coordinator is open) and `/metrics` (Prometheus: link, served kinds, the last
//! apply pass). The view is rendered purely from [`AgentView`]; only [`serve`] does IO. No TLS and nothing
//! beyond counts and kind names: bind it to a port only the cluster's monitoring reaches.

use std::collections::BTreeMap;
use std::fmt::Write;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::grpc::agent_client::Link;
use crate::grpc::convert::watched_types;
use crate::grpc::proto::{ApplyOutcome, ClusterApis, ItemResult};

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
        self.outcomes.clear();
        for item in items {
            let outcome = ApplyOutcome::try_from(item.outcome).unwrap_or(ApplyOutcome::Unspecified);
            *self.outcomes.entry(outcome_label(outcome)).or_default() += 1;
        }
    }
}

fn outcome_label(outcome: ApplyOutcome) -> &'static str {
    match outcome {
        ApplyOutcome::Applied => "applied",
        ApplyOutcome::Failed => "failed",
        ApplyOutcome::Conflict => "conflict",
        ApplyOutcome::Held => "held",
        ApplyOutcome::Refused => "refused",
        ApplyOutcome::Unspecified => "unknown",
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

/// The metrics page (text format 0.0.4).
pub fn render(view: &AgentView) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: Vec<(String, f64)>| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    let flag = |b: bool| f64::from(u8::from(b));
    family(
        "ferry_agent_connected",
        "gauge",
        "1 while the stream to the coordinator is open.",
        vec![(String::new(), flag(view.link.connected))],
    );
    family(
        "ferry_agent_connects_total",
        "counter",
        "Streams opened to the coordinator since start (more than one: reconnects).",
        vec![(String::new(), view.link.connects as f64)],
    );
    family(
        "ferry_agent_inventory_listed",
        "gauge",
        "1 once the cluster's inventory was listed.",
        vec![(String::new(), flag(view.listed))],
    );
    family(
        "ferry_agent_serves",
        "gauge",
        "1 for each of ferry's kinds the cluster serves and the agent watches.",
        watched_types()
            .into_iter()
            .map(|t| {
                let served = view.apis.served.iter().any(|s| s.kind == t.kind && s.group == t.group);
                (format!("{{kind=\"{}\"}}", t.kind), flag(served))
            })
            .collect(),
    );
    family(
        "ferry_agent_missing_crds",
        "gauge",
        "Velero CRDs the cluster lacks.",
        vec![(String::new(), view.apis.missing_required.len() as f64)],
    );
    family(
        "ferry_agent_items",
        "gauge",
        "Items of the last apply pass, by outcome.",
        ["applied", "failed", "conflict", "held", "refused"]
            .into_iter()
            .map(|o| (format!("{{outcome=\"{o}\"}}"), view.outcomes.get(o).copied().unwrap_or(0) as f64))
            .collect(),
    );
    out
}

/// Serves until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    view: watch::Receiver<AgentView>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_page))
        .with_state(view);
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

async fn readyz(State(view): State<watch::Receiver<AgentView>>) -> impl IntoResponse {
    match readiness(&view.borrow()) {
        Ok(()) => (StatusCode::OK, "ready\n".to_string()),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {reason}\n")),
    }
}

async fn metrics_page(State(view): State<watch::Receiver<AgentView>>) -> impl IntoResponse {
    let text = render(&view.borrow());
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::convert::object_ref;

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
    fn metrics_show_link_kinds_and_outcomes() {
        let mut view = AgentView { listed: true, ..Default::default() };
        view.link.connected = true;
        view.link.connects = 2;
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
        let text = render(&view);
        assert!(text.contains("ferry_agent_connected 1\n"), "{text}");
        assert!(text.contains("# TYPE ferry_agent_connects_total counter\nferry_agent_connects_total 2\n"), "{text}");
        assert!(text.contains("ferry_agent_serves{kind=\"Backup\"} 1\n"), "{text}");
        assert!(text.contains("ferry_agent_serves{kind=\"NonAdminBackup\"} 0\n"), "{text}");
        assert!(text.contains("ferry_agent_items{outcome=\"applied\"} 2\n"), "{text}");
        assert!(text.contains("ferry_agent_items{outcome=\"refused\"} 1\n"), "{text}");
    }
}
