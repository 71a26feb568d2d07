//! Catalog benchmark (not a timed test): cold load of N backups (each with a PVB file) from a local folder and
//! from a real MinIO, ferry's concurrent loader vs a serial one-request-at-a-time loader in Velero's sync pattern,
//! side by side in one run; a warm refresh with nothing changed (requests counted: GETs must be 0); peak RSS of
//! a process doing the cold load. Run with `e2e/bench` (sizes from `FERRY_BENCH_SIZES`, default `10000,100000`).

#[path = "../tests/support/local_server.rs"]
mod local_server;
#[path = "../tests/support/minio.rs"]
mod minio;
#[path = "support/proc_status.rs"]
mod proc_status;

use std::process::Command;
use std::time::Instant;

use ferry::bucket::metered::{meter, meter_with_latency};
use ferry::bucket::{self, Loader, Store, StoreConfig};
use ferry::catalog::{BackupFile, Layout, Location};
use ferry::fixture::{self, FixtureSpec};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

const CONCURRENCY: usize = 32;

fn spec(backups: usize) -> FixtureSpec {
    FixtureSpec { backups, tarballs: false, resource_lists: false, all_phases: false, ..FixtureSpec::default() }
}

fn location(store: &Store) -> Location {
    Location {
        name: "bench".into(),
        kind: store.kind,
        bucket: store.bucket.clone(),
        prefix: FixtureSpec::default().prefix,
        source_cluster: "cluster-a".into(),
    }
}

/// Velero's `backup_sync_controller` pattern: one ListCommonPrefixes, then per backup ObjectExists +
/// GetObject for the metadata and ObjectExists + GetObject for the PVB file, serially.
async fn serial_load(store: &dyn ObjectStore, layout: &Layout) -> anyhow::Result<usize> {
    let listing = store.list_with_delimiter(Some(&Path::from(layout.backups_dir().as_str()))).await?;
    let mut loaded = 0;
    for dir in &listing.common_prefixes {
        let Some(name) = layout.backup_of_dir(dir.as_ref()) else { continue };
        let meta = Path::from(layout.key(name, BackupFile::Metadata).as_str());
        if store.head(&meta).await.is_err() {
            continue;
        }
        let bytes = store.get(&meta).await?.bytes().await?;
        if ferry::catalog::decode::backup_metadata(name, &bytes).is_err() {
            continue;
        }
        let pvbs = Path::from(layout.key(name, BackupFile::PodVolumeBackups).as_str());
        if store.head(&pvbs).await.is_ok() {
            let bytes = store.get(&pvbs).await?.bytes().await?;
            let _ = ferry::catalog::decode::pod_volume_backups(&bytes, &Default::default());
        }
        loaded += 1;
    }
    Ok(loaded)
}

fn peak_rss_kb() -> u64 {
    rss_kb("VmHWM:")
}

fn rss_kb(field: &str) -> u64 {
    proc_status::own_kb(field)
}

fn store_config(url: &str, endpoint: Option<&str>) -> StoreConfig {
    StoreConfig {
        url: url.into(),
        endpoint: endpoint.map(str::to_string),
        region: Some("us-east-1".into()),
        allow_http: Some(true),
        base_dir: std::env::temp_dir(),
        ..Default::default()
    }
}

/// In a child process (so peak RSS is the loader's alone): cold-load and print `millis backups rss_kb`.
async fn child(url: &str, endpoint: Option<&str>) -> anyhow::Result<()> {
    let store = bucket::open(&store_config(url, endpoint))?;
    let started = Instant::now();
    let catalog = Loader::new(store.clone(), location(&store), CONCURRENCY).refresh(None).await?;
    let ms = started.elapsed().as_millis();
    if std::env::var_os("FERRY_BENCH_DEBUG").is_some() {
        let raw: usize = catalog.backups.values().map(|b| b.backup.raw_len()).sum();
        let pvb: usize = catalog.backups.values().map(|b| b.pod_volume_backups.compressed_len()).sum();
        eprintln!("rss now {} kB, raw metadata {} kB, pvb {} kB", rss_kb("VmRSS:"), raw / 1024, pvb / 1024);
        drop(catalog);
        eprintln!("rss after drop {} kB", rss_kb("VmRSS:"));
        return Ok(());
    }
    println!("{ms} {} {}", catalog.backups.len(), peak_rss_kb());
    Ok(())
}

struct Row {
    store: String,
    backups: usize,
    concurrent_ms: u128,
    serial_ms: u128,
    warm_ms: u128,
    warm_gets: u64,
    warm_lists: u64,
    rss_mb: f64,
}

