//! The bucket adapter: object stores opened from location URLs, listed and read into the catalog.

pub mod credentials;
pub mod list;
pub mod load;
#[cfg(any(test, feature = "test-support"))]
pub mod metered;
pub mod resources;
pub mod store;

pub use credentials::CredentialSource;
pub use load::{CatalogLimits, DEFAULT_CONCURRENCY, FetchError, LoadError, LoadProgress, Loader};
pub use resources::{BackupResources, backup_resources};
pub use store::{OpenError, S3Credentials, Store, StoreConfig, open};
