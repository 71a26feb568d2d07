//! Which of ferry's kinds this cluster serves, found by API discovery before watching and again on a timer, so
//! that a CRD installed later (OADP after ferry) is watched without a restart and one that disappears stops
//! its watch cleanly. Velero's kinds are required (a cluster without them gets a clear error, in the log and
//! in the coordinator's status); OADP's NonAdminBackup is optional.
//!
//! [`ApiState`] is the pure part (what to start, what to stop, what to tell the coordinator); [`discover`]
//! and [`velero_version`] ask the API server.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::Api;

use crate::grpc::convert::{crd_name, is_required, watched_types};
use crate::grpc::proto::{ClusterApis, ResourceType};

/// A kind that discovery no longer shows is dropped only after this many answers in a row say so: one odd
/// answer (an API server restarting behind a load balancer) must not make the cluster look OADP-less.
pub const ABSENT_CONFIRMATIONS: u32 = 2;

/// What the agent watches, what it has listed, and what it tells the coordinator.
#[derive(Debug, Default)]
pub struct ApiState {
    /// Kinds with a running watch.
    watching: BTreeSet<String>,
    /// Kinds whose first list completed and was published: only these are `served` to the coordinator.
    listed: BTreeSet<String>,
    /// Consecutive discoveries that did not show a watched kind.
    absent: BTreeMap<String, u32>,
    velero_version: String,
}

/// What one discovery changes.
#[derive(Debug, Default, PartialEq)]
pub struct Changes {
    pub start: Vec<ResourceType>,
    pub stop: Vec<ResourceType>,
}

impl ApiState {
    /// Takes a successful discovery's answer (the kinds served, among ferry's).
    pub fn observe(&mut self, served: &BTreeSet<String>) -> Changes {
        let mut changes = Changes::default();
        for resource in watched_types() {
            let kind = resource.kind.clone();
            if resource.group.is_empty() || served.contains(&kind) {
                self.absent.remove(&kind);
                if self.watching.insert(kind) {
                    changes.start.push(resource);
                }
            } else if self.watching.contains(&kind) {
                let streak = self.absent.entry(kind.clone()).or_default();
                *streak += 1;
                if *streak >= ABSENT_CONFIRMATIONS {
                    self.absent.remove(&kind);
                    self.watching.remove(&kind);
                    self.listed.remove(&kind);
                    changes.stop.push(resource);
                }
            }
        }
        changes
    }

    pub fn is_watching(&self, kind: &str) -> bool {
        self.watching.contains(kind)
    }

    /// Kinds watched but not listed yet.
    pub fn pending(&self) -> impl Iterator<Item = &str> {
        self.watching.iter().filter(|k| !self.listed.contains(*k)).map(String::as_str)
    }

    /// A watched kind's list was published. Returns whether that changes what the coordinator is told.
    pub fn mark_listed(&mut self, kind: &str) -> bool {
        self.watching.contains(kind) && self.listed.insert(kind.to_string())
    }

    /// Returns whether the version changed.
    pub fn set_velero_version(&mut self, version: Option<String>) -> bool {
        let version = version.unwrap_or_default();
        let changed = self.velero_version != version;
        self.velero_version = version;
        changed
    }

    /// Required kinds that are not watched, as CRD names.
    pub fn missing_required(&self) -> Vec<String> {
        watched_types()
            .iter()
            .filter(|t| is_required(&t.kind) && !self.watching.contains(&t.kind))
            .map(crd_name)
            .collect()
    }

    /// What the coordinator is told.
    pub fn cluster_apis(&self) -> ClusterApis {
        ClusterApis {
            served: watched_types().into_iter().filter(|t| self.listed.contains(&t.kind)).collect(),
            missing_required: self.missing_required(),
            velero_version: self.velero_version.clone(),
        }
    }
}

/// Why discovery could not answer (the previous answer stands).
#[derive(Debug, thiserror::Error)]
#[error("API discovery of {group_version}: {source}")]
pub struct DiscoveryError {
    group_version: String,
    source: kube::Error,
}

/// The custom kinds among ferry's that the API server serves now. A group version that is not served at all
/// (404) serves none of them; any other error fails the whole discovery, so that an unreachable API server
/// never looks like a cluster without Velero.
pub async fn discover(client: &Client) -> Result<BTreeSet<String>, DiscoveryError> {
    let mut group_versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in watched_types().into_iter().filter(|t| !t.group.is_empty()) {
        group_versions.entry(format!("{}/{}", t.group, t.version)).or_default().push(t.kind);
    }
    let mut served = BTreeSet::new();
    for (group_version, kinds) in group_versions {
        let resources = match client.list_api_group_resources(&group_version).await {
            Ok(list) => list.resources,
            Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
            Err(source) => return Err(DiscoveryError { group_version, source }),
        };
        // Subresources (`backups/status`) share the kind; only the resource itself counts.
        served
            .extend(resources.into_iter().filter(|r| !r.name.contains('/') && kinds.contains(&r.kind)).map(|r| r.kind));
    }
    Ok(served)
}

