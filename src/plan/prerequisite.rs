//! What a `wait` item waits for. Structured, so that the agent can watch for the exact object (the protocol
//! sends it as an object reference); rendered as the words `ferry plan` prints.

use std::fmt;

use serde::{Serialize, Serializer};

/// Something that must exist (or happen) before an item can be applied.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Prerequisite {
    /// A namespace on the target: ferry never creates tenant namespaces, it waits for them.
    Namespace { name: String },
    /// A Backup CR that this plan (or the same DesiredSet) creates.
    Backup { namespace: String, name: String },
    /// A Backup CR that exists but whose UID is unknown yet (a recorded inventory without UIDs).
    BackupUid { namespace: String, name: String },
    /// A Backup CR that Velero's own sync is expected to create (`materialize.veleroBackups: false`).
    VeleroSync { namespace: String, name: String },
    /// The backup itself must reach a terminal phase in the bucket: nothing on the cluster to wait for.
    TerminalPhase,
    /// The backup's PVB file (this key) must become readable: a tenant's NAB is held while its volume data
    /// could not be restored (the bucket, not the cluster, must change).
    ReadablePodVolumeBackups { key: String },
}

impl Prerequisite {
    /// The Backup CR this waits for, if it waits for one.
    pub fn backup(&self) -> Option<(&str, &str)> {
        match self {
            Prerequisite::Backup { namespace, name }
            | Prerequisite::BackupUid { namespace, name }
            | Prerequisite::VeleroSync { namespace, name } => Some((namespace, name)),
            Prerequisite::Namespace { .. }
            | Prerequisite::TerminalPhase
            | Prerequisite::ReadablePodVolumeBackups { .. } => None,
        }
    }
}

impl fmt::Display for Prerequisite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prerequisite::Namespace { name } => write!(f, "Namespace {name}"),
            Prerequisite::Backup { namespace, name } => write!(f, "Backup {namespace}/{name}"),
            Prerequisite::BackupUid { namespace, name } => write!(f, "the UID of Backup {namespace}/{name}"),
            Prerequisite::VeleroSync { namespace, name } => write!(
                f,
                "Velero's backup sync to create Backup {namespace}/{name} (materialize.veleroBackups is false)"
            ),
            Prerequisite::TerminalPhase => {
                f.write_str("the backup to reach a terminal phase (Completed, PartiallyFailed or Failed)")
            }
            Prerequisite::ReadablePodVolumeBackups { key } => write!(f, "a readable PVB file {key}"),
        }
    }
}

/// `ferry plan -o json` shows the words, as before the type existed.
impl Serialize for Prerequisite {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}
