//! ferry's configuration file (YAML). Unknown keys are errors naming the key; relative paths resolve from the
//! file's folder. See docs/design.md §8 and `docs/configuration.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::bucket::{
    CatalogLimits, CredentialSource, DEFAULT_CONCURRENCY, DEFAULT_MAX_BACKUPS_PER_LOCATION,
    DEFAULT_MAX_BYTES_IN_FLIGHT, ReadBudget, StoreConfig,
};
use crate::catalog::absence::AbsencePolicy;
use crate::catalog::decode::DecodeLimits;
use crate::catalog::{Location, StoreKind};
use crate::dag::tarball::TarballLimits;
use crate::dag::{Priorities, Rule};
use crate::plan::retirement::{RetireMode, RetirementOptions};
use crate::resolve::{MappingError, NamespaceMapping, NamespaceMappings, PrefixRewrite, ProtectedNamespaces};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    pub locations: Vec<LocationConfig>,
    pub clusters: Vec<ClusterConfig>,
    #[serde(default)]
    pub namespace_mappings: Vec<MappingConfig>,
    /// Namespaces no mapping may target, beyond `default`, `kube-*`, `openshift-*` and the Velero namespaces.
    #[serde(default)]
    pub protected_namespaces: Vec<String>,
    #[serde(default)]
    pub materialize: MaterializeConfig,
    #[serde(default)]
    pub catalog: CatalogConfig,
    /// Rule 5: retiring what the bucket no longer holds (`ferry coordinator` only: one listing proves nothing).
    #[serde(default)]
    pub retirement: RetirementConfig,
    /// `ferry coordinator` only.
    #[serde(default)]
    pub coordinator: CoordinatorConfig,
    #[serde(default)]
    pub dependencies: DependenciesConfig,
}

/// `ferry graph` / the agent's ordering: restore priorities and user rules (see `docs/configuration.md`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DependenciesConfig {
    /// `--restore-resource-priorities` syntax (`a,b,-,c`); replaces Velero's defaults, as the flag does.
    pub priorities: Option<String>,
    #[serde(default)]
    pub rules: Vec<Rule>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LocationConfig {
    pub name: String,
    pub url: String,
    /// As the clusters' BSLs name it; defaults to the URL's host (or folder name for `file://`).
    pub bucket: Option<String>,
    #[serde(default)]
    pub prefix: String,
    pub source_cluster: String,
    /// S3-compatible stores (MinIO, Ceph, …): the service URL (Velero's `s3Url`); Azure: the blob endpoint.
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub allow_http: Option<bool>,
    /// S3: `true` path style, `false` virtual-hosted (Velero's `s3ForcePathStyle`); unset: path style.
    pub s3_force_path_style: Option<bool>,
    /// A PEM file of CAs to trust besides the system's (Velero's BSL `objectStorage.caCert`, as a file).
    pub ca_cert: Option<PathBuf>,
    /// Accept any server certificate (Velero's `insecureSkipTLSVerify`). Test beds only.
    #[serde(default, rename = "insecureSkipTLSVerify")]
    pub insecure_skip_tls_verify: bool,
    /// Azure: the storage account (Velero's `storageAccount`).
    pub storage_account: Option<String>,
    /// This location's own credentials (Velero's BSL `credential`); unset: the process's standard variables.
    pub credential: Option<CredentialConfig>,
}

