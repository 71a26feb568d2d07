//! `ferry plan`: what each cluster would get, from the buckets and recorded inventories, with no cluster. With
//! `--backup NAME`: that backup's objects in apply order (dependency layers) and which of them would wait on
//! which; a `dependencies` rule that would close a cycle among them refuses the backup, with the cycle.

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use std::fmt::Write as _;

use anyhow::Context;
use clap::Args;
use serde::Serialize;

use ferry::bucket::{self, Loader};
use ferry::catalog::{BackupFile, LegacyVolumeBackup, LocationCatalog};
use ferry::config::LoadedConfig;
use ferry::dag::tarball::ItemError;
use ferry::dag::{Graph, layers};
use ferry::model::Inventory;
use ferry::plan::{self, Action, ClusterState, Plan, PlanOptions};

use super::backup_objects::{self, BackupObjects};
use super::graph::{self as graph_cli, BuildReportOutput, ObjectOutput};
use super::inventory_files;
use super::output::{OutputFormat, structured};
use super::table::Table;

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The ferry config file (YAML).
    #[arg(long, short = 'c', env = "FERRY_CONFIG")]
    pub config: PathBuf,
    /// Output format: a human table, or JSON/YAML (stable field names, RFC 3339 times) for scripts.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: OutputFormat,
    /// Plan as if it were this time (RFC 3339), for expiration checks; default now.
    #[arg(long, value_parser = humantime::parse_rfc3339_weak)]
    pub now: Option<SystemTime>,
    /// Plan this backup's objects instead: apply order by dependency layers, and what each one waits on.
    #[arg(long)]
    pub backup: Option<String>,
    /// With `--backup`: only look in this location (default: every location, in config order).
    #[arg(long, requires = "backup")]
    pub location: Option<String>,
}

/// `ferry plan --backup NAME -o json|yaml`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupPlan {
    pub backup: String,
    pub location: String,
    /// `tarball` or `resource list`.
    pub source: &'static str,
    pub key: String,
    /// `apply`, or `refuse` when a `dependencies` rule would close a cycle among its objects.
    pub action: &'static str,
    /// Why it is refused: each refused rule with the cycle it would close.
    pub reasons: Vec<String>,
    pub layers: usize,
    /// In apply order (layer by layer; objects that never become ready last, with no layer). A refused rule
    /// is left out of this order.
    pub objects: Vec<ObjectOutput>,
    pub never_ready: Vec<String>,
    pub report: BuildReportOutput,
    /// Only for a backup without a PVB file (written before Velero stored them): the `snapshot.velero.io/<volume>`
    /// annotations of its Pods. Velero's restore reads them itself; no PodVolumeBackup is ever created for them.
    pub legacy_volume_backups: Vec<LegacyVolumeBackup>,
    pub item_errors: Vec<ItemError>,
}

pub async fn run(args: PlanArgs) -> anyhow::Result<()> {
    let config = LoadedConfig::load(&args.config)?;
    if let Some(backup) = &args.backup {
        let plan = backup_plan(&config, backup, args.location.as_deref()).await?;
        let text = match structured(&plan, args.output)? {
            Some(text) => text,
            None => render_backup(&plan),
        };
        print!("{text}");
        return Ok(());
    }
    let catalogs = read_catalogs(&config).await?;
    let clusters = recorded_clusters(&config)?;
    let options = PlanOptions {
        materialize_velero_backups: config.config.materialize.velero_backups,
        now: args.now.unwrap_or_else(SystemTime::now),
        ..PlanOptions::default()
    };
    let plan = plan::plan(&catalogs, &clusters, &config.mappings, &options);
    let text = match structured(&plan, args.output)? {
        Some(text) => text,
        None => render(&plan),
    };
    print!("{text}");
    Ok(())
}

