//! `ferry restore <backup> --cluster T [--wait]`: a Velero Restore of a backup ferry materialized on T, with the
//! namespace mapping from the config: for admin backups, and for tenant backups that NAC's NonAdminRestore cannot
//! restore into a mapped namespace. Idempotent: a Restore of the same backup and mapping made before (by ferry) is
//! reported, and followed with `--wait`, instead of a second one; `--new` asks for another.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::Value;

use ferry::agent::kube_api::{FIELD_MANAGER, api_resource};
use ferry::config::LoadedConfig;
use ferry::model::labels;
use ferry::model::names::velero_label_value;
use ferry::restore::existing::{ExistingRestore, existing_restore, is_same_request, newest_same_request};
use ferry::restore::{RestoreNaming, RestorePlan, is_terminal_phase, plan_restore, unmapped_hint};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
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
    /// Create a Restore of this name, even if another Restore of the same backup exists (default: one name per
    /// backup and mapping, <backup>-ferry-<hash>, and an existing Restore of the same request is reported instead).
    #[arg(long, conflicts_with = "new")]
    pub name: Option<String>,
    /// Create another Restore (a new, generated name) even if one of the same backup and mapping exists: Velero
    /// then restores over what the first one restored.
    #[arg(long)]
    pub new: bool,
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
    let naming = match (&args.name, args.new) {
        (Some(name), _) => RestoreNaming::Named(name.clone()),
        (None, true) => RestoreNaming::New,
        (None, false) => RestoreNaming::Default,
    };
    let (restore, from, to) = match plan_restore(&backup, &args.cluster, &config.mappings, &naming)? {
        RestorePlan::Identity { namespace, tenant } => {
            let oadp = serves_non_admin_restores(&client).await?;
            let message = unmapped_hint(&args.backup, &namespace, tenant, oadp, &cluster.velero_namespace);
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
    let restores: Api<DynamicObject> =
        Api::namespaced_with(client, &cluster.velero_namespace, &api_resource("velero.io", "v1", "Restore"));
    let request = Request {
        restores: &restores,
        velero_namespace: &cluster.velero_namespace,
        backup: &args.backup,
        from: &from,
        to: &to,
    };
    let found = match &naming {
        RestoreNaming::Default => request.newest().await?,
        RestoreNaming::Named(name) => request.named(name).await?,
        RestoreNaming::New => None,
    };
    if let Some(found) = &found {
        let line = request.exists_line(found, args.wait);
        if args.dry_run {
            eprintln!("{line}; nothing would be created");
            return Ok(());
        }
        println!("{line}");
    }
    if args.dry_run {
        print!("{}", object_text(&restore, args.output)?);
        return Ok(());
    }
    let name = match found {
        Some(found) => found.name,
        None => match request.create(restore, &naming).await? {
            Created::New(name) => {
                println!(
                    "Restore {}/{name} created: backup {} with namespace mapping {from} → {to}",
                    cluster.velero_namespace, args.backup
                );
                name
            }
            // Another `ferry restore` of the same request created it between our look and our create.
            Created::Existing(found) => {
                println!("{}", request.exists_line(&found, args.wait));
                found.name
            }
        },
    };
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

/// One restore request on one cluster: a backup and its mapping, and the Restores API there.
struct Request<'a> {
    restores: &'a Api<DynamicObject>,
    velero_namespace: &'a str,
    backup: &'a str,
    from: &'a str,
    to: &'a str,
}

enum Created {
    New(String),
    Existing(ExistingRestore),
}

impl Request<'_> {
    /// The newest of ferry's Restores of this backup and mapping (listed by ferry's and Velero's labels).
    async fn newest(&self) -> anyhow::Result<Option<ExistingRestore>> {
        let selector = format!(
            "{}={},{}={}",
            labels::FERRY_MANAGED_BY,
            labels::FERRY_MANAGED_BY_VALUE,
            labels::VELERO_BACKUP_NAME,
            velero_label_value(self.backup)
        );
        let list = self.restores.list(&ListParams::default().labels(&selector)).await.context("listing Restores")?;
        let values: Vec<Value> = list.items.iter().map(serde_json::to_value).collect::<Result<_, _>>()?;
        Ok(newest_same_request(&values, self.backup, self.from, self.to))
    }

    /// The Restore called `name`: none, this request's (reported, not made again), or another's (refused).
    async fn named(&self, name: &str) -> anyhow::Result<Option<ExistingRestore>> {
        let Some(restore) = self.restores.get_opt(name).await.with_context(|| format!("reading Restore {name}"))?
        else {
            return Ok(None);
        };
        let restore = serde_json::to_value(restore)?;
        if !is_same_request(&restore, self.backup, self.from, self.to) {
            bail!(
                "Restore {name} exists and is not ferry's restore of backup {} with namespace mapping {} → {}; \
                 choose another --name (or --new); no Restore created",
                self.backup,
                self.from,
                self.to
            );
        }
        Ok(Some(existing_restore(&restore)))
    }

    /// Creates `restore`. A name taken meanwhile by the same request (a concurrent `ferry restore`) is that
    /// Restore; taken by anything else, an error.
    async fn create(&self, restore: Value, naming: &RestoreNaming) -> anyhow::Result<Created> {
        let wanted = restore.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
        let object: DynamicObject = serde_json::from_value(restore)?;
        let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        match self.restores.create(&params, &object).await {
            Ok(created) => Ok(Created::New(created.metadata.name.unwrap_or(wanted))),
            Err(kube::Error::Api(status)) if status.reason == "AlreadyExists" && *naming != RestoreNaming::New => {
                match self.named(&wanted).await? {
                    Some(found) => Ok(Created::Existing(found)),
                    None => bail!("Restore {wanted} was reported to exist but cannot be read; no Restore created"),
                }
            }
            Err(e) => Err(anyhow::Error::new(e).context(format!("creating a Restore of backup {}", self.backup))),
        }
    }

    fn exists_line(&self, found: &ExistingRestore, wait: bool) -> String {
        let then = if wait { "following it" } else { "not creating another (--new restores again)" };
        format!(
            "Restore {}/{} of backup {} with namespace mapping {} → {} already exists ({}): {then}",
            self.velero_namespace,
            found.name,
            self.backup,
            self.from,
            self.to,
            found.summary(std::time::SystemTime::now())
        )
    }
}

/// Whether the cluster serves OADP's NonAdminRestores (so tenants can restore an unmapped backup themselves).
async fn serves_non_admin_restores(client: &kube::Client) -> anyhow::Result<bool> {
    match client.list_api_group_resources("oadp.openshift.io/v1alpha1").await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == "nonadminrestores")),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(e) => Err(anyhow::Error::new(e).context("reading the cluster's API groups")),
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