/// A location's own credentials: a file (one key of a Secret, mounted) in the form the provider's Velero plugin
/// reads, and/or environment variables standing in for the standard ones.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CredentialConfig {
    /// S3: AWS credentials file (INI); GCS: JSON key; Azure: Velero's `KEY=value` file.
    pub file: Option<PathBuf>,
    /// S3: the profile of the file (Velero's `profile`); default `default`.
    pub profile: Option<String>,
    /// Azure: the variable of the file holding the storage account key (Velero's `storageAccountKeyEnvVar`);
    /// default `AZURE_STORAGE_ACCOUNT_ACCESS_KEY`.
    pub storage_account_key_env_var: Option<String>,
    /// Standard variable name → the environment variable holding this location's value, e.g.
    /// `{AWS_ACCESS_KEY_ID: SHARED_AWS_ACCESS_KEY_ID}`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterConfig {
    pub name: String,
    #[serde(default = "default_velero_namespace")]
    pub velero_namespace: String,
    /// `ferry plan` only: a `kubectl get -o json` file, or a folder of them.
    pub inventory: Option<PathBuf>,
    /// `ferry plan` only: whether the recorded cluster runs OADP (serves NonAdminBackups). Unset: it does when
    /// its inventory holds a NonAdminBackup or a typed `NonAdminBackupList` (kubectl's `List` names no kind,
    /// so an empty one proves nothing). The agents of a running coordinator tell it by API discovery instead.
    pub oadp: Option<bool>,
    /// `ferry restore` (and the demo): an admin kubeconfig of this cluster.
    pub kubeconfig: Option<PathBuf>,
    /// Location name → the BSL on this cluster that reads it (also grants the location).
    #[serde(default)]
    pub storage_locations: BTreeMap<String, String>,
    /// The locations this cluster reads (docs/design.md §3 rule 6): the config grants them, not the BSLs an agent
    /// reports. `storageLocations` keys are granted too.
    #[serde(default)]
    pub locations: Vec<String>,
    /// Accept read-write BSLs on other clusters' locations on this cluster. Risky: the cluster's Velero can then
    /// delete the writer's backups from the bucket (GC of expired backups, `velero backup delete`).
    #[serde(default)]
    pub allow_read_write_locations: bool,
}

impl ClusterConfig {
    /// Every location the config grants this cluster.
    pub fn granted_locations(&self) -> BTreeSet<String> {
        self.locations.iter().chain(self.storage_locations.keys()).cloned().collect()
    }
}

