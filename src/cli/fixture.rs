//! `ferry fixture write` (hidden): writes a Velero-layout bucket for tests, demos and benchmarks.

use std::time::Instant;

use anyhow::Context;
use clap::{Args, Subcommand};
use object_store::ObjectStoreExt;

use ferry::bucket::{self, StoreConfig};
use ferry::fixture::{self, FixtureSpec};

#[derive(Debug, Subcommand)]
pub enum FixtureCommand {
    /// Write a bucket in Velero's layout to a folder or a store URL.
    Write(WriteArgs),
}

#[derive(Debug, Args)]
pub struct WriteArgs {
    /// A folder, or a URL (file://, s3://, gs://, az://).
    pub dest: String,
    /// How many backups to write.
    #[arg(long, default_value_t = 10)]
    pub backups: usize,
    /// The bucket prefix Velero's BSL uses.
    #[arg(long, default_value = "velero")]
    pub prefix: String,
    /// The cluster the backups claim to come from.
    #[arg(long, default_value = "cluster-a")]
    pub source_cluster: String,
    /// Tenant namespaces that NAC backups are spread over.
    #[arg(long, value_delimiter = ',', default_value = "team-a,team-b")]
    pub tenants: Vec<String>,
    /// Every k-th backup is a NAC (tenant) backup; 0 for none.
    #[arg(long, default_value_t = 2)]
    pub nac_every: usize,
    /// PodVolumeBackups per backup.
    #[arg(long, default_value_t = 2)]
    pub pvbs: usize,
    /// Also write one backup in each of Velero's 13 phases.
    #[arg(long)]
    pub all_phases: bool,
    /// Also write backup `legacy-restic` as Velero wrote backups before it stored PVB files: no PVB file, the
    /// volume snapshots in `snapshot.velero.io/<volume>` annotations of the Pods in its tarball.
    #[arg(long)]
    pub legacy_volumes: bool,
    /// Skip tarballs, logs and results (for large benchmark buckets).
    #[arg(long)]
    pub no_tarballs: bool,
    /// Skip the per-backup resource lists.
    #[arg(long)]
    pub no_resource_lists: bool,
    /// Also write one backup of each kind of bad input (corrupt gzip, truncated metadata, …).
    #[arg(long)]
    pub bad_input: bool,
    /// Seed for the generated names and contents (same seed, same bucket).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Object store endpoint (for MinIO and other S3-compatible stores).
    #[arg(long)]
    pub endpoint: Option<String>,
    /// Object store region.
    #[arg(long)]
    pub region: Option<String>,
    /// Allow a plain-HTTP endpoint.
    #[arg(long)]
    pub allow_http: bool,
    /// Objects written at once.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
}

pub async fn run(command: FixtureCommand) -> anyhow::Result<()> {
    let FixtureCommand::Write(args) = command;
    let store = bucket::open(&StoreConfig {
        url: args.dest.clone(),
        endpoint: args.endpoint.clone(),
        region: args.region.clone(),
        allow_http: args.allow_http.then_some(true),
        base_dir: std::env::current_dir()?,
        create_folder: true,
        ..Default::default()
    })?;
    let spec = FixtureSpec {
        backups: args.backups,
        prefix: args.prefix,
        source_cluster: args.source_cluster,
        tenant_namespaces: args.tenants,
        nac_every: args.nac_every,
        pvbs_per_backup: args.pvbs,
        all_phases: args.all_phases,
        legacy_volumes: args.legacy_volumes,
        resource_lists: !args.no_resource_lists,
        tarballs: !args.no_tarballs,
        seed: args.seed,
    };
    let started = Instant::now();
    let summary = fixture::write(&store, &spec, args.concurrency).await?;
    if args.bad_input {
        for object in fixture::bad_input::bad_input_objects(&spec.prefix) {
            let key = object_store::path::Path::from(object.key.as_str());
            store.objects.put(&key, object.body.into()).await.with_context(|| format!("writing {}", object.key))?;
        }
    }
    eprintln!(
        "wrote {} backups ({} objects, {} bytes) to {} in {:.1}s",
        summary.backups,
        summary.objects,
        summary.bytes,
        args.dest,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
