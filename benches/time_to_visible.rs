//! Time-to-visible benchmark (not a timed test): how long until a bucket's Velero backups are listable as Backup
//! and PodVolumeBackup CRs on a reader cluster — the real Velero server (v1.18.3, `e2e/testbed/build-velero.sh`)
//! against ferry (coordinator + one agent over mTLS) and against the apiserver's own limit (the same objects
//! created by this process, 32 at a time). Also the repair case: Backups present, PVBs deleted. Each size runs
//! on fresh test beds (`e2e/testbed/up.sh`: kube-apiserver with Velero's CRDs, etcd, MinIO), the bucket written
//! by `ferry::fixture` in Velero's layout. Prints a markdown table (record results in docs/performance.md), and
//! CSV to `$FERRY_BENCH_CSV` when set.
//!
//! `cargo bench --bench time_to_visible` (or `e2e/bench-visible`) runs `FERRY_BENCH_SIZES` (default
//! `2000,10000`) backups × 2 PVBs; `cargo test --all-targets` runs a smoke with 20 backups (Velero only if its
//! binaries are cached) that fails if the objects never become listable. `FERRY_BENCH_VELERO=0` leaves Velero out.
//! `FERRY_BENCH_COLD_ONLY=1` measures only ferry's cold start (first object, the coordinator's whole read, peak
//! RSS), for sizes such as 100,000 whose creates would hold the bed for many minutes.

#[path = "../tests/e2e_support/mod.rs"]
mod e2e;
#[path = "support/proc_status.rs"]
mod proc_status;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use e2e::velero::velero_server_command;
use e2e::{FERRY, PREFIX, TestBed, VELERO_NS, api, backups, pvbs};
use ferry::fixture::{self, FixtureSpec};
use futures::StreamExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// In-flight creates of the apiserver-limit run (as ferry's agent's default `--apply-concurrency`).
const LIMIT_CONCURRENCY: usize = 32;
const PVBS_PER_BACKUP: usize = 2;
/// How long Velero is given to repair deleted PVBs: more than one period of its backup sync (1 min, fixed).
const VELERO_REPAIR_WAIT: Duration = Duration::from_secs(75);

fn main() -> anyhow::Result<()> {
    let smoke = !std::env::args().any(|a| a == "--bench");
    let sizes: Vec<usize> = if smoke {
        vec![20]
    } else {
        let text = std::env::var("FERRY_BENCH_SIZES").unwrap_or_else(|_| "2000,10000".into());
        text.split(',')
            .map(|s| s.trim().parse().with_context(|| format!("FERRY_BENCH_SIZES: {s:?}")))
            .collect::<Result<_, _>>()?
    };
    let velero = velero_binaries(smoke)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut rows = Vec::new();
    for &n in &sizes {
        rows.extend(runtime.block_on(run_size(n, velero.as_ref(), smoke))?);
    }
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!("\n{}", table(&rows));
    println!("commit {commit}; load average at the end: {}", proc_status::load_average(" / "));
    if let Ok(path) = std::env::var("FERRY_BENCH_CSV") {
        let mut csv = String::from("system,backups,objects,seconds,objects_per_s,cpu_s,peak_rss_mb\n");
        for r in &rows {
            let _ = writeln!(
                csv,
                "\"{}\",{},{},{:.2},{:.1},{},{}",
                r.system,
                r.backups,
                r.objects,
                r.seconds,
                r.objects_per_s(),
                r.cpu_s.map_or(String::new(), |c| format!("{c:.1}")),
                r.peak_rss_mb.map_or(String::new(), |m| format!("{m:.0}")),
            );
        }
        std::fs::write(&path, csv).with_context(|| format!("write {path}"))?;
        eprintln!("CSV written to {path}");
    }
    Ok(())
}

/// One measured line.
#[derive(Debug, Clone, Default)]
struct Row {
    system: String,
    backups: usize,
    /// Objects the measured span made listable (for the repair rows: the PVBs that came back).
    objects: usize,
    seconds: f64,
    cpu_s: Option<f64>,
    peak_rss_mb: Option<f64>,
    /// CPU seconds of the apiserver and etcd during the span.
    apiserver_cpu_s: Option<f64>,
    note: String,
    load: String,
}

impl Row {
    fn objects_per_s(&self) -> f64 {
        if self.seconds > 0.0 { self.objects as f64 / self.seconds } else { 0.0 }
    }
}

fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| system | backups | objects | seconds | objects/s | % of apiserver limit | CPU (s) | peak RSS (MB) | apiserver+etcd CPU (s) | load (1/5/15 min) | note |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n",
    );
    for r in rows {
        let limit = rows.iter().find(|l| l.system == "apiserver limit" && l.backups == r.backups);
        let share = match limit {
            Some(l) if r.system.starts_with("ferry") && l.objects_per_s() > 0.0 => {
                format!("{:.0} %", 100.0 * r.objects_per_s() / l.objects_per_s())
            }
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.1} | {:.0} | {share} | {} | {} | {} | {} | {} |",
            r.system,
            r.backups,
            r.objects,
            r.seconds,
            r.objects_per_s(),
            r.cpu_s.map_or("–".into(), |c| format!("{c:.1}")),
            r.peak_rss_mb.map_or("–".into(), |m| format!("{m:.0}")),
            r.apiserver_cpu_s.map_or("–".into(), |c| format!("{c:.1}")),
            r.load,
            r.note,
        );
    }
    out
}

/// `(velero, plugin dir)`: built by `e2e/testbed/build-velero.sh` under `cargo bench`; in the smoke only if cached.
fn velero_binaries(smoke: bool) -> anyhow::Result<Option<(PathBuf, PathBuf)>> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("e2e/testbed/build-velero.sh");
    let cache = std::env::var("FERRY_TESTBED_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/ferry-testbed"));
    let dir = cache.join("velero-v1.18.3");
    let cached = dir.join("velero").exists() && dir.join("plugins/velero-plugin-for-aws").exists();
    if std::env::var("FERRY_BENCH_VELERO").is_ok_and(|v| v == "0") {
        eprintln!("note: FERRY_BENCH_VELERO=0: Velero is not measured");
        return Ok(None);
    }
    if smoke && !cached {
        eprintln!(
            "note: Velero is not built ({} missing; e2e/testbed/build-velero.sh builds it): smoke runs ferry and the apiserver limit only",
            dir.display()
        );
        return Ok(None);
    }
    let out = Command::new(&script).stderr(Stdio::inherit()).output().context("run build-velero.sh")?;
    if !out.status.success() {
        bail!("e2e/testbed/build-velero.sh failed");
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let var = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(|v| PathBuf::from(v.trim_matches('\'')))
            .with_context(|| format!("build-velero.sh printed no {key}"))
    };
    Ok(Some((var("FERRY_TESTBED_VELERO")?, var("FERRY_TESTBED_VELERO_PLUGIN_DIR")?)))
}

/// All rows of one size: Velero and ferry on the two clusters of one bed, the apiserver limit on a second bed.
async fn run_size(n: usize, velero: Option<&(PathBuf, PathBuf)>, smoke: bool) -> anyhow::Result<Vec<Row>> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    // Generous, so a slow machine still finishes, but an agent or Velero that never delivers fails the run.
    let timeout = Duration::from_secs(if smoke { 45 } else { 120 + n as u64 / 10 });
    let mut rows = Vec::new();
    eprintln!("== {n} backups: test bed (cluster a: Velero, b: ferry)");
    let bed = TestBed::up();
    let spec = FixtureSpec {
        backups: n,
        prefix: PREFIX.into(),
        tenant_namespaces: vec![],
        nac_every: 0,
        pvbs_per_backup: PVBS_PER_BACKUP,
        resource_lists: false,
        tarballs: false,
        ..FixtureSpec::default()
    };
    let started = Instant::now();
    let written = fixture::write(&bed.store(), &spec, 32).await?;
    eprintln!("   bucket: {} objects written in {:.1} s", written.objects, started.elapsed().as_secs_f64());

    if std::env::var("FERRY_BENCH_COLD_ONLY").is_ok_and(|v| v == "1") {
        return Ok(vec![run_ferry_cold(&bed, n, timeout).await?]);
    }
    // The bed's env names the same binaries (up.sh runs build.sh, which builds them).
    if velero.is_some() {
        rows.extend(run_velero(&bed, n, smoke, timeout).await?);
    }
    rows.extend(run_ferry(&bed, n, timeout).await?);
    if smoke {
        // Quick: on cluster a of the same bed, in a namespace of its own (Velero, if it ran, is stopped).
        rows.push(run_limit(&bed, &spec, "bench-limit", false).await?);
    } else {
        drop(bed);
        eprintln!("== {n} backups: a fresh test bed for the apiserver limit");
        let bed = TestBed::up();
        rows.push(run_limit(&bed, &spec, VELERO_NS, false).await?);
        // The same creates again, into another namespace of the same bed, while one client watches both kinds
        // there, as ferry's agent (or Velero) watches what it creates: what a watching controller can reach.
        rows.push(run_limit(&bed, &spec, "bench-limit-watched", true).await?);
    }
    for r in &rows {
        eprintln!("{}", table(std::slice::from_ref(r)).lines().last().unwrap_or_default());
    }
    Ok(rows)
}

