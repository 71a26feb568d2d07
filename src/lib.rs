//! ferry federates Velero/OADP backup inventories across Kubernetes clusters.
//!
//! Pure core: [`catalog`] (bucket bytes → typed backups), [`resolve`] (ownership and namespace mapping),
//! [`plan`] (the desired objects per cluster). IO at the edges: [`bucket`] (object stores).

pub mod agent;
pub mod allocator;
pub mod bucket;
pub mod catalog;
pub mod config;
pub mod coordinator;
pub mod dag;
pub mod fixture;
#[cfg(test)]
mod fuzz_input;
pub mod grpc;
pub mod model;
pub mod plan;
pub mod resolve;
pub mod restore;
