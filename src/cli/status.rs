//! `ferry status`: what a running coordinator knows — clusters (liveness, inventory, desired/applied/failed/
//! refused counts), locations (health, bad objects) and, with `--cluster`, every item of every backup.

use std::io::{IsTerminal, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use serde::Serialize;

use ferry::grpc::convert::served_apis;
use ferry::grpc::proto::{
    ApplyOutcome, BackupStatus, ClusterApis, ClusterStatus, DesiredAction, GetStatusRequest, GetStatusResponse,
    LocationStatus,
};

use super::operator_client::CoordinatorConnection;
use super::output::{OutputFormat, structured};
use super::table::Table;

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub connection: CoordinatorConnection,
    /// Only this cluster, with per-backup detail.
    #[arg(long)]
    pub cluster: Option<String>,
    /// Output format: a human table, or JSON/YAML (stable field names, RFC 3339 times) for scripts.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: OutputFormat,
    /// Ask again and re-render every --interval, until interrupted. On a terminal the screen is redrawn;
    /// otherwise each rendering follows the last after a blank line.
    #[arg(long, short = 'w')]
    pub watch: bool,
    /// With --watch: how often to ask.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration, requires = "watch")]
    pub interval: Duration,
}

pub async fn run(args: StatusArgs) -> anyhow::Result<()> {
    let mut client = args.connection.connect().await?;
    let request = GetStatusRequest { cluster: args.cluster.clone().unwrap_or_default() };
    if !args.watch {
        let response = client.get_status(request).await.map_err(super::exit::rpc_error)?;
        print!("{}", rendering(response.into_inner(), args.output)?);
        return Ok(());
    }
    let terminal = std::io::stdout().is_terminal();
    // A zero interval would spin the coordinator; a tenth of a second is the floor.
    let interval = args.interval.max(Duration::from_millis(100));
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut first = true;
    loop {
        ticks.tick().await;
        // One failed ask does not end a watch (the coordinator may be restarting): say so and ask again.
        let text = match client.get_status(request.clone()).await {
            Ok(response) => rendering(response.into_inner(), args.output)?,
            Err(status) => {
                eprintln!("error: {:#}", super::exit::rpc_error(status));
                continue;
            }
        };
        let mut stdout = std::io::stdout().lock();
        if terminal {
            // Clear the screen and home the cursor, then a timestamp, as watch(1) does.
            write!(stdout, "\x1b[2J\x1b[H{}\n\n", rfc3339(SystemTime::now()))?;
        } else if !first {
            writeln!(stdout)?;
        }
        write!(stdout, "{text}")?;
        stdout.flush()?;
        first = false;
    }
}

