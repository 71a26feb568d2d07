//! Federation benchmark (not a timed test): one `ferry coordinator` process and N concurrent agent streams
//! from this process over loopback with mTLS (one connection and certificate per agent), each publishing a
//! snapshot of ~1k objects. Measures the time until every agent's snapshot is accepted and planned (its first
//! DesiredSet arrived), p50/p99 of DesiredSet delivery after a backup lands in the bucket, and the
//! coordinator's peak RSS and CPU time. Run with `e2e/bench-federation` (agents from `FERRY_BENCH_AGENTS`,
//! default 1000); `cargo test --all-targets` runs a smoke version with a few agents.

#[path = "support/proc_status.rs"]
mod proc_status;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use ferry::agent::client::{AgentClient, AgentConfig};
use ferry::fixture::{self, FixtureSpec};
use ferry::grpc::backoff::Backoff;
use ferry::grpc::certs::{self, CertsSpec, Validity};
use ferry::grpc::convert::{inventory_item, watched_types};
use ferry::grpc::proto::{InventoryItem, ResourceType};
use ferry::grpc::set_delta::DESIRED_SET_DELTAS;
use ferry::grpc::tls::{TlsFiles, client_tls_config};
use ferry::model::BackupPhase;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");
const TD: &str = "ferry.local";
/// Objects per agent snapshot.
const OBJECTS: usize = 1000;
/// Backups in the bucket.
const BUCKET_BACKUPS: usize = 100;
/// Catalog changes measured (each is delivered to every agent).
const CHANGES: usize = 3;
const REFRESH: Duration = Duration::from_millis(250);

/// What the run turns on: the coordinator's scaling changes (shared templates, deltas; docs/performance.md), so
/// that before and after are measured side by side.
#[derive(Clone, Copy)]
struct Variant {
    /// Objects built once per pass for all clusters (`coordinator.shareTemplates`), not per cluster.
    share: bool,
    /// Agents announce `desired-set-deltas-v1`, so a change reaches them as a delta, not the whole set.
    deltas: bool,
}

impl Variant {
    fn label(self) -> &'static str {
        match (self.share, self.deltas) {
            (false, false) => "objects per cluster, whole sets",
            (true, false) => "objects once per pass, whole sets",
            (true, true) => "objects once per pass, deltas",
            (false, true) => "objects per cluster, deltas",
        }
    }
}

