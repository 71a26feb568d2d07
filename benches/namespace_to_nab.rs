//! Namespace appears → NonAdminBackup listable, with 10,000 NAC backups in the bucket (target: docs/design.md
//! §7). On the real test bed (kube-apiserver with Velero's CRDs and the NonAdminBackup CRD, MinIO): `ferry coordinator` and one
//! `ferry agent` (cluster `b`, over mTLS) as the binaries cargo built for this target — release under
//! `cargo bench`. Tenant namespaces are created one at a time; for each, the time from the create call to its
//! NAB (and its Velero Backup) arriving on a watch started beforehand, and the CPU the coordinator and the agent
//! spent on that event. Then, where a build of OADP's non-admin controller is given (`FERRY_BENCH_NAC`, built by
//! `e2e/bench-namespace-nab`), the same measurement for NAC's own NonAdminBackup sync on the same apiserver.
//! Prints a markdown table (record results in docs/performance.md).
//!
//! `cargo test --all-targets` runs a smoke version (50 backups, 3 namespaces, no NAC) that fails if a NAB never
//! appears; `cargo bench --bench namespace_to_nab` runs the full size.

#[path = "../tests/e2e_support/mod.rs"]
mod e2e;
#[path = "support/proc_status.rs"]
mod proc_status;

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e::{FERRY, Ferry, TestBed, VELERO_NS};
use ferry::fixture::{self, FixtureSpec};
use ferry::model::labels;
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};

/// The BSL on cluster `b` that reads the bucket (default, so NAC's sync watches it too).
const BSL: &str = "dr-bsl";
/// Longest wait for one namespace's NAB before the run fails.
const WAIT: Duration = Duration::from_secs(60);

struct Size {
    backups: usize,
    /// Namespaces created for ferry, one at a time (`lat-i`).
    ferry_runs: usize,
    /// Pause after each NAB so the follow-up work (status, replan of the new inventory) is in that event's CPU.
    settle: Duration,
    /// Namespaces created for NAC's sync (`nac-i`), spread over one sync period.
    nac_runs: usize,
}

