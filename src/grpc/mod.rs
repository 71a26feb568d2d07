//! The coordinator ⇄ agent gRPC transport: generated protocol types, mTLS configuration and identities, who may
//! call what, protocol ⇄ domain conversion, chunking, DesiredSet deltas, rate limiting and reconnect backoff.
//! Transport only: the coordinator's service is `coordinator::service`, the agent's client `agent::client`;
//! nothing here uses either.
//!
//! The caller's identity is always derived from its verified client certificate ([`identity`]), never from a
//! message field.

pub mod authz;
pub mod backoff;
pub mod certs;
pub mod chunks;
pub mod convert;
pub mod coordinator_identity;
pub mod identity;
pub mod rate_limit;
pub mod revocation;
pub mod set_delta;
pub mod tls;
pub mod tls_acceptor;

/// Types and service stubs generated from `proto/ferry/v1/federation.proto`.
// Lints are relaxed only for generated code, which we do not edit.
#[allow(clippy::all, clippy::pedantic, missing_docs, rustdoc::all)]
pub mod proto {
    tonic::include_proto!("ferry.v1");
}
