//! The two-cluster test bed for end-to-end tests: real kube-apiservers (clusters `a` and `b`, with Velero's
//! upstream CRDs and the NonAdminBackup CRD), a real MinIO, and ferry's own binaries (`ferry coordinator`,
//! `ferry agent` per cluster, `ferry status`, `ferry restore`) as child processes. Started by
//! `e2e/testbed/up.sh` (binaries built once by `e2e/testbed/build.sh`), stopped by `down.sh` on drop.
#![allow(dead_code)]

#[path = "../http_support/mod.rs"]
mod http_support;
pub mod scripted_coordinator;
pub mod velero;
#[allow(unused_imports)] // not every e2e test reads a side port
pub use http_support::{http_get, http_response};

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferry::agent::kube_api::api_resource;
use ferry::bucket::{S3Credentials, Store, StoreConfig};
use ferry::catalog::{BackupFile, Layout};
use ferry::fixture;
use ferry::grpc::certs::{self, CertsSpec, Validity};
use ferry::model::BackupPhase;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt, PutPayload};
use serde_json::{Value, json};

pub const FERRY: &str = env!("CARGO_BIN_EXE_ferry");
pub const VELERO_NS: &str = "velero";
pub const PREFIX: &str = "velero";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The running test bed; stopped (all processes, state removed) when dropped.
pub struct TestBed {
    pub state: tempfile::TempDir,
    pub env: HashMap<String, String>,
}

impl TestBed {
    pub fn up() -> Self {
        Self::up_with_plain_velero(&[])
    }

    /// The bed, with OADP's CRDs left off `plain` clusters (plain Velero; install them later with
    /// [`TestBed::install_oadp_crds`]).
    pub fn up_with_plain_velero(plain: &[&str]) -> Self {
        let build = Command::new(root().join("e2e/testbed/build.sh")).status().expect("run e2e/testbed/build.sh");
        assert!(build.success(), "e2e/testbed/build.sh failed");
        // A second start on fresh ports and state when the first fails: its ports are chosen at random before the
        // servers bind them, so another process may take one in between. A second failure fails the test.
        for attempt in 1..=2 {
            let state = tempfile::Builder::new().prefix("ferry-e2e-").tempdir().expect("state dir");
            let out = Command::new(root().join("e2e/testbed/up.sh"))
                .arg(state.path())
                .env("FERRY_TESTBED_PLAIN_VELERO", plain.join(" "))
                .stderr(Stdio::inherit())
                .output()
                .expect("run e2e/testbed/up.sh");
            if out.status.success() {
                let env_path =
                    String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim().to_string();
                let env = parse_env(&std::fs::read_to_string(&env_path).expect("env file"));
                return Self { state, env };
            }
            eprintln!("e2e/testbed/up.sh failed (attempt {attempt} of 2); the logs of its parts:");
            print_log_tails(&state.path().join("logs"));
        }
        panic!("e2e/testbed/up.sh failed twice (logs above)");
    }

    pub fn var(&self, key: &str) -> String {
        self.env.get(key).cloned().unwrap_or_else(|| panic!("test bed env has no {key}"))
    }

    pub fn cluster_var(&self, cluster: &str, key: &str) -> String {
        self.var(&format!("FERRY_TESTBED_{}_{key}", cluster.to_ascii_uppercase()))
    }

    pub fn admin_kubeconfig(&self, cluster: &str) -> PathBuf {
        PathBuf::from(self.cluster_var(cluster, "KUBECONFIG"))
    }

    pub fn agent_kubeconfig(&self, cluster: &str) -> PathBuf {
        PathBuf::from(self.cluster_var(cluster, "AGENT_KUBECONFIG"))
    }

