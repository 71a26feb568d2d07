//! Opening a location's store from its URL: `s3://`, `gs://`, `az://`, `file://` (or a plain path), `memory://`.
//! Credentials come from the location's own [`CredentialSource`] when it has one (as each Velero BSL has its own
//! Secret), else from the standard variables (`AWS_*`, `GOOGLE_*`, `AZURE_*`) read by object_store's builders.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::list::PaginatedListStore;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::{Certificate, ClientOptions, ObjectStore};

use super::credentials::{self, CredentialSource, Settings};
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
    /// Relative `file://` paths (and credential and CA files) resolve from here (the config file's folder).
    pub base_dir: PathBuf,
    /// The location's own credentials (Velero's BSL `credential`); unset: the process's standard variables.
    pub credential: CredentialSource,
    /// S3: a PEM bundle of CAs trusted besides the system's (Velero's BSL `objectStorage.caCert`).
    pub ca_cert: Option<PathBuf>,
    /// Accept any server certificate (Velero's `insecureSkipTLSVerify`): for test beds only.
    pub insecure_skip_tls_verify: bool,
    /// S3: `true` path style (`endpoint/bucket/key`), `false` virtual-hosted (`bucket.endpoint/key`); unset:
    /// object_store's default, path style (`AWS_VIRTUAL_HOSTED_STYLE_REQUEST` honoured without a credential).
    pub s3_force_path_style: Option<bool>,
    /// Azure: the storage account (Velero's `storageAccount`).
    pub storage_account: Option<String>,
    /// `file://`: create a missing folder (writers such as the fixture command). A reader never does: a mistyped
    /// path would otherwise be an empty bucket that plans nothing.
    pub create_folder: bool,
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
    #[error("location URL {url:?}: credential file {}: {reason}", path.display())]
    CredentialFile { url: String, path: PathBuf, reason: String },
    #[error("location URL {url:?}: credential: {reason}")]
    Credential { url: String, reason: String },
    #[error("location URL {url:?}: caCert {}: {reason}", path.display())]
    CaCert { url: String, path: PathBuf, reason: String },
}

