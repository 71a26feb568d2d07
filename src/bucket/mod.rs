//! The bucket adapter: object stores opened from location URLs, listed and read into the catalog.

pub mod budget;
pub mod credentials;
pub mod list;
pub mod load;
#[cfg(any(test, feature = "test-support"))]
pub mod metered;
pub mod resources;
pub mod store;

pub use budget::{DEFAULT_MAX_BYTES_IN_FLIGHT, ReadBudget, Reservation};
pub use credentials::CredentialSource;
pub use load::{
    CatalogLimits, DEFAULT_CONCURRENCY, DEFAULT_MAX_BACKUPS_PER_LOCATION, FetchError, LoadError, LoadProgress, Loader,
};
pub use resources::{BackupResources, backup_resources};
pub use store::{OpenError, S3Credentials, Store, StoreConfig, open};