/// (Backups, PVBs) in the Velero namespace, cheaply: a one-item page and the server's count of the rest.
async fn count(client: &kube::Client) -> anyhow::Result<(usize, usize)> {
    Ok((count_of(&backups(client)).await?, count_of(&pvbs(client)).await?))
}

async fn count_of(api: &Api<DynamicObject>) -> anyhow::Result<usize> {
    let page = api.list_metadata(&ListParams::default().limit(1)).await?;
    let rest = page.metadata.remaining_item_count.unwrap_or(0);
    if rest == 0 && page.metadata.continue_.as_deref().is_some_and(|c| !c.is_empty()) {
        // No count from the server: list everything.
        return Ok(api.list_metadata(&ListParams::default()).await?.items.len());
    }
    Ok(page.items.len() + usize::try_from(rest).unwrap_or(0))
}

/// Polls until `done(backups, pvbs)`; returns the time of the first object seen and of completion, since `from`.
async fn wait_visible(
    client: &kube::Client,
    from: Instant,
    timeout: Duration,
    what: &str,
    done: impl Fn(usize, usize) -> bool,
) -> anyhow::Result<(Option<f64>, f64)> {
    let mut first = None;
    let mut last_report = Instant::now();
    loop {
        let (b, p) = count(client).await?;
        if first.is_none() && b + p > 0 {
            first = Some(from.elapsed().as_secs_f64());
        }
        if done(b, p) {
            return Ok((first, from.elapsed().as_secs_f64()));
        }
        if from.elapsed() > timeout {
            bail!("{what}: not listable after {timeout:?}: {b} Backups, {p} PVBs");
        }
        if last_report.elapsed() > Duration::from_secs(10) {
            eprintln!("   {what}: {:.0} s: {b} Backups, {p} PVBs", from.elapsed().as_secs_f64());
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A ReadOnly BSL named `default` on the bed's bucket.
async fn create_bsl(bed: &TestBed, client: &kube::Client) -> anyhow::Result<()> {
    let bsls = api(client, "velero.io", "v1", "BackupStorageLocation", Some(VELERO_NS));
    let bsl: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": "default", "namespace": VELERO_NS},
        "spec": {"provider": "aws", "default": true, "accessMode": "ReadOnly",
                 "objectStorage": {"bucket": bed.bucket(), "prefix": PREFIX},
                 "config": {"region": "minio", "s3ForcePathStyle": "true",
                            "s3Url": bed.var("FERRY_TESTBED_S3_ENDPOINT")}}}))?;
    bsls.create(&PostParams::default(), &bsl).await?;
    Ok(())
}

/// Deletes every PVB in the Velero namespace, one by one with `LIMIT_CONCURRENCY` in flight (a DELETE of the
/// collection outlived the apiserver's request timeout at 10k backups while ferry recreated them). When it returns,
/// every PVB that existed is gone; ferry's agent may already be recreating them.
async fn delete_all_pvbs(client: &kube::Client) -> anyhow::Result<()> {
    let api = pvbs(client);
    let names: Vec<String> =
        api.list_metadata(&ListParams::default()).await?.items.into_iter().filter_map(|p| p.metadata.name).collect();
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(names)
        .map(|name| {
            let api = api.clone();
            async move {
                match api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                    Err(e) => Err(e.into()),
                }
            }
        })
        .buffer_unordered(LIMIT_CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    Ok(())
}

/// A child process in its own process group, killed (the whole group: Velero's plugins too) when dropped.
struct Daemon {
    child: Child,
}