    pub async fn admin(&self, cluster: &str) -> kube::Client {
        let file = kube::config::Kubeconfig::read_from(self.admin_kubeconfig(cluster)).expect("kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(file, &Default::default()).await.expect("kube config");
        kube::Client::try_from(config).expect("kube client")
    }

    pub fn bucket(&self) -> String {
        self.var("FERRY_TESTBED_S3_BUCKET")
    }

    /// `ferry agent` for cluster `b`, dialing the coordinator at `addr` with the PKI [`TestBed::write_reader_config`]
    /// wrote into `dir`, as the agent's RBAC identity (arguments and environment left to the caller to add).
    pub fn reader_agent_command(&self, dir: &std::path::Path, addr: &str) -> Command {
        let pki = dir.join("pki");
        let mut agent = Command::new(FERRY);
        agent
            .args(["agent", "--coordinator", &format!("https://{addr}"), "--tls-server-name", "localhost"])
            .arg("--tls-ca")
            .arg(pki.join("ca.pem"))
            .arg("--tls-cert")
            .arg(pki.join("cluster-b.pem"))
            .arg("--tls-key")
            .arg(pki.join("cluster-b-key.pem"))
            .arg("--kubeconfig")
            .arg(self.agent_kubeconfig("b"))
            .args(["--velero-namespace", VELERO_NS]);
        agent
    }

    /// A PKI (agent `b`, `operators`) and a `ferry.yaml` in `dir` for a coordinator serving cluster `b` from
    /// the bed's bucket (written by cluster `a`); returns the config's path. For the benchmarks that run the
    /// real binaries on the bed.
    pub fn write_reader_config(&self, dir: &std::path::Path, operators: &[&str]) -> PathBuf {
        certs::write_all(&CertsSpec {
            out: dir.join("pki"),
            trust_domain: "ferry.local".into(),
            clusters: vec!["b".into()],
            operators: operators.iter().map(|o| o.to_string()).collect(),
            coordinator_sans: vec![],
            validity: Validity::days_from_now(1),
        })
        .expect("pki");
        let config = format!(
            "locations:\n  - name: shared\n    url: s3://{bucket}\n    bucket: {bucket}\n    prefix: {PREFIX}\n    sourceCluster: a\n    \
             endpoint: {endpoint}\n    region: {region}\n    allowHttp: true\n\
             clusters:\n  - name: b\n    veleroNamespace: {VELERO_NS}\n    locations: [shared]\n\
             coordinator:\n  listen: 127.0.0.1:0\n  tls: {{ca: pki/ca.pem, cert: pki/coordinator.pem, key: pki/coordinator-key.pem}}\n",
            bucket = self.bucket(),
            endpoint = self.var("FERRY_TESTBED_S3_ENDPOINT"),
            region = self.var("FERRY_TESTBED_S3_REGION"),
        );
        let path = dir.join("ferry.yaml");
        std::fs::write(&path, config).expect("write ferry.yaml");
        path
    }

    pub fn store(&self) -> Store {
        ferry::bucket::open(&StoreConfig {
            url: format!("s3://{}", self.bucket()),
            endpoint: Some(self.var("FERRY_TESTBED_S3_ENDPOINT")),
            region: Some(self.var("FERRY_TESTBED_S3_REGION")),
            allow_http: Some(true),
            credentials: Some(S3Credentials {
                access_key_id: self.var("FERRY_TESTBED_S3_ACCESS_KEY"),
                secret_access_key: self.var("FERRY_TESTBED_S3_SECRET_KEY"),
                session_token: None,
            }),
            ..Default::default()
        })
        .expect("open MinIO bucket")
    }

    /// Installs OADP's CRDs (those the bed left off) on `cluster` at runtime, as an admin installing OADP would,
    /// and waits until they are Established.
    pub async fn install_oadp_crds(&self, cluster: &str) -> Vec<String> {
        let client = self.admin(cluster).await;
        let crds: Api<CustomResourceDefinition> = Api::all(client);
        let dir = PathBuf::from(self.var("FERRY_TESTBED_CRDS_DIR"));
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("CRD dir") {
            let path = entry.expect("CRD file").path();
            let file = path.file_name().and_then(|f| f.to_str()).unwrap_or_default().to_string();
            let Some(name) = file.strip_suffix(".yaml").filter(|n| n.ends_with(".oadp.openshift.io")) else { continue };
            let text = std::fs::read_to_string(&path).expect("read CRD");
            let crd: CustomResourceDefinition = serde_saphyr::from_str(&text).expect("CRD YAML");
            crds.patch(name, &PatchParams::apply("ferry-e2e").force(), &Patch::Apply(&crd)).await.expect("apply CRD");
            names.push(name.to_string());
        }
        for name in &names {
            eventually(&format!("CRD {name} Established"), Duration::from_secs(30), || async {
                let crd = crds.get_opt(name).await.ok().flatten()?;
                let conditions = crd.status?.conditions?;
                conditions.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
            })
            .await;
        }
        names
    }

    /// The MinIO process of the bed (for outage tests).
    pub fn minio_pid(&self) -> Option<i32> {
        let pids = std::fs::read_to_string(self.state.path().join("pids")).ok()?;
        pids.lines().find(|l| l.contains("minio")).and_then(|l| l.split_whitespace().find_map(|w| w.parse().ok()))
    }
}

impl Drop for TestBed {
    fn drop(&mut self) {
        let _ = Command::new(root().join("e2e/testbed/down.sh")).arg(self.state.path()).status();
    }
}

fn parse_env(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('\'').replace("'\\''", "'")))
        .collect()
}

