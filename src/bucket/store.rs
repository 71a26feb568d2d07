//! Opening a location's store from its URL: `s3://`, `gs://`, `az://`, `file://` (or a plain path), `memory://`.
//! Credentials come from the standard variables (`AWS_*`, `GOOGLE_*`, `AZURE_*`) read by object_store's builders.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::list::PaginatedListStore;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::{ClientOptions, ObjectStore};

use crate::catalog::StoreKind;

/// How to reach a store; the S3 overrides win over `AWS_*` variables.
#[derive(Debug, Clone, Default)]
pub struct StoreConfig {
    pub url: String,
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub allow_http: Option<bool>,
    /// Explicit S3 credentials; normally absent, so the standard `AWS_*` variables (or instance roles) apply.
    pub credentials: Option<S3Credentials>,
    /// Per-request timeout; object_store retries failed requests within its own budget.
    pub request_timeout: Option<std::time::Duration>,
    /// Relative `file://` paths resolve from here (the config file's folder).
    pub base_dir: PathBuf,
}

#[derive(Clone, Default, PartialEq, Eq)]
pub struct S3Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Credentials").field("access_key_id", &self.access_key_id).finish_non_exhaustive()
    }
}

/// An opened store. `pager` is set where the store lists page by page (S3, GCS, Azure), which lets a
/// listing keep the pages it read when a later one fails, and lets the catalog list in parallel shards.
#[derive(Clone)]
pub struct Store {
    pub objects: Arc<dyn ObjectStore>,
    pub pager: Option<Arc<dyn PaginatedListStore>>,
    pub kind: StoreKind,
    /// The bucket named by the URL (its host), or the folder name for local stores.
    pub bucket: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("objects", &self.objects).field("kind", &self.kind).finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("location URL {url:?}: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("location URL {url:?}: {source}")]
    Store { url: String, source: object_store::Error },
}

pub fn open(config: &StoreConfig) -> Result<Store, OpenError> {
    let url = config.url.as_str();
    let bad = |reason: &str| OpenError::BadUrl { url: url.to_string(), reason: reason.to_string() };
    let store_err = |source| OpenError::Store { url: url.to_string(), source };
    let (scheme, rest) = url.split_once("://").unwrap_or(("file", url));
    match scheme {
        "s3" | "s3a" => {
            let bucket = host_of(rest).ok_or_else(|| bad("no bucket after s3://"))?;
            let mut builder = AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .with_client_options(client_options(config))
                .with_retry(retry_config());
            if let Some(c) = &config.credentials {
                builder = builder.with_access_key_id(&c.access_key_id).with_secret_access_key(&c.secret_access_key);
                if let Some(token) = &c.session_token {
                    builder = builder.with_token(token);
                }
            }
            if let Some(endpoint) = &config.endpoint {
                builder = builder.with_endpoint(endpoint);
            }
            if let Some(region) = &config.region {
                builder = builder.with_region(region);
            }
            if let Some(allow) = config.allow_http {
                builder = builder.with_allow_http(allow);
            }
            let s3 = Arc::new(builder.build().map_err(store_err)?);
            Ok(Store { objects: s3.clone(), pager: Some(s3), kind: StoreKind::S3, bucket: bucket.to_string() })
        }
        "gs" => {
            let bucket = host_of(rest).ok_or_else(|| bad("no bucket after gs://"))?;
            let gcs = GoogleCloudStorageBuilder::from_env()
                .with_bucket_name(bucket)
                .with_client_options(client_options(config))
                .with_retry(retry_config())
                .build()
                .map_err(store_err)?;
            let gcs = Arc::new(gcs);
            Ok(Store { objects: gcs.clone(), pager: Some(gcs), kind: StoreKind::Gcs, bucket: bucket.to_string() })
        }
        "az" | "azure" | "abfs" | "abfss" | "adl" => {
            let container = host_of(rest).ok_or_else(|| bad("no container after az://"))?;
            let azure = MicrosoftAzureBuilder::from_env()
                .with_container_name(container)
                .with_client_options(client_options(config))
                .with_retry(retry_config())
                .build()
                .map_err(store_err)?;
            let azure = Arc::new(azure);
            Ok(Store {
                objects: azure.clone(),
                pager: Some(azure),
                kind: StoreKind::Azure,
                bucket: container.to_string(),
            })
        }
        "file" => {
            let path = resolve_path(&config.base_dir, rest);
            std::fs::create_dir_all(&path).map_err(|e| bad(&format!("cannot use folder {}: {e}", path.display())))?;
            let local = LocalFileSystem::new_with_prefix(&path).map_err(store_err)?;
            let bucket = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            Ok(Store { objects: Arc::new(local), pager: None, kind: StoreKind::Local, bucket })
        }
        "memory" => {
            let name = host_of(rest).unwrap_or("default");
            Ok(Store {
                objects: shared_memory_store(name),
                pager: None,
                kind: StoreKind::Local,
                bucket: name.to_string(),
            })
        }
        other => Err(bad(&format!("unsupported scheme {other:?}; use s3://, gs://, az://, file:// or memory://"))),
    }
}

fn host_of(rest: &str) -> Option<&str> {
    let host = rest.split('/').next().unwrap_or_default();
    (!host.is_empty()).then_some(host)
}

fn resolve_path(base: &Path, rest: &str) -> PathBuf {
    let path = Path::new(rest);
    if path.is_absolute() { path.to_path_buf() } else { base.join(path) }
}

fn client_options(config: &StoreConfig) -> ClientOptions {
    // object_store retries 5xx/429 itself; keep each attempt well under its 3-minute retry budget.
    let timeout = config.request_timeout.unwrap_or(std::time::Duration::from_secs(30));
    ClientOptions::new().with_timeout(timeout).with_pool_max_idle_per_host(64)
}

/// Retries within one refresh: a few quick ones for blips. A store that stays down fails the refresh in
/// seconds rather than after object_store's default 3-minute budget: the previous catalog is kept, status shows
/// the location unhealthy at once, and the next refresh tries again.
fn retry_config() -> object_store::RetryConfig {
    object_store::RetryConfig {
        backoff: object_store::BackoffConfig::default(),
        max_retries: 4,
        retry_timeout: std::time::Duration::from_secs(20),
    }
}

/// `memory://NAME` names one store per process, so a writer and a reader in the same process meet.
fn shared_memory_store(name: &str) -> Arc<dyn ObjectStore> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<InMemory>>>> = OnceLock::new();
    let stores = STORES.get_or_init(Default::default);
    let mut stores = stores.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    stores.entry(name.to_string()).or_insert_with(|| Arc::new(InMemory::new())).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = |url: &str| StoreConfig { url: url.into(), base_dir: dir.path().into(), ..Default::default() };
        let local = open(&cfg("file://bucket-a")).unwrap();
        assert_eq!(local.kind, StoreKind::Local);
        assert_eq!(local.bucket, "bucket-a");
        assert!(dir.path().join("bucket-a").is_dir());
        let s3 = open(&StoreConfig { region: Some("us-east-1".into()), ..cfg("s3://velero-backups") }).unwrap();
        assert_eq!((s3.kind, s3.bucket.as_str()), (StoreKind::S3, "velero-backups"));
        assert!(s3.pager.is_some());
        assert!(open(&cfg("ftp://x")).unwrap_err().to_string().contains("unsupported scheme"));
        assert!(open(&cfg("s3://")).is_err());
    }
}
