//! `ferry completion <shell>` and `ferry man [--out DIR]`: shell completion scripts and roff man pages, both
//! generated from the same clap command tree the binary parses with, so they cannot drift from the flags.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::Cli;

#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell to write a completion script for (to stdout; e.g. `ferry completion bash > /etc/bash_completion.d/ferry`).
    pub shell: Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write one page per command (ferry.1, ferry-status.1, …) into this directory; without it, the top-level
    /// page goes to stdout.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub fn completion(args: CompletionArgs) -> anyhow::Result<()> {
    let mut command = Cli::command();
    let mut stdout = std::io::stdout().lock();
    clap_complete::generate(args.shell, &mut command, "ferry", &mut stdout);
    stdout.flush()?;
    Ok(())
}

pub fn man(args: ManArgs) -> anyhow::Result<()> {
    let command = Cli::command();
    match args.out {
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            // Hidden commands (the test fixtures) get no page: generate_to skips them.
            clap_mangen::generate_to(command, &dir).with_context(|| format!("writing man pages to {}", dir.display()))
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            clap_mangen::Man::new(command).render(&mut stdout)?;
            stdout.flush()?;
            Ok(())
        }
    }
}