/// One answer as the chosen output shows it.
fn rendering(response: GetStatusResponse, output: OutputFormat) -> anyhow::Result<String> {
    let view = StatusView::from(response);
    Ok(match structured(&view, output)? {
        Some(text) => text,
        None => render(&view),
    })
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusView {
    pub caller: String,
    /// The coordinator's software version; absent from a coordinator too old to say.
    pub coordinator_version: Option<String>,
    pub clusters: Vec<ClusterView>,
    pub locations: Vec<LocationView>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterView {
    pub cluster: String,
    /// `connected`, `stale` or `disconnected`.
    pub state: &'static str,
    pub seconds_since_heartbeat: Option<i64>,
    /// When the last heartbeat arrived (RFC 3339, UTC; computed from the age the coordinator reports).
    pub last_heartbeat: Option<String>,
    pub software_version: String,
    pub inventory: u64,
    pub inventory_by_kind: std::collections::BTreeMap<String, u64>,
    pub desired_version: String,
    pub desired: u64,
    pub applied: u64,
    pub failed: u64,
    pub refused: u64,
    pub waiting: u64,
    pub held: u64,
    pub conflicts: u64,
    /// BSLs through which the cluster gets nothing (read-write on another cluster's location, or not granted).
    pub refused_storage_locations: u64,
    /// Items the agent would not apply (it checks what the coordinator sends: docs/security.md).
    pub agent_refused: u64,
    /// Which of ferry's kinds the cluster serves; absent when its agent never said (assumed: all).
    pub apis: Option<ApisView>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub backups: Vec<BackupView>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApisView {
    /// The kinds served (and listed by the agent), e.g. `Backup`, `NonAdminBackup`.
    pub served: Vec<String>,
    /// OADP's NonAdminBackup is served: tenant backups become NonAdminBackups there.
    pub oadp: bool,
    /// The Velero server version, where the agent could tell.
    pub velero_version: Option<String>,
    /// Required CRDs the cluster lacks: nothing is planned for it.
    pub missing_required: Vec<String>,
    /// One line: `velero v1.18.3, no oadp`.
    pub summary: String,
}

impl From<ClusterApis> for ApisView {
    fn from(apis: ClusterApis) -> Self {
        let served = served_apis(Some(&apis));
        Self {
            summary: served.summary(),
            served: apis.served.into_iter().map(|t| t.kind).collect(),
            oadp: served.non_admin_backups,
            velero_version: served.velero_version,
            missing_required: served.missing_required,
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupView {
    pub backup: String,
    pub items: Vec<ItemView>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemView {
    pub action: &'static str,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// The agent's last outcome: `applied`, `failed`, `conflict`, `held`, or `pending` (none reported yet).
    pub outcome: &'static str,
    pub reason: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocationView {
    pub name: String,
    pub source_cluster: String,
    pub healthy: bool,
    pub message: String,
    pub last_refresh_unix: i64,
    /// `lastRefreshUnix` as RFC 3339 (UTC); absent before the first refresh.
    pub last_refresh: Option<String>,
    pub backups: u64,
    /// Directories without `velero-backup.json` (half-written, or not Velero's).
    pub foreign_folders: u64,
    pub errors: Vec<LocationErrorView>,
    /// Why the location is in a writer collision (nothing new is materialized from it); absent when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collision: Option<String>,
    /// The clusters holding a read-write BSL on it, while in collision.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub writers: Vec<String>,
    /// Read without checking the server's TLS certificate (the config's key of the same name).
    #[serde(rename = "insecureSkipTLSVerify")]
    pub insecure_skip_tls_verify: bool,
    /// Backups listed and not read yet while a cold load runs (the catalog is served as it loads).
    #[serde(skip_serializing_if = "is_zero")]
    pub pending: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Serialize)]
pub struct LocationErrorView {
    pub object: String,
    pub error: String,
}

impl From<GetStatusResponse> for StatusView {
    fn from(r: GetStatusResponse) -> Self {
        Self {
            caller: r.caller,
            coordinator_version: Some(r.coordinator_version).filter(|v| !v.is_empty()),
            clusters: r.clusters.into_iter().map(ClusterView::from).collect(),
            locations: r.locations.into_iter().map(LocationView::from).collect(),
        }
    }
}

impl From<ClusterStatus> for ClusterView {
    fn from(c: ClusterStatus) -> Self {
        let state = match (c.connected, c.stale) {
            (false, _) => "disconnected",
            (true, true) => "stale",
            (true, false) => "connected",
        };
        Self {
            cluster: c.cluster,
            state,
            seconds_since_heartbeat: (c.seconds_since_heartbeat >= 0).then_some(c.seconds_since_heartbeat),
            last_heartbeat: (c.seconds_since_heartbeat >= 0)
                .then(|| SystemTime::now().checked_sub(Duration::from_secs(c.seconds_since_heartbeat.unsigned_abs())))
                .flatten()
                .map(rfc3339),
            software_version: c.software_version,
            inventory: c.inventory_items,
            inventory_by_kind: c.inventory_by_kind.into_iter().map(|k| (k.kind, k.count)).collect(),
            desired_version: c.desired_version,
            desired: c.desired,
            applied: c.applied,
            failed: c.failed,
            refused: c.refused,
            waiting: c.waiting,
            held: c.held,
            conflicts: c.conflicts,
            refused_storage_locations: c.refused_storage_locations,
            agent_refused: c.agent_refused,
            apis: c.apis.map(ApisView::from),
            backups: c.backups.into_iter().map(BackupView::from).collect(),
        }
    }
}

impl From<BackupStatus> for BackupView {
    fn from(b: BackupStatus) -> Self {
        let items = b
            .items
            .into_iter()
            .map(|i| {
                let r = i.r#ref.unwrap_or_default();
                ItemView {
                    action: action_name(i.action),
                    kind: r.kind,
                    namespace: r.namespace,
                    name: r.name,
                    outcome: outcome_name(i.outcome),
                    reason: i.reason,
                }
            })
            .collect();
        Self { backup: b.backup, items }
    }
}

impl From<LocationStatus> for LocationView {
    fn from(l: LocationStatus) -> Self {
        Self {
            name: l.name,
            source_cluster: l.source_cluster,
            healthy: l.healthy,
            message: l.message,
            last_refresh_unix: l.last_refresh_unix,
            last_refresh: (l.last_refresh_unix > 0)
                .then(|| UNIX_EPOCH.checked_add(Duration::from_secs(l.last_refresh_unix.unsigned_abs())))
                .flatten()
                .map(rfc3339),
            backups: l.backups,
            foreign_folders: l.foreign_folders,
            errors: l.errors.into_iter().map(|e| LocationErrorView { object: e.object, error: e.error }).collect(),
            collision: Some(l.collision).filter(|c| !c.is_empty()),
            writers: l.writers,
            insecure_skip_tls_verify: l.insecure_skip_tls_verify,
            pending: l.pending,
        }
    }
}

/// A location's MESSAGE column: a collision first (it stops the location for every cluster), then a TLS
/// certificate left unchecked (what the location says may not be its bucket's), then the refresh's message.
fn location_message(l: &LocationView) -> String {
    let insecure = l.insecure_skip_tls_verify.then_some(INSECURE_TLS.to_string());
    [l.collision.clone(), insecure, Some(l.message.clone())]
        .into_iter()
        .flatten()
        .filter(|m| !m.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// What `ferry status` says of a location with `insecureSkipTLSVerify`.
pub const INSECURE_TLS: &str = "TLS CERTIFICATE NOT VERIFIED (insecureSkipTLSVerify)";

/// Machine-readable times in JSON/YAML: RFC 3339 in UTC, whole seconds (what the coordinator reports).
pub fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}

fn action_name(action: i32) -> &'static str {
    match DesiredAction::try_from(action).unwrap_or(DesiredAction::Unspecified) {
        DesiredAction::Create => "create",
        DesiredAction::Wait => "wait",
        DesiredAction::Conflict => "conflict",
        DesiredAction::Refuse => "refuse",
        DesiredAction::Retire => "retire",
        DesiredAction::WouldRetire => "would-retire",
        DesiredAction::Unspecified => "unknown",
    }
}

fn outcome_name(outcome: i32) -> &'static str {
    match ApplyOutcome::try_from(outcome).unwrap_or(ApplyOutcome::Unspecified) {
        ApplyOutcome::Applied => "applied",
        ApplyOutcome::Failed => "failed",
        ApplyOutcome::Conflict => "conflict",
        ApplyOutcome::Held => "held",
        ApplyOutcome::Refused => "refused by agent",
        ApplyOutcome::Unspecified => "pending",
    }
}

pub fn render(view: &StatusView) -> String {
    let mut out = String::new();
    let mut clusters = Table::new(&[
        "CLUSTER",
        "STATE",
        "HEARTBEAT",
        "AGENT",
        "APIS",
        "INVENTORY",
        "DESIRED",
        "APPLIED",
        "FAILED",
        "REFUSED",
        "WAITING",
        "HELD",
        "CONFLICTS",
    ]);
    for c in &view.clusters {
        clusters.row(vec![
            c.cluster.clone(),
            c.state.into(),
            c.seconds_since_heartbeat.map_or("-".into(), |s| format!("{s}s ago")),
            if c.software_version.is_empty() { "-".into() } else { c.software_version.clone() },
            c.apis.as_ref().map_or("-".into(), |a| a.summary.clone()),
            c.inventory.to_string(),
            c.desired.to_string(),
            c.applied.to_string(),
            c.failed.to_string(),
            c.refused.to_string(),
            c.waiting.to_string(),
            c.held.to_string(),
            c.conflicts.to_string(),
        ]);
    }
    out.push_str(&clusters.render(""));
    out.push('\n');
    let mut locations =
        Table::new(&["LOCATION", "SOURCE", "HEALTHY", "BACKUPS", "BAD OBJECTS", "NOT BACKUPS", "MESSAGE"]);
    for l in &view.locations {
        locations.row(vec![
            l.name.clone(),
            l.source_cluster.clone(),
            if l.healthy { "yes".into() } else { "NO".into() },
            l.backups.to_string(),
            l.errors.len().to_string(),
            l.foreign_folders.to_string(),
            location_message(l),
        ]);
    }
    out.push_str(&locations.render(""));
    for c in view.clusters.iter().filter(|c| !c.backups.is_empty()) {
        out.push_str(&format!("\nBACKUPS ON {}\n", c.cluster));
        let mut items = Table::new(&["BACKUP", "ACTION", "KIND", "NAMESPACE", "NAME", "OUTCOME", "REASON"]);
        for b in &c.backups {
            for i in &b.items {
                items.row(vec![
                    b.backup.clone(),
                    i.action.into(),
                    i.kind.clone(),
                    i.namespace.clone(),
                    i.name.clone(),
                    i.outcome.into(),
                    i.reason.clone(),
                ]);
            }
        }
        out.push_str(&items.render("  "));
    }
    for l in view.locations.iter().filter(|l| !l.errors.is_empty()) {
        out.push_str(&format!("\nBAD OBJECTS IN {} (skipped)\n", l.name));
        let mut errors = Table::new(&["OBJECT", "ERROR"]);
        for e in &l.errors {
            errors.row(vec![e.object.clone(), e.error.clone()]);
        }
        out.push_str(&errors.render("  "));
    }
    // Last, so the first line stays the clusters' header (scripts read it): which build answered, and whom
    // it saw calling.
    out.push_str(&format!(
        "\nCOORDINATOR {} (caller {})\n",
        view.coordinator_version.as_deref().unwrap_or("version unknown"),
        if view.caller.is_empty() { "-" } else { &view.caller }
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_without_certificate_checks_says_so_in_text_and_json() {
        let insecure = LocationStatus {
            name: "bed".into(),
            healthy: true,
            insecure_skip_tls_verify: true,
            collision: "written by 2 clusters".into(),
            message: "listing incomplete: timeout".into(),
            ..Default::default()
        };
        let checked = LocationStatus { name: "prod".into(), healthy: true, ..Default::default() };
        let view = StatusView::from(GetStatusResponse { locations: vec![insecure, checked], ..Default::default() });
        let text = render(&view);
        let line = |name: &str| text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{text}"));
        assert!(
            line("bed").ends_with(&format!("written by 2 clusters; {INSECURE_TLS}; listing incomplete: timeout")),
            "{text}"
        );
        assert!(!line("prod").contains("insecureSkipTLSVerify"), "{text}");
        let json = serde_json::to_value(&view).expect("json");
        assert_eq!(json["locations"][0]["insecureSkipTLSVerify"], true, "{json}");
        assert_eq!(json["locations"][1]["insecureSkipTLSVerify"], false, "{json}");
    }

    #[test]
    fn json_times_are_rfc3339_and_absent_before_the_first() {
        let read = LocationView::from(LocationStatus { last_refresh_unix: 1_700_000_000, ..Default::default() });
        assert_eq!(read.last_refresh.as_deref(), Some("2023-11-14T22:13:20Z"));
        let never = LocationView::from(LocationStatus::default());
        assert_eq!(never.last_refresh, None);

        let cluster = ClusterView::from(ClusterStatus { seconds_since_heartbeat: 5, ..Default::default() });
        let heartbeat = cluster.last_heartbeat.clone().expect("a heartbeat time");
        let parsed = humantime::parse_rfc3339(&heartbeat).expect("RFC 3339");
        let age = SystemTime::now().duration_since(parsed).expect("in the past");
        assert!((4..=7).contains(&age.as_secs()), "{heartbeat} is {age:?} ago");
        let json = serde_json::to_value(&cluster).expect("json");
        assert_eq!(json["lastHeartbeat"], heartbeat.as_str());
        assert_eq!(
            ClusterView::from(ClusterStatus { seconds_since_heartbeat: -1, ..Default::default() }).last_heartbeat,
            None
        );
    }
}