fn default_velero_namespace() -> String {
    "velero".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MappingConfig {
    pub from: String,
    pub to: String,
    #[serde(default)]
    pub namespaces: BTreeMap<String, String>,
    pub prefix: Option<PrefixConfig>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrefixConfig {
    #[serde(default)]
    pub strip: String,
    #[serde(default)]
    pub add: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MaterializeConfig {
    #[serde(default = "yes")]
    pub velero_backups: bool,
}

impl Default for MaterializeConfig {
    fn default() -> Self {
        Self { velero_backups: true }
    }
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RetirementConfig {
    /// `report` (default): status, metrics and the Plan rpc show what would be retired; `delete`: agents delete it.
    #[serde(default)]
    pub mode: RetireMode,
    /// Consecutive complete listings of its location a backup must be absent from.
    #[serde(default = "default_confirmations")]
    pub confirmations: u32,
    /// And for at least this long since the first of them.
    #[serde(default = "default_grace", deserialize_with = "duration")]
    pub grace: std::time::Duration,
}

impl Default for RetirementConfig {
    fn default() -> Self {
        Self { mode: RetireMode::Report, confirmations: default_confirmations(), grace: default_grace() }
    }
}

impl RetirementConfig {
    pub fn options(&self) -> RetirementOptions {
        RetirementOptions {
            mode: self.mode,
            policy: AbsencePolicy { confirmations: self.confirmations.max(1), grace: self.grace },
        }
    }
}

fn default_confirmations() -> u32 {
    AbsencePolicy::default().confirmations
}

fn default_grace() -> std::time::Duration {
    AbsencePolicy::default().grace
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CatalogConfig {
    /// Concurrent requests per location.
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// Largest bucket object fetched; a larger one is reported by key and skipped, never downloaded.
    #[serde(default = "default_max_object_bytes")]
    pub max_object_bytes: u64,
    /// Most bytes one object may decompress to.
    #[serde(default = "default_max_decompressed_bytes")]
    pub max_decompressed_bytes: u64,
    /// Most times its compressed size one object may decompress to (gzip bombs).
    #[serde(default = "default_max_decompression_ratio")]
    pub max_decompression_ratio: u64,
    /// Most bytes all bucket reads of the process may hold at once (downloads, inflated text, decoded copies),
    /// across every location: the per-object limits alone let 32 concurrent gzip bombs take 8 GiB.
    #[serde(default = "default_max_bytes_in_flight")]
    pub max_bytes_in_flight: u64,
    /// Most backups read from one location; a longer listing is served cut and counts as incomplete.
    #[serde(default = "default_max_backups_per_location")]
    pub max_backups_per_location: usize,
    /// Most entries of one backup tarball read by `ferry graph` and `ferry plan --backup`.
    #[serde(default = "default_max_tarball_entries")]
    pub max_tarball_entries: usize,
    /// Most bytes of items of one backup tarball read, in all.
    #[serde(default = "default_max_tarball_item_bytes")]
    pub max_tarball_item_bytes: u64,
}

impl Default for CatalogConfig {
    fn default() -> Self {
        Self {
            concurrency: DEFAULT_CONCURRENCY,
            max_object_bytes: default_max_object_bytes(),
            max_decompressed_bytes: default_max_decompressed_bytes(),
            max_decompression_ratio: default_max_decompression_ratio(),
            max_bytes_in_flight: default_max_bytes_in_flight(),
            max_backups_per_location: default_max_backups_per_location(),
            max_tarball_entries: default_max_tarball_entries(),
            max_tarball_item_bytes: default_max_tarball_item_bytes(),
        }
    }
}

impl CatalogConfig {
    pub fn limits(&self) -> CatalogLimits {
        CatalogLimits {
            max_object_bytes: self.max_object_bytes,
            decode: DecodeLimits {
                max_decompressed_bytes: self.max_decompressed_bytes,
                max_ratio: self.max_decompression_ratio,
            },
            max_backups: self.max_backups_per_location,
        }
    }

    /// A new budget of `maxBytesInFlight`: make one per process and give it to every loader.
    pub fn budget(&self) -> ReadBudget {
        ReadBudget::new(self.max_bytes_in_flight)
    }
}

/// The totals one backup tarball may reach (`dag::tarball::read_with`).
impl CatalogConfig {
    pub fn tarball_limits(&self) -> TarballLimits {
        TarballLimits { max_entries: self.max_tarball_entries, max_item_bytes: self.max_tarball_item_bytes }
    }
}

fn default_max_tarball_entries() -> usize {
    TarballLimits::default().max_entries
}

fn default_max_tarball_item_bytes() -> u64 {
    TarballLimits::default().max_item_bytes
}

fn default_max_bytes_in_flight() -> u64 {
    DEFAULT_MAX_BYTES_IN_FLIGHT
}

fn default_max_backups_per_location() -> usize {
    DEFAULT_MAX_BACKUPS_PER_LOCATION
}

fn default_max_object_bytes() -> u64 {
    CatalogLimits::default().max_object_bytes
}

fn default_max_decompressed_bytes() -> u64 {
    DecodeLimits::default().max_decompressed_bytes
}

fn default_max_decompression_ratio() -> u64 {
    DecodeLimits::default().max_ratio
}

fn default_concurrency() -> usize {
    DEFAULT_CONCURRENCY
}

/// The coordinator's transport and timing. Durations are humantime strings (`10s`, `5m`, `200ms`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CoordinatorConfig {
    /// Address of the gRPC listener.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Address of the plain-HTTP `/healthz`, `/readyz` and `/metrics` listener; empty to disable.
    #[serde(default = "default_metrics_listen")]
    pub metrics_listen: String,
    /// Address of the plain-HTTP status page (clusters, locations, backups); empty (the default) disables it.
    /// Only a loopback address is accepted: the page shows tenant namespaces and backup names without any
    /// authentication of its own, so it is reached through `kubectl port-forward` (gated by RBAC).
    #[serde(default)]
    pub status_page_listen: String,
    /// PEM files: the CA that issued agent and operator certificates, and the coordinator's own certificate.
    pub tls: Option<TlsConfig>,
    /// The SPIFFE trust domain of agent and operator identities (docs/security.md).
    #[serde(default = "default_trust_domain")]
    pub trust_domain: String,
    /// How often agents send a heartbeat (they are told nothing: the same value must be in their config).
    #[serde(default = "default_heartbeat", deserialize_with = "duration")]
    pub heartbeat_interval: std::time::Duration,
    /// A cluster is stale after this many heartbeat intervals without a message.
    #[serde(default = "default_missed_heartbeats")]
    pub stale_after_missed_heartbeats: u32,
    /// How often each location is listed (only changed objects are fetched).
    #[serde(default = "default_catalog_refresh", deserialize_with = "duration")]
    pub catalog_refresh_interval: std::time::Duration,
    /// How long to wait for more changes before recomputing desired sets.
    #[serde(default = "default_debounce", deserialize_with = "duration")]
    pub debounce: std::time::Duration,
    /// Every cluster's desired set is recomputed at least this often, changed inputs or not.
    #[serde(default = "default_resync", deserialize_with = "duration")]
    pub resync_interval: std::time::Duration,
    /// Largest gRPC message accepted, in bytes (a snapshot of one resource type is one message).
    #[serde(default = "default_max_message_bytes")]
    pub max_message_bytes: usize,
    /// Longest a TLS handshake may take before the connection is dropped.
    #[serde(default = "default_tls_handshake_timeout", deserialize_with = "duration")]
    pub tls_handshake_timeout: std::time::Duration,
    /// Most connections open at once; past it, new ones wait in the listen backlog.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// A connection is closed after this age: its agent reconnects and authenticates with the certificate it
    /// has then (renewed, or refused if revoked by a new CA).
    #[serde(default = "default_max_connection_age", deserialize_with = "duration")]
    pub max_connection_age: std::time::Duration,
    /// Most inventory objects held for one cluster; more are rejected (in the Ack) and reported.
    #[serde(default = "default_max_inventory_items")]
    pub max_inventory_items: usize,
    /// Messages per second one agent stream is served at, at most (a burst of as many is allowed).
    #[serde(default = "default_max_messages_per_second")]
    pub max_messages_per_second: u32,
    /// Build each object once per planning pass for every cluster that gets the same one (default). `false`
    /// builds it per cluster: only for measuring what sharing saves (`benches/federation.rs`).
    #[serde(default = "yes")]
    pub share_templates: bool,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        Self {
            listen: default_listen(),
            metrics_listen: default_metrics_listen(),
            status_page_listen: String::new(),
            tls: None,
            trust_domain: default_trust_domain(),
            heartbeat_interval: default_heartbeat(),
            stale_after_missed_heartbeats: default_missed_heartbeats(),
            catalog_refresh_interval: default_catalog_refresh(),
            debounce: default_debounce(),
            resync_interval: default_resync(),
            max_message_bytes: default_max_message_bytes(),
            tls_handshake_timeout: default_tls_handshake_timeout(),
            max_connections: default_max_connections(),
            max_connection_age: default_max_connection_age(),
            max_inventory_items: default_max_inventory_items(),
            max_messages_per_second: default_max_messages_per_second(),
            share_templates: true,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TlsConfig {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Identities and certificate serial numbers to refuse although the CA signed them (docs/security.md,
    /// "Revocation"); read again whenever it changes, like the certificates.
    #[serde(default)]
    pub revocation_list: Option<PathBuf>,
}

/// A humantime duration (`10s`, `5m`, `200ms`).
fn duration<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<std::time::Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    humantime::parse_duration(&text).map_err(|e| serde::de::Error::custom(format!("{text:?}: {e}")))
}

fn default_tls_handshake_timeout() -> std::time::Duration {
    std::time::Duration::from_secs(10)
}
fn default_max_connections() -> usize {
    10_000
}
fn default_max_connection_age() -> std::time::Duration {
    std::time::Duration::from_secs(3600)
}
fn default_max_inventory_items() -> usize {
    1_000_000
}
/// Snapshots and sets travel in 16 KiB messages (`grpc::chunks::STREAM_MESSAGE_BYTES`): 400 a second (and a burst
/// of as many) lets a reconnecting agent send ~6 MB/s; a 10,000-object cluster's snapshot (~10 MB) is paced for
/// under a second.
fn default_max_messages_per_second() -> u32 {
    400
}
fn default_listen() -> String {
    "0.0.0.0:7443".into()
}
fn default_metrics_listen() -> String {
    "0.0.0.0:9090".into()
}
fn default_trust_domain() -> String {
    "ferry.local".into()
}
fn default_heartbeat() -> std::time::Duration {
    std::time::Duration::from_secs(10)
}
fn default_missed_heartbeats() -> u32 {
    5
}
fn default_catalog_refresh() -> std::time::Duration {
    std::time::Duration::from_secs(30)
}
fn default_debounce() -> std::time::Duration {
    std::time::Duration::from_millis(200)
}
fn default_resync() -> std::time::Duration {
    std::time::Duration::from_secs(300)
}
/// The transport's default ([`crate::grpc::chunks::DEFAULT_MAX_MESSAGE_BYTES`]).
fn default_max_message_bytes() -> usize {
    crate::grpc::chunks::DEFAULT_MAX_MESSAGE_BYTES
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("config {path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("config {path}: {source}")]
    Mapping { path: PathBuf, source: Box<MappingError> },
}

/// A validated config and the folder its relative paths resolve from.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: Config,
    pub path: PathBuf,
    pub base_dir: PathBuf,
    pub mappings: NamespaceMappings,
    /// `dependencies.priorities` parsed, or Velero's defaults.
    pub priorities: Priorities,
}

impl LoadedConfig {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.into(), source })?;
        Self::from_yaml(&text, path)
    }

    pub fn from_yaml(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let config: Config = serde_saphyr::from_str(text)
            .map_err(|e| ConfigError::Parse { path: path.into(), message: e.to_string() })?;
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let invalid = |message: String| ConfigError::Invalid { path: path.into(), message };
        check_unique("locations", config.locations.iter().map(|l| l.name.as_str())).map_err(invalid)?;
        check_unique("clusters", config.clusters.iter().map(|c| c.name.as_str())).map_err(invalid)?;
        let location_names: BTreeSet<&str> = config.locations.iter().map(|l| l.name.as_str()).collect();
        for cluster in &config.clusters {
            if let Some(unknown) = cluster.storage_locations.keys().find(|l| !location_names.contains(l.as_str())) {
                return Err(invalid(format!(
                    "clusters[{}].storageLocations names unknown location {unknown:?}",
                    cluster.name
                )));
            }
            if let Some(unknown) = cluster.locations.iter().find(|l| !location_names.contains(l.as_str())) {
                return Err(invalid(format!(
                    "clusters[{}].locations names unknown location {unknown:?}",
                    cluster.name
                )));
            }
        }
        let cluster_names: BTreeSet<&str> = config.clusters.iter().map(|c| c.name.as_str()).collect();
        let sources: BTreeSet<&str> =
            cluster_names.iter().copied().chain(config.locations.iter().map(|l| l.source_cluster.as_str())).collect();
        for m in &config.namespace_mappings {
            // A typo here would silently map nothing (identity): name a cluster the config knows.
            if !sources.contains(m.from.as_str()) {
                return Err(invalid(format!(
                    "namespaceMappings {} → {}: unknown source cluster {:?} (not in clusters, nor any location's sourceCluster)",
                    m.from, m.to, m.from
                )));
            }
            if !cluster_names.contains(m.to.as_str()) {
                return Err(invalid(format!(
                    "namespaceMappings {} → {}: unknown target cluster {:?}",
                    m.from, m.to, m.to
                )));
            }
        }
        let coordinator = &config.coordinator;
        if coordinator.heartbeat_interval.is_zero() || coordinator.stale_after_missed_heartbeats == 0 {
            return Err(invalid("coordinator.heartbeatInterval and staleAfterMissedHeartbeats must be above 0".into()));
        }
        if coordinator.catalog_refresh_interval.is_zero() || coordinator.resync_interval.is_zero() {
            return Err(invalid("coordinator.catalogRefreshInterval and resyncInterval must be above 0".into()));
        }
        let catalog = &config.catalog;
        if catalog.max_object_bytes == 0
            || catalog.max_decompressed_bytes == 0
            || catalog.max_decompression_ratio == 0
            || catalog.max_bytes_in_flight == 0
            || catalog.max_backups_per_location == 0
        {
            return Err(invalid(
                "catalog.maxObjectBytes, maxDecompressedBytes, maxDecompressionRatio, maxBytesInFlight and \
                 maxBackupsPerLocation must be above 0"
                    .into(),
            ));
        }
        if config.catalog.concurrency == 0 {
            return Err(invalid("catalog.concurrency must be at least 1".into()));
        }
        let priorities = match &config.dependencies.priorities {
            Some(text) => Priorities::parse(text).map_err(|e| invalid(format!("dependencies.{e}")))?,
            None => Priorities::velero_default(),
        };
        for (i, rule) in config.dependencies.rules.iter().enumerate() {
            if rule.kind.trim().is_empty() || rule.after.trim().is_empty() {
                return Err(invalid(format!("dependencies.rules[{i}]: kind and after must name a kind")));
            }
        }
        let protected = ProtectedNamespaces {
            listed: config.protected_namespaces.iter().cloned().collect(),
            velero_namespaces: config.clusters.iter().map(|c| (c.name.clone(), c.velero_namespace.clone())).collect(),
        };
        let mappings = config
            .namespace_mappings
            .iter()
            .map(|m| NamespaceMapping {
                from: m.from.clone(),
                to: m.to.clone(),
                namespaces: m.namespaces.clone(),
                prefix: m.prefix.as_ref().map(|p| PrefixRewrite { strip: p.strip.clone(), add: p.add.clone() }),
            })
            .collect();
        let mappings = NamespaceMappings::new(mappings, protected)
            .map_err(|source| ConfigError::Mapping { path: path.into(), source: Box::new(source) })?;
        Ok(Self { config, path: path.into(), base_dir, mappings, priorities })
    }

    pub fn store_config(&self, location: &LocationConfig) -> StoreConfig {
        let credential = location.credential.clone().unwrap_or_default();
        StoreConfig {
            url: location.url.clone(),
            endpoint: location.endpoint.clone(),
            region: location.region.clone(),
            allow_http: location.allow_http,
            base_dir: self.base_dir.clone(),
            credential: CredentialSource {
                file: credential.file,
                profile: credential.profile,
                storage_account_key_variable: credential.storage_account_key_env_var,
                env: credential.env,
            },
            ca_cert: location.ca_cert.clone(),
            insecure_skip_tls_verify: location.insecure_skip_tls_verify,
            s3_force_path_style: location.s3_force_path_style,
            storage_account: location.storage_account.clone(),
            ..Default::default()
        }
    }

    /// The domain view of a location, once its store is open (the store knows the URL's bucket and kind).
    pub fn location(&self, location: &LocationConfig, kind: StoreKind, url_bucket: &str) -> Location {
        Location {
            name: location.name.clone(),
            kind,
            bucket: location.bucket.clone().unwrap_or_else(|| url_bucket.to_string()),
            prefix: location.prefix.trim_matches('/').to_string(),
            source_cluster: location.source_cluster.clone(),
        }
    }

    pub fn resolve_path(&self, path: &Path) -> PathBuf {
        if path.is_absolute() { path.to_path_buf() } else { self.base_dir.join(path) }
    }
}

fn check_unique<'a>(what: &str, names: impl Iterator<Item = &'a str>) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for name in names {
        if name.is_empty() {
            return Err(format!("{what}: an entry has an empty name"));
        }
        if !seen.insert(name) {
            return Err(format!("{what}: {name:?} is listed twice"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
locations:
  - name: shared
    url: s3://velero-backups
    prefix: velero
    sourceCluster: cluster-a
    endpoint: http://127.0.0.1:9000
    region: us-east-1
    allowHttp: true
clusters:
  - name: cluster-b
    veleroNamespace: openshift-adp
    inventory: inventories/cluster-b
    locations: [shared]
    storageLocations: {shared: dr-bsl}
namespaceMappings:
  - from: cluster-a
    to: cluster-b
    namespaces: {team-a: team-a-dr}
    prefix: {strip: "", add: "dr-"}
"#;

    fn load(text: &str) -> Result<LoadedConfig, ConfigError> {
        LoadedConfig::from_yaml(text, Path::new("/etc/ferry/ferry.yaml"))
    }

    #[test]
    fn the_design_example_loads() {
        let c = load(GOOD).unwrap();
        assert_eq!(c.config.locations[0].allow_http, Some(true));
        assert_eq!(c.resolve_path(Path::new("inv")), Path::new("/etc/ferry/inv"));
        assert_eq!(c.mappings.target_namespace("cluster-a", "cluster-b", "team-a").unwrap(), "team-a-dr");
        assert!(c.config.materialize.velero_backups);
    }

    /// Issue 29 (9): retirement defaults to report mode, 3 complete listings and 1 hour (docs/configuration.md),
    /// whether the section is absent, empty or partial; `confirmations: 0` still needs one listing.
    #[test]
    fn retirement_defaults_to_report_three_listings_and_an_hour() {
        let expected = RetirementOptions {
            mode: RetireMode::Report,
            policy: AbsencePolicy { confirmations: 3, grace: std::time::Duration::from_secs(3600) },
        };
        assert_eq!(load(GOOD).unwrap().config.retirement.options(), expected);
        assert_eq!(load(&format!("{GOOD}retirement: {{}}\n")).unwrap().config.retirement.options(), expected);
        let delete = load(&format!("{GOOD}retirement: {{mode: delete}}\n")).unwrap().config.retirement.options();
        assert_eq!(delete, RetirementOptions { mode: RetireMode::Delete, ..expected });
        let zero = load(&format!("{GOOD}retirement: {{confirmations: 0, grace: 5m}}\n")).unwrap();
        let zero = zero.config.retirement.options().policy;
        assert_eq!((zero.confirmations, zero.grace.as_secs()), (1, 300));
    }

    #[test]
    fn the_revocation_list_is_an_optional_tls_key() {
        let text = format!(
            "{GOOD}coordinator:\n  tls: {{ca: ca.pem, cert: c.pem, key: k.pem, revocationList: revoked.txt}}\n"
        );
        let c = load(&text).expect("loads");
        let tls = c.config.coordinator.tls.expect("tls");
        assert_eq!(tls.revocation_list.as_deref(), Some(Path::new("revoked.txt")));
        let c = load(&format!("{GOOD}coordinator:\n  tls: {{ca: ca.pem, cert: c.pem, key: k.pem}}\n")).expect("loads");
        assert_eq!(c.config.coordinator.tls.expect("tls").revocation_list, None);
    }

    #[test]
    fn dependencies_section() {
        let c = load(GOOD).unwrap();
        assert_eq!(c.priorities, Priorities::velero_default());
        let text = format!(
            "{GOOD}dependencies:\n  priorities: \"namespaces,configmaps,-,services\"\n  rules:\n    - {{kind: Ingress, after: services, selector: {{namespace: shop}}}}\n"
        );
        let c = load(&text).unwrap();
        assert_eq!(c.priorities.to_string(), "namespaces,configmaps,-,services");
        assert_eq!(c.config.dependencies.rules[0].to_string(), "Ingress[namespace=shop] after services");
        let err = load(&text.replace("-,services", "-,services,-")).unwrap_err().to_string();
        assert!(err.contains("only one \"-\""), "{err}");
        let err = load(&text.replace("selector:", "selectr:")).unwrap_err().to_string();
        assert!(err.contains("selectr"), "{err}");
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = load(&GOOD.replace("allowHttp", "allowHtp")).unwrap_err().to_string();
        assert!(err.contains("allowHtp"), "{err}");
        let err = load(&format!("{GOOD}\nextra: 1\n")).unwrap_err().to_string();
        assert!(err.contains("extra"), "{err}");
    }

    #[test]
    fn invalid_configs_are_refused_with_reasons() {
        let err = load(&GOOD.replace("team-a-dr", "kube-system")).unwrap_err().to_string();
        assert!(err.contains("kube-system") && err.contains("cluster-a → cluster-b"), "{err}");
        let err = load(&GOOD.replace("openshift-adp", "backup-ops").replace("team-a-dr", "backup-ops"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("Velero/OADP namespace"), "{err}");
        let err = load(&GOOD.replace("{shared: dr-bsl}", "{other: dr-bsl}")).unwrap_err().to_string();
        assert!(err.contains("unknown location \"other\""), "{err}");
        let err = load(&GOOD.replace("locations: [shared]", "locations: [elsewhere]")).unwrap_err().to_string();
        assert!(err.contains("clusters[cluster-b].locations names unknown location \"elsewhere\""), "{err}");
        let err = load(&GOOD.replace("from: cluster-a", "from: cluster-aa")).unwrap_err().to_string();
        assert!(err.contains("unknown source cluster \"cluster-aa\""), "{err}");
        let err = load(&GOOD.replace("add: \"dr-\"", "add: \"kube-\"")).unwrap_err().to_string();
        assert!(err.contains("prefix rule"), "{err}");
        let err = load(&GOOD.replace("to: cluster-b", "to: cluster-z")).unwrap_err().to_string();
        assert!(err.contains("cluster-z"), "{err}");
    }
}