fn main() -> anyhow::Result<()> {
    let smoke = !std::env::args().any(|a| a == "--bench");
    let size = if smoke {
        Size { backups: 50, ferry_runs: 3, settle: Duration::from_millis(500), nac_runs: 0 }
    } else {
        Size {
            backups: env_usize("FERRY_BENCH_BACKUPS", 10_000),
            ferry_runs: env_usize("FERRY_BENCH_NAMESPACES", 40),
            settle: Duration::from_secs(2),
            nac_runs: env_usize("FERRY_BENCH_NAC_NAMESPACES", 6),
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(bench(&size, smoke))
}

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Latencies and CPU of one syncer over its namespaces.
struct Row {
    syncer: String,
    nab: Vec<Duration>,
    backup: Vec<Duration>,
    /// CPU seconds per namespace event, per process (name, seconds).
    cpu: Vec<(String, f64)>,
    load_before: String,
    load_after: String,
    /// A sentence for under the table.
    note: String,
}

impl Row {
    /// A row for `syncer`, its load taken now.
    fn starting(syncer: String) -> Self {
        Row {
            syncer,
            nab: Vec::new(),
            backup: Vec::new(),
            cpu: Vec::new(),
            load_before: proc_status::load_average(" "),
            load_after: String::new(),
            note: String::new(),
        }
    }
}

async fn bench(size: &Size, smoke: bool) -> anyhow::Result<()> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let started = Instant::now();
    let bed = TestBed::up();
    let b = bed.admin("b").await;
    e2e::create_bsl(&bed, &b, BSL).await;

    let ferry_ns: Vec<String> = (0..size.ferry_runs).map(|i| format!("lat-{i}")).collect();
    let nac_ns: Vec<String> = (0..size.nac_runs).map(|i| format!("nac-{i}")).collect();
    // One NAC backup per tenant namespace; all but the measured ones are for namespaces that never appear.
    let idle_tenants = size.backups.saturating_sub(ferry_ns.len() + nac_ns.len());
    let mut tenants: Vec<String> = (0..idle_tenants).map(|i| format!("idle-{i}")).collect();
    tenants.extend(ferry_ns.iter().cloned());
    tenants.extend(nac_ns.iter().cloned());
    let spec = FixtureSpec {
        backups: tenants.len(),
        tenant_namespaces: tenants,
        nac_every: 1,
        pvbs_per_backup: 1,
        tarballs: false,
        resource_lists: false,
        seed: 16,
        ..FixtureSpec::default()
    };
    let t = Instant::now();
    fixture::write(&bed.store(), &spec, 32).await?;
    eprintln!("== {} NAC backups written to MinIO in {:.1} s", spec.backups, t.elapsed().as_secs_f64());

    // Watches started before any namespace: the first time each tenant namespace's NAB / Backup is seen.
    // Declared after the bed, so dropped (watches closed) before it: open watches keep kube-apiserver from
    // stopping within down.sh's grace.
    let (nabs_seen, _nab_watch) = watch_first_seen(e2e::nabs(&b, None), |o| o.metadata.namespace.clone());
    let (backups_seen, _backup_watch) = watch_first_seen(e2e::backups(&b), |o| {
        o.metadata.annotations.as_ref().and_then(|a| a.get(labels::NAB_ORIGIN_NAMESPACE)).cloned()
    });

    let mut rows = Vec::new();
    let ferry = start_ferry(&bed)?;
    let coordinator_pid = ferry.coordinator.as_ref().map(Child::id).unwrap_or(0);
    let agent_pid = ferry.agents.get("b").map(Child::id).unwrap_or(0);
    let t = Instant::now();
    // `ferry status` is a process: polled once a second, not at wait_for's pace.
    let loaded = e2e::poll(Duration::from_secs(600), || async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let status = ferry.status(None);
        let backups = status["locations"][0]["backups"].as_u64().unwrap_or(0) as usize;
        let connected = status["clusters"][0]["state"] == "connected";
        (backups >= spec.backups && connected).then_some(())
    })
    .await;
    anyhow::ensure!(loaded.is_some(), "the catalog never held {} backups{}", spec.backups, e2e::logs_hint(&ferry));
    eprintln!("== catalog holds {} backups, agent connected, after {:.1} s", spec.backups, t.elapsed().as_secs_f64());
    // The agent's first desired set (nothing to apply: no tenant namespace exists yet) and the startup CPU settle;
    // then the idle CPU rate (heartbeats, watches), to read the per-event figures against.
    tokio::time::sleep(if smoke { Duration::from_secs(1) } else { Duration::from_secs(10) }).await;
    let idle_window = if smoke { Duration::from_secs(1) } else { Duration::from_secs(10) };
    let idle_start = (proc_status::cpu_seconds(coordinator_pid), proc_status::cpu_seconds(agent_pid));
    tokio::time::sleep(idle_window).await;
    let idle = [
        ("coordinator", proc_status::cpu_seconds(coordinator_pid) - idle_start.0),
        ("agent", proc_status::cpu_seconds(agent_pid) - idle_start.1),
    ]
    .map(|(name, s)| format!("{name} {:.1} ms/s", s * 1000.0 / idle_window.as_secs_f64()));

    // The bench is built with the same profile as the binary it runs (test: debug, bench: release).
    let mut row = Row::starting(format!(
        "ferry ({}{})",
        if smoke { "smoke, " } else { "" },
        if cfg!(debug_assertions) { "debug build" } else { "release build" }
    ));
    let cpu_start = (proc_status::cpu_seconds(coordinator_pid), proc_status::cpu_seconds(agent_pid));
    let passes_before = recompute_passes(&ferry.log_text("coordinator")).len();
    for ns in &ferry_ns {
        let created = Instant::now();
        e2e::create_namespace(&b, ns).await;
        let Some(nab_at) = wait_for(WAIT, || seen(&nabs_seen, ns)).await else {
            anyhow::bail!("no NAB in namespace {ns} after {WAIT:?}{}", e2e::logs_hint(&ferry));
        };
        // The Backup is applied before its NAB, but on another watch: its event may trail the NAB's a little.
        let Some(backup_at) = wait_for(Duration::from_secs(5), || seen(&backups_seen, ns)).await else {
            anyhow::bail!("a NAB but no Velero Backup for namespace {ns}{}", e2e::logs_hint(&ferry));
        };
        // Listable, not only watched: a plain list finds it.
        let listed = e2e::nabs(&b, Some(ns)).list(&ListParams::default()).await?;
        anyhow::ensure!(!listed.items.is_empty(), "the watch saw a NAB in {ns} that a list does not find");
        row.nab.push(nab_at.duration_since(created));
        row.backup.push(backup_at.saturating_duration_since(created));
        eprintln!("   {ns}: NAB after {} ms", nab_at.duration_since(created).as_millis());
        tokio::time::sleep(size.settle).await;
    }
    let runs = ferry_ns.len().max(1) as f64;
    row.cpu.push(("coordinator".into(), (proc_status::cpu_seconds(coordinator_pid) - cpu_start.0) / runs));
    row.cpu.push(("agent".into(), (proc_status::cpu_seconds(agent_pid) - cpu_start.1) / runs));
    row.load_after = proc_status::load_average(" ");
    rows.push(row);
    // Where the time goes, in part: the coordinator's own measure of each replan (all backups, this cluster).
    let mut passes: Vec<u64> = recompute_passes(&ferry.log_text("coordinator")).split_off(passes_before);
    passes.sort_unstable();
    let replan = format!(
        "coordinator replan of {} backups, {} passes during the runs: p50 {} ms, max {} ms",
        spec.backups,
        passes.len(),
        passes.get(passes.len() / 2).copied().unwrap_or(0),
        passes.last().copied().unwrap_or(0)
    );
    eprintln!("== {replan}");
    if let Some(keep) = std::env::var_os("FERRY_BENCH_KEEP_LOGS") {
        for name in ["coordinator", "agent-b"] {
            let _ = std::fs::write(Path::new(&keep).join(format!("{name}.log")), ferry.log_text(name));
        }
    }
    drop(ferry);

    if !smoke {
        match nac_paths() {
            Some((binary, crds)) => rows.push(nac_run(&bed, &b, &binary, &crds, &spec, &nac_ns, &nabs_seen).await?),
            None => eprintln!("== NAC not measured: FERRY_BENCH_NAC / FERRY_BENCH_NAC_CRDS not set"),
        }
    }

    println!();
    println!(
        "| syncer | backups in bucket | namespaces | NAB listable p50 (ms) | p99 (ms) | max (ms) | Velero Backup p50 / p99 (ms) | CPU per namespace event (ms) | load average before → after |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|---|---|");
    for row in &rows {
        println!("{}", format_row(row, spec.backups));
    }
    println!(
        "\nLatency is from just before the namespace create call to the object's first event on a watch started \
         beforehand (a list then finds it). CPU per namespace event is user + system time over the runs (each run \
         includes {} ms of settling after its NAB) divided by the runs; ferry idle: {}; {replan} (debounce before \
         each: 200 ms). {} cores; whole run {:.0} s.",
        size.settle.as_millis(),
        idle.join(", "),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        started.elapsed().as_secs_f64()
    );
    for row in rows.iter().filter(|r| !r.note.is_empty()) {
        println!("{}.", row.note);
    }
    Ok(())
}

