//! issue 28: a hostile bucket writer's gzip bombs cannot take the coordinator past its memory limit. Forty PVB
//! files that each inflate past the per-object cap (`catalog.maxDecompressedBytes`, 256 MiB) sit in a real MinIO
//! beside good backups; the real `ferry coordinator` process reads them with the default limits and budget
//! (`catalog.maxBytesInFlight`, 256 MiB). Its peak RSS (VmHWM) stays under the helm chart's 1 GiB, each bomb is
//! reported by its key in `ferry status`, and every good backup is served. Without the budget the same run
//! peaks at 2,074 MiB on 8 worker threads (611 MiB on 2); with it, 319 MiB (measured, docs/performance.md).

mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use ferry::catalog::{BackupFile, Layout};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use support::minio::{ACCESS_KEY, Minio, REGION, SECRET_KEY};
use support::{put_all, velero};

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");
const BOMBS: usize = 40;
const GOOD: usize = 50;
/// deploy/helm/ferry/values.yaml: the coordinator's `resources.limits.memory`.
const CHART_LIMIT: u64 = 1024 * 1024 * 1024;

/// A gzip of ~1.3 MiB that inflates to ~300 MiB: incompressible bytes first, so that its ratio stays under
/// `catalog.maxDecompressionRatio` until the 256 MiB cap is passed (the worst a bomb can do per object).
fn bomb() -> Vec<u8> {
    let mut text = Vec::with_capacity(300 << 20);
    let mut block = Sha256::digest(b"bomb");
    while text.len() < 1300 * 1024 {
        text.extend_from_slice(&block);
        block = Sha256::digest(block);
    }
    text.resize(300 << 20, b' ');
    let gz = velero::gzip(&text);
    assert!(gz.len() < 2 << 20, "{}", gz.len());
    gz
}

fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM");
    let kib: u64 = line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("a number");
    kib * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_gzip_bombs_at_once_stay_under_the_charts_memory_limit_and_are_reported_by_key() {
    let minio = Minio::shared();
    minio.create_bucket("bombs");
    let store = minio.store("bombs");
    let layout = Layout::new("velero");
    let bomb = bomb();
    let mut objects = Vec::new();
    for i in 0..GOOD {
        let name = format!("good-{i:03}");
        objects.push((layout.key(&name, BackupFile::Metadata), velero::backup_json(&name, &["shop"], "Completed")));
        let pvbs = velero::pvb_file(&velero::pvbs(&name, "shop", 1));
        objects.push((layout.key(&name, BackupFile::PodVolumeBackups), pvbs));
    }
    let bomb_names: Vec<String> = (0..BOMBS).map(|i| format!("bomb-{i:03}")).collect();
    for name in &bomb_names {
        objects.push((layout.key(name, BackupFile::Metadata), velero::backup_json(name, &["shop"], "Completed")));
        objects.push((layout.key(name, BackupFile::PodVolumeBackups), bomb.clone()));
    }
    put_all(&store, objects).await;

    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("ferry.yaml");
    std::fs::write(
        &config,
        format!(
            "locations:\n  - name: bombs\n    url: s3://bombs\n    prefix: velero\n    sourceCluster: cluster-a\n    \
             endpoint: {}\n    region: {REGION}\n    allowHttp: true\n\
             clusters:\n  - name: cluster-b\n    veleroNamespace: velero\n    locations: [bombs]\n",
            minio.endpoint
        ),
    )
    .expect("config");
    let mut child = Command::new(FERRY)
        .arg("coordinator")
        .arg("--config")
        .arg(&config)
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "", "--insecure-dev"])
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .env("FERRY_LOG", "warn")
        // As on an 8-core node: the runtime inflates on each of its worker threads at once (this machine may
        // have 2, which alone would hide most of what the budget prevents).
        .env("TOKIO_WORKER_THREADS", "8")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn ferry coordinator");
    let pid = child.id().expect("pid");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let line = tokio::time::timeout(Duration::from_secs(20), stdout.next_line()).await.expect("starts").expect("read");
    let addr = line.and_then(|l| l.strip_prefix("listening on ").map(str::to_string)).expect("address line");

    let started = Instant::now();
    let location = loop {
        let out = std::process::Command::new(FERRY)
            .args(["status", "--coordinator", &format!("http://{addr}"), "--insecure-dev", "-o", "json"])
            .output()
            .expect("run ferry status");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let location = json["locations"][0].clone();
        if location["lastRefreshUnix"].as_i64().unwrap_or(0) > 0
            || location["last_refresh_unix"].as_i64().unwrap_or(0) > 0
        {
            break location;
        }
        assert!(started.elapsed() < Duration::from_secs(300), "never refreshed: {json:#}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let peak = peak_rss(pid);
    eprintln!("peak RSS {} MiB after one refresh of {BOMBS} bombs ({:?})", peak >> 20, started.elapsed());
    let _ = child.kill().await;

    let text = location.to_string();
    assert_eq!(location["backups"].as_u64(), Some((GOOD + BOMBS) as u64), "every backup is served: {text}");
    for name in &bomb_names {
        let key = layout.key(name, BackupFile::PodVolumeBackups);
        let reported = location["errors"].as_array().into_iter().flatten().any(|e| {
            e["object"].as_str() == Some(key.as_str())
                && e["error"].as_str().is_some_and(|m| m.contains("catalog.maxDecompressedBytes"))
        });
        assert!(reported, "{key} is not reported: {text}");
    }
    assert!(peak < CHART_LIMIT, "peak RSS {} MiB is past the chart's 1 GiB", peak >> 20);
    // The budget, the ~1 MiB bombs being downloaded and the process's own baseline.
    assert!(peak < 256 * 1024 * 1024 + 200 * 1024 * 1024, "peak RSS {} MiB is past budget + baseline", peak >> 20);
}