/// ferry's processes on the bed: the coordinator and one agent per cluster.
pub struct Ferry {
    pub dir: tempfile::TempDir,
    pub coordinator: Option<Child>,
    pub addr: String,
    pub agents: HashMap<String, Child>,
    /// Each agent's `/healthz`, `/readyz`, `/metrics` address.
    pub agent_metrics: HashMap<String, String>,
    /// The coordinator's web status page (`http://127.0.0.1:PORT/`), when started with one.
    pub status_page: Option<String>,
    /// `--status-page-listen` for the coordinator; none: no status page.
    pub status_page_listen: Option<String>,
    /// Added to every `ferry agent` started after it is set: what the member clusters allow (docs/security.md:
    /// `--allow-namespace-mapping` for the config's mappings, `--allow-retirement` for `retirement.mode: delete`).
    pub agent_args: Vec<String>,
}

impl Ferry {
    /// Writes the PKI and the config (`mappings` is YAML for `namespaceMappings`), starts the coordinator.
    pub fn start(bed: &TestBed, mappings: &str) -> Self {
        Self::start_with(bed, mappings, "")
    }

    /// As [`Ferry::start`], with `extra` (top-level YAML keys) appended to the config.
    pub fn start_with(bed: &TestBed, mappings: &str, extra: &str) -> Self {
        let mut ferry = Self::prepare_with(bed, mappings, extra);
        ferry.start_coordinator(bed, None);
        ferry
    }

    /// As [`Ferry::start`], the coordinator also serving its web status page on a free loopback port.
    pub fn start_with_status_page(bed: &TestBed, mappings: &str) -> Self {
        let mut ferry = Self::prepare_with(bed, mappings, "");
        ferry.status_page_listen = Some("127.0.0.1:0".into());
        ferry.start_coordinator(bed, None);
        ferry
    }

