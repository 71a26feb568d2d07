//! When a long-running command (`ferry coordinator`, `ferry agent`) stops: on SIGTERM (Kubernetes) or SIGINT.

use anyhow::Context;

/// SIGTERM (Kubernetes) or SIGINT (Ctrl-C).
pub async fn shutdown_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}
