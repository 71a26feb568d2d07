//! Velero `Backup` (velero.io/v1), the fields ferry decides on (`pkg/apis/velero/v1/backup_types.go`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer};

use super::meta::{ObjectMeta, list_or_null, null_as_default, struct_from_object, struct_from_object_or_null};
use super::object::Kind;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Backup {
    #[serde(deserialize_with = "struct_from_object")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "struct_from_object_or_null")]
    pub spec: BackupSpec,
    #[serde(deserialize_with = "struct_from_object_or_null")]
    pub status: BackupStatus,
}

impl Kind for Backup {
    const API_VERSION: &'static str = "velero.io/v1";
    const KIND: &'static str = "Backup";
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BackupSpec {
    #[serde(deserialize_with = "list_or_null")]
    pub included_namespaces: Box<[String]>,
    #[serde(deserialize_with = "list_or_null")]
    pub excluded_namespaces: Box<[String]>,
    pub include_cluster_resources: Option<bool>,
    #[serde(deserialize_with = "list_or_null")]
    pub included_cluster_scoped_resources: Box<[String]>,
    #[serde(deserialize_with = "null_as_default")]
    pub storage_location: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BackupStatus {
    #[serde(deserialize_with = "phase_or_new")]
    pub phase: BackupPhase,
    // Boxed, not `String`: a coordinator holds a Backup view per Backup of every cluster.
    pub expiration: Option<Box<str>>,
    pub completion_timestamp: Option<Box<str>>,
}

/// Every phase of Velero v1.18's Backup, in the CRD's enum order. An empty phase means `New`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackupPhase {
    #[default]
    New,
    Queued,
    ReadyToStart,
    FailedValidation,
    InProgress,
    WaitingForPluginOperations,
    WaitingForPluginOperationsPartiallyFailed,
    Finalizing,
    FinalizingPartiallyFailed,
    Completed,
    PartiallyFailed,
    Failed,
    Deleting,
}

impl BackupPhase {
    pub const ALL: [BackupPhase; 13] = [
        Self::New,
        Self::Queued,
        Self::ReadyToStart,
        Self::FailedValidation,
        Self::InProgress,
        Self::WaitingForPluginOperations,
        Self::WaitingForPluginOperationsPartiallyFailed,
        Self::Finalizing,
        Self::FinalizingPartiallyFailed,
        Self::Completed,
        Self::PartiallyFailed,
        Self::Failed,
        Self::Deleting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "New",
            Self::Queued => "Queued",
            Self::ReadyToStart => "ReadyToStart",
            Self::FailedValidation => "FailedValidation",
            Self::InProgress => "InProgress",
            Self::WaitingForPluginOperations => "WaitingForPluginOperations",
            Self::WaitingForPluginOperationsPartiallyFailed => "WaitingForPluginOperationsPartiallyFailed",
            Self::Finalizing => "Finalizing",
            Self::FinalizingPartiallyFailed => "FinalizingPartiallyFailed",
            Self::Completed => "Completed",
            Self::PartiallyFailed => "PartiallyFailed",
            Self::Failed => "Failed",
            Self::Deleting => "Deleting",
        }
    }

    /// Completed, PartiallyFailed or Failed: the backup will not change any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::PartiallyFailed | Self::Failed)
    }

    /// Phases in which the main backup is done but plugin operations or finalization still run. Velero's sync
    /// skips these until `status.expiration` passes, then syncs them as PartiallyFailed so GC can remove them
    /// (`backup_sync_controller.go`, docs/upstream.md §V5 step 6c).
    pub fn is_finishing(self) -> bool {
        matches!(
            self,
            Self::WaitingForPluginOperations
                | Self::WaitingForPluginOperationsPartiallyFailed
                | Self::Finalizing
                | Self::FinalizingPartiallyFailed
        )
    }
}

impl fmt::Display for BackupPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown Backup phase {0:?} (Velero v1.18 knows {known})", known = known_phases())]
pub struct UnknownPhase(pub String);

fn known_phases() -> String {
    BackupPhase::ALL.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")
}

impl FromStr for BackupPhase {
    type Err = UnknownPhase;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Ok(Self::New);
        }
        Self::ALL.into_iter().find(|p| p.as_str() == s).ok_or_else(|| UnknownPhase(s.to_string()))
    }
}

fn phase_or_new<'de, D: Deserializer<'de>>(deserializer: D) -> Result<BackupPhase, D::Error> {
    let text = Option::<String>::deserialize(deserializer)?.unwrap_or_default();
    text.parse().map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_round_trips_and_unknown_is_an_error() {
        for phase in BackupPhase::ALL {
            assert_eq!(phase.as_str().parse::<BackupPhase>(), Ok(phase));
        }
        assert_eq!("".parse::<BackupPhase>(), Ok(BackupPhase::New));
        let err = "Exploded".parse::<BackupPhase>().unwrap_err();
        assert!(err.to_string().contains("\"Exploded\""));
    }

    #[test]
    fn nulls_from_go_read_as_empty() {
        let b: Backup = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "b", "labels": null},
            "spec": {"includedNamespaces": null, "storageLocation": "default"},
            "status": {"phase": "Completed"}
        }))
        .unwrap();
        assert!(b.spec.included_namespaces.is_empty());
        assert_eq!(b.status.phase, BackupPhase::Completed);
    }
}