fn format_row(row: &Row, backups: usize) -> String {
    let mut nab = row.nab.clone();
    nab.sort();
    let mut backup = row.backup.clone();
    backup.sort();
    let ms = |d: Duration| d.as_millis();
    let cpu: Vec<String> = row.cpu.iter().map(|(name, s)| format!("{name} {:.0}", s * 1000.0)).collect();
    let backup = if backup.is_empty() {
        "— (before the namespace)".to_string()
    } else {
        format!("{} / {}", ms(proc_status::percentile(&backup, 0.5)), ms(proc_status::percentile(&backup, 0.99)))
    };
    format!(
        "| {} | {backups} | {} | {} | {} | {} | {backup} | {} | {} → {} |",
        row.syncer,
        nab.len(),
        ms(proc_status::percentile(&nab, 0.5)),
        ms(proc_status::percentile(&nab, 0.99)),
        ms(nab.last().copied().unwrap_or_default()),
        cpu.join(", "),
        row.load_before,
        row.load_after,
    )
}

type Seen = Arc<Mutex<HashMap<String, Instant>>>;

/// Kills its process when dropped (NAC: also on an early return).
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Watches `api` from now on and records when an object with each `key` was first seen, until the guard drops.
fn watch_first_seen(api: Api<DynamicObject>, key: fn(&DynamicObject) -> Option<String>) -> (Seen, AbortOnDrop) {
    let seen = Seen::default();
    let out = seen.clone();
    let task = tokio::spawn(async move {
        let mut events = watcher::watcher(api, watcher::Config::default()).default_backoff().boxed();
        while let Some(event) = events.next().await {
            let at = Instant::now();
            if let Ok(Event::Apply(object) | Event::InitApply(object)) = event
                && let Some(k) = key(&object)
                && let Ok(mut map) = out.lock()
            {
                map.entry(k).or_insert(at);
            }
        }
    });
    (seen, AbortOnDrop(task))
}

