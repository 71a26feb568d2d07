//! The coordinator's web status page (`--status-page-listen`, off by default): clusters, locations and, per
//! backup, where it is materialized and why not. Everything on it comes from the hub's `status` and
//! `describe_backups`, the same data `ferry status` and `ferry describe backup` show over gRPC.
//!
//! The page shows tenant namespaces and backup names and has no authentication of its own, so it is served
//! only on a loopback address: an operator reaches it with `kubectl port-forward`, which Kubernetes RBAC gates
//! (`pods/portforward`). Any request whose Host is not loopback is answered 421 (DNS rebinding through an open
//! port-forward: [`page_policy`]). It is one HTML page (`status_page.html`, inline CSS and JS, no external
//! assets) rendered on the server, so it reads without JavaScript; its script polls `/api/status` every 2 s
//! and redraws the same tables from the JSON. Its Content-Security-Policy allows that inline style and script
//! by hash only.
//!
//! The view building and the HTML rendering are pure; [`serve`] joins them to axum.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, LazyLock};
use std::time::SystemTime;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::hub::Hub;
use super::page_policy;
use crate::grpc::proto::{
    ApplyOutcome, ClusterStatus, DescribeBackupResponse, DescribedCluster, DescribedItem, DesiredAction,
    GetStatusResponse, LocationStatus, ObjectRef,
};

/// Most backups the page describes; the rest are counted. Each description scans every cluster's objects
/// under the hub's lock, and the page is polled every 2 s.
pub const MAX_BACKUPS: usize = 200;

const TEMPLATE: &str = include_str!("status_page.html");

/// Why the status page cannot listen where it was asked to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatusPageError {
    #[error("status page address {0:?} is not HOST:PORT with an IP address or localhost")]
    BadAddress(String),
    #[error(
        "status page address {0:?} is not a loopback address: the page shows tenant namespaces and backup names \
         and has no authentication of its own; listen on 127.0.0.1 or [::1] and open it through \
         `kubectl port-forward` (access then needs RBAC on pods/portforward)"
    )]
    NotLoopback(String),
}

/// Accepts `127.0.0.1:8080`, `[::1]:8080`, `localhost:8080` (any loopback IP), nothing else. A host name is
/// not resolved: only `localhost`, which is always loopback, is taken.
pub fn check_listen_address(address: &str) -> Result<(), StatusPageError> {
    let ip = match address.parse::<SocketAddr>() {
        Ok(addr) => addr.ip(),
        Err(_) => match address.rsplit_once(':') {
            Some((host, port)) if host.eq_ignore_ascii_case("localhost") && port.parse::<u16>().is_ok() => {
                IpAddr::from([127, 0, 0, 1])
            }
            _ => return Err(StatusPageError::BadAddress(address.to_string())),
        },
    };
    if ip.is_loopback() { Ok(()) } else { Err(StatusPageError::NotLoopback(address.to_string())) }
}

