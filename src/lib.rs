//! ferry federates Velero/OADP backup inventories across Kubernetes clusters. The map (docs/architecture.md has
//! the picture; `tests/module_map.rs` keeps the arrows one way):
//!
//! - Pure core, no IO: [`model`] (typed views of Velero's and OADP's objects, their keys), [`catalog`] (bucket
//!   bytes → typed backups), [`dag`] (a backup's objects in dependency order), [`resolve`] (ownership and
//!   namespace mapping), [`plan`] (the desired objects per cluster).
//! - Adapters to the outside world: [`bucket`] (object stores), [`grpc`] (the coordinator ⇄ agent transport,
//!   mTLS, identities), [`exposition`] (the `/metrics` text); [`config`] (the config file, validated, and what
//!   each part is set up with).
//! - Runtimes, the only places that join logic and IO: [`coordinator`] (catalogs, inventories, desired sets,
//!   status), [`agent`] (one per cluster: watch, publish, apply), [`restore`] (`ferry restore`'s Velero Restore).
//! - [`allocator`]: the process's allocator settings. `fixture` (bucket contents in Velero's layout) only with
//!   the `test-support` feature.

pub mod agent;
pub mod allocator;
pub mod bucket;
pub mod catalog;
pub mod config;
pub mod coordinator;
pub mod dag;
pub mod exposition;
#[cfg(any(test, feature = "test-support"))]
pub mod fixture;
#[cfg(test)]
mod fuzz_input;
pub mod grpc;
pub mod model;
pub mod plan;
pub mod resolve;
pub mod restore;