/// Every location of the config read once, in config order (an unreadable location is an error, never an
/// empty catalog). Shared by the offline commands (`ferry plan`, `ferry describe backup --config`).
pub async fn read_catalogs(config: &LoadedConfig) -> anyhow::Result<Vec<LocationCatalog>> {
    let mut catalogs = Vec::new();
    let progress: std::sync::Arc<dyn ferry::bucket::LoadProgress> =
        std::sync::Arc::new(super::progress::CatalogProgress::for_stderr());
    for location in &config.config.locations {
        let store =
            bucket::open(&config.store_config(location)).with_context(|| format!("location {:?}", location.name))?;
        let domain = config.location(location, store.kind, &store.bucket);
        let started = Instant::now();
        tracing::info!(location = %location.name, url = %location.url, "reading location");
        let catalog = &config.config.catalog;
        let loader = Loader::new(store, domain, catalog.concurrency)
            .with_limits(catalog.limits())
            .with_budget(catalog.budget())
            .with_progress(progress.clone());
        let catalog = loader.refresh(None).await?;
        tracing::info!(
            location = %location.name,
            backups = catalog.backups.len(),
            errors = catalog.errors.len(),
            foreign_folders = catalog.foreign_folders.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "location read"
        );
        catalogs.push(catalog);
    }
    Ok(catalogs)
}

/// Every cluster of the config as the planner sees it, its inventory from its recorded `inventory` files.
pub fn recorded_clusters(config: &LoadedConfig) -> anyhow::Result<Vec<ClusterState>> {
    let mut clusters = Vec::new();
    for cluster in &config.config.clusters {
        let mut inventory: Inventory = match &cluster.inventory {
            Some(path) => inventory_files::read(&config.resolve_path(path))
                .with_context(|| format!("cluster {}", cluster.name))?,
            None => Default::default(),
        };
        // What the agent's API discovery tells a coordinator, a recorded inventory tells by what it holds.
        inventory.apis.non_admin_backups = cluster.oadp.unwrap_or(inventory.declares_non_admin_backups);
        clusters.push(ClusterState {
            name: cluster.name.clone(),
            velero_namespace: cluster.velero_namespace.clone(),
            inventory,
            storage_locations: cluster.storage_locations.clone(),
            granted_locations: cluster.granted_locations(),
            allow_read_write_locations: cluster.allow_read_write_locations,
            // A recorded inventory is not live: one listing proves no absence, so nothing is retired offline.
            live: false,
        });
    }
    Ok(clusters)
}

/// One backup's plan: its objects (tarball, else resource list) through the same graph as `ferry graph`, with
/// the config's priorities and rules. A refused rule is a reason in the plan, not a failure of the command.
pub async fn backup_plan(config: &LoadedConfig, backup: &str, location: Option<&str>) -> anyhow::Result<BackupPlan> {
    let loaded = backup_objects::load(config, backup, location).await?;
    let BackupObjects { backup, location, source, key, objects, mut item_errors } = loaded;
    let legacy_volume_backups = if source == "tarball" {
        let (found, errors) = legacy_volume_backups(config, &location, &backup).await?;
        // A bad Pod item is already reported by the graph's reader.
        let new: Vec<ItemError> =
            errors.into_iter().filter(|e| !item_errors.iter().any(|known| known.path == e.path)).collect();
        item_errors.extend(new);
        found
    } else {
        Vec::new()
    };
    let graph = Graph::build(objects, &config.priorities, &config.config.dependencies.rules);
    let l = layers(&graph);
    let reasons: Vec<String> = graph.report.refused_rules.iter().map(|r| r.to_string()).collect();
    Ok(BackupPlan {
        backup,
        location,
        source,
        key,
        action: if reasons.is_empty() { "apply" } else { "refuse" },
        reasons,
        layers: l.layers.len(),
        objects: graph_cli::objects_output(&graph, &l),
        never_ready: l.never_ready.iter().map(|v| graph.name(*v)).collect(),
        report: graph_cli::report_output(&graph, &graph.report),
        legacy_volume_backups,
        item_errors,
    })
}

