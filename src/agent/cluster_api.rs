//! What the agent needs from a cluster, as a trait ([`ClusterApi`]): the real API server's is in `kube_api.rs`,
//! the watch-cache-backed one in `index.rs`, in-memory ones in unit tests. Also how the agent names an object in
//! its messages and Events ([`describe`]).

use serde_json::Value;

use crate::grpc::proto::ObjectRef;

/// An API server error, reduced to what the agent decides on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    #[error("already exists")]
    AlreadyExists,
    #[error("not found")]
    NotFound,
    /// A delete's UID or resourceVersion precondition did not hold.
    #[error("precondition failed: {0}")]
    PreconditionFailed(String),
    #[error("{0}")]
    Other(String),
}

/// What the agent needs from a cluster.
#[async_trait::async_trait]
pub trait ClusterApi: Send + Sync {
    /// The object, or `None` if it does not exist (possibly from a cache that lags writes a little).
    async fn get(&self, r: &ObjectRef) -> Result<Option<Value>, ApiError>;
    /// The object as the API server has it now (after a create found it exists).
    async fn get_fresh(&self, r: &ObjectRef) -> Result<Option<Value>, ApiError> {
        self.get(r).await
    }
    /// Creates an absent object (fails with `AlreadyExists` if someone else created it meanwhile).
    async fn create(&self, r: &ObjectRef, object: &Value) -> Result<Value, ApiError>;
    /// Deletes an object if its UID and resourceVersion are still these (preconditions).
    async fn delete(&self, r: &ObjectRef, uid: &str, resource_version: &str) -> Result<(), ApiError>;
    /// Records a Kubernetes Event about an object (best effort).
    async fn event(&self, about: &ObjectRef, uid: Option<&str>, reason: &str, note: &str, warning: bool);
}

/// An object as the agent's messages and Events name it: `Kind namespace/name` (`Kind name` if cluster-scoped).
pub fn describe(r: &ObjectRef) -> String {
    if r.namespace.is_empty() {
        format!("{} {}", r.kind, r.name)
    } else {
        format!("{} {}/{}", r.kind, r.namespace, r.name)
    }
}
