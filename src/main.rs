//! The `ferry` binary: one executable for the CLI, the coordinator and the agent.

mod cli;

#[global_allocator]
static ALLOCATOR: ferry::allocator::Allocator = mimalloc::MiMalloc;

use std::io::IsTerminal;

use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() -> std::process::ExitCode {
    // Before the runtime's threads exist.
    ferry::allocator::configure();
    match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime.block_on(run()),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

async fn run() -> std::process::ExitCode {
    // One process-wide TLS crypto provider (aws-lc-rs); object_store's clients use it. A second install
    // attempt only fails if one is already there, which is fine.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let cli = cli::Cli::parse();
    let filter = EnvFilter::try_from_env("FERRY_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::stderr().is_terminal();
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr);
    match cli.log_format {
        cli::LogFormat::Text => logs.init(),
        cli::LogFormat::Json => logs.json().init(),
    }
    match cli::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(cli::exit::kind_of(&e).code())
        }
    }
}