    /// As [`Ferry::start_with`] without starting anything (the PKI and the config only).
    pub fn prepare_with(bed: &TestBed, mappings: &str, extra: &str) -> Self {
        let dir = tempfile::Builder::new().prefix("ferry-e2e-run-").tempdir().expect("dir");
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        certs::write_all(&CertsSpec {
            out: dir.path().join("pki"),
            trust_domain: "ferry.local".into(),
            clusters: vec!["a".into(), "b".into()],
            operators: vec!["admin".into()],
            coordinator_sans: vec![],
            validity: Validity::days_from_now(1),
        })
        .expect("pki");
        let config = format!(
            r#"locations:
  - name: shared
    url: s3://{bucket}
    bucket: {bucket}
    prefix: {PREFIX}
    sourceCluster: a
    endpoint: {endpoint}
    region: {region}
    allowHttp: true
clusters:
  - name: a
    veleroNamespace: {VELERO_NS}
    kubeconfig: {kube_a}
  - name: b
    veleroNamespace: {VELERO_NS}
    kubeconfig: {kube_b}
    locations: [shared]
namespaceMappings:
{mappings}
coordinator:
  listen: 127.0.0.1:0
  heartbeatInterval: 1s
  catalogRefreshInterval: 1s
  debounce: 50ms
  tls: {{ca: pki/ca.pem, cert: pki/coordinator.pem, key: pki/coordinator-key.pem}}
{extra}
"#,
            bucket = bed.bucket(),
            endpoint = bed.var("FERRY_TESTBED_S3_ENDPOINT"),
            region = bed.var("FERRY_TESTBED_S3_REGION"),
            kube_a = bed.admin_kubeconfig("a").display(),
            kube_b = bed.admin_kubeconfig("b").display(),
        );
        std::fs::write(dir.path().join("ferry.yaml"), config).expect("config");
        Ferry {
            dir,
            coordinator: None,
            addr: String::new(),
            agents: HashMap::new(),
            agent_metrics: HashMap::new(),
            status_page: None,
            status_page_listen: None,
            agent_args: Vec::new(),
        }
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("ferry.yaml")
    }

