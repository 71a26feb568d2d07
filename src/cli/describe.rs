//! `ferry describe backup NAME`: one backup everywhere — its metadata and PVBs from the bucket, and per cluster
//! its Backup CR, PVBs and NABs there and every item planned for it with the agent's outcome. From a running
//! coordinator (as `ferry status`), or with `--config` offline from the buckets and recorded inventories (as
//! `ferry plan`); both answers are assembled by `ferry::coordinator::describe`.

use anyhow::Context;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::SystemTime;

use clap::{Args, Subcommand};
use serde::Serialize;

use ferry::bucket::{self, Loader};
use ferry::config::LoadedConfig;
use ferry::coordinator::describe::{ClusterRecords, describe_backup};
use ferry::coordinator::held_set::HeldSet;
use ferry::coordinator::legacy_volumes::add_legacy_volume_backups;
use ferry::grpc::convert::desired_set;
use ferry::grpc::proto::{
    ApplyOutcome, DescribeBackupRequest, DescribeBackupResponse, DescribedBackup, DescribedCluster, DescribedItem,
    DescribedPodVolumeBackup, DesiredAction, ObjectRef,
};
use ferry::plan::{PlanOptions, plan_cluster};

use super::operator_client::CoordinatorConnection;
use super::output::{OutputFormat, structured};
use super::plan::{read_catalogs, recorded_clusters};
use super::table::Table;

#[derive(Debug, Subcommand)]
pub enum DescribeCommand {
    /// One backup across every location and cluster: metadata, PVBs, and per cluster what exists and what is
    /// planned (why held, refused or in conflict).
    Backup(DescribeBackupArgs),
}

#[derive(Debug, Args)]
pub struct DescribeBackupArgs {
    /// The backup's name (as in the bucket and in its Backup CRs).
    pub name: String,
    /// Offline: read the config's buckets and recorded inventories (`clusters[].inventory`) and plan now, as
    /// `ferry plan` does, instead of asking a coordinator. Without it, the coordinator is asked.
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,
    /// With --config: plan as if it were this time (RFC 3339), for expiration checks; default now.
    #[arg(long, requires = "config", value_parser = humantime::parse_rfc3339_weak)]
    pub now: Option<SystemTime>,
    #[command(flatten)]
    pub connection: CoordinatorConnection,
    /// Output format: a human table, or JSON/YAML (stable field names, RFC 3339 times) for scripts.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: OutputFormat,
}

pub async fn run(command: DescribeCommand) -> anyhow::Result<()> {
    let DescribeCommand::Backup(args) = command;
    let described = match &args.config {
        Some(path) => describe_offline(&LoadedConfig::load(path)?, &args.name, args.now).await?,
        None => {
            let mut client = args.connection.connect().await?;
            let request = DescribeBackupRequest { name: args.name.clone() };
            let response = client.describe_backup(request).await.map_err(super::exit::rpc_error)?;
            response.into_inner()
        }
    };
    let view = DescribeView::from(described);
    let text = match structured(&view, args.output)? {
        Some(text) => text,
        None => render(&view),
    };
    print!("{text}");
    Ok(())
}

/// The same answer the rpc gives, from the buckets, recorded inventories and a plan computed now (no agent
/// results: every outcome is pending).
async fn describe_offline(
    config: &LoadedConfig,
    name: &str,
    now: Option<SystemTime>,
) -> anyhow::Result<DescribeBackupResponse> {
    let catalogs = read_catalogs(config).await?;
    let clusters = recorded_clusters(config)?;
    let options = PlanOptions {
        materialize_velero_backups: config.config.materialize.velero_backups,
        now: now.unwrap_or_else(SystemTime::now),
        ..PlanOptions::default()
    };
    let complete = catalogs.iter().all(|c| c.listing == ferry::catalog::Listing::Complete);
    let desired: Vec<_> = clusters
        .iter()
        .map(|c| HeldSet::from(desired_set(&plan_cluster(&catalogs, c, &config.mappings, &options), complete)))
        .collect();
    let records: Vec<ClusterRecords<'_>> = clusters
        .iter()
        .zip(&desired)
        .map(|(cluster, desired)| ClusterRecords {
            cluster: &cluster.name,
            state: "recorded",
            inventory: &cluster.inventory,
            desired,
            results: &[],
        })
        .collect();
    let mut described = describe_backup(name, &catalogs, &records)?;
    add_legacy_volume_backups(&mut described, &loaders(config)?).await;
    Ok(described)
}