/// The Velero server's version: the image tag of the `velero` Deployment in the Velero namespace, where the
/// agent may read it (an optional, namespaced permission) and the tag is a version. `None` otherwise.
pub async fn velero_version(client: &Client, velero_namespace: &str) -> Option<String> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), velero_namespace);
    let deployment = match deployments.get_opt("velero").await {
        Ok(found) => found?,
        Err(e) => {
            tracing::debug!(error = %e, "cannot read the velero Deployment; Velero's version is unknown");
            return None;
        }
    };
    let containers = deployment.spec?.template.spec?.containers;
    let container = containers.iter().find(|c| c.name == "velero").or(containers.first())?;
    image_version(container.image.as_deref()?)
}

/// `velero/velero:v1.18.3` → `v1.18.3`; a digest, or a tag that is not a version (`latest`), says nothing.
pub fn image_version(image: &str) -> Option<String> {
    if image.contains('@') {
        return None;
    }
    let last = image.rsplit('/').next()?;
    let (_, tag) = last.split_once(':')?;
    let version = tag.strip_prefix('v').unwrap_or(tag);
    version.chars().next().is_some_and(|c| c.is_ascii_digit()).then(|| tag.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn names(types: &[ResourceType]) -> Vec<&str> {
        types.iter().map(|t| t.kind.as_str()).collect()
    }

    const VELERO: [&str; 3] = ["BackupStorageLocation", "Backup", "PodVolumeBackup"];

    #[test]
    fn a_plain_velero_cluster_watches_velero_and_lacks_nothing_required() {
        let mut state = ApiState::default();
        let changes = state.observe(&kinds(&VELERO));
        assert_eq!(names(&changes.start), ["Namespace", "BackupStorageLocation", "Backup", "PodVolumeBackup"]);
        assert!(state.missing_required().is_empty());
        assert!(state.cluster_apis().served.is_empty(), "nothing is served before its list is published");
        for kind in ["Namespace", "BackupStorageLocation", "Backup", "PodVolumeBackup"] {
            assert!(state.mark_listed(kind));
        }
        assert!(!state.mark_listed("NonAdminBackup"), "not watched");
        assert_eq!(
            names(&state.cluster_apis().served),
            ["Namespace", "BackupStorageLocation", "Backup", "PodVolumeBackup"]
        );
        assert_eq!(state.pending().count(), 0);
    }

    #[test]
    fn a_crd_installed_later_starts_its_watch_and_is_served_once_listed() {
        let mut state = ApiState::default();
        state.observe(&kinds(&VELERO));
        assert_eq!(state.observe(&kinds(&VELERO)), Changes::default(), "same answer, no change");
        let mut with_oadp = kinds(&VELERO);
        with_oadp.insert("NonAdminBackup".into());
        assert_eq!(names(&state.observe(&with_oadp).start), ["NonAdminBackup"]);
        assert!(state.pending().any(|k| k == "NonAdminBackup"));
        assert!(state.mark_listed("NonAdminBackup"));
        assert!(!state.mark_listed("NonAdminBackup"), "listed once");
        assert!(names(&state.cluster_apis().served).contains(&"NonAdminBackup"));
    }

    #[test]
    fn a_crd_that_disappears_stops_only_after_a_second_answer() {
        let mut state = ApiState::default();
        let mut with_oadp = kinds(&VELERO);
        with_oadp.insert("NonAdminBackup".into());
        state.observe(&with_oadp);
        state.mark_listed("NonAdminBackup");
        assert_eq!(state.observe(&kinds(&VELERO)), Changes::default(), "one answer is not enough");
        assert_eq!(state.observe(&with_oadp), Changes::default(), "back again: the streak resets");
        state.observe(&kinds(&VELERO));
        assert_eq!(names(&state.observe(&kinds(&VELERO)).stop), ["NonAdminBackup"]);
        assert!(!state.is_watching("NonAdminBackup"));
        assert!(!names(&state.cluster_apis().served).contains(&"NonAdminBackup"));
    }

    #[test]
    fn missing_velero_crds_are_named() {
        let mut state = ApiState::default();
        state.observe(&kinds(&["BackupStorageLocation"]));
        assert_eq!(state.missing_required(), ["backups.velero.io", "podvolumebackups.velero.io"]);
        assert_eq!(state.cluster_apis().missing_required, ["backups.velero.io", "podvolumebackups.velero.io"]);
        state.observe(&kinds(&VELERO));
        assert!(state.missing_required().is_empty());
    }

    #[test]
    fn velero_versions_from_image_tags() {
        assert_eq!(image_version("velero/velero:v1.18.3").as_deref(), Some("v1.18.3"));
        assert_eq!(image_version("registry.local:5000/velero/velero:v1.17.0").as_deref(), Some("v1.17.0"));
        assert_eq!(image_version("registry.local:5000/velero/velero"), None);
        assert_eq!(image_version("velero/velero:latest"), None);
        assert_eq!(image_version("quay.io/oadp/velero@sha256:0123abcd"), None);
        let mut state = ApiState::default();
        assert!(state.set_velero_version(Some("v1.18.3".into())));
        assert!(!state.set_velero_version(Some("v1.18.3".into())));
        assert_eq!(state.cluster_apis().velero_version, "v1.18.3");
    }
}