impl Daemon {
    fn spawn(command: &mut Command) -> anyhow::Result<Self> {
        use std::os::unix::process::CommandExt;
        Ok(Self { child: command.process_group(0).spawn()? })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU seconds (user + system) of the group: its live members and the children the leader reaped.
    fn cpu_s(&self) -> f64 {
        group_members(self.pid())
            .iter()
            .map(|&p| match p == self.pid() {
                true => proc_status::cpu_seconds_with_children(p),
                false => proc_status::cpu_seconds(p),
            })
            .sum()
    }

    /// Sum of the peak RSS of the group's live members.
    fn peak_rss_mb(&self) -> f64 {
        group_members(self.pid()).iter().map(|&p| proc_status::process_kb(p, "VmHWM:") as f64 / 1024.0).sum()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: signalling the process group this bench created (its leader is our child, not yet reaped).
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return vec![pgid] };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| proc_status::stat_fields(pid).get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid))
        .collect()
}

/// CPU seconds of a cluster's kube-apiserver and etcd (from the bed's pids file).
fn apiserver_cpu(bed: &TestBed, cluster: &str) -> f64 {
    let pids = std::fs::read_to_string(bed.state.path().join("pids")).unwrap_or_default();
    pids.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next()?;
            let pid = words.next()?.parse::<u32>().ok()?;
            (name == format!("kube-apiserver-{cluster}") || name == format!("etcd-{cluster}")).then_some(pid)
        })
        .map(proc_status::cpu_seconds)
        .sum()
}

fn log_file(bed: &TestBed, name: &str) -> anyhow::Result<std::fs::File> {
    Ok(std::fs::File::create(bed.state.path().join("logs").join(format!("{name}.log")))?)
}