    fn log(&self, name: &str) -> std::fs::File {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("{name}.log")))
            .expect("log")
    }

    pub fn log_text(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{name}.log"))).unwrap_or_default()
    }

    /// Starts the coordinator (on `addr` when restarting, so agents find it again).
    pub fn start_coordinator(&mut self, bed: &TestBed, addr: Option<&str>) {
        let listen = addr.unwrap_or("127.0.0.1:0");
        let page = self.status_page_listen.clone().unwrap_or_default();
        let args = ["--metrics-listen", "", "--status-page-listen", &page];
        let (child, addr, _) = self.spawn_coordinator(bed, listen, &args, "coordinator");
        self.addr = addr;
        self.coordinator = Some(child);
    }

    /// A coordinator process with `args` added, logging to `<log>.log`: it, its gRPC address and its metrics
    /// address (when `args` gave it one). A status page it serves is recorded in `status_page`.
    pub fn spawn_coordinator(
        &mut self,
        bed: &TestBed,
        listen: &str,
        args: &[&str],
        log: &str,
    ) -> (Child, String, String) {
        let mut child = Command::new(FERRY)
            .args(["coordinator", "--config"])
            .arg(self.config_path())
            .args(["--listen", listen])
            .args(args)
            .env("AWS_ACCESS_KEY_ID", bed.var("FERRY_TESTBED_S3_ACCESS_KEY"))
            .env("AWS_SECRET_ACCESS_KEY", bed.var("FERRY_TESTBED_S3_SECRET_KEY"))
            .env("FERRY_LOG", "info,ferry=debug")
            .stdout(Stdio::piped())
            .stderr(self.log(log))
            .spawn()
            .expect("start ferry coordinator");
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut read = || {
            let mut line = String::new();
            std::io::BufRead::read_line(&mut stdout, &mut line).expect("read address");
            line.trim().to_string()
        };
        let line = read();
        let addr = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("coordinator said {line:?}: {}", self.log_text(log)))
            .to_string();
        let value_of = |flag: &str| args.iter().position(|a| *a == flag).and_then(|i| args.get(i + 1));
        let metrics = match value_of("--metrics-listen") {
            Some(value) if !value.is_empty() => read().strip_prefix("metrics on ").unwrap_or_default().to_string(),
            _ => String::new(),
        };
        if let Some(page) = value_of("--status-page-listen").filter(|v| !v.is_empty()) {
            let line = read();
            let url = line.strip_prefix("status page on ");
            let url = url.unwrap_or_else(|| panic!("coordinator said {line:?} for its status page on {page}"));
            self.status_page = Some(url.to_string());
        }
        (child, addr, metrics)
    }

    pub fn start_agent(&mut self, bed: &TestBed, cluster: &str) {
        let pki = self.dir.path().join("pki");
        let child = Command::new(FERRY)
            .args(["agent", "--coordinator", &self.endpoints(), "--tls-server-name", "localhost"])
            .arg("--tls-ca")
            .arg(pki.join("ca.pem"))
            .arg("--tls-cert")
            .arg(pki.join(format!("cluster-{cluster}.pem")))
            .arg("--tls-key")
            .arg(pki.join(format!("cluster-{cluster}-key.pem")))
            .arg("--kubeconfig")
            .arg(bed.agent_kubeconfig(cluster))
            .args(["--velero-namespace", VELERO_NS, "--heartbeat-interval", "1s", "--retry-interval", "500ms"])
            .args(&self.agent_args)
            .args(["--discovery-interval", "1s", "--metrics-listen", "127.0.0.1:0"])
            .env("FERRY_LOG", "info,ferry=debug")
            .stdout(Stdio::piped())
            .stderr(self.log(&format!("agent-{cluster}")))
            .spawn()
            .expect("start ferry agent");
        let mut child = child;
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut line).expect("read the metrics address");
        let metrics = line.trim().strip_prefix("metrics on ").unwrap_or_else(|| panic!("agent said {line:?}"));
        self.agent_metrics.insert(cluster.to_string(), metrics.to_string());
        self.agents.insert(cluster.to_string(), child);
    }

    /// `addr` as the agents' `--coordinator` (several, comma-separated, for coordinator replicas).
    pub fn endpoints(&self) -> String {
        self.addr.split(',').map(|a| format!("https://{a}")).collect::<Vec<_>>().join(",")
    }

    /// SIGKILL, as a crash would.
    pub fn kill_coordinator(&mut self) {
        if let Some(mut c) = self.coordinator.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn kill_agent(&mut self, cluster: &str) {
        if let Some(mut c) = self.agents.remove(cluster) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `ferry status` as operator: the JSON.
    pub fn status(&self, cluster: Option<&str>) -> Value {
        let pki = self.dir.path().join("pki");
        let mut command = Command::new(FERRY);
        command
            .args([
                "status",
                "-o",
                "json",
                "--coordinator",
                &format!("https://{}", self.addr),
                "--tls-server-name",
                "localhost",
            ])
            .arg("--tls-ca")
            .arg(pki.join("ca.pem"))
            .arg("--tls-cert")
            .arg(pki.join("operator-admin.pem"))
            .arg("--tls-key")
            .arg(pki.join("operator-admin-key.pem"));
        if let Some(c) = cluster {
            command.args(["--cluster", c]);
        }
        let out = command.output().expect("ferry status");
        assert!(out.status.success(), "ferry status: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("status JSON")
    }
}

impl Drop for Ferry {
    fn drop(&mut self) {
        self.kill_coordinator();
        let names: Vec<String> = self.agents.keys().cloned().collect();
        for name in names {
            self.kill_agent(&name);
        }
    }
}

/// Typed-enough access to the kinds the tests check.
pub fn api(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let ar = api_resource(group, version, kind);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

pub fn backups(client: &kube::Client) -> Api<DynamicObject> {
    api(client, "velero.io", "v1", "Backup", Some(VELERO_NS))
}

pub fn pvbs(client: &kube::Client) -> Api<DynamicObject> {
    api(client, "velero.io", "v1", "PodVolumeBackup", Some(VELERO_NS))
}

pub fn nabs(client: &kube::Client, namespace: Option<&str>) -> Api<DynamicObject> {
    api(client, "oadp.openshift.io", "v1alpha1", "NonAdminBackup", namespace)
}

pub async fn create(api: &Api<DynamicObject>, object: Value) -> DynamicObject {
    let object: DynamicObject = serde_json::from_value(object).expect("object");
    api.create(&PostParams::default(), &object).await.expect("create")
}

/// Creates every object of the YAML files in `dir` (one object each; RBAC kinds), as the operator would.
pub async fn create_rbac_files(client: &kube::Client, dir: &std::path::Path) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("rbac dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml") && !p.ends_with("kustomization.yaml"))
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("rbac file");
        let object: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let kind = object["kind"].as_str().expect("kind").to_string();
        let namespace = object.pointer("/metadata/namespace").and_then(Value::as_str).map(str::to_string);
        create(&api(client, "rbac.authorization.k8s.io", "v1", &kind, namespace.as_deref()), object).await;
    }
}