fn seen(map: &Seen, key: &str) -> Option<Instant> {
    map.lock().ok().and_then(|m| m.get(key).copied())
}

/// Polls `check` every 10 ms until it returns `Some` or `timeout` passes.
async fn wait_for<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// PKI, config (one location on the bed's MinIO, cluster `b` reading it through [`BSL`]; coordinator defaults
/// otherwise: debounce 200 ms, catalog refresh 30 s), the coordinator and cluster `b`'s agent.
fn start_ferry(bed: &TestBed) -> anyhow::Result<Ferry> {
    let dir = tempfile::Builder::new().prefix("ferry-bench-nab-").tempdir()?;
    let config_path = bed.write_reader_config(dir.path(), &["admin"]);
    let logs = dir.path().to_path_buf();
    let log = |name: &str| std::fs::File::create(logs.join(format!("{name}.log")));
    let mut coordinator = Command::new(FERRY)
        .args(["coordinator", "--metrics-listen", "", "--config"])
        .arg(&config_path)
        .env("AWS_ACCESS_KEY_ID", bed.var("FERRY_TESTBED_S3_ACCESS_KEY"))
        .env("AWS_SECRET_ACCESS_KEY", bed.var("FERRY_TESTBED_S3_SECRET_KEY"))
        // Debug for the coordinator's "recompute pass … elapsed_ms" (one line per pass).
        .env("FERRY_LOG", "info,ferry::coordinator=debug")
        .stdout(Stdio::piped())
        .stderr(log("coordinator")?)
        .spawn()?;
    let line = first_line(&mut coordinator);
    let addr = line.as_deref().unwrap_or_default().strip_prefix("listening on ").unwrap_or_default().to_string();
    let config_dir = dir.path().to_path_buf();
    // Held from here, so that an early return stops what was started (Ferry kills its processes when dropped).
    let mut ferry = Ferry {
        dir,
        coordinator: Some(coordinator),
        addr: addr.clone(),
        agents: HashMap::new(),
        agent_metrics: HashMap::new(),
        status_page: None,
        status_page_listen: None,
        agent_args: Vec::new(),
    };
    anyhow::ensure!(!addr.is_empty(), "coordinator said {line:?}");
    let mut agent = bed
        .reader_agent_command(&config_dir, &addr)
        .args(["--metrics-listen", "127.0.0.1:0"])
        // Info: at debug the agent logs one "apply" line per held item per pass (~10k lines a pass at full size,
        // ~50 ms more agent CPU per event); FERRY_BENCH_AGENT_LOG=debug to split a slow run by those lines.
        .env(
            "FERRY_LOG",
            std::env::var("FERRY_BENCH_AGENT_LOG").map_or("info".into(), |l| format!("info,ferry::agent={l}")),
        )
        .stdout(Stdio::piped())
        .stderr(log("agent-b")?)
        .spawn()?;
    let line = first_line(&mut agent);
    ferry.agents.insert("b".to_string(), agent);
    let metrics = line?.strip_prefix("metrics on ").unwrap_or_default().to_string();
    ferry.agent_metrics.insert("b".to_string(), metrics);
    Ok(ferry)
}

/// `elapsed_ms` of each "recompute pass" line in a coordinator log.
fn recompute_passes(log: &str) -> Vec<u64> {
    log.lines()
        .filter(|l| l.contains("recompute pass"))
        .filter_map(|l| l.split_once("elapsed_ms=").and_then(|(_, v)| v.split_whitespace().next()?.parse().ok()))
        .collect()
}

