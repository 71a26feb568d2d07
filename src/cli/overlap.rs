//! `ferry overlap <backup> <backup>…`: the objects two or more backups share, and whether running them in
//! parallel is safe at object level, next to what Velero 1.18's namespace-level check would say.

use std::path::PathBuf;

use clap::Args;

use ferry::config::LoadedConfig;
use ferry::dag::overlap::shared_by_kind;
use ferry::dag::{Overlap, ResourceSet, overlap};

use super::backup_objects;
use super::output::{OutputFormat, structured};
use super::table::Table;

/// Shared objects listed per pair in the table (all of them in JSON/YAML).
const LISTED: usize = 20;

#[derive(Debug, Args)]
pub struct OverlapArgs {
    /// Two or more backup names.
    #[arg(num_args = 2.., required = true)]
    pub backups: Vec<String>,
    /// The ferry config file (YAML): locations, and `dependencies` (priorities, rules).
    #[arg(long, short = 'c', env = "FERRY_CONFIG")]
    pub config: PathBuf,
    /// Only look in this location (default: every location, in config order).
    #[arg(long)]
    pub location: Option<String>,
    /// Output format: a human table, or JSON/YAML (stable field names, RFC 3339 times) for scripts.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: OutputFormat,
}

pub async fn run(args: OverlapArgs) -> anyhow::Result<()> {
    let config = LoadedConfig::load(&args.config)?;
    let mut loaded = Vec::new();
    for backup in &args.backups {
        loaded.push(backup_objects::load(&config, backup, args.location.as_deref()).await?);
    }
    let sets: Vec<ResourceSet<'_>> =
        loaded.iter().map(|b| ResourceSet { backup: b.backup.clone(), objects: &b.objects }).collect();
    let result = overlap(&sets);
    let text = match structured(&result, args.output)? {
        Some(text) => text,
        None => render(&result),
    };
    print!("{text}");
    Ok(())
}

pub fn render(o: &Overlap) -> String {
    let mut out = format!("PARALLEL SAFE: {}\n", if o.parallel_safe { "yes" } else { "no" });
    let mut table =
        Table::new(&["A", "B", "SHARED OBJECTS", "SHARED NAMESPACES", "SAFE (OBJECTS)", "SAFE (VELERO NS)"]);
    let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
    for p in &o.pairs {
        table.row(vec![
            p.a.clone(),
            p.b.clone(),
            p.shared.len().to_string(),
            p.shared_namespaces.len().to_string(),
            yes(p.parallel_safe),
            yes(p.velero_namespace_level_safe),
        ]);
    }
    out.push_str(&table.render("  "));
    for p in o.pairs.iter().filter(|p| !p.parallel_safe) {
        let kinds: Vec<String> = shared_by_kind(p).iter().map(|(k, n)| format!("{n} {k}")).collect();
        out.push_str(&format!("\n{} ∩ {}: {}\n", p.a, p.b, kinds.join(", ")));
        for s in p.shared.iter().take(LISTED) {
            out.push_str(&format!("  {s}\n"));
        }
        if p.shared.len() > LISTED {
            out.push_str(&format!("  … and {} more (-o json lists all)\n", p.shared.len() - LISTED));
        }
    }
    out
}
