//! The coordinator's plain-HTTP side port: `/healthz` (the process serves), `/readyz` (it leads and at least one
//! location was read) and `/metrics` (OpenMetrics text: the status-derived gauges and the live counters and
//! histograms, [`Telemetry::render`](super::telemetry::Telemetry::render)). No TLS and no data beyond counts and
//! names: bind it to a port only the cluster's monitoring reaches.

use std::sync::Arc;
use std::time::SystemTime;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::hub::Hub;
use super::metrics;
use crate::exposition;

/// Serves until `shutdown` turns true.
pub async fn serve(hub: Arc<Hub>, listener: TcpListener, mut shutdown: watch::Receiver<bool>) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_page))
        .with_state(hub);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = shutdown.wait_for(|stopping| *stopping).await;
        })
        .await
}

async fn readyz(State(hub): State<Arc<Hub>>) -> impl IntoResponse {
    // A standby is alive (`/healthz`) but not ready, so a Service routes agents to the leader only.
    let standby = hub.role.borrow().not_serving();
    if let Some(reason) = standby {
        return (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {reason}\n"));
    }
    match hub.status(None, SystemTime::now()).map_err(|e| e.to_string()).and_then(|s| metrics::readiness(&s)) {
        Ok(()) => (StatusCode::OK, "ready\n".to_string()),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {reason}\n")),
    }
}

async fn metrics_page(State(hub): State<Arc<Hub>>) -> impl IntoResponse {
    let page = hub
        .status(None, SystemTime::now())
        .map_err(|e| e.to_string())
        .and_then(|status| hub.telemetry.render(&status).map_err(|e| format!("encoding the metrics: {e}")));
    match page {
        Ok(page) => (StatusCode::OK, [(header::CONTENT_TYPE, exposition::CONTENT_TYPE)], page).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e).into_response(),
    }
}