/// A backup without a PVB file predates them: its volume backups are its Pods' snapshot annotations, read from
/// the tarball (on demand, for this one backup). One that has a PVB file has none here. A tarball the loader
/// refuses (over a size limit) is an item error, as the graph could still be read.
async fn legacy_volume_backups(
    config: &LoadedConfig,
    location: &str,
    backup: &str,
) -> anyhow::Result<(Vec<LegacyVolumeBackup>, Vec<ItemError>)> {
    let Some(location) = config.config.locations.iter().find(|l| l.name == location) else {
        return Ok(Default::default());
    };
    let store =
        bucket::open(&config.store_config(location)).with_context(|| format!("location {:?}", location.name))?;
    let domain = config.location(location, store.kind, &store.bucket);
    let catalog = &config.config.catalog;
    let loader =
        Loader::new(store, domain, catalog.concurrency).with_limits(catalog.limits()).with_budget(catalog.budget());
    let context = || format!("location {:?}: backup {backup}", location.name);
    if loader.has_file(backup, BackupFile::PodVolumeBackups).await.with_context(context)? {
        return Ok(Default::default());
    }
    match loader.legacy_volume_backups(backup).await {
        Ok(found) => Ok((found.volume_backups, found.errors)),
        Err(e) => {
            let path = ferry::catalog::Layout::new(&location.prefix).key(backup, BackupFile::Tarball);
            Ok((Vec::new(), vec![ItemError { path, error: format!("legacy volume backups not read: {e}") }]))
        }
    }
}

/// A summary line, the refusal reasons, the objects in apply order with WAITS ON, then the build's findings.
pub fn render_backup(plan: &BackupPlan) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "BACKUP {} (location {}, from {}): {} {} objects in {} layers, {} never ready",
        plan.backup,
        plan.location,
        plan.source,
        plan.action,
        plan.objects.len(),
        plan.layers,
        plan.never_ready.len()
    );
    for reason in &plan.reasons {
        let _ = writeln!(out, "REFUSED: {reason}");
    }
    out.push_str(&graph_cli::objects_table(&plan.objects));
    out.push_str(&legacy_volume_backups_table(&plan.legacy_volume_backups));
    // The refused rules are already listed above, as the plan's reasons.
    let report = BuildReportOutput { refused_rules: Vec::new(), ..plan.report.clone() };
    out.push_str(&graph_cli::report_sections(&report, &plan.item_errors));
    out
}

/// The legacy volume backups section, or nothing when there are none.
fn legacy_volume_backups_table(volumes: &[LegacyVolumeBackup]) -> String {
    if volumes.is_empty() {
        return String::new();
    }
    let mut table = Table::new(&["POD NAMESPACE", "POD", "VOLUME", "SNAPSHOT ID"]);
    for v in volumes {
        table.row(vec![v.pod_namespace.clone(), v.pod_name.clone(), v.volume.clone(), v.snapshot_id.clone()]);
    }
    format!(
        "\nLEGACY VOLUME BACKUPS (from pod annotations; Velero's restore reads them itself, no PodVolumeBackup is \
         created):\n{}",
        table.render("  ")
    )
}

/// Groups by cluster with counts, then lists catalog errors.
pub fn render(plan: &Plan) -> String {
    let mut out = String::new();
    for cluster in &plan.clusters {
        let counts: Vec<String> = [Action::Create, Action::Wait, Action::Conflict, Action::Refuse]
            .iter()
            .map(|a| format!("{} {}", cluster.count(*a), a.as_str()))
            .collect();
        out.push_str(&format!("CLUSTER {}: {}\n", cluster.cluster, counts.join(", ")));
        let mut table = Table::new(&["ACTION", "KIND", "NAMESPACE", "NAME", "BACKUP", "DETAIL"]);
        for item in &cluster.items {
            let detail = match (&item.waits_for, &item.reason) {
                (Some(w), Some(r)) => format!("waits for {w}; {r}"),
                (Some(w), None) => format!("waits for {w}"),
                (None, Some(r)) => r.clone(),
                (None, None) => String::new(),
            };
            table.row(vec![
                item.action.as_str().into(),
                item.kind.clone(),
                item.namespace.clone(),
                item.name.clone(),
                item.backup.clone(),
                detail,
            ]);
        }
        if table.is_empty() {
            out.push_str("  nothing to do\n");
        } else {
            out.push_str(&table.render("  "));
        }
        out.push('\n');
    }
    if !plan.errors.is_empty() {
        out.push_str(&format!("ERRORS: {} object(s) skipped\n", plan.errors.len()));
        let mut table = Table::new(&["LOCATION", "OBJECT", "ERROR"]);
        for e in &plan.errors {
            table.row(vec![e.location.clone(), e.object.clone(), e.error.clone()]);
        }
        out.push_str(&table.render("  "));
    }
    out
}
