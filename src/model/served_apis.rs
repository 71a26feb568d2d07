//! Which of the kinds ferry plans against a cluster's API serves. Velero's kinds are required; OADP's
//! NonAdminBackup is optional, since most clusters that read another cluster's backups run plain Velero.

/// What a target can hold. The default is a cluster that serves everything (an inventory recorded before
/// ferry asked, or an agent older than API discovery).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedApis {
    /// OADP's `nonadminbackups.oadp.openshift.io` is served: NAC runs there (or can), so tenant backups
    /// become NonAdminBackups.
    pub non_admin_backups: bool,
    /// Required CRDs the cluster lacks (e.g. `backups.velero.io`): nothing can be materialized there.
    pub missing_required: Vec<String>,
    /// The Velero server's version where known (e.g. `v1.18.3`).
    pub velero_version: Option<String>,
}

impl Default for ServedApis {
    fn default() -> Self {
        Self { non_admin_backups: true, missing_required: Vec::new(), velero_version: None }
    }
}

impl ServedApis {
    /// A cluster with Velero's kinds only.
    pub fn plain_velero() -> Self {
        Self { non_admin_backups: false, ..Self::default() }
    }

    /// One line for tables: `velero v1.18.3, oadp`, `velero, no oadp`, `MISSING backups.velero.io`.
    pub fn summary(&self) -> String {
        if !self.missing_required.is_empty() {
            return format!("MISSING {}", self.missing_required.join(", "));
        }
        let velero = match &self.velero_version {
            Some(version) => format!("velero {version}"),
            None => "velero".to_string(),
        };
        let oadp = if self.non_admin_backups { "oadp" } else { "no oadp" };
        format!("{velero}, {oadp}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries() {
        assert_eq!(ServedApis::default().summary(), "velero, oadp");
        let plain = ServedApis { velero_version: Some("v1.18.3".into()), ..ServedApis::plain_velero() };
        assert_eq!(plain.summary(), "velero v1.18.3, no oadp");
        let broken = ServedApis { missing_required: vec!["backups.velero.io".into()], ..ServedApis::default() };
        assert_eq!(broken.summary(), "MISSING backups.velero.io");
    }
}
