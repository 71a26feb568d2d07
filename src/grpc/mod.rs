//! The coordinator ⇄ agent gRPC transport: generated protocol types, mTLS configuration and identities, the
//! coordinator's service and the agent's client.
//!
//! The caller's identity is always derived from its verified client certificate ([`identity`]), never from a
//! message field.

pub mod agent_client;
pub mod authz;
pub mod backoff;
pub mod certs;
pub mod chunks;
pub mod convert;
pub mod identity;
pub mod rate_limit;
pub mod server;
pub mod set_delta;
pub mod tls;
pub mod tls_acceptor;

/// Types and service stubs generated from `proto/ferry/v1/federation.proto`.
// Lints are relaxed only for generated code, which we do not edit.
#[allow(clippy::all, clippy::pedantic, missing_docs, rustdoc::all)]
pub mod proto {
    tonic::include_proto!("ferry.v1");
}
