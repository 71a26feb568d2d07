//! The `ferry` command line.

pub mod agent;
pub mod backup_objects;
pub mod certs;
pub mod client_config;
pub mod completion;
pub mod coordinator;
pub mod describe;
pub mod exit;
#[cfg(feature = "test-support")]
pub mod fixture;
pub mod graph;
pub mod inventory_files;
pub mod kube_client;
pub mod operator_client;
pub mod output;
pub mod overlap;
pub mod plan;
pub mod progress;
pub mod restore;
pub mod shutdown;
pub mod status;
pub mod table;
pub mod tls_args;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(name = "ferry", version, about = "Federates Velero/OADP backup inventories across Kubernetes clusters")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t, env = "FERRY_LOG_FORMAT")]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, Default, ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show what each cluster would get from the buckets (offline: recorded inventories, no cluster needed).
    Plan(plan::PlanArgs),
    /// Run a cluster's agent: publish its inventory, apply what the coordinator sends.
    Agent(agent::AgentArgs),
    /// Run the coordinator: read the buckets, serve agents their desired sets, answer operators.
    Coordinator(coordinator::CoordinatorArgs),
    /// Ask a running coordinator what it knows: clusters, locations, and per-backup detail with --cluster.
    Status(status::StatusArgs),
    /// One backup everywhere: bucket metadata and PVBs, and per cluster what exists and what is planned.
    #[command(subcommand)]
    Describe(describe::DescribeCommand),
    /// Restore a backup into its mapped namespace with a Velero Restore (what NAC's NonAdminRestore cannot do).
    Restore(restore::RestoreArgs),
    /// Make a demo/test PKI: a CA, the coordinator's certificate, agent and operator certificates.
    Certs(certs::CertsArgs),
    /// A backup's resource dependency graph: restore order by layers, what waits on what, refused rules.
    Graph(graph::GraphArgs),
    /// Objects that two or more backups share, and whether running them in parallel is safe.
    Overlap(overlap::OverlapArgs),
    /// A shell completion script (bash, zsh, fish, powershell, elvish) on stdout.
    Completion(completion::CompletionArgs),
    /// Man pages (roff): the top-level page on stdout, or one per command into --out.
    Man(completion::ManArgs),
    /// Test fixtures (for tests, demos and benchmarks; only in builds with the test-support feature).
    #[cfg(feature = "test-support")]
    #[command(hide = true, subcommand)]
    Fixture(fixture::FixtureCommand),
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Plan(args) => plan::run(args).await,
        Command::Certs(args) => certs::run(args),
        Command::Coordinator(args) => coordinator::run(args).await,
        Command::Agent(args) => agent::run(args).await,
        Command::Restore(args) => restore::run(args).await,
        Command::Status(args) => status::run(args).await,
        Command::Describe(command) => describe::run(command).await,
        Command::Graph(args) => graph::run(args).await,
        Command::Overlap(args) => overlap::run(args).await,
        Command::Completion(args) => completion::completion(args),
        Command::Man(args) => completion::man(args),
        #[cfg(feature = "test-support")]
        Command::Fixture(command) => fixture::run(command).await,
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every argument and subcommand without help text, as `path: --flag`, walking the whole tree (hidden
    /// commands included: the fixtures are run by hand too).
    fn missing_help(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for arg in command.get_arguments() {
            // clap's own --help and --version come with their text.
            if matches!(arg.get_id().as_str(), "help" | "version") {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                missing.push(format!("{path}: {}", arg.get_id()));
            }
        }
        for sub in command.get_subcommands() {
            let sub_path = format!("{path} {}", sub.get_name());
            if sub.get_about().is_none() && sub.get_long_about().is_none() {
                missing.push(format!("{sub_path} (the command)"));
            }
            missing_help(sub, &sub_path, missing);
        }
    }

    #[test]
    fn every_flag_and_subcommand_has_help() {
        let mut command = Cli::command();
        command.build();
        let mut missing = Vec::new();
        missing_help(&command, "ferry", &mut missing);
        assert!(missing.is_empty(), "without help text:\n{}", missing.join("\n"));
    }

    #[test]
    fn the_command_tree_is_consistent() {
        Cli::command().debug_assert();
    }
}