/// The measured numbers of one run.
struct Measured {
    variant: Variant,
    agents: usize,
    objects: usize,
    accept_all: Duration,
    reconnects: u64,
    latencies: Vec<Duration>,
    /// Idle, connected (when every agent holds its first set), settled (10 s later), peak.
    rss_kb: (u64, u64, u64, u64),
    cpu_accept: f64,
    cpu_changes: f64,
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let smoke = !std::env::args().any(|a| a == "--bench");
    // Agent counts (comma-separated): every variant at the largest, the default variant also at the others (for
    // delivery latency by agent count).
    let counts: Vec<usize> = match smoke {
        true => vec![4],
        false => std::env::var("FERRY_BENCH_AGENTS")
            .unwrap_or_else(|_| "1000".into())
            .split(',')
            .filter_map(|v| v.trim().parse().ok())
            .collect(),
    };
    let largest = counts.iter().copied().max().unwrap_or(1000);
    let every = [
        Variant { share: false, deltas: false },
        Variant { share: true, deltas: false },
        Variant { share: true, deltas: true },
    ];
    // `FERRY_BENCH_VARIANTS=deltas` (for profiling one variant): the variants whose label contains any of these.
    let wanted = std::env::var("FERRY_BENCH_VARIANTS").unwrap_or_default();
    let every: Vec<Variant> = every
        .into_iter()
        .filter(|v| wanted.is_empty() || wanted.split(',').any(|w| v.label().contains(w.trim())))
        .collect();
    let mut runs = Vec::new();
    for &agents in counts.iter().filter(|&&n| n != largest) {
        runs.push(runtime.block_on(bench(Variant { share: true, deltas: true }, agents))?);
    }
    for variant in every {
        runs.push(runtime.block_on(bench(variant, largest))?);
    }
    if smoke {
        // The smoke proves the delta path delivers: the full run's numbers come from `cargo bench`.
        anyhow::ensure!(
            runs.iter().all(|r| r.latencies.len() == CHANGES * r.agents),
            "every change reached every agent"
        );
    }
    println!();
    println!(
        "| variant | agents | objects/agent | accept all snapshots (s) | reconnects | delivery p50 (ms) | delivery p99 (ms) | delivery max (ms) | coordinator RSS idle / connected / settled / peak (MB) | coordinator CPU: accept / per change (s) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---|---|");
    for run in &runs {
        println!("{}", row(run));
    }
    if let Ok(path) = std::env::var("FERRY_BENCH_CSV") {
        let mut csv = String::from("variant,agents,p50_ms,p99_ms,cpu_per_change_s,rss_settled_mb\n");
        for run in &runs {
            csv.push_str(&format!(
                "\"{}\",{},{},{},{:.3},{:.0}\n",
                run.variant.label(),
                run.agents,
                proc_status::percentile(&run.latencies, 0.5).as_millis(),
                proc_status::percentile(&run.latencies, 0.99).as_millis(),
                run.cpu_changes / CHANGES as f64,
                run.rss_kb.2 as f64 / 1024.0
            ));
        }
        std::fs::write(&path, csv)?;
    }
    println!(
        "\nDelivery latency is from the write of velero-backup.json to the agent holding the new set; it includes \
         the catalog refresh interval ({} ms) and the debounce (200 ms).",
        REFRESH.as_millis()
    );
    Ok(())
}

/// The inventory of one cluster: its BSL on the shared bucket, namespaces and Backups (1k objects in all).
fn inventory() -> Vec<(ResourceType, Vec<InventoryItem>)> {
    let mut by_kind: Vec<(ResourceType, Vec<InventoryItem>)> =
        watched_types().into_iter().map(|t| (t, Vec::new())).collect();
    let mut push = |kind: &str, value: serde_json::Value| {
        let slot = by_kind.iter_mut().find(|(t, _)| t.kind == kind).map(|(_, items)| items);
        if let Some(items) = slot {
            items.push(inventory_item(kind, &value));
        }
    };
    let spec = FixtureSpec::default();
    push(
        "BackupStorageLocation",
        json!({"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
               "metadata": {"name": "default", "namespace": "velero", "uid": "bsl-uid"},
               "spec": {"provider": "aws", "accessMode": "ReadOnly", "objectStorage": {"bucket": "bench", "prefix": spec.prefix}},
               "status": {"phase": "Available"}}),
    );
    // As an API server returns them: a UID (36 characters) and a resourceVersion on every object.
    for i in 0..OBJECTS / 2 {
        let name = format!("team-{i}");
        push(
            "Namespace",
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": name, "uid": format!("5f0c9a1e-3b7d-4c2a-9e8f-{i:012}"),
                                "resourceVersion": format!("{}", 200_000 + i),
                                "labels": {"kubernetes.io/metadata.name": name}},
                   "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
        );
    }
    for i in 0..OBJECTS - 1 - OBJECTS / 2 {
        // The fixture's UID is already a realistic one; the resourceVersion is the API server's.
        let mut backup = fixture::admin_backup_json(&format!("local-{i}"), BackupPhase::Completed, "default");
        backup["metadata"]["namespace"] = json!("velero");
        backup["metadata"]["resourceVersion"] = json!(format!("{}", 100_000 + i));
        push("Backup", backup);
    }
    by_kind
}

