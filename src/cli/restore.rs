//! `ferry restore <backup> --cluster T [--wait]`: a Velero Restore with the namespace mapping from the config,
//! for tenant backups that NAC's NonAdminRestore cannot restore into a mapped namespace.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::Value;

use ferry::agent::kube_api::{FIELD_MANAGER, api_resource};
use ferry::config::LoadedConfig;
use ferry::restore::{RestorePlan, is_terminal_phase, plan_restore};
use kube::api::{Api, DynamicObject, PostParams};
use kube::runtime::wait::await_condition;

use super::output::{ObjectFormat, object_text};

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The backup's name (as in the bucket and in the Backup CR on the target cluster).
    pub backup: String,
    /// The target cluster (as named in the config).
    #[arg(long)]
    pub cluster: String,
    /// The ferry config file (YAML): clusters (Velero namespace, kubeconfig) and namespace mappings.
    #[arg(long, short = 'c', env = "FERRY_CONFIG")]
    pub config: PathBuf,
    /// Admin kubeconfig of the target cluster (default: clusters[].kubeconfig in the config, then KUBECONFIG).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long)]
    pub context: Option<String>,
    /// Name of the Restore (default: <backup>-ferry-<unix time>).
    #[arg(long)]
    pub name: Option<String>,
    /// Wait until the Restore reaches a terminal phase, printing its progress.
    #[arg(long)]
    pub wait: bool,
    /// Let Velero create the target namespace if it does not exist. Without it, a missing namespace is refused:
    /// ferry never creates tenant namespaces, and one Velero would create gets none of the target's own
    /// quotas, network policies or RBAC.
    #[arg(long)]
    pub create_namespace: bool,
    /// Read and check everything, then print the Restore that would be created (-o yaml|json) instead of
    /// creating it.
    #[arg(long, conflicts_with = "wait")]
    pub dry_run: bool,
    /// With --dry-run: how the Restore is printed.
    #[arg(long, short = 'o', value_enum, default_value_t, requires = "dry_run")]
    pub output: ObjectFormat,
    /// With --wait: give up after this long.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

pub async fn run(args: RestoreArgs) -> anyhow::Result<()> {
    let config = LoadedConfig::load(&args.config)?;
    let cluster = config
        .config
        .clusters
        .iter()
        .find(|c| c.name == args.cluster)
        .with_context(|| format!("cluster {:?} is not in the config", args.cluster))?;
    let kubeconfig = args.kubeconfig.clone().or_else(|| cluster.kubeconfig.as_ref().map(|p| config.resolve_path(p)));
    let client = super::kube_client::kube_client(kubeconfig.as_deref(), args.context.as_deref()).await?;
    let backups: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &cluster.velero_namespace, &api_resource("velero.io", "v1", "Backup"));
    let backup = backups
        .get_opt(&args.backup)
        .await?
        .with_context(|| format!("no Backup {}/{} on {}", cluster.velero_namespace, args.backup, args.cluster))?;
    let backup = serde_json::to_value(backup)?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let name = args.name.clone().unwrap_or_else(|| format!("{}-ferry-{now}", args.backup));
    let (restore, from, to) = match plan_restore(&backup, &args.cluster, &config.mappings, &name)? {
        RestorePlan::Identity { namespace } => {
            let message = format!(
                "Backup {} is not mapped on {} (namespace {namespace} on both clusters): a NonAdminRestore in {namespace} \
                 restores it as usual; no Restore created.",
                args.backup, args.cluster
            );
            // A dry run's stdout is an object for a parser: the explanation goes to stderr there.
            if args.dry_run {
                eprintln!("{message}");
            } else {
                println!("{message}");
            }
            return Ok(());
        }
        RestorePlan::Create { restore, from, to } => (restore, from, to),
    };
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let exists =
        namespaces.get_opt(&to).await.with_context(|| format!("reading namespace {to} on {}", args.cluster))?;
    if exists.is_none() && !args.create_namespace {
        bail!(
            "namespace {to} does not exist on {}: create it (with the tenant's quotas, policies and RBAC) first, or \
             pass --create-namespace to let Velero's restore create it; no Restore created",
            args.cluster
        );
    }
    if args.dry_run {
        print!("{}", object_text(&restore, args.output)?);
        return Ok(());
    }
    let restores: Api<DynamicObject> =
        Api::namespaced_with(client, &cluster.velero_namespace, &api_resource("velero.io", "v1", "Restore"));
    let object: DynamicObject = serde_json::from_value(restore)?;
    let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    restores.create(&params, &object).await.with_context(|| format!("creating Restore {name}"))?;
    println!(
        "Restore {}/{name} created: backup {} with namespace mapping {from} → {to}",
        cluster.velero_namespace, args.backup
    );
    if !args.wait {
        return Ok(());
    }
    // Watched, not polled: a line on each change of progress, until a terminal phase (or the Restore is gone).
    let last = std::cell::RefCell::new(String::new());
    let progress = |restore: Option<&DynamicObject>| {
        let Some(restore) = restore else { return true };
        let phase = phase_of(restore);
        let line = progress_line(restore);
        if *last.borrow() != line {
            println!("{line}");
            *last.borrow_mut() = line;
        }
        is_terminal_phase(&phase)
    };
    let finished = tokio::time::timeout(args.timeout, await_condition(restores, &name, progress))
        .await
        .map_err(|_| anyhow::anyhow!("Restore {name} not finished after {}", humantime::format_duration(args.timeout)))?
        .with_context(|| format!("watching Restore {name}"))?;
    let Some(restore) = finished else { bail!("Restore {name} was deleted before it finished") };
    match phase_of(&restore).as_str() {
        "Completed" => Ok(()),
        phase => bail!("Restore {name} ended in phase {phase}"),
    }
}

fn phase_of(restore: &DynamicObject) -> String {
    restore.data.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default().to_string()
}

/// `phase Completed  items 10/10  warnings 0  errors 0`.
fn progress_line(restore: &DynamicObject) -> String {
    let count = |p: &str| restore.data.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let phase = phase_of(restore);
    format!(
        "phase {}  items {}/{}  warnings {}  errors {}",
        if phase.is_empty() { "New" } else { &phase },
        count("/status/progress/itemsRestored"),
        count("/status/progress/totalItems"),
        count("/status/warnings"),
        count("/status/errors")
    )
}