/// Velero on cluster `a`: BSL created while it runs, then all objects listable; then the repair case.
async fn run_velero(bed: &TestBed, n: usize, smoke: bool, timeout: Duration) -> anyhow::Result<Vec<Row>> {
    let a = bed.admin("a").await;
    let (mut command, metrics) = velero_server_command(bed, "a", &[]);
    let mut start_velero = || Daemon::spawn(command.stderr(log_file(bed, "velero")?));
    let api_cpu_before = apiserver_cpu(bed, "a");
    let (daemon, t0, how) = if smoke {
        // Velero syncs at its start and then once a minute (a fixed period; a BSL's backupSyncPeriod can only
        // lengthen it). The smoke makes the BSL Available before Velero starts, so the sync at its start counts
        // and the smoke stays short; from Velero's start.
        create_bsl(bed, &a).await?;
        // Velero's BSL CRD has no status subresource: the status is the object's own.
        let bsls = api(&a, "velero.io", "v1", "BackupStorageLocation", Some(VELERO_NS));
        let status = json!({"status": {"phase": "Available"}});
        bsls.patch("default", &PatchParams::default(), &Patch::Merge(&status)).await?;
        let t0 = Instant::now();
        (start_velero()?, t0, "from Velero's start, BSL already Available")
    } else {
        let daemon = start_velero()?;
        // Started: its metrics port answers (controllers are up a moment later; they run before the BSL is
        // created in any case, as on a real cluster).
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(metrics).is_err() {
            if Instant::now() > deadline {
                bail!(
                    "Velero's metrics port {metrics} not open after 60 s; see {}/logs/velero.log",
                    bed.state.path().display()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        let t0 = Instant::now();
        create_bsl(bed, &a).await?;
        (daemon, t0, "from BSL creation")
    };
    let cpu_before = daemon.cpu_s();
    eprintln!("   Velero: waiting for {n} Backups + {} PVBs", n * PVBS_PER_BACKUP);
    let (first, all) =
        wait_visible(&a, t0, timeout + Duration::from_secs(60), "Velero", |b, p| b >= n && p >= n * PVBS_PER_BACKUP)
            .await?;
    let cpu = daemon.cpu_s() - cpu_before;
    let api_cpu = apiserver_cpu(bed, "a") - api_cpu_before;
    let first = first.unwrap_or(all);
    let mut rows = vec![
        Row {
            system: "Velero".into(),
            backups: n,
            objects: n * (1 + PVBS_PER_BACKUP),
            seconds: all,
            cpu_s: Some(cpu),
            peak_rss_mb: Some(daemon.peak_rss_mb()),
            apiserver_cpu_s: Some(api_cpu),
            note: format!("{how}; its first object after {first:.1} s"),
            load: proc_status::load_average(" / "),
        },
        Row {
            system: "Velero, sync only".into(),
            backups: n,
            objects: n * (1 + PVBS_PER_BACKUP),
            seconds: all - first,
            note: "from its first object (without the wait for its once-a-minute sync)".into(),
            load: proc_status::load_average(" / "),
            ..Row::default()
        },
    ];
    if smoke {
        eprintln!("note: the smoke skips Velero's repair case (it needs more than a minute)");
    } else {
        eprintln!("   Velero: PVBs deleted; counting them after {VELERO_REPAIR_WAIT:?}");
        delete_all_pvbs(&a).await?;
        tokio::time::sleep(VELERO_REPAIR_WAIT).await;
        let (b, p) = count(&a).await?;
        rows.push(Row {
            system: "Velero, repair".into(),
            backups: n,
            objects: p,
            seconds: VELERO_REPAIR_WAIT.as_secs_f64(),
            note: format!(
                "PVBs deleted: {p} of {} back after {} s ({b} Backups)",
                n * PVBS_PER_BACKUP,
                VELERO_REPAIR_WAIT.as_secs()
            ),
            load: proc_status::load_average(" / "),
            ..Row::default()
        });
    }
    drop(daemon);
    Ok(rows)
}

/// ferry on cluster `b`: BSL present, coordinator and agent started, then all objects listable; then repair.
/// ferry's coordinator and agent started on cluster `b` (its BSL created first), and when they were started.
async fn start_ferry(bed: &TestBed, b: &kube::Client) -> anyhow::Result<(Daemon, Daemon, Instant)> {
    create_bsl(bed, b).await?;
    let dir = bed.state.path().join("ferry");
    std::fs::create_dir_all(&dir)?;
    bed.write_reader_config(&dir, &[]);
    let t0 = Instant::now();
    let mut coordinator = Daemon::spawn(
        Command::new(FERRY)
            .args(["coordinator", "--metrics-listen", "", "--config"])
            .arg(dir.join("ferry.yaml"))
            .env("AWS_ACCESS_KEY_ID", bed.var("FERRY_TESTBED_S3_ACCESS_KEY"))
            .env("AWS_SECRET_ACCESS_KEY", bed.var("FERRY_TESTBED_S3_SECRET_KEY"))
            .env("FERRY_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(log_file(bed, "ferry-coordinator")?),
    )?;
    let stdout = coordinator.child.stdout.take().context("coordinator stdout")?;
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)?;
    let Some(addr) = line.trim().strip_prefix("listening on ").map(String::from) else {
        bail!("coordinator said {line:?}; see {}/logs/ferry-coordinator.log", bed.state.path().display());
    };
    let agent = Daemon::spawn(
        bed.reader_agent_command(&dir, &addr)
            .args(["--metrics-listen", ""])
            .env("FERRY_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log_file(bed, "ferry-agent")?),
    )?;
    Ok((coordinator, agent, t0))
}

/// A cold start at scale (`FERRY_BENCH_COLD_ONLY=1`, for sizes whose creates would take the bed many minutes,
/// such as 100,000 backups): the first object listable, and when the coordinator has read the location whole
/// (its log line), with both processes' peak RSS so far and how many objects were listable by then.
async fn run_ferry_cold(bed: &TestBed, n: usize, timeout: Duration) -> anyhow::Result<Row> {
    let b = bed.admin("b").await;
    let (coordinator, agent, t0) = start_ferry(bed, &b).await?;
    let (first, _) = wait_visible(&b, t0, timeout, "ferry", |bk, p| bk + p > 0).await?;
    let log = bed.state.path().join("logs/ferry-coordinator.log");
    let loaded = loop {
        if std::fs::read_to_string(&log).is_ok_and(|text| text.contains("location read whole")) {
            break t0.elapsed().as_secs_f64();
        }
        if t0.elapsed() > timeout {
            bail!("the coordinator did not read the location within {timeout:?}; see {}", log.display());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let (backups, pvbs) = count(&b).await?;
    Ok(Row {
        system: "ferry, cold start only".into(),
        backups: n,
        objects: backups + pvbs,
        seconds: loaded,
        cpu_s: Some(coordinator.cpu_s() + agent.cpu_s()),
        peak_rss_mb: Some(coordinator.peak_rss_mb() + agent.peak_rss_mb()),
        apiserver_cpu_s: None,
        note: format!(
            "until the coordinator had read the location whole; first object after {:.1} s; objects = listable by \
             then; coordinator {:.1} s CPU, {:.0} MB; agent {:.1} s CPU, {:.0} MB",
            first.unwrap_or(loaded),
            coordinator.cpu_s(),
            coordinator.peak_rss_mb(),
            agent.cpu_s(),
            agent.peak_rss_mb()
        ),
        load: proc_status::load_average(" / "),
    })
}

async fn run_ferry(bed: &TestBed, n: usize, timeout: Duration) -> anyhow::Result<Vec<Row>> {
    let b = bed.admin("b").await;
    let api_cpu_before = apiserver_cpu(bed, "b");
    let (coordinator, agent, t0) = start_ferry(bed, &b).await?;
    eprintln!("   ferry: waiting for {n} Backups + {} PVBs", n * PVBS_PER_BACKUP);
    let result = wait_visible(&b, t0, timeout, "ferry", |bk, p| bk >= n && p >= n * PVBS_PER_BACKUP).await;
    let (first, all) = result.with_context(|| format!("see {}/logs/ferry-*.log", bed.state.path().display()))?;
    let sample = |what: &str, seconds: f64, objects: usize, note: String, api_cpu: f64| Row {
        system: what.into(),
        backups: n,
        objects,
        seconds,
        cpu_s: Some(coordinator.cpu_s() + agent.cpu_s()),
        peak_rss_mb: Some(coordinator.peak_rss_mb() + agent.peak_rss_mb()),
        apiserver_cpu_s: Some(api_cpu),
        note,
        load: proc_status::load_average(" / "),
    };
    let split = || {
        format!(
            "coordinator {:.1} s CPU, {:.0} MB; agent {:.1} s CPU, {:.0} MB",
            coordinator.cpu_s(),
            coordinator.peak_rss_mb(),
            agent.cpu_s(),
            agent.peak_rss_mb()
        )
    };
    let mut rows = vec![sample(
        "ferry",
        all,
        n * (1 + PVBS_PER_BACKUP),
        format!(
            "from the start of coordinator and agent (BSL present; includes the bucket scan), first object after {:.1} s; {}",
            first.unwrap_or(all),
            split()
        ),
        apiserver_cpu(bed, "b") - api_cpu_before,
    )];

    eprintln!("   ferry: deleting the PVBs, then waiting for the agent to recreate them");
    let cpu_before = coordinator.cpu_s() + agent.cpu_s();
    let api_cpu_before = apiserver_cpu(bed, "b");
    let deleting = Instant::now();
    delete_all_pvbs(&b).await?;
    let deletion = deleting.elapsed().as_secs_f64();
    // From the moment the last old PVB is gone: every PVB counted after it is one ferry made again.
    let t0 = Instant::now();
    let (_, repaired) =
        wait_visible(&b, t0, timeout, "ferry repair", |bk, p| bk >= n && p >= n * PVBS_PER_BACKUP).await?;
    let mut row = sample(
        "ferry, repair",
        repaired,
        n * PVBS_PER_BACKUP,
        format!(
            "PVBs deleted ({deletion:.1} s for the deletes, {LIMIT_CONCURRENCY} in flight; ferry repairs meanwhile), \
             Backups kept: from the last delete to all PVBs back"
        ),
        apiserver_cpu(bed, "b") - api_cpu_before,
    );
    row.cpu_s = row.cpu_s.map(|c| c - cpu_before);
    rows.push(row);
    drop(agent);
    drop(coordinator);
    Ok(rows)
}

/// The apiserver's limit: the bucket's own objects (Backups first, then their PVBs, as ferry's agent orders them
/// by dependency layer) created by this process, `LIMIT_CONCURRENCY` at a time, in namespace `ns`.
async fn run_limit(bed: &TestBed, spec: &FixtureSpec, ns: &str, watched: bool) -> anyhow::Result<Row> {
    let a = bed.admin("a").await;
    let namespaces = api(&a, "", "v1", "Namespace", None);
    if namespaces.get_opt(ns).await?.is_none() {
        let object: DynamicObject =
            serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))?;
        namespaces.create(&PostParams::default(), &object).await?;
    }
    let (mut backup_objects, mut pvb_objects) = (Vec::new(), Vec::new());
    for object in fixture::all_objects(spec) {
        if object.key.ends_with("/velero-backup.json") {
            backup_objects.push(serde_json::from_slice::<Value>(&object.body)?);
        } else if object.key.ends_with("-podvolumebackups.json.gz") {
            let mut text = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&object.body[..]), &mut text)?;
            let list: Option<Vec<Value>> = serde_json::from_slice(&text)?;
            for mut pvb in list.unwrap_or_default() {
                // The PVB file omits them.
                pvb["apiVersion"] = json!("velero.io/v1");
                pvb["kind"] = json!("PodVolumeBackup");
                pvb_objects.push(pvb);
            }
        }
    }
    let objects = backup_objects.len() + pvb_objects.len();
    for object in backup_objects.iter_mut().chain(pvb_objects.iter_mut()) {
        strip_server_fields(object);
        object["metadata"]["namespace"] = json!(ns);
    }
    for backup in &mut backup_objects {
        // As ferry and Velero do: a Backup's Schedule is not on this cluster (the garbage collector would delete
        // the Backup), a PVB's owner is the local Backup (its UID known once created).
        if let Some(meta) = backup.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("ownerReferences");
        }
    }
    let backup_api = api(&a, "velero.io", "v1", "Backup", Some(ns));
    let pvb_api = api(&a, "velero.io", "v1", "PodVolumeBackup", Some(ns));
    let watchers = watched.then(|| {
        let watch = |api: Api<DynamicObject>| {
            tokio::spawn(async move {
                let mut events = kube::runtime::watcher(api, kube::runtime::watcher::Config::default()).boxed();
                while events.next().await.is_some() {}
            })
        };
        [watch(backup_api.clone()), watch(pvb_api.clone())]
    });
    let api_cpu_before = apiserver_cpu(bed, "a");
    let t0 = Instant::now();
    let created: Vec<anyhow::Result<(String, String)>> = futures::stream::iter(backup_objects)
        .map(|object| create_object(&backup_api, object))
        .buffer_unordered(LIMIT_CONCURRENCY)
        .collect()
        .await;
    let uids: std::collections::HashMap<String, String> = created.into_iter().collect::<anyhow::Result<_>>()?;
    for pvb in &mut pvb_objects {
        if let Some(Value::Array(refs)) = pvb.pointer_mut("/metadata/ownerReferences") {
            for r in refs {
                let uid = r["name"].as_str().and_then(|name| uids.get(name)).cloned().unwrap_or_default();
                r["uid"] = json!(uid);
            }
        }
    }
    let created: Vec<anyhow::Result<(String, String)>> = futures::stream::iter(pvb_objects)
        .map(|object| create_object(&pvb_api, object))
        .buffer_unordered(LIMIT_CONCURRENCY)
        .collect()
        .await;
    created.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    let seconds = t0.elapsed().as_secs_f64();
    // Created is persisted; listing may lag a moment behind (the watch cache).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listed = count_of(&backup_api).await? + count_of(&pvb_api).await?;
        if listed == objects {
            break;
        }
        if Instant::now() > deadline {
            bail!("apiserver limit: {listed} objects listable, {objects} created");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let apiserver_cpu_s = Some(apiserver_cpu(bed, "a") - api_cpu_before);
    for watcher in watchers.into_iter().flatten() {
        watcher.abort();
    }
    let (system, watch_note) = match watched {
        true => ("apiserver limit, watched", "; one watch on Backups and one on PVBs of that namespace meanwhile"),
        false => ("apiserver limit", ""),
    };
    Ok(Row {
        system: system.into(),
        backups: spec.backups,
        objects,
        seconds,
        apiserver_cpu_s,
        note: format!(
            "the bucket's objects, {LIMIT_CONCURRENCY} creates in flight from one kube-rs client (admin){watch_note}"
        ),
        load: proc_status::load_average(" / "),
        ..Row::default()
    })
}

/// Creates `object`; (name, UID).
async fn create_object(api: &Api<DynamicObject>, object: Value) -> anyhow::Result<(String, String)> {
    let object: DynamicObject = serde_json::from_value(object)?;
    let created = api.create(&PostParams::default(), &object).await?;
    Ok((created.metadata.name.unwrap_or_default(), created.metadata.uid.unwrap_or_default()))
}

/// Removes what the server sets (a create must not carry them).
fn strip_server_fields(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in ["uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"] {
            meta.remove(key);
        }
    }
}