pub fn open(config: &StoreConfig) -> Result<Store, OpenError> {
    let url = config.url.as_str();
    let bad = |reason: &str| OpenError::BadUrl { url: url.to_string(), reason: reason.to_string() };
    let store_err = |source| OpenError::Store { url: url.to_string(), source };
    let (scheme, rest) = url.split_once("://").unwrap_or(("file", url));
    let own_credential = config.credential.is_set();
    match scheme {
        "s3" | "s3a" => {
            let bucket = host_of(rest).ok_or_else(|| bad("no bucket after s3://"))?;
            let builder = if own_credential { AmazonS3Builder::new() } else { AmazonS3Builder::from_env() };
            let mut builder = builder
                .with_bucket_name(bucket)
                .with_client_options(client_options(config)?)
                .with_retry(retry_config());
            if let Some(c) = &config.credentials {
                builder = builder.with_access_key_id(&c.access_key_id).with_secret_access_key(&c.secret_access_key);
                if let Some(token) = &c.session_token {
                    builder = builder.with_token(token);
                }
            }
            for (key, value) in credential_settings(config, StoreKind::S3)?.0 {
                let key = key.parse::<AmazonS3ConfigKey>().map_err(|_| unknown_setting(config, &key, "S3"))?;
                builder = builder.with_config(key, value);
            }
            if let Some(region) = &config.region {
                builder = builder.with_region(region);
            }
            if let Some(allow) = config.allow_http {
                builder = builder.with_allow_http(allow);
            }
            if let Some(force_path_style) = config.s3_force_path_style {
                builder = builder.with_virtual_hosted_style_request(!force_path_style);
            }
            if let Some(endpoint) = &config.endpoint {
                let endpoint = match config.s3_force_path_style {
                    Some(false) => virtual_hosted_endpoint(endpoint, bucket).map_err(|reason| bad(&reason))?,
                    _ => endpoint.clone(),
                };
                builder = builder.with_endpoint(endpoint);
            }
            let s3 = Arc::new(builder.build().map_err(store_err)?);
            Ok(Store { objects: s3.clone(), pager: Some(s3), kind: StoreKind::S3, bucket: bucket.to_string() })
        }
        "gs" => {
            let bucket = host_of(rest).ok_or_else(|| bad("no bucket after gs://"))?;
            let builder =
                if own_credential { GoogleCloudStorageBuilder::new() } else { GoogleCloudStorageBuilder::from_env() };
            let mut builder = builder
                .with_bucket_name(bucket)
                .with_client_options(client_options(config)?)
                .with_retry(retry_config());
            for (key, value) in credential_settings(config, StoreKind::Gcs)?.0 {
                let key = key.parse::<GoogleConfigKey>().map_err(|_| unknown_setting(config, &key, "GCS"))?;
                builder = builder.with_config(key, value);
            }
            if let Some(endpoint) = &config.endpoint {
                builder = builder.with_config(GoogleConfigKey::BaseUrl, endpoint);
            }
            let gcs = Arc::new(builder.build().map_err(store_err)?);
            Ok(Store { objects: gcs.clone(), pager: Some(gcs), kind: StoreKind::Gcs, bucket: bucket.to_string() })
        }
        "az" | "azure" | "abfs" | "abfss" | "adl" => {
            let container = host_of(rest).ok_or_else(|| bad("no container after az://"))?;
            let builder = if own_credential { MicrosoftAzureBuilder::new() } else { MicrosoftAzureBuilder::from_env() };
            let mut builder = builder
                .with_container_name(container)
                .with_client_options(client_options(config)?)
                .with_retry(retry_config());
            if let Some(account) = &config.storage_account {
                builder = builder.with_account(account);
            }
            for (key, value) in credential_settings(config, StoreKind::Azure)?.0 {
                let key = key.parse::<AzureConfigKey>().map_err(|_| unknown_setting(config, &key, "Azure"))?;
                builder = builder.with_config(key, value);
            }
            if let Some(endpoint) = &config.endpoint {
                builder = builder.with_endpoint(endpoint.clone());
            }
            if let Some(allow) = config.allow_http {
                builder = builder.with_allow_http(allow);
            }
            let azure = Arc::new(builder.build().map_err(store_err)?);
            Ok(Store {
                objects: azure.clone(),
                pager: Some(azure),
                kind: StoreKind::Azure,
                bucket: container.to_string(),
            })
        }
        "file" => {
            let path = resolve_path(&config.base_dir, rest);
            if own_credential {
                return Err(bad("a local folder takes no credential"));
            }
            if config.create_folder {
                std::fs::create_dir_all(&path)
                    .map_err(|e| bad(&format!("cannot create folder {}: {e}", path.display())))?;
            } else if !path.is_dir() {
                let reason = if path.exists() { "is not a folder" } else { "does not exist" };
                return Err(bad(&format!("folder {} {reason}", path.display())));
            }
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

fn client_options(config: &StoreConfig) -> Result<ClientOptions, OpenError> {
    // object_store retries 5xx/429 itself; keep each attempt well under its 3-minute retry budget.
    let timeout = config.request_timeout.unwrap_or(std::time::Duration::from_secs(30));
    let mut options = ClientOptions::new()
        .with_timeout(timeout)
        .with_pool_max_idle_per_host(64)
        .with_allow_invalid_certificates(config.insecure_skip_tls_verify);
    if let Some(ca_cert) = &config.ca_cert {
        let path = resolve_path(&config.base_dir, &ca_cert.to_string_lossy());
        let ca_err = |reason: String| OpenError::CaCert { url: config.url.clone(), path: path.clone(), reason };
        let pem = std::fs::read(&path).map_err(|e| ca_err(e.to_string()))?;
        let certificates = Certificate::from_pem_bundle(&pem).map_err(|e| ca_err(e.to_string()))?;
        if certificates.is_empty() {
            return Err(ca_err("no PEM certificate in it".into()));
        }
        for certificate in certificates {
            options = options.with_root_certificate(certificate);
        }
    }
    Ok(options)
}

/// The location's credential as object_store settings: the file's first, then the variables (which win).
fn credential_settings(config: &StoreConfig, kind: StoreKind) -> Result<Settings, OpenError> {
    let source = &config.credential;
    let mut settings = Settings::default();
    if let Some(file) = &source.file {
        let path = resolve_path(&config.base_dir, &file.to_string_lossy());
        let file_err =
            |reason: String| OpenError::CredentialFile { url: config.url.clone(), path: path.clone(), reason };
        let text = std::fs::read_to_string(&path).map_err(|e| file_err(e.to_string()))?;
        settings = credentials::from_file(kind, &text, &path, source).map_err(file_err)?;
    }
    let from_env = credentials::from_env(&source.env, |name| std::env::var(name).ok())
        .map_err(|reason| OpenError::Credential { url: config.url.clone(), reason })?;
    settings.0.extend(from_env.0);
    Ok(settings)
}

fn unknown_setting(config: &StoreConfig, key: &str, provider: &str) -> OpenError {
    let reason = format!("{} is not a setting {provider} knows", key.to_ascii_uppercase());
    OpenError::Credential { url: config.url.clone(), reason }
}

/// The endpoint of a virtual-hosted bucket: the bucket in front of the host, as the AWS SDKs address it
/// (`https://minio.example:9000` → `https://velero.minio.example:9000`).
fn virtual_hosted_endpoint(endpoint: &str, bucket: &str) -> Result<String, String> {
    let (scheme, rest) = endpoint
        .split_once("://")
        .ok_or_else(|| format!("endpoint {endpoint:?} has no scheme (http:// or https://)"))?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("endpoint {endpoint:?} has no host"));
    }
    Ok(format!("{scheme}://{bucket}.{}", rest.trim_end_matches('/')))
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
        let err = open(&cfg("file://bucket-a")).unwrap_err().to_string();
        assert!(err.contains("file://bucket-a") && err.contains("bucket-a does not exist"), "{err}");
        assert!(!dir.path().join("bucket-a").exists(), "a reader creates nothing");
        let local = open(&StoreConfig { create_folder: true, ..cfg("file://bucket-a") }).unwrap();
        assert_eq!(local.kind, StoreKind::Local);
        assert_eq!(local.bucket, "bucket-a");
        assert!(dir.path().join("bucket-a").is_dir());
        let s3 = open(&StoreConfig { region: Some("us-east-1".into()), ..cfg("s3://velero-backups") }).unwrap();
        assert_eq!((s3.kind, s3.bucket.as_str()), (StoreKind::S3, "velero-backups"));
        assert!(s3.pager.is_some());
        assert!(open(&cfg("ftp://x")).unwrap_err().to_string().contains("unsupported scheme"));
        assert!(open(&cfg("s3://")).is_err());
    }

    #[test]
    fn virtual_hosted_endpoints_put_the_bucket_in_front_of_the_host() {
        assert_eq!(
            virtual_hosted_endpoint("https://minio.example:9000/", "velero").unwrap(),
            "https://velero.minio.example:9000"
        );
        assert!(virtual_hosted_endpoint("minio.example", "velero").unwrap_err().contains("no scheme"));
        assert!(virtual_hosted_endpoint("https://", "velero").unwrap_err().contains("no host"));
    }

    #[test]
    fn credential_and_ca_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let s3 = |credential: CredentialSource| StoreConfig {
            url: "s3://velero".into(),
            region: Some("us-east-1".into()),
            base_dir: dir.path().into(),
            credential,
            ..Default::default()
        };
        let missing = s3(CredentialSource { file: Some("creds/cloud".into()), ..Default::default() });
        let err = open(&missing).unwrap_err().to_string();
        assert!(err.contains(&format!("credential file {}", dir.path().join("creds/cloud").display())), "{err}");
        std::fs::write(dir.path().join("cloud"), "[default]\naws_access_key_id=AKIA\naws_secret_access_key=s\n")
            .unwrap();
        let file = CredentialSource { file: Some("cloud".into()), ..Default::default() };
        open(&s3(file.clone())).unwrap();
        let err = open(&s3(CredentialSource { profile: Some("dr".into()), ..file.clone() })).unwrap_err().to_string();
        assert!(err.ends_with("cloud: no [dr] profile"), "{err}");
        let env = CredentialSource {
            env: [("AWS_NOT_A_SETTING".to_string(), "PATH".to_string())].into(),
            ..Default::default()
        };
        let err = open(&s3(env)).unwrap_err().to_string();
        assert!(err.contains("AWS_NOT_A_SETTING is not a setting S3 knows"), "{err}");
        std::fs::write(dir.path().join("ca.pem"), "not a certificate").unwrap();
        let err = open(&StoreConfig { ca_cert: Some("ca.pem".into()), ..s3(file.clone()) }).unwrap_err().to_string();
        assert!(err.contains("caCert") && err.contains("ca.pem"), "{err}");
        let err = open(&StoreConfig { url: "file://bucket".into(), create_folder: true, ..s3(file) })
            .unwrap_err()
            .to_string();
        assert!(err.contains("takes no credential"), "{err}");
    }
}
