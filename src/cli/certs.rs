//! `ferry certs`: a demo/test PKI (CA, coordinator, agents, operators) written as PEM files.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use ferry::grpc::certs::{self, CertsSpec, Validity};

#[derive(Debug, Args)]
pub struct CertsArgs {
    /// Directory to write into (created if missing). An existing ca.pem + ca-key.pem there is reused.
    #[arg(long)]
    pub out: PathBuf,
    /// SPIFFE trust domain of the identities (spiffe://<trust-domain>/cluster/<name>).
    #[arg(long, default_value = "ferry.local")]
    pub trust_domain: String,
    /// A cluster to make an agent certificate for (repeatable).
    #[arg(long = "cluster")]
    pub clusters: Vec<String>,
    /// An operator to make a certificate for (repeatable), for `ferry status` and `plan` against a coordinator.
    #[arg(long = "operator")]
    pub operators: Vec<String>,
    /// Extra DNS names or IP addresses for the coordinator certificate (besides localhost and 127.0.0.1).
    #[arg(long = "coordinator-san")]
    pub coordinator_sans: Vec<String>,
    /// Validity of every certificate made, in days.
    #[arg(long, default_value_t = 365)]
    pub days: u32,
}

pub fn run(args: CertsArgs) -> anyhow::Result<()> {
    let spec = CertsSpec {
        out: args.out,
        trust_domain: args.trust_domain,
        clusters: args.clusters,
        operators: args.operators,
        coordinator_sans: args.coordinator_sans,
        validity: Validity::days_from_now(args.days),
    };
    let written = certs::write_all(&spec).with_context(|| format!("writing certificates to {}", spec.out.display()))?;
    for path in written {
        println!("{}", path.display());
    }
    Ok(())
}
