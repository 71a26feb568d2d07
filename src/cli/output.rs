//! `-o table|json|yaml` for every command.

use clap::ValueEnum;
use serde::Serialize;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    #[default]
    Table,
    Json,
    Yaml,
}

/// Prints `value` as JSON or YAML; `None` for table output, which each command renders itself.
pub fn structured<T: Serialize>(value: &T, format: OutputFormat) -> anyhow::Result<Option<String>> {
    Ok(match format {
        OutputFormat::Table => None,
        OutputFormat::Json => Some(serde_json::to_string_pretty(value)? + "\n"),
        OutputFormat::Yaml => Some(serde_saphyr::to_string(value)?),
    })
}
