//! The `ferry coordinator` and `ferry status` binaries: certificates from `ferry certs`, an agent client in this
//! process, `ferry status` as table and JSON, SIGTERM shutdown, and `--insecure-dev`.

#[path = "http_support/mod.rs"]
mod http_support;
#[path = "federation_support/mod.rs"]
mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use http_support::{http_get, http_response, http_response_as};
use serde_json::Value;
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

/// Starts `ferry coordinator` with `args` and returns it with the gRPC and metrics addresses it printed.
async fn start_coordinator(bed: &Bed, args: &[&str]) -> (Child, String, String) {
    start_coordinator_with(&bed.path().join("ferry.yaml"), args).await
}

/// As [`start_coordinator`], with another config file.
async fn start_coordinator_with(config: &std::path::Path, args: &[&str]) -> (Child, String, String) {
    let mut child = Command::new(FERRY)
        .arg("coordinator")
        .arg("--config")
        .arg(config)
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .args(args)
        .env("FERRY_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn ferry coordinator");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("coordinator starts in time")
        .expect("read")
        .expect("a line");
    let addr = line.strip_prefix("listening on ").unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    let line = lines.next_line().await.expect("read").expect("a second line");
    let metrics = line.strip_prefix("metrics on ").unwrap_or_else(|| panic!("unexpected second line {line:?}"));
    (child, addr.to_string(), metrics.to_string())
}

