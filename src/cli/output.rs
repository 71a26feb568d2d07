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

/// `-o` where there is no table form (a Kubernetes object: `ferry restore --dry-run`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum ObjectFormat {
    #[default]
    Yaml,
    Json,
}

/// `value` as JSON or YAML; `None` for table output, which each command renders itself.
pub fn structured<T: Serialize>(value: &T, format: OutputFormat) -> anyhow::Result<Option<String>> {
    Ok(match format {
        OutputFormat::Table => None,
        OutputFormat::Json => Some(object_text(value, ObjectFormat::Json)?),
        OutputFormat::Yaml => Some(object_text(value, ObjectFormat::Yaml)?),
    })
}

/// The one printer of JSON and YAML: pretty JSON with a final newline, or YAML.
pub fn object_text<T: Serialize>(value: &T, format: ObjectFormat) -> anyhow::Result<String> {
    Ok(match format {
        ObjectFormat::Json => serde_json::to_string_pretty(value)? + "\n",
        ObjectFormat::Yaml => serde_saphyr::to_string(value)?,
    })
}
