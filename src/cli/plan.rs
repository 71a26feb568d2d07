//! `ferry plan`: what each cluster would get, from the buckets and recorded inventories, with no cluster.

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use anyhow::Context;
use clap::Args;

use ferry::bucket::{self, Loader};
use ferry::config::LoadedConfig;
use ferry::plan::{self, Action, ClusterState, Plan, PlanOptions};

use super::inventory_files;
use super::output::{OutputFormat, structured};
use super::table::Table;

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The ferry config file (YAML).
    #[arg(long, short = 'c', env = "FERRY_CONFIG")]
    pub config: PathBuf,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: OutputFormat,
    /// Plan as if it were this time (RFC 3339), for expiration checks; default now.
    #[arg(long, value_parser = humantime::parse_rfc3339_weak)]
    pub now: Option<SystemTime>,
}

pub async fn run(args: PlanArgs) -> anyhow::Result<()> {
    let config = LoadedConfig::load(&args.config)?;
    let mut catalogs = Vec::new();
    for location in &config.config.locations {
        let store = bucket::open(&config.store_config(location))?;
        let domain = config.location(location, store.kind, &store.bucket);
        let started = Instant::now();
        tracing::info!(location = %location.name, url = %location.url, "reading location");
        let loader = Loader::new(store, domain, config.config.catalog.concurrency);
        let catalog = loader.refresh(None).await?;
        tracing::info!(
            location = %location.name,
            backups = catalog.backups.len(),
            errors = catalog.errors.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "location read"
        );
        catalogs.push(catalog);
    }
    let mut clusters = Vec::new();
    for cluster in &config.config.clusters {
        let inventory = match &cluster.inventory {
            Some(path) => inventory_files::read(&config.resolve_path(path))
                .with_context(|| format!("cluster {}", cluster.name))?,
            None => Default::default(),
        };
        clusters.push(ClusterState {
            name: cluster.name.clone(),
            velero_namespace: cluster.velero_namespace.clone(),
            inventory,
            storage_locations: cluster.storage_locations.clone(),
        });
    }
    let options = PlanOptions {
        materialize_velero_backups: config.config.materialize.velero_backups,
        now: args.now.unwrap_or_else(SystemTime::now),
    };
    let plan = plan::plan(&catalogs, &clusters, &config.mappings, &options);
    let text = match structured(&plan, args.output)? {
        Some(text) => text,
        None => render(&plan),
    };
    print!("{text}");
    Ok(())
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
