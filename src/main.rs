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
    let filter = log_filter(|name| std::env::var(name).ok());
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

/// The default log filter.
const DEFAULT_LOG: &str = "info";

/// The tracing filter: `RUST_LOG` when set (the Rust convention), else `FERRY_LOG`, else `info`. A filter that
/// does not parse is not silently ignored: a warning on stderr says which and that the default is used.
fn log_filter(var: impl Fn(&str) -> Option<String>) -> EnvFilter {
    let chosen = ["RUST_LOG", "FERRY_LOG"]
        .into_iter()
        .find_map(|name| var(name).filter(|v| !v.trim().is_empty()).map(|value| (name, value)));
    let Some((name, value)) = chosen else {
        return EnvFilter::new(DEFAULT_LOG);
    };
    match EnvFilter::try_new(&value) {
        Ok(filter) => filter,
        Err(e) => {
            // The subscriber is not installed yet: straight to stderr.
            eprintln!("warning: ignoring {name}={value:?} ({e}); logging at the default level {DEFAULT_LOG:?}");
            EnvFilter::new(DEFAULT_LOG)
        }
    }
}