/// Everything the page shows, as `/api/status` serves it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PageView {
    pub generated_unix: i64,
    pub clusters: Vec<ClusterRow>,
    pub locations: Vec<LocationRow>,
    pub backups: Vec<BackupRow>,
    /// How many backups there are; more than `backups.len()` when the page's limit cut the list.
    pub backups_total: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRow {
    pub name: String,
    /// `connected`, `stale` or `disconnected`.
    pub state: &'static str,
    pub seconds_since_heartbeat: Option<i64>,
    pub software_version: String,
    pub inventory: u64,
    pub desired: u64,
    pub applied: u64,
    pub failed: u64,
    pub refused: u64,
    pub waiting: u64,
    pub held: u64,
    pub conflicts: u64,
    pub agent_refused: u64,
    pub retiring: u64,
    pub would_retire: u64,
    pub refused_storage_locations: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LocationRow {
    pub name: String,
    pub source_cluster: String,
    pub healthy: bool,
    pub message: String,
    pub last_refresh_unix: i64,
    pub backups: u64,
    pub foreign_folders: u64,
    /// Bad objects: (key, why).
    pub errors: Vec<(String, String)>,
    pub collision: String,
    pub writers: Vec<String>,
    /// Read without checking its server's TLS certificate (`insecureSkipTLSVerify`).
    #[serde(rename = "insecureSkipTLSVerify")]
    pub insecure_skip_tls_verify: bool,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BackupRow {
    pub name: String,
    /// The locations that hold it (none: it is gone from the buckets, and clusters may still hold it).
    pub locations: Vec<String>,
    pub phase: String,
    /// `admin`, `tenant NS/NAME`, `refused`, or empty when no location holds it.
    pub owner: String,
    /// Why ferry refuses the backup as a whole (its ownership marks do not hold), else empty.
    pub refusal: String,
    /// Bad objects of its folder: (key, why).
    pub bucket_errors: Vec<(String, String)>,
    pub clusters: Vec<BackupOnCluster>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BackupOnCluster {
    pub cluster: String,
    pub state: String,
    /// What of the backup exists there: `Backup velero/x`, `2 PodVolumeBackups`, `NonAdminBackup ns/n`.
    pub present: Vec<String>,
    /// `materialized` (there, nothing left to do), `refused`, `conflict`, `waiting`, `failed`, `pending`, …
    pub verdict: String,
    pub planned: Vec<PlannedRow>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlannedRow {
    pub action: String,
    pub object: String,
    pub reason: String,
    pub outcome: String,
    pub message: String,
}

/// The page's data from a `GetStatus` answer (without per-backup detail) and the backups' descriptions.
pub fn view(
    status: &GetStatusResponse,
    backups: &[DescribeBackupResponse],
    backups_total: usize,
    now: SystemTime,
) -> PageView {
    PageView {
        generated_unix: unix(now),
        clusters: status.clusters.iter().map(cluster_row).collect(),
        locations: status.locations.iter().map(location_row).collect(),
        backups: backups.iter().map(backup_row).collect(),
        backups_total,
    }
}

fn unix(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

fn cluster_row(c: &ClusterStatus) -> ClusterRow {
    let state = match (c.connected, c.stale) {
        (true, true) => "stale",
        (true, false) => "connected",
        (false, _) => "disconnected",
    };
    ClusterRow {
        name: c.cluster.clone(),
        state,
        seconds_since_heartbeat: (c.seconds_since_heartbeat >= 0).then_some(c.seconds_since_heartbeat),
        software_version: c.software_version.clone(),
        inventory: c.inventory_items,
        desired: c.desired,
        applied: c.applied,
        failed: c.failed,
        refused: c.refused,
        waiting: c.waiting,
        held: c.held,
        conflicts: c.conflicts,
        agent_refused: c.agent_refused,
        retiring: c.retiring,
        would_retire: c.would_retire,
        refused_storage_locations: c.refused_storage_locations,
    }
}

fn location_row(l: &LocationStatus) -> LocationRow {
    LocationRow {
        name: l.name.clone(),
        source_cluster: l.source_cluster.clone(),
        healthy: l.healthy,
        message: l.message.clone(),
        last_refresh_unix: l.last_refresh_unix,
        backups: l.backups,
        foreign_folders: l.foreign_folders,
        errors: l.errors.iter().map(|e| (e.object.clone(), e.error.clone())).collect(),
        collision: l.collision.clone(),
        writers: l.writers.clone(),
        insecure_skip_tls_verify: l.insecure_skip_tls_verify,
    }
}

fn backup_row(d: &DescribeBackupResponse) -> BackupRow {
    let bucket = d.bucket.as_ref();
    let owner = bucket.and_then(|b| b.owner.as_ref());
    let owner_text = match owner {
        Some(o) if o.kind == "tenant" => format!("tenant {}/{}", o.origin_namespace, o.origin_name),
        Some(o) => o.kind.clone(),
        None => String::new(),
    };
    BackupRow {
        name: d.name.clone(),
        locations: bucket.map(|b| b.locations.iter().map(|l| l.name.clone()).collect()).unwrap_or_default(),
        phase: bucket.map(|b| b.phase.clone()).unwrap_or_default(),
        owner: owner_text,
        refusal: owner.map(|o| o.refusal.clone()).unwrap_or_default(),
        bucket_errors: d.bucket_errors.iter().map(|e| (e.object.clone(), e.error.clone())).collect(),
        clusters: d.clusters.iter().map(backup_on_cluster).collect(),
    }
}

fn backup_on_cluster(c: &DescribedCluster) -> BackupOnCluster {
    let mut present: Vec<String> = c.backups.iter().map(|b| format!("Backup {}/{}", b.namespace, b.name)).collect();
    match c.pod_volume_backups.len() {
        0 => {}
        1 => present.push("1 PodVolumeBackup".into()),
        n => present.push(format!("{n} PodVolumeBackups")),
    }
    present.extend(c.non_admin_backups.iter().map(|n| format!("NonAdminBackup {}/{}", n.namespace, n.name)));
    let planned: Vec<PlannedRow> = c.planned.iter().map(planned_row).collect();
    BackupOnCluster {
        cluster: c.cluster.clone(),
        state: c.state.clone(),
        verdict: verdict(&c.planned, !present.is_empty()),
        present,
        planned,
    }
}

/// One word for a backup on a cluster, the worst of its items first: a refusal or conflict explains why it
/// is not there even when other items went through.
fn verdict(planned: &[DescribedItem], present: bool) -> String {
    let has = |action: DesiredAction| planned.iter().any(|i| i.action == action as i32);
    let outcome = |o: ApplyOutcome| planned.iter().any(|i| i.outcome == o as i32);
    let word = if planned.is_empty() {
        if present { "materialized" } else { "absent" }
    } else if has(DesiredAction::Refuse) || outcome(ApplyOutcome::Refused) {
        "refused"
    } else if has(DesiredAction::Conflict) || outcome(ApplyOutcome::Conflict) {
        "conflict"
    } else if outcome(ApplyOutcome::Failed) {
        "failed"
    } else if has(DesiredAction::Wait) || outcome(ApplyOutcome::Held) {
        "waiting"
    } else if has(DesiredAction::Retire) {
        "retiring"
    } else if has(DesiredAction::WouldRetire) {
        "would retire"
    } else if planned.iter().all(|i| i.outcome == ApplyOutcome::Applied as i32) {
        "applied"
    } else {
        "pending"
    };
    word.to_string()
}

fn planned_row(i: &DescribedItem) -> PlannedRow {
    PlannedRow {
        action: enum_name(DesiredAction::try_from(i.action).ok().map(|a| a.as_str_name()), "DESIRED_ACTION_", i.action),
        object: i.r#ref.as_ref().map(object_name).unwrap_or_default(),
        reason: if i.reason.is_empty() { i.waits_for_condition.clone() } else { i.reason.clone() },
        outcome: match ApplyOutcome::try_from(i.outcome) {
            Ok(ApplyOutcome::Unspecified) => "pending".into(),
            known => enum_name(known.ok().map(|o| o.as_str_name()), "APPLY_OUTCOME_", i.outcome),
        },
        message: i.message.clone(),
    }
}

/// `DESIRED_ACTION_CREATE` → `create`; a value newer than this build, by its number.
fn enum_name(name: Option<&str>, prefix: &str, number: i32) -> String {
    match name {
        Some(name) => name.strip_prefix(prefix).unwrap_or(name).to_lowercase().replace('_', " "),
        None => number.to_string(),
    }
}

fn object_name(r: &ObjectRef) -> String {
    match r.namespace.as_str() {
        "" => format!("{} {}", r.kind, r.name),
        ns => format!("{} {ns}/{}", r.kind, r.name),
    }
}

/// Text for HTML element content and quoted attribute values. Backup names, namespaces and reasons are user
/// data: each of `& < > " '` is replaced, so none can open a tag or leave an attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The whole page, rendered on the server (readable without JavaScript); its script redraws it from
/// `/api/status`.
pub fn render(view: &PageView) -> String {
    let parts = [
        ("{{GENERATED}}", generated_text(view)),
        ("{{CLUSTERS}}", cluster_rows(view)),
        ("{{LOCATIONS}}", location_rows(view)),
        ("{{BACKUPS_NOTE}}", backups_note(view)),
        ("{{BACKUPS}}", backup_rows(view)),
    ];
    fill(TEMPLATE, &parts)
}

/// Replaces each marker, in the order they stand in the template, searching only the template (never text
/// already put in: a backup named `{{BACKUPS}}` stays a name). A missing marker is left out silently; the
/// unit tests check every marker is there.
fn fill(template: &str, parts: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(template.len() + parts.iter().map(|(_, v)| v.len()).sum::<usize>());
    let mut rest = template;
    for (marker, value) in parts {
        if let Some((before, after)) = rest.split_once(marker) {
            out.push_str(before);
            out.push_str(value);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

fn generated_text(view: &PageView) -> String {
    format!("generated {}", time_text(view.generated_unix))
}

/// `2026-12-04T23:03:03Z` (UTC, as the script writes it too); `never` for 0, which the status uses for "not
/// yet".
pub fn time_text(unix: i64) -> String {
    match u64::try_from(unix) {
        Ok(secs) if secs > 0 => {
            humantime::format_rfc3339_seconds(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs)).to_string()
        }
        _ => "never".into(),
    }
}

fn backups_note(view: &PageView) -> String {
    if view.backups_total > view.backups.len() {
        escape(&format!(
            "showing {} of {} backups (those with work left or a problem first)",
            view.backups.len(),
            view.backups_total
        ))
    } else {
        escape(&format!("{} backups", view.backups_total))
    }
}

fn td(out: &mut String, class: &str, text: &str) {
    out.push_str("<td");
    if !class.is_empty() {
        out.push_str(" class=\"");
        out.push_str(&escape(class));
        out.push('"');
    }
    out.push('>');
    out.push_str(&escape(text));
    out.push_str("</td>");
}

fn cluster_rows(view: &PageView) -> String {
    let mut out = String::new();
    for c in &view.clusters {
        out.push_str("<tr>");
        td(&mut out, "", &c.name);
        td(&mut out, c.state, &c.state_text());
        td(&mut out, "", &c.software_version);
        for n in [c.inventory, c.desired, c.applied, c.failed, c.refused, c.waiting, c.held, c.conflicts] {
            td(&mut out, "num", &n.to_string());
        }
        td(&mut out, "num", &c.agent_refused.to_string());
        td(&mut out, "num", &format!("{}/{}", c.retiring, c.would_retire));
        out.push_str("</tr>\n");
    }
    if view.clusters.is_empty() {
        out.push_str("<tr><td colspan=\"13\">no clusters configured</td></tr>\n");
    }
    out
}

impl ClusterRow {
    /// `connected (2s ago)`, `disconnected (never)`.
    pub fn state_text(&self) -> String {
        match self.seconds_since_heartbeat {
            Some(s) => format!("{} ({s}s ago)", self.state),
            None => format!("{} (never seen)", self.state),
        }
    }
}

impl LocationRow {
    pub fn health_text(&self) -> String {
        let health = match (self.healthy, self.message.as_str()) {
            (true, "") => "healthy".into(),
            (true, m) => format!("healthy: {m}"),
            (false, m) => format!("unhealthy: {m}"),
        };
        match self.insecure_skip_tls_verify {
            true => format!("{health}; TLS certificate not verified (insecureSkipTLSVerify)"),
            false => health,
        }
    }
}

fn location_rows(view: &PageView) -> String {
    let mut out = String::new();
    for l in &view.locations {
        out.push_str("<tr>");
        td(&mut out, "", &l.name);
        td(&mut out, "", &l.source_cluster);
        let good = l.healthy && !l.insecure_skip_tls_verify;
        td(&mut out, if good { "connected" } else { "bad" }, &l.health_text());
        td(&mut out, "", &time_text(l.last_refresh_unix));
        td(&mut out, "num", &l.backups.to_string());
        td(&mut out, "num", &l.foreign_folders.to_string());
        let collision = match l.writers.is_empty() {
            true => l.collision.clone(),
            false => format!("{} (writers: {})", l.collision, l.writers.join(", ")),
        };
        td(&mut out, if collision.is_empty() { "" } else { "bad" }, &collision);
        out.push_str("<td>");
        list(&mut out, l.errors.iter().map(|(key, why)| format!("{key}: {why}")));
        out.push_str("</td></tr>\n");
    }
    if view.locations.is_empty() {
        out.push_str("<tr><td colspan=\"8\">no locations configured</td></tr>\n");
    }
    out
}

fn list(out: &mut String, items: impl Iterator<Item = String>) {
    let mut any = false;
    for item in items {
        if !any {
            out.push_str("<ul>");
            any = true;
        }
        out.push_str("<li>");
        out.push_str(&escape(&item));
        out.push_str("</li>");
    }
    if any {
        out.push_str("</ul>");
    }
}

impl BackupRow {
    /// `admin`, `tenant team-x/nightly`, `REFUSED: why`.
    pub fn owner_text(&self) -> String {
        match self.refusal.as_str() {
            "" => self.owner.clone(),
            why => format!("REFUSED: {why}"),
        }
    }
}

impl PlannedRow {
    /// `refuse Backup velero/x: why → agent: pending`.
    pub fn text(&self) -> String {
        let mut text = format!("{} {}", self.action, self.object);
        if !self.reason.is_empty() {
            text.push_str(": ");
            text.push_str(&self.reason);
        }
        text.push_str(" → ");
        text.push_str(&self.outcome);
        if !self.message.is_empty() {
            text.push_str(": ");
            text.push_str(&self.message);
        }
        text
    }
}

fn backup_rows(view: &PageView) -> String {
    let mut out = String::new();
    for b in &view.backups {
        // One row per cluster the backup concerns; a backup no cluster plans or holds gets one row.
        let clusters: Vec<Option<&BackupOnCluster>> =
            if b.clusters.is_empty() { vec![None] } else { b.clusters.iter().map(Some).collect() };
        for (index, c) in clusters.iter().enumerate() {
            out.push_str("<tr>");
            if index == 0 {
                let span = clusters.len().to_string();
                for (class, text) in [
                    ("name", b.name.clone()),
                    (if b.refusal.is_empty() { "" } else { "bad" }, b.owner_text()),
                    ("", b.locations.join(", ")),
                    ("", b.phase.clone()),
                ] {
                    out.push_str(&format!("<td rowspan=\"{span}\""));
                    if !class.is_empty() {
                        out.push_str(&format!(" class=\"{class}\""));
                    }
                    out.push('>');
                    out.push_str(&escape(&text));
                    if class == "name" && !b.bucket_errors.is_empty() {
                        list(&mut out, b.bucket_errors.iter().map(|(key, why)| format!("{key}: {why}")));
                    }
                    out.push_str("</td>");
                }
            }
            match c {
                Some(c) => {
                    td(&mut out, "", &format!("{} ({})", c.cluster, c.state));
                    td(&mut out, &verdict_class(&c.verdict), &c.verdict);
                    td(&mut out, "", &c.present.join(", "));
                    out.push_str("<td>");
                    list(&mut out, c.planned.iter().map(PlannedRow::text));
                    out.push_str("</td>");
                }
                None => out.push_str("<td colspan=\"4\">on no cluster and planned for none</td>"),
            }
            out.push_str("</tr>\n");
        }
    }
    if view.backups.is_empty() {
        out.push_str("<tr><td colspan=\"8\">no backups</td></tr>\n");
    }
    out
}

/// The CSS class of a verdict (the script has the same mapping).
fn verdict_class(verdict: &str) -> String {
    match verdict {
        "materialized" | "applied" => "connected",
        "refused" | "conflict" | "failed" => "bad",
        _ => "stale",
    }
    .to_string()
}

/// Serves `/` (the page) and `/api/status` (its JSON) until `shutdown` turns true; a request whose Host is
/// not loopback gets 421 ([`refuse_foreign_host`]).
pub async fn serve(hub: Arc<Hub>, listener: TcpListener, mut shutdown: watch::Receiver<bool>) -> std::io::Result<()> {
    axum::serve(listener, router(hub))
        .with_graceful_shutdown(async move {
            let _ = shutdown.wait_for(|stopping| *stopping).await;
        })
        .await
}

fn router(hub: Arc<Hub>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/api/status", get(api))
        .with_state(hub)
        // On the whole router (404s too): a rebinding page learns nothing from this port, not even its routes.
        .layer(middleware::from_fn(refuse_foreign_host))
}

/// 421 Misdirected Request unless the request names a loopback host (docs/operations.md, "Status page"): a
/// web page the operator's browser visits could otherwise read the page through DNS rebinding on an open
/// `kubectl port-forward` (see [`page_policy`]). The absolute-form authority, when a client sends one, is
/// what HTTP/1.1 says the request is for; else the Host header. Neither: refused too (every browser sends one).
pub async fn refuse_foreign_host(request: Request, next: Next) -> Response {
    let host = match request.uri().authority() {
        Some(authority) => Some(authority.as_str()),
        None => request.headers().get(header::HOST).and_then(|h| h.to_str().ok()),
    };
    match host {
        Some(host) if page_policy::is_loopback_host(host) => next.run(request).await,
        _ => (
            StatusCode::MISDIRECTED_REQUEST,
            "the status page answers only to localhost, 127.0.0.1 or [::1] (open it through kubectl port-forward)\n",
        )
            .into_response(),
    }
}

fn current(hub: &Hub) -> Result<PageView, String> {
    let now = SystemTime::now();
    let status = hub.status(None, now).map_err(|e| e.to_string())?;
    let (backups, total) = hub.describe_backups(now, MAX_BACKUPS);
    Ok(view(&status, &backups, total, now))
}

/// The page's policy, from the template's inline blocks once (page_policy.rs says why not per response).
static CONTENT_SECURITY_POLICY: LazyLock<String> = LazyLock::new(|| page_policy::content_security_policy(TEMPLATE));

/// The Content-Security-Policy header the page and its JSON are served with.
pub fn content_security_policy() -> &'static str {
    &CONTENT_SECURITY_POLICY
}

/// No caching (the data is live), no sniffing, and a policy that lets the page load nothing from anywhere:
/// its own inline style and script (by hash), and fetches to its own origin.
fn headers(mut response: Response, content_type: &'static str) -> Response {
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // Base64, quotes, letters and punctuation only, so always a valid value; were it not, the page gets the
    // strictest policy (it renders, without style or live updates) rather than none.
    let policy = HeaderValue::from_str(content_security_policy())
        .unwrap_or_else(|_| HeaderValue::from_static("default-src 'none'"));
    h.insert(header::CONTENT_SECURITY_POLICY, policy);
    response
}

async fn page(State(hub): State<Arc<Hub>>) -> Response {
    match current(&hub) {
        Ok(view) => headers(render(&view).into_response(), "text/html; charset=utf-8"),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e).into_response(),
    }
}

async fn api(State(hub): State<Arc<Hub>>) -> Response {
    match current(&hub).and_then(|v| serde_json::to_string(&v).map_err(|e| e.to_string())) {
        Ok(json) => headers(json.into_response(), "application/json"),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::convert::object_ref;
    use crate::grpc::proto::{CatalogObjectError, DescribedBackup, DescribedClusterBackup, DescribedOwner};

    const HOSTILE: &str = "<script>alert('x')</script>&\"{{BACKUPS}}";

    fn sample() -> PageView {
        let status = GetStatusResponse {
            caller: String::new(),
            coordinator_version: String::new(),
            clusters: vec![
                ClusterStatus {
                    cluster: "a".into(),
                    connected: true,
                    seconds_since_heartbeat: 1,
                    applied: 3,
                    ..Default::default()
                },
                ClusterStatus { cluster: "b".into(), seconds_since_heartbeat: -1, refused: 1, ..Default::default() },
            ],
            locations: vec![LocationStatus {
                name: "shared".into(),
                source_cluster: "a".into(),
                healthy: false,
                message: "listing incomplete: timeout".into(),
                errors: vec![CatalogObjectError {
                    object: "velero/backups/x/velero-backup.json".into(),
                    error: "bad JSON".into(),
                }],
                ..Default::default()
            }],
        };
        let refused = DescribeBackupResponse {
            name: HOSTILE.into(),
            bucket: Some(DescribedBackup {
                phase: "Completed".into(),
                owner: Some(DescribedOwner {
                    kind: "refused".into(),
                    refusal: "owner namespace \"team-a\" but <b>team-b</b>".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            clusters: vec![DescribedCluster {
                cluster: "b".into(),
                state: "connected".into(),
                planned: vec![DescribedItem {
                    action: DesiredAction::Refuse as i32,
                    r#ref: Some(object_ref("Backup", "velero", HOSTILE)),
                    reason: "tampered ownership".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let there = DescribeBackupResponse {
            name: "nightly".into(),
            clusters: vec![DescribedCluster {
                cluster: "b".into(),
                state: "connected".into(),
                backups: vec![DescribedClusterBackup {
                    namespace: "velero".into(),
                    name: "nightly".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        view(&status, &[refused, there], 5, SystemTime::UNIX_EPOCH)
    }

    /// The policy the page is served with allows exactly the rendered page's inline blocks, by hash.
    #[test]
    fn the_csp_has_no_unsafe_inline_and_hashes_the_pages_own_style_and_script() {
        let policy = content_security_policy();
        assert!(!policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"), "{policy}");
        let html = render(&sample());
        for (tag, directive) in [("style", "style-src"), ("script", "script-src")] {
            let blocks: Vec<&str> = page_policy::inline_blocks(&html, tag).collect();
            assert_eq!(blocks.len(), 1, "one inline {tag} in the page");
            let sources = policy
                .split(';')
                .find_map(|d| d.trim().strip_prefix(directive))
                .unwrap_or_else(|| panic!("no {directive} in {policy}"));
            assert_eq!(sources.trim(), format!("'{}'", page_policy::hash_source(blocks[0])), "{policy}");
        }
        // No inline code elsewhere that the hashes could not cover (the policy would block it).
        for attribute in [" style=", " onload=", " onclick=", "javascript:"] {
            assert!(!html.contains(attribute), "{attribute} in the page");
        }
    }

    /// A hub with one cluster and one location, nothing read yet.
    fn hub() -> Arc<Hub> {
        Arc::new(crate::coordinator::hub::test_hub("a"))
    }

    /// `GET path` with `host` as the Host header (none: no header) over HTTP/1.1: (status code, whole response).
    async fn get_as(addr: SocketAddr, path: &str, host: Option<&str>) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let host = host.map(|h| format!("Host: {h}\r\n")).unwrap_or_default();
        let request = format!("GET {path} HTTP/1.1\r\n{host}Connection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut response = String::new();
        stream.read_to_string(&mut response).await.expect("read");
        let code = response.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (code, response)
    }

    /// DNS rebinding: a page of `evil.example` whose name now resolves to 127.0.0.1 sends its own name as Host.
    #[tokio::test]
    async fn a_non_loopback_host_gets_421_and_a_loopback_one_the_page() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let (stop, stopped) = watch::channel(false);
        let server = tokio::spawn(serve(hub(), listener, stopped));
        let port = addr.port();
        for path in ["/", "/api/status", "/nothing-here"] {
            for host in [Some("evil.example".to_string()), Some(format!("evil.example:{port}")), None] {
                let (code, response) = get_as(addr, path, host.as_deref()).await;
                assert_eq!(code, 421, "{path} with Host {host:?}: {response}");
                assert!(!response.contains("shared"), "nothing of the page: {response}");
            }
        }
        // The absolute form names the host even when the Host header says localhost.
        let (code, _) = get_as(addr, "http://evil.example/api/status", Some("localhost")).await;
        assert_eq!(code, 421);
        for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}"), "[::1]".to_string()] {
            let (code, response) = get_as(addr, "/", Some(&host)).await;
            assert_eq!(code, 200, "Host {host}: {response}");
            assert!(response.contains("<h2>Locations</h2>") && response.contains("<td>shared</td>"), "{response}");
            let policy = format!("content-security-policy: {}", content_security_policy());
            assert!(response.to_ascii_lowercase().contains(&policy.to_ascii_lowercase()), "{response}");
            let (code, json) = get_as(addr, "/api/status", Some(&host)).await;
            assert_eq!(code, 200, "Host {host}: {json}");
            assert!(json.contains("\"locations\":[{\"name\":\"shared\""), "{json}");
        }
        stop.send_replace(true);
        server.await.expect("joined").expect("served");
    }

    #[test]
    fn only_loopback_addresses_are_accepted() {
        for ok in ["127.0.0.1:8080", "127.0.0.2:0", "[::1]:8080", "localhost:8080", "LOCALHOST:1"] {
            assert_eq!(check_listen_address(ok), Ok(()), "{ok}");
        }
        for bad in ["0.0.0.0:8080", "10.0.0.1:8080", "[::]:8080"] {
            let err = check_listen_address(bad).expect_err(bad);
            assert_eq!(err, StatusPageError::NotLoopback(bad.into()));
            let text = err.to_string();
            assert!(text.contains(bad) && text.contains("kubectl port-forward"), "{text}");
        }
        for bad in ["example.com:80", "localhost", "127.0.0.1", "localhost:http"] {
            assert_eq!(check_listen_address(bad), Err(StatusPageError::BadAddress(bad.into())), "{bad}");
        }
    }

    #[test]
    fn escape_replaces_every_markup_character() {
        assert_eq!(escape(HOSTILE), "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;{{BACKUPS}}");
        assert_eq!(escape("team-a/nightly"), "team-a/nightly");
    }

    #[test]
    fn the_view_says_where_a_backup_is_and_why_not() {
        let v = sample();
        assert_eq!(v.clusters[0].state_text(), "connected (1s ago)");
        assert_eq!(v.clusters[1].state_text(), "disconnected (never seen)");
        assert_eq!(v.locations[0].health_text(), "unhealthy: listing incomplete: timeout");
        let mut insecure = v.locations[0].clone();
        insecure.insecure_skip_tls_verify = true;
        let expected = "unhealthy: listing incomplete: timeout; TLS certificate not verified (insecureSkipTLSVerify)";
        assert_eq!(insecure.health_text(), expected);
        assert_eq!((time_text(0), time_text(-1)), ("never".to_string(), "never".to_string()));
        assert_eq!(time_text(1_796_425_383), "2026-12-04T23:03:03Z");
        let refused = &v.backups[0];
        assert_eq!(refused.owner_text(), "REFUSED: owner namespace \"team-a\" but <b>team-b</b>");
        assert_eq!(refused.clusters[0].verdict, "refused");
        let item = refused.clusters[0].planned[0].text();
        assert_eq!(item, format!("refuse Backup velero/{HOSTILE}: tampered ownership → pending"));
        let there = &v.backups[1];
        assert_eq!(
            (there.clusters[0].verdict.as_str(), there.clusters[0].present.as_slice()),
            ("materialized", &["Backup velero/nightly".to_string()][..])
        );
        assert_eq!(verdict(&[], false), "absent");
        let held = DescribedItem {
            action: DesiredAction::Create as i32,
            outcome: ApplyOutcome::Held as i32,
            ..Default::default()
        };
        assert_eq!(verdict(&[held], false), "waiting");
    }

    #[test]
    fn the_page_renders_every_section_with_user_data_escaped() {
        let html = render(&sample());
        for marker in ["{{GENERATED}}", "{{CLUSTERS}}", "{{LOCATIONS}}", "{{BACKUPS_NOTE}}"] {
            assert!(!html.contains(marker), "{marker} left in the page");
        }
        // The hostile name appears only escaped.
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(!html.contains("<b>team-b</b>"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;{{BACKUPS}}"));
        assert!(html.contains("REFUSED: owner namespace &quot;team-a&quot; but &lt;b&gt;team-b&lt;/b&gt;"));
        // The name's own `{{BACKUPS}}` is not a marker: the backup table is there once.
        assert_eq!(html.matches("tampered ownership").count(), 1, "{html}");
        assert!(html.contains("showing 2 of 5 backups"));
        assert!(html.contains("velero/backups/x/velero-backup.json: bad JSON"));
        assert!(html.contains("<td>a</td>") && html.contains("<td>b</td>"));
        // One page, nothing fetched from elsewhere.
        assert!(!html.contains("http://") && !html.contains("https://") && !html.contains("src="), "{html}");
    }
}