fn row(run: &Measured) -> String {
    format!(
        "| {} | {} | {} | {:.2} | {} | {} | {} | {} | {:.0} / {:.0} / {:.0} / {:.0} | {:.1} / {:.2} |",
        run.variant.label(),
        run.agents,
        run.objects,
        run.accept_all.as_secs_f64(),
        run.reconnects,
        proc_status::percentile(&run.latencies, 0.5).as_millis(),
        proc_status::percentile(&run.latencies, 0.99).as_millis(),
        run.latencies.last().copied().unwrap_or_default().as_millis(),
        run.rss_kb.0 as f64 / 1024.0,
        run.rss_kb.1 as f64 / 1024.0,
        run.rss_kb.2 as f64 / 1024.0,
        run.rss_kb.3 as f64 / 1024.0,
        run.cpu_accept,
        run.cpu_changes / CHANGES as f64,
    )
}

/// One run of `variant` with `agents` agent streams.
async fn bench(variant: Variant, agents: usize) -> anyhow::Result<Measured> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let share = variant.share;
    let work = tempfile::tempdir()?;
    let dir = work.path();
    let clusters: Vec<String> = (0..agents).map(|i| format!("agent-{i:04}")).collect();
    eprintln!("== PKI for {agents} agents");
    certs::write_all(&CertsSpec {
        out: dir.join("pki"),
        trust_domain: TD.into(),
        clusters: clusters.clone(),
        operators: vec![],
        coordinator_sans: vec![],
        validity: Validity::days_from_now(1),
    })?;
    eprintln!("== bucket with {BUCKET_BACKUPS} backups");
    let spec =
        FixtureSpec { backups: BUCKET_BACKUPS, tarballs: false, resource_lists: false, ..FixtureSpec::default() };
    let bucket_dir = dir.join("bucket");
    let store = ferry::bucket::open(&ferry::bucket::StoreConfig {
        url: format!("file://{}", bucket_dir.display()),
        create_folder: true,
        ..Default::default()
    })?;
    fixture::write(&store, &spec, 32).await?;
    let mut config = format!(
        "locations:\n  - name: shared\n    url: file://{}\n    bucket: bench\n    prefix: {}\n    sourceCluster: source\n\
         coordinator:\n  listen: 127.0.0.1:0\n  shareTemplates: {share}\n  catalogRefreshInterval: {}ms\n  tls: {{ca: pki/ca.pem, cert: pki/coordinator.pem, key: pki/coordinator-key.pem}}\n\
         clusters:\n",
        bucket_dir.display(),
        spec.prefix,
        REFRESH.as_millis()
    );
    for c in &clusters {
        config.push_str(&format!("  - name: {c}\n    locations: [shared]\n"));
    }
    std::fs::write(dir.join("ferry.yaml"), config)?;

    // `FERRY_BENCH_WRAP="heaptrack -o /tmp/coordinator"` (for profiling): the coordinator under that command,
    // in a process group of its own so that the wrapper and the coordinator stop together; the RSS and CPU
    // columns read the coordinator's process, not the wrapper's.
    let wrap = std::env::var("FERRY_BENCH_WRAP").unwrap_or_default();
    let mut command = match wrap.split_whitespace().collect::<Vec<_>>().split_first() {
        Some((program, args)) => {
            let mut command = tokio::process::Command::new(program);
            command.args(args).arg(FERRY);
            command
        }
        None => tokio::process::Command::new(FERRY),
    };
    let mut child = command
        .args(["coordinator", "--metrics-listen", "", "--config"])
        .arg(dir.join("ferry.yaml"))
        .env("FERRY_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0)
        .spawn()?;
    let group = child.id().unwrap_or(0);
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    // The first line that names the address (a wrapper may print its own lines before it).
    let mut addr = String::new();
    while let Some(line) = lines.next_line().await? {
        if let Some(listening) = line.strip_prefix("listening on ") {
            addr = listening.to_string();
            break;
        }
    }
    let pid = proc_status::running(group, Path::new(FERRY))
        .ok_or_else(|| std::io::Error::other("the coordinator is not running"))?;
    let idle_rss_kb = proc_status::process_kb(pid, "VmRSS:");

    let inventory = inventory();
    let objects: usize = inventory.iter().map(|(_, i)| i.len()).sum();
    eprintln!("== {agents} agents × {objects} objects");
    let cpu_before = proc_status::cpu_seconds(pid);
    let started = Instant::now();
    let mut clients = Vec::new();
    for c in &clusters {
        let files = TlsFiles {
            ca: dir.join("pki/ca.pem"),
            cert: dir.join(format!("pki/cluster-{c}.pem")),
            key: dir.join(format!("pki/cluster-{c}-key.pem")),
        };
        let mut agent =
            AgentConfig::new(format!("https://{addr}"), Some(client_tls_config(&files, Some("localhost"))?));
        agent.backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        agent.connect_timeout = Duration::from_secs(30);
        if !variant.deltas {
            agent.capabilities.retain(|c| c != DESIRED_SET_DELTAS);
        }
        clients.push(AgentClient::spawn(agent, inventory.clone()));
    }
    let mut first = Vec::new();
    for client in &clients {
        let mut rx = client.desired();
        tokio::time::timeout(Duration::from_secs(600), rx.wait_for(|d| d.as_ref().is_some_and(|d| d.complete)))
            .await??;
        first.push(rx.borrow().as_ref().map(|d| d.version.clone()).unwrap_or_default());
    }
    let accept_all = started.elapsed();
    let cpu_accept = proc_status::cpu_seconds(pid) - cpu_before;
    let rss_connected_kb = proc_status::process_kb(pid, "VmRSS:");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let rss_settled_kb = proc_status::process_kb(pid, "VmRSS:");
    let reconnects: u64 = clients.iter().map(|c| c.link().borrow().connects.saturating_sub(1)).sum();
    eprintln!("   all snapshots accepted and planned in {:.2} s ({reconnects} reconnects)", accept_all.as_secs_f64());

    let mut latencies = Vec::new();
    let cpu_before = proc_status::cpu_seconds(pid);
    for change in 0..CHANGES {
        let name = format!("landed-{change}");
        let mut waiters = Vec::new();
        for client in &clients {
            let mut rx = client.desired();
            let name = name.clone();
            waiters.push(tokio::spawn(async move {
                let _ = rx.wait_for(|d| d.as_ref().is_some_and(|d| d.items.iter().any(|i| i.backup == name))).await;
                Instant::now()
            }));
        }
        let mut backup = fixture::admin_backup_json(&name, BackupPhase::Completed, "default");
        backup["metadata"]["namespace"] = json!("velero");
        let folder = bucket_dir.join(&spec.prefix).join("backups").join(&name);
        std::fs::create_dir_all(&folder)?;
        let landed = Instant::now();
        std::fs::write(folder.join("velero-backup.json"), serde_json::to_vec(&backup)?)?;
        for waiter in waiters {
            let at = tokio::time::timeout(Duration::from_secs(120), waiter).await??;
            latencies.push(at.duration_since(landed));
        }
        eprintln!("   change {change}: delivered to all {agents} agents");
    }
    let cpu_changes = proc_status::cpu_seconds(pid) - cpu_before;
    latencies.sort();
    let peak_rss_kb = proc_status::process_kb(pid, "VmHWM:");

    let measured = Measured {
        variant,
        agents,
        objects,
        accept_all,
        reconnects,
        latencies,
        rss_kb: (idle_rss_kb, rss_connected_kb, rss_settled_kb, peak_rss_kb),
        cpu_accept,
        cpu_changes,
    };
    eprintln!("{}", row(&measured));
    for client in clients {
        client.abort();
    }
    // The whole group: a wrapper's coordinator too (SIGTERM first, so a profiler writes its data out).
    // SAFETY: kill(2) with a negative id signals that process group; it has no memory preconditions.
    unsafe { libc::kill(-(group as libc::pid_t), libc::SIGTERM) };
    if tokio::time::timeout(Duration::from_secs(30), child.wait()).await.is_err() {
        // SAFETY: as above.
        unsafe { libc::kill(-(group as libc::pid_t), libc::SIGKILL) };
    }
    let _ = child.kill().await;
    Ok(measured)
}