/// The value of the sample `series` (name and labels exactly as written) on a metrics page.
fn sample(page: &str, series: &str) -> Option<f64> {
    page.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// The live counters and histograms of a running coordinator's `/metrics`, after its location was refreshed and
/// cluster-b's agent connected: the agent reports results for the set it got, and the page shows the refresh, the
/// connect, the results by outcome, the delivery latency of that set, the heartbeat as a timestamp and
/// `ferry_build_info`, in the OpenMetrics text format.
async fn scrape_counters_histograms_and_build_info(
    metrics: &str,
    agent: &ferry::agent::client::AgentClient,
    desired: &ferry::grpc::proto::DesiredSet,
) {
    use ferry::grpc::proto::{ApplyOutcome, ApplyResult, DesiredAction, ItemResult};
    let created: Vec<ItemResult> = desired
        .items
        .iter()
        .filter(|i| i.action == DesiredAction::Create as i32)
        .map(|i| ItemResult { r#ref: i.r#ref.clone(), outcome: ApplyOutcome::Applied as i32, message: String::new() })
        .collect();
    let applied = created.len() as f64;
    assert!(applied > 0.0, "the example plans objects to create");
    agent.report(ApplyResult { desired_version: desired.version.clone(), items: created });
    let applies = "ferry_cluster_applies_total{cluster=\"cluster-b\",result=\"applied\"}";
    let deadline = Instant::now() + Duration::from_secs(10);
    let (head, page) = loop {
        let (code, head, page) = http_response(metrics, "/metrics");
        assert_eq!(code, 200, "{head}");
        if sample(&page, applies) == Some(applied) || Instant::now() > deadline {
            break (head, page);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(sample(&page, applies), Some(applied), "{page}");
    let openmetrics = "content-type: application/openmetrics-text; version=1.0.0; charset=utf-8";
    assert!(head.lines().any(|h| h.eq_ignore_ascii_case(openmetrics)), "{head}");
    assert!(page.ends_with("# EOF\n"), "{page}");
    let has = |line: &str| page.lines().any(|l| l == line);

    // Counters: the location refreshed at least once without error; cluster-b connected once, cluster-c never.
    assert!(has("# TYPE ferry_location_refreshes counter"), "{page}");
    let refreshes = sample(&page, "ferry_location_refreshes_total{location=\"shared\",result=\"ok\"}");
    assert!(refreshes.is_some_and(|n| n >= 1.0), "{page}");
    assert_eq!(sample(&page, "ferry_location_refreshes_total{location=\"shared\",result=\"error\"}"), Some(0.0));
    assert_eq!(sample(&page, "ferry_cluster_connects_total{cluster=\"cluster-b\"}"), Some(1.0), "{page}");
    assert_eq!(sample(&page, "ferry_cluster_connects_total{cluster=\"cluster-c\"}"), Some(0.0), "{page}");
    assert_eq!(sample(&page, "ferry_cluster_applies_total{cluster=\"cluster-b\",result=\"failed\"}"), Some(0.0));
    // The example bucket has bad objects: each counted once, however often the location is refreshed.
    let bad = sample(&page, "ferry_location_bad_objects{location=\"shared\"}").expect("bad objects gauge");
    assert!(bad >= 1.0, "{page}");
    assert_eq!(sample(&page, "ferry_errors_total{kind=\"bad_object\"}"), Some(bad), "{page}");
    assert_eq!(sample(&page, "ferry_errors_total{kind=\"refresh\"}"), Some(0.0), "{page}");

    // Histograms: a bucket per bound, cumulative, `+Inf` equal to the count, a sane sum.
    assert!(has("# TYPE ferry_location_refresh_duration_seconds histogram"), "{page}");
    let count = sample(&page, "ferry_location_refresh_duration_seconds_count{location=\"shared\"}").expect("count");
    assert!(count >= 1.0, "{page}");
    let inf = "ferry_location_refresh_duration_seconds_bucket{le=\"+Inf\",location=\"shared\"}";
    assert_eq!(sample(&page, inf), Some(count), "{page}");
    let slow = "ferry_location_refresh_duration_seconds_bucket{le=\"60.0\",location=\"shared\"}";
    assert_eq!(sample(&page, slow), Some(count), "a local folder is read in well under a minute: {page}");
    let sum = sample(&page, "ferry_location_refresh_duration_seconds_sum{location=\"shared\"}").expect("sum");
    assert!(sum > 0.0 && sum < 60.0 * count, "{page}");
    assert_eq!(sample(&page, "ferry_delivery_latency_seconds_count"), Some(1.0), "the set reported on: {page}");
    assert_eq!(sample(&page, "ferry_delivery_latency_seconds_bucket{le=\"+Inf\"}"), Some(1.0), "{page}");
    let latency = sample(&page, "ferry_delivery_latency_seconds_sum").expect("latency");
    assert!(latency > 0.0 && latency < 60.0, "{page}");

    // The build, and the agent's last message as a unix time (cluster-c's agent never spoke: 0).
    let version = env!("CARGO_PKG_VERSION");
    assert!(has(&format!("ferry_build_info{{version=\"{version}\",component=\"coordinator\"}} 1")), "{page}");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs_f64();
    let heartbeat = sample(&page, "ferry_cluster_last_heartbeat_timestamp_seconds{cluster=\"cluster-b\"}");
    assert!(heartbeat.is_some_and(|t| (now - 120.0..=now + 1.0).contains(&t)), "{heartbeat:?} vs {now}: {page}");
    let never = sample(&page, "ferry_cluster_last_heartbeat_timestamp_seconds{cluster=\"cluster-c\"}");
    assert_eq!(never, Some(0.0), "{page}");
}

fn status(bed: &Bed, addr: &str, extra: &[&str]) -> std::process::Output {
    status_as(bed, addr, "operator-admin", extra)
}

/// `ferry status` presenting the certificate `<stem>.pem` of the bed's PKI.
fn status_as(bed: &Bed, addr: &str, stem: &str, extra: &[&str]) -> std::process::Output {
    std::process::Command::new(FERRY)
        .arg("status")
        .args(["--coordinator", &format!("https://{addr}")])
        .arg("--tls-ca")
        .arg(bed.pki("ca.pem"))
        .arg("--tls-cert")
        .arg(bed.pki(&format!("{stem}.pem")))
        .arg("--tls-key")
        .arg(bed.pki(&format!("{stem}-key.pem")))
        .args(["--tls-server-name", "localhost"])
        .args(extra)
        .output()
        .expect("run ferry status")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinator_binary_serves_an_agent_reports_status_and_stops_on_sigterm() {
    let bed = Bed::new();
    let tls = ["--tls-ca", "pki/ca.pem", "--tls-cert", "pki/coordinator.pem", "--tls-key", "pki/coordinator-key.pem"];
    let tls: Vec<String> = tls
        .iter()
        .map(|a| if a.starts_with("pki/") { bed.path().join(a).display().to_string() } else { a.to_string() })
        .collect();
    let tls: Vec<&str> = tls.iter().map(String::as_str).collect();
    let (mut child, addr, metrics) = start_coordinator(&bed, &tls).await;
    let socket: std::net::SocketAddr = addr.parse().expect("addr");
    let agent = agent(bed.agent_config(socket, "cluster-b"), &cluster_b_inventory());
    let desired = wait_desired(&agent, |d| d.complete && !d.items.is_empty()).await;

    assert_eq!(http_get(&metrics, "/healthz").0, 200);
    assert_eq!(http_get(&metrics, "/readyz"), (200, "ready\n".to_string()), "the location was read");
    let (code, page) = http_get(&metrics, "/metrics");
    assert_eq!(code, 200);
    assert!(page.contains("ferry_cluster_connected{cluster=\"cluster-b\"} 1"), "{page}");
    assert!(page.contains("ferry_location_healthy{location=\"shared\"} 1"), "{page}");
    scrape_counters_histograms_and_build_info(&metrics, &agent, &desired).await;

    let table = status(&bed, &addr, &[]);
    assert!(table.status.success(), "{}", String::from_utf8_lossy(&table.stderr));
    let table = String::from_utf8_lossy(&table.stdout);
    let header = table.lines().next().unwrap_or_default();
    assert!(header.starts_with("CLUSTER") && header.contains("DESIRED") && header.contains("REFUSED"), "{table}");
    let b_row = table.lines().find(|l| l.starts_with("cluster-b")).expect("cluster-b row");
    assert!(b_row.contains("connected"), "{table}");
    assert!(table.lines().any(|l| l.starts_with("cluster-c") && l.contains("disconnected")), "{table}");
    assert!(table.contains("LOCATION") && table.lines().any(|l| l.starts_with("shared")), "{table}");

    let json = status(&bed, &addr, &["--cluster", "cluster-b", "-o", "json"]);
    assert!(json.status.success(), "{}", String::from_utf8_lossy(&json.stderr));
    let json: Value = serde_json::from_slice(&json.stdout).expect("status -o json is JSON");
    assert_eq!(json["caller"], "operator/admin");
    assert_eq!(json["clusters"][0]["cluster"], "cluster-b");
    assert_eq!(json["clusters"][0]["state"], "connected");
    assert_eq!(json["clusters"][0]["desiredVersion"], desired.version.as_str());
    let items: usize = json["clusters"][0]["backups"]
        .as_array()
        .expect("per-backup detail")
        .iter()
        .map(|b| b["items"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(items, desired.items.len());
    assert!(json["locations"][0]["errors"].as_array().is_some_and(|e| !e.is_empty()), "bad objects reported");

    assert_eq!(json["coordinatorVersion"], env!("CARGO_PKG_VERSION"));
    assert!(
        table.lines().any(|l| l == format!("COORDINATOR {} (caller operator/admin)", env!("CARGO_PKG_VERSION"))),
        "{table}"
    );

    let yaml = status(&bed, &addr, &["-o", "yaml"]);
    assert!(String::from_utf8_lossy(&yaml.stdout).contains("caller: operator/admin"));

    // A wrong identity for the rpc: an agent certificate may not read status.
    let denied = status_as(&bed, &addr, "cluster-cluster-b", &[]);
    assert_eq!(denied.status.code(), Some(4), "refused: the documented exit code");
    assert!(String::from_utf8_lossy(&denied.stderr).contains("PermissionDenied"));

    // SIGTERM: streams end with a goodbye and the process exits promptly and cleanly. The agent's link is watched
    // from before the signal: its reconnect attempt replaces the goodbye as its last error soon after.
    let mut link = agent.link();
    let told = tokio::spawn(async move {
        let goodbye =
            |l: &ferry::agent::client::Link| l.last_error.as_deref().is_some_and(|e| e.contains("shutting down"));
        let told = matches!(tokio::time::timeout(Duration::from_secs(10), link.wait_for(goodbye)).await, Ok(Ok(_)));
        if told { Ok(()) } else { Err(link.borrow().last_error.clone().unwrap_or_default()) }
    });
    let pid = child.id().expect("pid") as i32;
    let started = Instant::now();
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let exit = tokio::time::timeout(Duration::from_secs(10), child.wait()).await.expect("exits in time").expect("wait");
    assert!(exit.success(), "{exit:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    if let Err(error) = told.await.expect("the watch task joins") {
        panic!("the agent was not told why its stream ended: {error}");
    }
    agent.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insecure_dev_warns_and_takes_identities_from_a_header() {
    let bed = Bed::new();
    let mut child = Command::new(FERRY)
        .arg("coordinator")
        .arg("--config")
        .arg(bed.path().join("ferry.yaml"))
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "", "--insecure-dev"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let line = tokio::time::timeout(Duration::from_secs(20), stdout.next_line()).await.expect("starts").expect("read");
    let addr = line.and_then(|l| l.strip_prefix("listening on ").map(str::to_string)).expect("address line");
    let warning = tokio::time::timeout(Duration::from_secs(5), stderr.next_line()).await.expect("warns").expect("read");
    assert!(warning.unwrap_or_default().contains("PLAINTEXT"), "a loud warning on start");

    let socket: std::net::SocketAddr = addr.parse().expect("addr");
    let mut config = bed.agent_config(socket, "cluster-b");
    config.endpoint = format!("http://{addr}");
    config.tls = None;
    config.dev_identity = Some("cluster/cluster-b".into());
    let agent = agent(config, &cluster_b_inventory());
    wait_desired(&agent, |d| d.complete).await;

    let out = std::process::Command::new(FERRY)
        .args(["status", "--coordinator", &format!("http://{addr}"), "--insecure-dev", "-o", "json"])
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["caller"], "operator/dev");

    // Without a claimed identity there is no caller at all.
    let mut anonymous = bed.agent_config(socket, "cluster-b");
    anonymous.endpoint = format!("http://{addr}");
    anonymous.tls = None;
    let anonymous = support::agent(anonymous, &[]);
    let error = wait_link(&anonymous, |l| l.last_error.is_some()).await.last_error.unwrap_or_default();
    assert!(error.contains("Unauthenticated"), "{error}");
    anonymous.abort();
    agent.abort();
    let _ = child.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bucket_down_does_not_make_the_coordinator_unready() {
    let bed = Bed::new();
    let config = std::fs::read_to_string(bed.path().join("ferry.yaml")).expect("config");
    let down = "  - {name: down, url: s3://nothing, sourceCluster: cluster-a, endpoint: 'http://127.0.0.1:9', region: us-east-1, allowHttp: true}\n";
    let config = config.replacen("clusters:\n", &format!("{down}clusters:\n"), 1);
    let path = bed.path().join("two-locations.yaml");
    std::fs::write(&path, config).expect("write config");
    let (mut child, _addr, metrics) = start_coordinator_with(&path, &["--insecure-dev"]).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let page = loop {
        let (_, page) = http_get(&metrics, "/metrics");
        let read = |name: &str| {
            page.lines().any(|l| {
                l.starts_with(&format!("ferry_location_last_refresh_timestamp_seconds{{location=\"{name}\"}}"))
                    && !l.ends_with(" 0")
            })
        };
        if read("shared") && page.contains("ferry_location_healthy{location=\"down\"} 0") {
            break page;
        }
        assert!(Instant::now() < deadline, "the shared location was never read: {page}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(page.contains("ferry_location_healthy{location=\"shared\"} 1"), "{page}");
    assert_eq!(http_get(&metrics, "/readyz"), (200, "ready\n".to_string()), "one readable location is enough");
    child.kill().await.expect("kill");
}

/// insecureSkipTLSVerify is never applied silently: the coordinator warns at start naming the location, and
/// says so in `ferry status` (JSON and table) and in `ferry_location_insecure_tls` for as long as it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_location_without_certificate_checks_is_warned_shown_and_counted() {
    let bed = Bed::new();
    let config = std::fs::read_to_string(bed.path().join("ferry.yaml")).expect("config");
    let bed_tls = "  - {name: bed-tls, url: s3://nothing, sourceCluster: cluster-a, endpoint: 'https://127.0.0.1:9', region: us-east-1, insecureSkipTLSVerify: true}\n";
    let config = config.replacen("clusters:\n", &format!("{bed_tls}clusters:\n"), 1);
    let path = bed.path().join("insecure-tls.yaml");
    std::fs::write(&path, config).expect("write config");
    let (mut child, addr, metrics) = start_coordinator_with(&path, &["--insecure-dev"]).await;

    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let warning = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await.expect("read stderr") {
            if line.contains("insecureSkipTLSVerify") {
                return line;
            }
        }
        panic!("the coordinator ended without the warning");
    })
    .await
    .expect("the warning in time");
    assert!(warning.contains("WARN") && warning.contains("bed-tls"), "{warning}");
    // The rest of the log is not read: drained, so the coordinator never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    let (_, page) = http_get(&metrics, "/metrics");
    assert_eq!(sample(&page, "ferry_location_insecure_tls{location=\"bed-tls\"}"), Some(1.0), "{page}");
    assert_eq!(sample(&page, "ferry_location_insecure_tls{location=\"shared\"}"), Some(0.0), "{page}");

    let status = |format: &[&str]| {
        let out = std::process::Command::new(FERRY)
            .args(["status", "--coordinator", &format!("http://{addr}"), "--insecure-dev"])
            .args(format)
            .output()
            .expect("run");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("UTF-8")
    };
    let json: Value = serde_json::from_str(&status(&["-o", "json"])).expect("json");
    let flag = |name: &str| {
        let locations = json["locations"].as_array().expect("locations");
        locations.iter().find(|l| l["name"] == name).map(|l| l["insecureSkipTLSVerify"].clone())
    };
    assert_eq!((flag("bed-tls"), flag("shared")), (Some(Value::Bool(true)), Some(Value::Bool(false))), "{json}");
    let table = status(&[]);
    let row = |name: &str| table.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{table}")).to_string();
    assert!(row("bed-tls").contains("TLS CERTIFICATE NOT VERIFIED (insecureSkipTLSVerify)"), "{table}");
    assert!(!row("shared").contains("insecureSkipTLSVerify"), "{table}");
    child.kill().await.expect("kill");
}

/// The status page is off unless asked for, refuses any non-loopback address before the coordinator starts,
/// and on loopback serves the page and its JSON, apart from the metrics port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_page_is_loopback_only_and_apart_from_metrics() {
    let bed = Bed::new();
    for address in ["0.0.0.0:0", "[::]:0"] {
        let out = std::process::Command::new(FERRY)
            .arg("coordinator")
            .arg("--config")
            .arg(bed.path().join("ferry.yaml"))
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "", "--insecure-dev"])
            .args(["--status-page-listen", address])
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "a non-loopback status page address is refused");
        assert!(stderr.contains(address) && stderr.contains("kubectl port-forward"), "{stderr}");
        assert!(String::from_utf8_lossy(&out.stdout).is_empty(), "nothing started: {stderr}");
    }

    let mut child = Command::new(FERRY)
        .arg("coordinator")
        .arg("--config")
        .arg(bed.path().join("ferry.yaml"))
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--insecure-dev"])
        .args(["--status-page-listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut printed = Vec::new();
    for _ in 0..3 {
        let line = tokio::time::timeout(Duration::from_secs(20), stdout.next_line()).await.expect("in time");
        printed.push(line.expect("read").expect("a line"));
    }
    let metrics = printed[1].strip_prefix("metrics on ").expect("metrics line").to_string();
    let page = printed[2]
        .strip_prefix("status page on http://")
        .and_then(|rest| rest.strip_suffix('/'))
        .unwrap_or_else(|| panic!("status page line: {printed:?}"))
        .to_string();
    let (code, html) = http_get(&page, "/");
    assert_eq!(code, 200, "{html}");
    assert!(html.contains("<h2>Clusters</h2>") && html.contains("<td>cluster-b</td>"), "{html}");
    let (code, json) = http_get(&page, "/api/status");
    assert_eq!(code, 200, "{json}");
    let json: Value = serde_json::from_str(&json).expect("JSON");
    let clusters: Vec<&str> =
        json["clusters"].as_array().expect("clusters").iter().filter_map(|c| c["name"].as_str()).collect();
    assert!(clusters.contains(&"cluster-b"), "{json}");
    assert_eq!(json["locations"][0]["name"], "shared", "{json}");
    // DNS rebinding through a port-forward: a page of evil.example (resolving to 127.0.0.1) sends its own name.
    let port = page.rsplit_once(':').map(|(_, p)| p).expect("a port");
    for path in ["/", "/api/status"] {
        for host in ["evil.example".to_string(), format!("evil.example:{port}")] {
            let (code, _, body) = http_response_as(&page, path, &host);
            assert_eq!(code, 421, "{path} with Host {host}: {body}");
            assert!(!body.contains("cluster-b"), "{body}");
        }
        let (code, head, body) = http_response_as(&page, path, &format!("localhost:{port}"));
        assert_eq!(code, 200, "{path} as localhost: {body}");
        let csp = head.lines().find(|l| l.to_ascii_lowercase().starts_with("content-security-policy:"));
        let csp = csp.unwrap_or_else(|| panic!("no CSP: {head}"));
        assert!(csp.contains("'sha256-") && !csp.contains("unsafe-inline"), "{csp}");
    }
    // The side port of probes and Prometheus answers any Host: they come by pod IP, and it serves no page.
    assert_eq!(http_response_as(&metrics, "/healthz", "10.1.2.3:9090").0, 200);
    assert_eq!(http_get(&metrics, "/").0, 404, "the metrics port has no status page");
    assert_eq!(http_get(&page, "/metrics").0, 404, "the status page port has no metrics");
    let _ = child.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_watch_rerenders_with_the_client_config_file() {
    let bed = Bed::new();
    let pki = |name: &str| bed.pki(name).display().to_string();
    let (ca, cert, key) = (pki("ca.pem"), pki("coordinator.pem"), pki("coordinator-key.pem"));
    let tls = ["--tls-ca", &ca, "--tls-cert", &cert, "--tls-key", &key];
    let (mut coordinator, addr, _metrics) = start_coordinator(&bed, &tls).await;

    // Everything from the file's context: address, certificates, server name; the flag picks the context.
    let client = bed.path().join("client.yaml");
    let context = |name: &str, coordinator: &str| {
        format!(
            "  - name: {name}\n    coordinator: '{coordinator}'\n    ca: {}\n    cert: {}\n    key: {}\n    \
             tls-server-name: localhost\n",
            pki("ca.pem"),
            pki("operator-admin.pem"),
            pki("operator-admin-key.pem")
        )
    };
    let text = format!(
        "current-context: down\ncontexts:\n{}{}",
        context("down", "https://127.0.0.1:9"),
        context("up", &format!("https://{addr}"))
    );
    std::fs::write(&client, text).expect("write client config");
    let once = std::process::Command::new(FERRY)
        .args(["status", "-o", "json", "--client-context", "up"])
        .env("FERRY_CLIENT_CONFIG", &client)
        .output()
        .expect("run");
    assert!(once.status.success(), "{}", String::from_utf8_lossy(&once.stderr));
    let json: Value = serde_json::from_slice(&once.stdout).expect("json");
    assert_eq!(json["caller"], "operator/admin");

    let mut watch = Command::new(FERRY)
        .args(["status", "--watch", "--interval", "200ms", "--client-context", "up"])
        .env("FERRY_CLIENT_CONFIG", &client)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn ferry status --watch");
    let mut lines = BufReader::new(watch.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    let read = async {
        while let Some(line) = lines.next_line().await.expect("read") {
            seen.push(line);
            if seen.iter().filter(|l| l.starts_with("CLUSTER")).count() >= 3 {
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read).await.expect("three renderings in time");
    watch.kill().await.expect("kill the watch");
    // Not a terminal: no screen clearing, each rendering after a blank line.
    assert!(seen.iter().all(|l| !l.contains('\x1b')), "{seen:?}");
    let headers: Vec<usize> =
        seen.iter().enumerate().filter(|(_, l)| l.starts_with("CLUSTER")).map(|(i, _)| i).collect();
    assert_eq!(headers[0], 0, "{seen:?}");
    for &i in &headers[1..] {
        assert_eq!(seen[i - 1], "", "a blank line before each rendering: {seen:?}");
        assert!(seen[i - 2].starts_with("COORDINATOR "), "the previous rendering ended: {seen:?}");
    }
    coordinator.kill().await.expect("kill");
}
