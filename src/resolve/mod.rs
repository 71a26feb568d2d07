//! Who owns a backup, and where its tenant's namespace lands on another cluster. Pure.

pub mod mapping;
pub mod nac_uuid;
pub mod owner;

pub use mapping::{MappingError, NamespaceMapping, NamespaceMappings, PrefixRewrite, ProtectedNamespaces};
pub use owner::{Owner, Tenant, owner_of};

/// Why ferry will not materialize something; shown in plans and status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);