fn first_line(child: &mut Child) -> anyhow::Result<String> {
    let stdout = child.stdout.take().ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line)?;
    Ok(line.trim().to_string())
}

/// NAC's binary and a directory of the CRDs it needs beyond the bed's (its own and the DPA's).
fn nac_paths() -> Option<(PathBuf, PathBuf)> {
    let binary = PathBuf::from(std::env::var_os("FERRY_BENCH_NAC")?);
    let crds = PathBuf::from(std::env::var_os("FERRY_BENCH_NAC_CRDS")?);
    Some((binary, crds))
}

/// NAC's own sync on the same apiserver, after ferry stopped: its CRDs and a DPA with `nonAdmin` defaults
/// (backupSyncPeriod 2 m, garbageCollectionPeriod 24 h), NAC started with an admin kubeconfig outside a pod, then
/// the bucket's backups as Velero Backup CRs in the Velero namespace (what Velero's own BSL sync would have
/// created: NAC never reads the bucket), then the `nac-i` namespaces, spread over one sync period.
async fn nac_run(
    bed: &TestBed,
    b: &kube::Client,
    binary: &Path,
    crds: &Path,
    spec: &FixtureSpec,
    namespaces: &[String],
    nabs_seen: &Seen,
) -> anyhow::Result<Row> {
    // NAC's default (DPA spec.nonAdmin.backupSyncPeriod unset: 2 m); shorter only to try the bench out.
    let period = Duration::from_secs(env_usize("FERRY_BENCH_NAC_SYNC_SECONDS", 120) as u64);
    install_crds(b, crds).await?;
    let dpas = e2e::api(b, "oadp.openshift.io", "v1alpha1", "DataProtectionApplication", Some(VELERO_NS));
    let mut non_admin = json!({"enable": true});
    if period != Duration::from_secs(120) {
        non_admin["backupSyncPeriod"] = json!(format!("{}s", period.as_secs()));
    }
    e2e::create(
        &dpas,
        json!({"apiVersion": "oadp.openshift.io/v1alpha1", "kind": "DataProtectionApplication",
               "metadata": {"name": "bench", "namespace": VELERO_NS},
               "spec": {"configuration": {"velero": {}}, "nonAdmin": non_admin}}),
    )
    .await;
    let log = std::fs::File::create(bed.state.path().join("logs/nac.log"))?;
    let nac = Command::new(binary)
        .arg("--kubeconfig")
        .arg(bed.admin_kubeconfig("b"))
        .args(["--metrics-bind-address", "0", "--health-probe-bind-address", "0"])
        .env("WATCH_NAMESPACE", VELERO_NS)
        // logrus debug: the synchronizer logs each sweep at V(1).
        .env("LOG_LEVEL", "5")
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    let nac_pid = nac.id();
    let _nac = KillOnDrop(nac);
    let started = Instant::now();
    let nac_log = || std::fs::read_to_string(bed.state.path().join("logs/nac.log")).unwrap_or_default();
    // Both of NAC's periodic controllers run once at its start: the first sweep, and the garbage collector, which
    // deletes NAC-labelled Backup CRs without a NAB — so the bucket's Backup CRs go in only after it ran.
    let up = wait_for(Duration::from_secs(60), || {
        let log = nac_log();
        (log.contains("NonAdminBackup Synchronization exit") && log.contains("Garbage Collector Reconcile end"))
            .then_some(())
    })
    .await;
    if up.is_none() {
        anyhow::bail!("NAC's first sync sweep never ran; its log:\n{}", nac_log());
    }
    eprintln!("== NAC up, first sweep and garbage collection after {:.1} s", started.elapsed().as_secs_f64());

    // The Backup CRs Velero's sync would create on this cluster (storage location = this cluster's BSL).
    let t = Instant::now();
    let backups = e2e::backups(b);
    let bodies: Vec<Value> = (0..spec.backups)
        .flat_map(|i| fixture::objects_for(spec, i))
        .filter(|o| o.key.ends_with("/velero-backup.json"))
        .filter_map(|o| serde_json::from_slice::<Value>(&o.body).ok())
        .map(velero_synced)
        .collect();
    let made: Vec<bool> = futures::stream::iter(bodies)
        .map(|body| {
            let backups = backups.clone();
            async move {
                let Ok(object) = serde_json::from_value::<DynamicObject>(body) else { return false };
                // 409: ferry made it for its namespace; 429 (API Priority and Fairness): again, a little later.
                for attempt in 1..=10u32 {
                    match backups.create(&PostParams::default(), &object).await {
                        Ok(_) => return true,
                        Err(kube::Error::Api(e)) if e.code == 409 => return true,
                        Err(kube::Error::Api(e)) if e.code == 429 => {
                            tokio::time::sleep(Duration::from_millis(100) * attempt).await
                        }
                        Err(_) => return false,
                    }
                }
                false
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let failed = made.iter().filter(|ok| !**ok).count();
    anyhow::ensure!(failed == 0, "{failed} Velero Backup CRs could not be created");
    eprintln!("== {} Velero Backup CRs in {VELERO_NS} in {:.1} s", made.len(), t.elapsed().as_secs_f64());

    let mut row = Row::starting(format!("NAC sync (backupSyncPeriod {} s)", period.as_secs()));
    let cpu_start = proc_status::cpu_seconds(nac_pid);
    let sweeps_before = nac_log().matches("NonAdminBackup Synchronization exit").count();
    let gap = period / namespaces.len().max(1) as u32;
    let mut created = Vec::new();
    for ns in namespaces {
        created.push((ns.clone(), Instant::now()));
        e2e::create_namespace(b, ns).await;
        eprintln!("   {ns} created");
        tokio::time::sleep(gap).await;
    }
    for (ns, at) in &created {
        let Some(nab_at) = wait_for(period + WAIT, || seen(nabs_seen, ns)).await else {
            anyhow::bail!("NAC made no NAB in {ns}; its log:\n{}", tail(&nac_log(), 30));
        };
        eprintln!("   {ns}: NAB after {} ms", nab_at.duration_since(*at).as_millis());
        // No Backup latency: the Backup CR existed before the namespace (Velero's sync put it there).
        row.nab.push(nab_at.duration_since(*at));
    }
    let cpu = proc_status::cpu_seconds(nac_pid) - cpu_start;
    row.cpu.push(("NAC".into(), cpu / namespaces.len().max(1) as f64));
    row.load_after = proc_status::load_average(" ");
    let sweeps = nac_log().matches("NonAdminBackup Synchronization exit").count() - sweeps_before;
    row.note = format!(
        "NAC: {sweeps} sync sweeps over {} Velero Backup CRs during its runs, {:.0} ms CPU per sweep (all its \
         controllers' CPU over the window, divided by the sweeps)",
        spec.backups,
        cpu * 1000.0 / sweeps.max(1) as f64
    );
    eprintln!("== {}", row.note);
    Ok(row)
}

/// `velero-backup.json` as Velero's backup sync turns it into a Backup CR on this cluster.
fn velero_synced(mut backup: Value) -> Value {
    if let Some(meta) = backup["metadata"].as_object_mut() {
        for field in ["uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"] {
            meta.remove(field);
        }
    }
    backup["metadata"]["namespace"] = json!(VELERO_NS);
    backup["metadata"]["labels"][labels::VELERO_STORAGE_LOCATION] = json!(BSL);
    backup["spec"]["storageLocation"] = json!(BSL);
    backup
}

/// Applies every CRD in `dir` that the bed does not already serve and waits until each is Established.
async fn install_crds(client: &kube::Client, dir: &Path) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let crd: CustomResourceDefinition = serde_saphyr::from_str(&std::fs::read_to_string(&path)?)?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        if crds.get_opt(&name).await?.is_some() {
            continue;
        }
        crds.patch(&name, &PatchParams::apply("ferry-bench").force(), &Patch::Apply(&crd)).await?;
        names.push(name);
    }
    for name in &names {
        let established = e2e::poll(Duration::from_secs(30), || async {
            let crd = crds.get_opt(name).await.ok().flatten()?;
            let conditions = crd.status?.conditions?;
            conditions.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
        })
        .await;
        anyhow::ensure!(established.is_some(), "CRD {name} not Established");
    }
    eprintln!("== CRDs installed for NAC: {}", names.join(", "));
    Ok(())
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
