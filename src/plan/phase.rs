//! Which backups are materialized at all, by phase.
//!
//! Terminal backups (Completed, PartiallyFailed, Failed) are. Backups still finishing plugin operations are
//! waited for until their expiration passes, then synced as PartiallyFailed, as Velero's own sync does. Earlier
//! phases wait; FailedValidation and Deleting are refused.

use std::time::SystemTime;

use crate::model::{Backup, BackupPhase, Object};

use super::{Action, PlanItem, Prerequisite, Target};

/// How a materialized backup's phase is written on the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseGate {
    AsIs,
    /// Expired while finishing: written as PartiallyFailed so Velero's GC can remove it.
    ExpiredToPartiallyFailed,
}

/// A backup that is not materialized (yet).
pub struct NotMaterialized {
    action: Action,
    reason: String,
    waits_for: Option<Prerequisite>,
}

impl NotMaterialized {
    pub fn into_item(self, target: &Target<'_>, backup: &str) -> PlanItem {
        PlanItem::about_backup(self.action, target, backup, self.reason, self.waits_for)
    }
}

pub fn gate(backup: &Object<Backup>, now: SystemTime) -> Result<PhaseGate, NotMaterialized> {
    let phase = backup.view.status.phase;
    if phase.is_terminal() {
        return Ok(PhaseGate::AsIs);
    }
    if phase.is_finishing() {
        let expired = backup
            .view
            .status
            .expiration
            .as_deref()
            .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
            .is_some_and(|expiration| expiration <= now);
        if expired {
            return Ok(PhaseGate::ExpiredToPartiallyFailed);
        }
    }
    Err(match phase {
        BackupPhase::FailedValidation => NotMaterialized {
            action: Action::Refuse,
            reason: "phase FailedValidation: the backup never ran and holds no data".into(),
            waits_for: None,
        },
        BackupPhase::Deleting => NotMaterialized {
            action: Action::Refuse,
            reason: "phase Deleting: the backup is being deleted on its source cluster".into(),
            waits_for: None,
        },
        _ => NotMaterialized {
            action: Action::Wait,
            reason: format!("phase {phase}: only terminal backups are materialized"),
            waits_for: Some(Prerequisite::TerminalPhase),
        },
    })
}