/// A loader per location, for what a description reads on demand.
fn loaders(config: &LoadedConfig) -> anyhow::Result<Vec<Loader>> {
    let catalog = &config.config.catalog;
    let mut loaders = Vec::new();
    // One budget for every location's reads: it bounds the process's memory, not one location's.
    let budget = config.config.catalog.budget();
    for location in &config.config.locations {
        let store =
            bucket::open(&config.store_config(location)).with_context(|| format!("location {:?}", location.name))?;
        let domain = config.location(location, store.kind, &store.bucket);
        loaders.push(
            Loader::new(store, domain, catalog.concurrency).with_limits(catalog.limits()).with_budget(budget.clone()),
        );
    }
    Ok(loaders)
}

/// `-o json|yaml`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DescribeView {
    pub name: String,
    /// The caller's identity as the coordinator saw it; absent offline.
    pub caller: Option<String>,
    /// From the first location (in config order) that holds it; absent when no location's catalog does.
    pub backup: Option<BackupView>,
    /// The entries of its PVB file.
    pub pod_volume_backups: Vec<PodVolumeBackupView>,
    /// Only for a backup without a PVB file: its Pods' `snapshot.velero.io/<volume>` annotations (Velero's
    /// restore reads them itself; no PodVolumeBackup is created for them).
    pub legacy_volume_backups: Vec<LegacyVolumeBackupView>,
    /// Why its tarball (or a Pod in it) could not be read for them.
    pub legacy_volume_backups_error: Option<String>,
    /// Bad objects under the backup's folder (skipped by the catalog).
    pub bucket_errors: Vec<BucketErrorView>,
    /// Every cluster that holds something of it or has something planned for it.
    pub clusters: Vec<ClusterView>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupView {
    pub locations: Vec<LocationView>,
    pub source_cluster: String,
    pub phase: String,
    pub start_timestamp: Option<String>,
    pub completion_timestamp: Option<String>,
    pub expiration: Option<String>,
    pub owner: OwnerView,
    pub included_namespaces: Vec<String>,
    pub storage_location: String,
    /// The PVB file's key; absent when the backup has none.
    pub pod_volume_backups_key: Option<String>,
    /// Why the PVB file is unusable (no PVBs are materialized from it); absent when it is fine.
    pub pod_volume_backups_error: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocationView {
    pub name: String,
    pub source_cluster: String,
    pub metadata_key: String,
    /// Why the location is in a writer collision (nothing new of it is materialized); absent when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collision: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerView {
    /// `admin`, `tenant` or `refused`.
    pub kind: String,
    pub origin_namespace: Option<String>,
    pub origin_name: Option<String>,
    pub nacuuid: Option<String>,
    pub refusal: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodVolumeBackupView {
    pub name: String,
    pub pod_namespace: String,
    pub pod_name: String,
    pub volume: String,
    pub snapshot_id: String,
    pub phase: String,
    pub total_bytes: Option<u64>,
    pub bytes_done: Option<u64>,
    pub uploader_type: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyVolumeBackupView {
    pub pod_namespace: String,
    pub pod_name: String,
    pub volume: String,
    pub snapshot_id: String,
    /// `from pod annotation`.
    pub source: String,
}

#[derive(Debug, Serialize)]
pub struct BucketErrorView {
    pub object: String,
    pub error: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterView {
    pub cluster: String,
    /// `connected`, `stale`, `disconnected`, or `recorded` (offline).
    pub state: String,
    pub desired_version: String,
    pub backups: Vec<ClusterBackupView>,
    pub pod_volume_backups: Vec<ClusterPodVolumeBackupView>,
    pub non_admin_backups: Vec<NonAdminBackupView>,
    pub planned: Vec<PlannedView>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterBackupView {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub storage_location: String,
    pub phase: String,
    pub managed_by_ferry: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPodVolumeBackupView {
    pub namespace: String,
    pub name: String,
    pub backup_label: String,
    pub backup_uid_label: String,
    pub phase: String,
    pub managed_by_ferry: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NonAdminBackupView {
    pub namespace: String,
    pub name: String,
    pub nacuuid: String,
    /// NAC's `status.phase`; absent before NAC saw it.
    pub phase: Option<String>,
    pub velero_backup: Option<String>,
    pub managed_by_ferry: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedView {
    /// `create`, `wait`, `conflict`, `refuse`, … (a value newer than this build: its number).
    pub action: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub reason: Option<String>,
    /// Objects it waits for (`Kind namespace/name`), and a condition in words.
    pub waits_for: Vec<String>,
    pub waits_for_condition: Option<String>,
    /// The agent's last outcome: `applied`, `failed`, `conflict`, `held`, `refused`, or `pending`.
    pub outcome: String,
    pub message: Option<String>,
}

fn some(text: String) -> Option<String> {
    Some(text).filter(|t| !t.is_empty())
}

/// An enum value by its proto name without the prefix, lower-case (`DESIRED_ACTION_CREATE` → `create`); a
/// value this build does not know, by its number.
fn enum_name(name: Option<&str>, prefix: &str, number: i32) -> String {
    match name {
        Some(name) => name.strip_prefix(prefix).unwrap_or(name).to_lowercase(),
        None => number.to_string(),
    }
}

fn action_name(action: i32) -> String {
    enum_name(DesiredAction::try_from(action).ok().map(|a| a.as_str_name()), "DESIRED_ACTION_", action)
}

fn outcome_name(outcome: i32) -> String {
    match ApplyOutcome::try_from(outcome) {
        Ok(ApplyOutcome::Unspecified) => "pending".into(),
        known => enum_name(known.ok().map(|o| o.as_str_name()), "APPLY_OUTCOME_", outcome),
    }
}

fn object_name(r: &ObjectRef) -> String {
    match r.namespace.as_str() {
        "" => format!("{} {}", r.kind, r.name),
        ns => format!("{} {ns}/{}", r.kind, r.name),
    }
}

impl From<DescribeBackupResponse> for DescribeView {
    fn from(r: DescribeBackupResponse) -> Self {
        let (backup, pod_volume_backups, legacy_volume_backups, legacy_volume_backups_error) = match r.bucket {
            Some(b) => {
                let pvbs = b.pod_volume_backups.iter().cloned().map(PodVolumeBackupView::from).collect();
                let legacy = b
                    .legacy_volume_backups
                    .iter()
                    .map(|v| LegacyVolumeBackupView {
                        pod_namespace: v.pod_namespace.clone(),
                        pod_name: v.pod_name.clone(),
                        volume: v.volume.clone(),
                        snapshot_id: v.snapshot_id.clone(),
                        source: v.source.clone(),
                    })
                    .collect();
                let legacy_error = some(b.legacy_volume_backups_error.clone());
                (Some(BackupView::from(b)), pvbs, legacy, legacy_error)
            }
            None => (None, Vec::new(), Vec::new(), None),
        };
        Self {
            name: r.name,
            caller: some(r.caller),
            backup,
            pod_volume_backups,
            legacy_volume_backups,
            legacy_volume_backups_error,
            bucket_errors: r
                .bucket_errors
                .into_iter()
                .map(|e| BucketErrorView { object: e.object, error: e.error })
                .collect(),
            clusters: r.clusters.into_iter().map(ClusterView::from).collect(),
        }
    }
}

impl From<DescribedBackup> for BackupView {
    fn from(b: DescribedBackup) -> Self {
        let owner = b.owner.unwrap_or_default();
        Self {
            locations: b
                .locations
                .into_iter()
                .map(|l| LocationView {
                    name: l.name,
                    source_cluster: l.source_cluster,
                    metadata_key: l.metadata_key,
                    collision: some(l.collision),
                })
                .collect(),
            source_cluster: b.source_cluster,
            phase: b.phase,
            start_timestamp: some(b.start_timestamp),
            completion_timestamp: some(b.completion_timestamp),
            expiration: some(b.expiration),
            owner: OwnerView {
                kind: owner.kind,
                origin_namespace: some(owner.origin_namespace),
                origin_name: some(owner.origin_name),
                nacuuid: some(owner.nacuuid),
                refusal: some(owner.refusal),
            },
            included_namespaces: b.included_namespaces,
            storage_location: b.storage_location,
            pod_volume_backups_key: some(b.pod_volume_backups_key),
            pod_volume_backups_error: some(b.pod_volume_backups_error),
        }
    }
}

impl From<DescribedPodVolumeBackup> for PodVolumeBackupView {
    fn from(p: DescribedPodVolumeBackup) -> Self {
        Self {
            name: p.name,
            pod_namespace: p.pod_namespace,
            pod_name: p.pod_name,
            volume: p.volume,
            snapshot_id: p.snapshot_id,
            phase: p.phase,
            total_bytes: p.total_bytes,
            bytes_done: p.bytes_done,
            uploader_type: p.uploader_type,
        }
    }
}

impl From<DescribedCluster> for ClusterView {
    fn from(c: DescribedCluster) -> Self {
        Self {
            cluster: c.cluster,
            state: c.state,
            desired_version: c.desired_version,
            backups: c
                .backups
                .into_iter()
                .map(|b| ClusterBackupView {
                    namespace: b.namespace,
                    name: b.name,
                    uid: b.uid,
                    storage_location: b.storage_location,
                    phase: b.phase,
                    managed_by_ferry: b.managed_by_ferry,
                })
                .collect(),
            pod_volume_backups: c
                .pod_volume_backups
                .into_iter()
                .map(|p| ClusterPodVolumeBackupView {
                    namespace: p.namespace,
                    name: p.name,
                    backup_label: p.backup_label,
                    backup_uid_label: p.backup_uid_label,
                    phase: p.phase,
                    managed_by_ferry: p.managed_by_ferry,
                })
                .collect(),
            non_admin_backups: c
                .non_admin_backups
                .into_iter()
                .map(|n| NonAdminBackupView {
                    namespace: n.namespace,
                    name: n.name,
                    nacuuid: n.nacuuid,
                    phase: some(n.phase),
                    velero_backup: some(n.velero_backup),
                    managed_by_ferry: n.managed_by_ferry,
                })
                .collect(),
            planned: c.planned.into_iter().map(PlannedView::from).collect(),
        }
    }
}

impl From<DescribedItem> for PlannedView {
    fn from(i: DescribedItem) -> Self {
        let r = i.r#ref.unwrap_or_default();
        Self {
            action: action_name(i.action),
            kind: r.kind,
            namespace: r.namespace,
            name: r.name,
            reason: some(i.reason),
            waits_for: i.waits_for.iter().map(object_name).collect(),
            waits_for_condition: some(i.waits_for_condition),
            outcome: outcome_name(i.outcome),
            message: some(i.message),
        }
    }
}

/// `Key:  value` lines under a heading, values aligned (kubectl describe's layout).
fn fields(out: &mut String, indent: &str, rows: &[(&str, String)]) {
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    for (key, value) in rows {
        let value = if value.is_empty() { "<none>" } else { value.as_str() };
        let _ = writeln!(out, "{indent}{:<width$}  {value}", format!("{key}:"), width = width);
    }
}

fn yes_no(value: bool) -> String {
    if value { "yes".into() } else { "no".into() }
}

pub fn render(view: &DescribeView) -> String {
    let mut out = String::new();
    out.push_str("BACKUP\n");
    match &view.backup {
        Some(b) => {
            let owner = &b.owner;
            let owner_text = match owner.kind.as_str() {
                "tenant" => format!(
                    "tenant {}/{} (NACUUID {})",
                    owner.origin_namespace.as_deref().unwrap_or_default(),
                    owner.origin_name.as_deref().unwrap_or_default(),
                    owner.nacuuid.as_deref().unwrap_or_default()
                ),
                "refused" => format!("REFUSED: {}", owner.refusal.as_deref().unwrap_or_default()),
                other => other.to_string(),
            };
            let locations: Vec<String> =
                b.locations.iter().map(|l| format!("{} ({})", l.name, l.metadata_key)).collect();
            let pvb_file = match (&b.pod_volume_backups_key, &b.pod_volume_backups_error) {
                (Some(key), Some(error)) => format!("{key} UNUSABLE: {error}"),
                (Some(key), None) => key.clone(),
                (None, _) => "none".into(),
            };
            fields(
                &mut out,
                "  ",
                &[
                    ("Name", view.name.clone()),
                    ("Locations", locations.join(", ")),
                    ("Source cluster", b.source_cluster.clone()),
                    ("Phase", b.phase.clone()),
                    ("Started", b.start_timestamp.clone().unwrap_or_default()),
                    ("Completed", b.completion_timestamp.clone().unwrap_or_default()),
                    ("Expires", b.expiration.clone().unwrap_or_default()),
                    ("Owner", owner_text),
                    ("Included namespaces", b.included_namespaces.join(", ")),
                    ("Storage location", b.storage_location.clone()),
                    ("PVB file", pvb_file),
                ],
            );
            for l in b.locations.iter() {
                if let Some(collision) = &l.collision {
                    let _ = writeln!(out, "  COLLISION in location {}: {collision}", l.name);
                }
            }
        }
        None => {
            fields(&mut out, "  ", &[("Name", view.name.clone())]);
            out.push_str("  In no location's catalog (deleted from the bucket, or unreadable).\n");
        }
    }
    for e in &view.bucket_errors {
        let _ = writeln!(out, "  BAD OBJECT {}: {}", e.object, e.error);
    }

    let _ = writeln!(out, "\nPODVOLUMEBACKUPS ({})", view.pod_volume_backups.len());
    if view.pod_volume_backups.is_empty() {
        out.push_str("  none\n");
    } else {
        let mut table = Table::new(&["NAME", "POD", "VOLUME", "UPLOADER", "SNAPSHOT", "PHASE", "BYTES"]);
        for p in &view.pod_volume_backups {
            let bytes = match (p.bytes_done, p.total_bytes) {
                (Some(done), Some(total)) => format!("{done}/{total}"),
                (None, Some(total)) => total.to_string(),
                (Some(done), None) => done.to_string(),
                (None, None) => "-".into(),
            };
            table.row(vec![
                p.name.clone(),
                format!("{}/{}", p.pod_namespace, p.pod_name),
                p.volume.clone(),
                p.uploader_type.clone(),
                p.snapshot_id.clone(),
                p.phase.clone(),
                bytes,
            ]);
        }
        out.push_str(&table.render("  "));
    }

    if !view.legacy_volume_backups.is_empty() || view.legacy_volume_backups_error.is_some() {
        let _ = writeln!(
            out,
            "\nLEGACY VOLUME BACKUPS ({}; from pod annotations: Velero's restore reads them itself, no PodVolumeBackup \
             is created)",
            view.legacy_volume_backups.len()
        );
        if let Some(error) = &view.legacy_volume_backups_error {
            let _ = writeln!(out, "  ERROR {error}");
        }
        if !view.legacy_volume_backups.is_empty() {
            let mut table = Table::new(&["POD", "VOLUME", "SNAPSHOT ID", "SOURCE"]);
            for v in &view.legacy_volume_backups {
                table.row(vec![
                    format!("{}/{}", v.pod_namespace, v.pod_name),
                    v.volume.clone(),
                    v.snapshot_id.clone(),
                    v.source.clone(),
                ]);
            }
            out.push_str(&table.render("  "));
        }
    }

    for c in &view.clusters {
        let version = if c.desired_version.is_empty() { "no desired set yet" } else { &c.desired_version };
        let short: String = version.chars().take(12).collect();
        let _ = writeln!(out, "\nCLUSTER {} ({}, desired set {short})", c.cluster, c.state);
        if c.backups.is_empty() {
            out.push_str("  Backup CR: none\n");
        } else {
            let mut table = Table::new(&["BACKUP CR", "UID", "STORAGE LOCATION", "PHASE", "BY FERRY"]);
            for b in &c.backups {
                table.row(vec![
                    format!("{}/{}", b.namespace, b.name),
                    b.uid.clone(),
                    b.storage_location.clone(),
                    b.phase.clone(),
                    yes_no(b.managed_by_ferry),
                ]);
            }
            out.push_str(&table.render("  "));
        }
        if !c.pod_volume_backups.is_empty() {
            let mut table = Table::new(&["PODVOLUMEBACKUP", "BACKUP LABEL", "PHASE", "BY FERRY"]);
            for p in &c.pod_volume_backups {
                table.row(vec![
                    format!("{}/{}", p.namespace, p.name),
                    p.backup_label.clone(),
                    p.phase.clone(),
                    yes_no(p.managed_by_ferry),
                ]);
            }
            out.push_str(&table.render("  "));
        }
        if !c.non_admin_backups.is_empty() {
            let mut table = Table::new(&["NONADMINBACKUP", "NAC PHASE", "VELERO BACKUP", "BY FERRY"]);
            for n in &c.non_admin_backups {
                table.row(vec![
                    format!("{}/{}", n.namespace, n.name),
                    n.phase.clone().unwrap_or_else(|| "-".into()),
                    n.velero_backup.clone().unwrap_or_else(|| "-".into()),
                    yes_no(n.managed_by_ferry),
                ]);
            }
            out.push_str(&table.render("  "));
        }
        if c.planned.is_empty() {
            out.push_str("  Planned: nothing\n");
        } else {
            let mut table = Table::new(&["PLANNED", "KIND", "NAMESPACE", "NAME", "OUTCOME", "DETAIL"]);
            for i in &c.planned {
                let mut detail: Vec<String> = Vec::new();
                if !i.waits_for.is_empty() {
                    detail.push(format!("waits for {}", i.waits_for.join(", ")));
                }
                detail.extend(i.waits_for_condition.iter().map(|w| format!("waits for {w}")));
                detail.extend(i.reason.iter().cloned());
                detail.extend(i.message.iter().map(|m| format!("agent: {m}")));
                table.row(vec![
                    i.action.clone(),
                    i.kind.clone(),
                    i.namespace.clone(),
                    i.name.clone(),
                    i.outcome.clone(),
                    detail.join("; "),
                ]);
            }
            out.push_str(&table.render("  "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enum_values_render_by_name_and_unknown_ones_by_number() {
        assert_eq!(action_name(DesiredAction::Create as i32), "create");
        assert_eq!(action_name(DesiredAction::Refuse as i32), "refuse");
        assert_eq!(action_name(99), "99");
        assert_eq!(outcome_name(ApplyOutcome::Unspecified as i32), "pending");
        assert_eq!(outcome_name(ApplyOutcome::Held as i32), "held");
        assert_eq!(outcome_name(42), "42");
    }
}