pub async fn create_namespace(client: &kube::Client, name: &str) {
    let namespaces = api(client, "", "v1", "Namespace", None);
    create(&namespaces, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})).await;
}

/// A `ReadOnly` BSL on `client`'s cluster that reads the bed's bucket (as a reader's BSL must be).
pub async fn create_bsl(bed: &TestBed, client: &kube::Client, name: &str) {
    create_bsl_with_access_mode(bed, client, name, Some("ReadOnly")).await
}

/// A BSL on `client`'s cluster that reads the bed's bucket, with `accessMode` as given (`None`: unset, which
/// Velero takes as ReadWrite).
pub async fn create_bsl_with_access_mode(bed: &TestBed, client: &kube::Client, name: &str, mode: Option<&str>) {
    let bsls = api(client, "velero.io", "v1", "BackupStorageLocation", Some(VELERO_NS));
    let mut bsl = json!({"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
           "metadata": {"name": name, "namespace": VELERO_NS},
           "spec": {"provider": "aws", "default": true,
                    "objectStorage": {"bucket": bed.bucket(), "prefix": PREFIX},
                    "config": {"region": bed.var("FERRY_TESTBED_S3_REGION"), "s3ForcePathStyle": "true",
                               "s3Url": bed.var("FERRY_TESTBED_S3_ENDPOINT")}}});
    if let Some(mode) = mode {
        bsl["spec"]["accessMode"] = mode.into();
    }
    create(&bsls, bsl).await;
}

/// Polls `check` every 100 ms until it returns `Some`, or `None` once `timeout` has passed.
pub async fn poll<T, F, Fut>(timeout: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// [`poll`], failing the test on timeout: for eventual consistency.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    poll(timeout, check).await.unwrap_or_else(|| panic!("timed out after {timeout:?} waiting for {what}"))
}

pub fn to_value(object: &DynamicObject) -> Value {
    serde_json::to_value(object).expect("json")
}

pub fn logs_hint(ferry: &Ferry) -> String {
    format!(
        "\n--- coordinator log (tail) ---\n{}\n--- agent-b log (tail) ---\n{}",
        tail(&ferry.log_text("coordinator"), 40),
        tail(&ferry.log_text("agent-b"), 40)
    )
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A NAC backup of `nab` in tenant namespace `ns`: (name = NACUUID, velero-backup.json, its PVBs).
pub fn nac_backup(ns: &str, nab: &str, uuid: &str) -> (String, Value, Vec<Value>) {
    let nacuuid = fixture::nac_object_uuid(ns, nab, uuid);
    let backup = fixture::nac_backup_json(ns, nab, &nacuuid, BackupPhase::Completed);
    let uid = backup["metadata"]["uid"].as_str().unwrap_or_default().to_string();
    let pvbs = (0..2).map(|i| fixture::pod_volume_backup_json(&nacuuid, &uid, ns, i)).collect();
    (nacuuid, backup, pvbs)
}

pub fn gzip_json(value: &Value) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut text = serde_json::to_vec(value).expect("json");
    text.push(b'\n');
    encoder.write_all(&text).expect("gzip");
    encoder.finish().expect("gzip")
}