async fn measure(label: &'static str, config: StoreConfig, n: usize) -> anyhow::Result<Row> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.arg("--child").arg(&config.url);
    if let Some(e) = &config.endpoint {
        cmd.arg(e);
    }
    if let Some(c) = &config.credentials {
        cmd.env("AWS_ACCESS_KEY_ID", &c.access_key_id).env("AWS_SECRET_ACCESS_KEY", &c.secret_access_key);
    }
    let out = cmd.output()?;
    anyhow::ensure!(out.status.success(), "child failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<u64> = text.split_whitespace().filter_map(|f| f.parse().ok()).collect();
    anyhow::ensure!(fields.len() == 3 && fields[1] as usize == n, "child said {text:?}, expected {n} backups");

    let store = bucket::open(&config)?;
    let layout = Layout::new(&location(&store).prefix);
    let started = Instant::now();
    let serial = serial_load(store.objects.as_ref(), &layout).await?;
    let serial_ms = started.elapsed().as_millis();
    anyhow::ensure!(serial == n, "serial loader saw {serial} backups, expected {n}");

    let (metered, counts) = meter(store);
    let loader = Loader::new(metered.clone(), location(&metered), CONCURRENCY);
    let cold = loader.refresh(None).await?;
    let before = counts.tally();
    let started = Instant::now();
    let warm = loader.refresh(Some(&cold)).await?;
    let warm_ms = started.elapsed().as_millis();
    let warm_requests = counts.tally() - before;
    anyhow::ensure!(warm.backups.len() == n, "warm refresh lost backups");
    Ok(Row {
        store: label.to_string(),
        backups: n,
        concurrent_ms: fields[0] as u128,
        serial_ms,
        warm_ms,
        warm_gets: warm_requests.get + warm_requests.head,
        warm_lists: warm_requests.list,
        rss_mb: fields[2] as f64 / 1024.0,
    })
}

/// Both loaders again, every request delayed by `latency` (a bucket one network round trip away, as a real
/// cloud bucket is): in-process, so without an RSS figure.
async fn measure_with_latency(config: StoreConfig, n: usize, latency: std::time::Duration) -> anyhow::Result<Row> {
    let (store, counts) = meter_with_latency(bucket::open(&config)?, latency);
    let started = Instant::now();
    let cold = Loader::new(store.clone(), location(&store), CONCURRENCY).refresh(None).await?;
    let concurrent_ms = started.elapsed().as_millis();
    anyhow::ensure!(cold.backups.len() == n, "concurrent loader saw {} backups", cold.backups.len());
    let started = Instant::now();
    let serial = serial_load(store.objects.as_ref(), &Layout::new(&location(&store).prefix)).await?;
    let serial_ms = started.elapsed().as_millis();
    anyhow::ensure!(serial == n, "serial loader saw {serial} backups, expected {n}");
    let loader = Loader::new(store.clone(), location(&store), CONCURRENCY);
    let before = counts.tally();
    let started = Instant::now();
    loader.refresh(Some(&cold)).await?;
    let warm_ms = started.elapsed().as_millis();
    let warm = counts.tally() - before;
    Ok(Row {
        store: format!("MinIO + {} ms/request", latency.as_millis()),
        backups: n,
        concurrent_ms,
        serial_ms,
        warm_ms,
        warm_gets: warm.get + warm.head,
        warm_lists: warm.list,
        rss_mb: f64::NAN,
    })
}

async fn write_fixture(store: &Store, n: usize) -> anyhow::Result<()> {
    let started = Instant::now();
    let summary = fixture::write(store, &spec(n), 64).await?;
    eprintln!(
        "  wrote {} backups ({} objects) to {} in {:.1}s",
        summary.backups,
        summary.objects,
        store.bucket,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[global_allocator]
static ALLOCATOR: ferry::allocator::Allocator = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    // As the `ferry` binary does, before the runtime's threads exist: the child's peak RSS is ferry's.
    ferry::allocator::configure();
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(bench())
}

async fn bench() -> anyhow::Result<()> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        return child(&args[2], args.get(3).map(String::as_str)).await;
    }
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it: then a small
    // smoke run checks that the benchmark itself works.
    let smoke = !args.iter().any(|a| a == "--bench");
    let default_sizes = if smoke { "300" } else { "10000,100000" };
    let sizes: Vec<usize> = std::env::var("FERRY_BENCH_SIZES")
        .unwrap_or_else(|_| default_sizes.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let server = minio::Minio::start();
    let work = tempfile::tempdir()?;
    let mut rows = Vec::new();
    for &n in &sizes {
        eprintln!("== {n} backups");
        let dir = work.path().join(format!("bucket-{n}"));
        let local_url = format!("file://{}", dir.display());
        let writer = StoreConfig { create_folder: true, ..store_config(&local_url, None) };
        write_fixture(&bucket::open(&writer)?, n).await?;
        let bucket_name = format!("bench-{n}");
        server.create_bucket(&bucket_name);
        write_fixture(&server.store(&bucket_name), n).await?;
        rows.push(measure("local folder", store_config(&local_url, None), n).await?);
        rows.push(measure("MinIO", server.store_config(&bucket_name), n).await?);
    }
    if let Some(&n) = sizes.first() {
        let latency = std::time::Duration::from_millis(2);
        eprintln!("== {n} backups, {} ms added to every request", latency.as_millis());
        rows.push(measure_with_latency(server.store_config(&format!("bench-{n}")), n, latency).await?);
    }
    println!();
    println!(
        "| store | backups | ferry cold (s) | serial cold (s) | speed-up | warm refresh (s) | warm GET+HEAD | warm LIST | cold peak RSS (MB) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.1}× | {:.2} | {} | {} | {} |",
            r.store,
            r.backups,
            r.concurrent_ms as f64 / 1000.0,
            r.serial_ms as f64 / 1000.0,
            r.serial_ms as f64 / r.concurrent_ms.max(1) as f64,
            r.warm_ms as f64 / 1000.0,
            r.warm_gets,
            r.warm_lists,
            if r.rss_mb.is_nan() { "–".to_string() } else { format!("{:.0}", r.rss_mb) }
        );
    }
    Ok(())
}
