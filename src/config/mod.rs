//! ferry's configuration file (YAML). Unknown keys are errors naming the key; relative paths resolve from the
//! file's folder. See DESIGN §8 and `docs/configuration.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::bucket::{DEFAULT_CONCURRENCY, StoreConfig};
use crate::catalog::{Location, StoreKind};
use crate::dag::{Priorities, Rule};
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
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub allow_http: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterConfig {
    pub name: String,
    #[serde(default = "default_velero_namespace")]
    pub velero_namespace: String,
    /// `ferry plan` only: a `kubectl get -o json` file, or a folder of them.
    pub inventory: Option<PathBuf>,
    /// Location name → the BSL on this cluster that reads it.
    #[serde(default)]
    pub storage_locations: BTreeMap<String, String>,
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
pub struct CatalogConfig {
    /// Concurrent requests per location.
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
}

impl Default for CatalogConfig {
    fn default() -> Self {
        Self { concurrency: DEFAULT_CONCURRENCY }
    }
}

fn default_concurrency() -> usize {
    DEFAULT_CONCURRENCY
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
        }
        let cluster_names: BTreeSet<&str> = config.clusters.iter().map(|c| c.name.as_str()).collect();
        for m in &config.namespace_mappings {
            if !cluster_names.contains(m.to.as_str()) {
                return Err(invalid(format!(
                    "namespaceMappings {} → {}: unknown target cluster {:?}",
                    m.from, m.to, m.to
                )));
            }
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
        StoreConfig {
            url: location.url.clone(),
            endpoint: location.endpoint.clone(),
            region: location.region.clone(),
            allow_http: location.allow_http,
            base_dir: self.base_dir.clone(),
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
        let err = load(&GOOD.replace("to: cluster-b", "to: cluster-z")).unwrap_err().to_string();
        assert!(err.contains("cluster-z"), "{err}");
    }
}