/// The items of `backup` in `ferry status --cluster b -o json`.
pub fn status_items(ferry: &Ferry, backup: &str) -> Vec<Value> {
    let status = ferry.status(Some("b"));
    status["clusters"][0]["backups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["backup"] == backup)
        .flat_map(|b| b["items"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// Deletes every object of a backup's folder, as `velero backup delete` (or Velero's GC) does in the bucket.
pub async fn delete_backup_folder(bed: &TestBed, name: &str) {
    use futures::TryStreamExt;
    use object_store::ObjectStore;
    let store = bed.store();
    let prefix = ObjectPath::from(format!("{PREFIX}/backups/{name}/").as_str());
    let keys: Vec<_> = store.objects.list(Some(&prefix)).map_ok(|m| m.location).try_collect().await.expect("list");
    assert!(!keys.is_empty(), "backup {name} has objects to delete");
    for key in keys {
        store.objects.delete(&key).await.expect("delete");
    }
}

/// Writes a backup's metadata and PVB file as Velero does (PVB file first: the metadata's presence is what
/// makes a backup exist).
pub async fn put_backup(bed: &TestBed, name: &str, backup: &Value, pvbs: &[Value]) {
    let store = bed.store();
    let layout = Layout::new(PREFIX);
    let pvb_body = if pvbs.is_empty() { gzip_json(&Value::Null) } else { gzip_json(&Value::Array(pvbs.to_vec())) };
    for (key, body) in [
        (layout.key(name, BackupFile::PodVolumeBackups), pvb_body),
        (layout.key(name, BackupFile::Metadata), serde_json::to_vec_pretty(backup).expect("json")),
    ] {
        store.objects.put(&ObjectPath::from(key.as_str()), PutPayload::from(body)).await.expect("put");
    }
}

/// MinIO of the bed, stopped and started again on the same port and data (read from /proc before stopping).
pub struct MinioProcess {
    pid: i32,
    cmdline: Vec<String>,
    environ: Vec<(String, String)>,
}

impl MinioProcess {
    pub fn capture(bed: &TestBed) -> Self {
        let pid = bed.minio_pid().expect("MinIO pid in the bed's pids file");
        let split = |file: &str| -> Vec<String> {
            let raw = std::fs::read(format!("/proc/{pid}/{file}")).expect("proc");
            raw.split(|b| *b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect()
        };
        let cmdline = split("cmdline");
        let environ = split("environ")
            .into_iter()
            .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect();
        Self { pid, cmdline, environ }
    }

    pub fn stop(&self) {
        // SAFETY: signalling the bed's MinIO process.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::path::Path::new(&format!("/proc/{}", self.pid)).exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn start(&self, bed: &TestBed) {
        let child = std::process::Command::new(&self.cmdline[0])
            .args(&self.cmdline[1..])
            .env_clear()
            .envs(self.environ.iter().cloned())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("restart MinIO");
        // Let down.sh stop it too (same line format as up.sh's: name pid start-time).
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap_or_default();
        let start_time =
            stat.rsplit_once(") ").map(|(_, r)| r).and_then(|r| r.split_whitespace().nth(19)).unwrap_or("0");
        let mut pids = std::fs::OpenOptions::new().append(true).open(bed.state.path().join("pids")).expect("pids");
        writeln!(pids, "minio-restarted {} {start_time}", child.id()).expect("pids");
        std::mem::forget(child);
    }
}

/// The last lines of every log of a bed that did not start (its state directory is removed with it).
fn print_log_tails(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(15)..].join("\n");
        eprintln!("--- {} ---\n{tail}", entry.path().display());
    }
}
