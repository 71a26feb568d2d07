//! Helpers for tests of the coordinator ⇄ agent protocol on real sockets: a PKI made with `ferry certs`'s code,
//! a copy of the bundled example bucket (written by ferry's fixture writer), the recorded inventory of
//! cluster-b as inventory items, and a coordinator started in-process on 127.0.0.1.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::net::TcpListener;
use tonic::transport::{ClientTlsConfig, Endpoint};

use ferry::agent::client::{AgentClient, AgentConfig, Link};
use ferry::config::LoadedConfig;
use ferry::coordinator::{self, RunningCoordinator, Settings, Transport};
use ferry::grpc::backoff::Backoff;
use ferry::grpc::certs::{self, CertsSpec, Validity};
use ferry::grpc::convert::{inventory_item, watched_types};
use ferry::grpc::proto::federation_client::FederationClient;
use ferry::grpc::proto::{DesiredSet, InventoryItem, ResourceType};
use ferry::grpc::tls::{TlsFiles, client_tls_config};
use ferry::grpc::tls_acceptor::ReloadingTls;

pub const TD: &str = "ferry.local";

/// Everything a test needs on disk: PKI, bucket, config.
pub struct Bed {
    pub dir: tempfile::TempDir,
}

impl Bed {
    /// A PKI for clusters `cluster-b`, `cluster-c` and `intruder` (not in the config) and operator `admin`,
    /// the example bucket, and a config with clusters b and c.
    pub fn new() -> Self {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let dir = tempfile::tempdir().expect("tempdir");
        certs::write_all(&CertsSpec {
            out: dir.path().join("pki"),
            trust_domain: TD.into(),
            clusters: vec!["cluster-b".into(), "cluster-c".into(), "intruder".into()],
            operators: vec!["admin".into()],
            coordinator_sans: vec![],
            validity: Validity::days_from_now(1),
        })
        .expect("pki");
        copy_dir(&example().join("bucket"), &dir.path().join("bucket"));
        std::fs::write(dir.path().join("ferry.yaml"), CONFIG).expect("config");
        Self { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn config(&self) -> LoadedConfig {
        LoadedConfig::load(&self.path().join("ferry.yaml")).expect("config loads")
    }

    pub fn pki(&self, name: &str) -> PathBuf {
        self.path().join("pki").join(name)
    }

    pub fn server_transport(&self) -> Transport {
        let files = TlsFiles {
            ca: self.pki(certs::CA_CERT),
            cert: self.pki(certs::COORDINATOR_CERT),
            key: self.pki(certs::COORDINATOR_KEY),
        };
        Transport::Mtls { tls: Arc::new(ReloadingTls::new(files).expect("server tls")), trust_domain: TD.into() }
    }

    /// Client TLS presenting the certificate of cluster `who`'s agent, or of an operator (`operator-<name>`).
    pub fn client_tls(&self, who: &str) -> ClientTlsConfig {
        let stem = if who.starts_with("operator-") { who.to_string() } else { format!("cluster-{who}") };
        let files = TlsFiles {
            ca: self.pki(certs::CA_CERT),
            cert: self.pki(&format!("{stem}.pem")),
            key: self.pki(&format!("{stem}-key.pem")),
        };
        client_tls_config(&files, Some("localhost")).expect("client tls")
    }

    pub async fn start(&self, settings: Settings) -> RunningCoordinator {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        coordinator::start(&self.config(), settings, listener, self.server_transport()).await.expect("start")
    }

    /// Restarts on a given address (after a shutdown, the port is free again).
    pub async fn start_on(&self, addr: std::net::SocketAddr, settings: Settings) -> RunningCoordinator {
        let mut tries = 0;
        let listener = loop {
            match TcpListener::bind(addr).await {
                Ok(l) => break l,
                Err(_) if tries < 50 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("rebind {addr}: {e}"),
            }
        };
        coordinator::start(&self.config(), settings, listener, self.server_transport()).await.expect("start")
    }

    pub fn agent_config(&self, addr: std::net::SocketAddr, role: &str) -> AgentConfig {
        let mut config = AgentConfig::new(format!("https://{addr}"), Some(self.client_tls(role)));
        config.backoff = Backoff::new(Duration::from_millis(50), Duration::from_millis(500));
        config.heartbeat_interval = Duration::from_millis(200);
        config
    }

    pub async fn operator(&self, addr: std::net::SocketAddr) -> FederationClient<tonic::transport::Channel> {
        self.client(addr, "operator-admin").await
    }

    /// A client of the coordinator at `addr` with the certificate of `who` (e.g. "cluster-b").
    pub async fn client(&self, addr: std::net::SocketAddr, who: &str) -> FederationClient<tonic::transport::Channel> {
        FederationClient::new(self.channel(addr, who).await)
    }

    /// An mTLS channel to the coordinator at `addr` with the certificate of `who`.
    pub async fn channel(&self, addr: std::net::SocketAddr, who: &str) -> tonic::transport::Channel {
        Endpoint::from_shared(format!("https://{addr}"))
            .expect("endpoint")
            .tls_config(self.client_tls(who))
            .expect("tls")
            .connect()
            .await
            .unwrap_or_else(|e| panic!("{who} connects: {e}"))
    }
}

/// Fast timings so that tests finish quickly.
pub fn fast_settings() -> Settings {
    Settings {
        heartbeat_interval: Duration::from_millis(200),
        stale_after_missed: 5,
        catalog_refresh_interval: Duration::from_millis(200),
        debounce: Duration::from_millis(20),
        resync_interval: Duration::from_secs(60),
        ..Settings::default()
    }
}

const CONFIG: &str = r#"
locations:
  - name: shared
    url: file://bucket
    bucket: velero-backups
    prefix: velero
    sourceCluster: cluster-a
clusters:
  - name: cluster-b
    veleroNamespace: openshift-adp
    locations: [shared]
  - name: cluster-c
    veleroNamespace: openshift-adp
    locations: [shared]
namespaceMappings:
  - from: cluster-a
    to: cluster-b
    namespaces: {team-a: team-a-dr}
"#;

pub fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// The recorded inventory of cluster-b (the bundled example), by resource type, as an agent would publish it.
pub fn cluster_b_inventory() -> Vec<(ResourceType, Vec<InventoryItem>)> {
    let mut by_kind: Vec<(ResourceType, Vec<InventoryItem>)> =
        watched_types().into_iter().map(|t| (t, Vec::new())).collect();
    let dir = example().join("inventories/cluster-b");
    for entry in std::fs::read_dir(dir).expect("inventory dir") {
        let doc: Value =
            serde_json::from_slice(&std::fs::read(entry.expect("entry").path()).expect("read")).expect("json");
        for item in doc["items"].as_array().expect("items") {
            let kind = item["kind"].as_str().expect("kind");
            let slot = by_kind.iter_mut().find(|(t, _)| t.kind == kind).expect("watched kind");
            slot.1.push(inventory_item(kind, item));
        }
    }
    by_kind
}

/// Starts an agent client and publishes an inventory.
pub fn agent(config: AgentConfig, inventory: &[(ResourceType, Vec<InventoryItem>)]) -> AgentClient {
    AgentClient::spawn(config, inventory.to_vec())
}

/// Waits (up to 10 s) until the agent holds a desired set satisfying `pred`.
pub async fn wait_desired(agent: &AgentClient, pred: impl Fn(&DesiredSet) -> bool) -> Arc<DesiredSet> {
    let mut rx = agent.desired();
    let found = tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|d| d.as_deref().is_some_and(&pred)))
        .await
        .expect("desired set in time")
        .expect("client alive");
    found.clone().expect("some")
}

/// Waits (up to 10 s) until the link satisfies `pred`.
pub async fn wait_link(agent: &AgentClient, pred: impl Fn(&Link) -> bool) -> Link {
    let mut rx = agent.link();
    let link = tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|l| pred(l)))
        .await
        .unwrap_or_else(|_| panic!("link condition in time; last {:?}", agent.link().borrow()))
        .expect("client alive");
    link.clone()
}

/// Polls `f` every 20 ms until it returns true (up to 10 s).
pub async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
