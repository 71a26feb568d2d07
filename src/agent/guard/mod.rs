//! What an agent accepts from its coordinator (docs/design.md §6, docs/security.md): an allowlist of exactly what
//! ferry plans, checked against the agent's own view of its cluster, not against the coordinator's word. Even a
//! compromised coordinator gets nothing applied but
//! - ferry's own Velero Backups in this cluster's Velero namespace, finished, bound to a ReadOnly BSL of this
//!   cluster, their tenant marks consistent ([`backup`]);
//! - PodVolumeBackups, finished, of exactly the Backup they wait for, of a pod in one of its namespaces
//!   ([`pod_volume_backup`]);
//! - NonAdminBackups in the shape NAC treats as synced, of exactly the Backup they wait for, in that Backup's
//!   origin namespace or one this cluster allows it to be mapped to ([`non_admin_backup`], [`mapping_allowlist`]).
//!
//! Checks come in two steps: [`Guard::refusal`] on what was sent, before anything is read for it, and
//! [`Guard::related_refusal`] once the objects it relates to (the Backup, its BSL) were read from this cluster.
//! Pure.

mod backup;

pub mod mapping_allowlist;
mod non_admin_backup;
mod pod_volume_backup;

use std::time::SystemTime;

use serde_json::Value;

use super::cluster_api::describe;
use crate::grpc::convert::{api_of, object_ref};
use crate::grpc::proto::{DesiredItem, ObjectRef};
use crate::model::json_meta;
use crate::model::names::{invalid_namespace_name, invalid_object_name};
use crate::model::ownership::is_ferry_managed_json;
use crate::model::{Backup, BackupStorageLocation, Kind, NonAdminBackup, PodVolumeBackup, labels};
use crate::resolve::ProtectedNamespaces;

pub use mapping_allowlist::{AllowedMapping, MappingAllowlist};

/// Phases after which Velero acts on a Backup no more (the plan materializes only these).
const BACKUP_DONE: [&str; 3] = ["Completed", "PartiallyFailed", "Failed"];
/// Phases after which Velero's node-agent acts on a PodVolumeBackup no more.
const PVB_DONE: [&str; 2] = ["Completed", "Failed"];

/// What the member cluster itself allows, beyond what every agent accepts (the agent's flags).
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// `--allow-read-write-locations`: accept Backups and PVBs bound to a ReadWrite BSL, whose Velero may
    /// delete the backup's data from the bucket (GC of expired backups, `velero backup delete`).
    pub allow_read_write_locations: bool,
    /// `--allow-namespace-mapping`: tenant namespaces a tenant backup may be mapped to, besides its own.
    pub mappings: MappingAllowlist,
    /// `--allow-retirement`: carry out RETIRE items (delete ferry's own objects). Off, none is carried out.
    pub allow_retirement: bool,
}

/// The objects an item relates to, as read from this cluster (not as the coordinator says).
#[derive(Debug, Default, Clone, Copy)]
pub struct Related<'a> {
    /// The Backup a PVB or NAB belongs to.
    pub backup: Option<&'a Value>,
    /// The BSL a Backup is bound to (for a PVB or NAB: the BSL of its Backup).
    pub location: Option<&'a Value>,
}

/// What an item needs read from this cluster before [`Guard::related_refusal`] can judge it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Needs {
    /// The Backup it belongs to (PVB, NAB).
    pub backup: Option<ObjectRef>,
    /// The BSL named by the body (Backup) — for PVBs and NABs, the BSL of that Backup, read once it is.
    pub location: Option<ObjectRef>,
}

/// The agent's rules, for one cluster.
#[derive(Debug, Clone)]
pub struct Guard {
    velero_namespace: String,
    protected: ProtectedNamespaces,
    policy: Policy,
}

impl Guard {
    /// `extra_protected`: namespaces to protect on top of `default`, `kube-*`, `openshift-*` and the Velero
    /// namespace (the agent's `--protected-namespaces`).
    pub fn new(velero_namespace: &str, extra_protected: &[String]) -> Self {
        let protected = ProtectedNamespaces { listed: extra_protected.iter().cloned().collect(), ..Default::default() };
        Self { velero_namespace: velero_namespace.to_string(), protected, policy: Policy::default() }
    }

    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Why the agent refuses to apply `item` (whose JSON body, if any, is `body`), or `None`: what can be judged
    /// from what was sent alone.
    pub fn refusal(&self, item: &DesiredItem, r: &ObjectRef, body: Option<&Value>) -> Option<String> {
        self.check_ref(r)
            .or_else(|| self.check_waits(item))
            .or_else(|| body.and_then(|b| self.check_body(r, b)))
            .or_else(|| body.and_then(|b| self.check_kind(item, r, b)))
    }

    /// Why the agent refuses to touch `r` at all (kind, name, namespace), or `None`: what a RETIRE item is checked
    /// against before anything is read.
    pub fn kind_refusal(&self, r: &ObjectRef) -> Option<String> {
        self.check_ref(r)
    }

    /// Why the agent records no Event about `r` for its coordinator (a REFUSE or CONFLICT item), or `None`: only
    /// about an object it could create, or one of this cluster's BSLs (a refused location) — never about a
    /// Secret, never in `kube-system`, never with a name that is a path.
    pub fn event_refusal(&self, r: &ObjectRef) -> Option<String> {
        let is_bsl = r.kind == BackupStorageLocation::KIND
            && api_of(&r.kind).is_some_and(|(group, version)| group == r.group && version == r.version);
        if !is_bsl {
            return self.check_ref(r);
        }
        if let Some(reason) = invalid_object_name(&r.name) {
            return Some(format!("BackupStorageLocation {:?} is not a valid object name: {reason}", r.name));
        }
        (r.namespace != self.velero_namespace).then(|| {
            format!("BackupStorageLocation {}/{} is outside this cluster's Velero namespace", r.namespace, r.name)
        })
    }

    /// What must be read from this cluster to judge `body` (which passed [`Guard::refusal`]).
    pub fn needs(&self, r: &ObjectRef, body: &Value) -> Needs {
        let backup_named = |name: &str| Some(object_ref(Backup::KIND, &self.velero_namespace, name));
        match r.kind.as_str() {
            Backup::KIND => Needs { backup: None, location: self.location_ref(text(body, "/spec/storageLocation")) },
            PodVolumeBackup::KIND => {
                Needs { backup: backup_named(annotation(body, labels::FERRY_BACKUP_NAME)), location: None }
            }
            _ => Needs { backup: backup_named(label(body, labels::NAB_SYNCED_FROM_NACUUID)), location: None },
        }
    }

    /// The BSL of this cluster named `name`.
    pub fn location_ref(&self, name: &str) -> Option<ObjectRef> {
        (!name.is_empty()).then(|| object_ref(BackupStorageLocation::KIND, &self.velero_namespace, name))
    }

    /// Why the agent refuses `body` (which passed [`Guard::refusal`]) given what it relates to on this cluster,
    /// or `None`. `body` is the object as it would be written (a PVB with its Backup's UID filled in).
    pub fn related_refusal(
        &self,
        r: &ObjectRef,
        body: &Value,
        related: Related<'_>,
        now: SystemTime,
    ) -> Option<String> {
        match r.kind.as_str() {
            Backup::KIND => backup::location_refusal(&self.policy, body, related.location, "its Backup", now),
            PodVolumeBackup::KIND => pod_volume_backup::related_refusal(&self.policy, body, related, now),
            _ => non_admin_backup::related_refusal(r, body, related),
        }
    }

    fn check_kind(&self, item: &DesiredItem, r: &ObjectRef, body: &Value) -> Option<String> {
        match r.kind.as_str() {
            Backup::KIND => backup::body_refusal(self, body),
            PodVolumeBackup::KIND => pod_volume_backup::body_refusal(item, body),
            _ => non_admin_backup::body_refusal(self, item, r, body),
        }
    }

    /// Why no tenant backup of namespace `from` may land in namespace `to` here, or `None`.
    fn mapping_refusal(&self, from: &str, to: &str) -> Option<String> {
        if let Some(why) = invalid_namespace_name(to) {
            return Some(format!("namespace {to:?} is not a namespace name: {why}"));
        }
        if to == self.velero_namespace {
            return Some(format!("{to:?} is this cluster's Velero/OADP namespace"));
        }
        if let Some(why) = self.protected.why_protected("", to) {
            return Some(why);
        }
        (!self.policy.mappings.allows(from, to)).then(|| {
            format!(
                "this cluster does not allow mapping namespace {from:?} to {to:?}: it allows {}",
                self.policy.mappings.describe()
            )
        })
    }
    fn check_ref(&self, r: &ObjectRef) -> Option<String> {
        let known = matches!(r.kind.as_str(), Backup::KIND | PodVolumeBackup::KIND | NonAdminBackup::KIND);
        let api = api_of(&r.kind);
        if !known || api.is_none_or(|(group, version)| group != r.group || version != r.version) {
            return Some(format!(
                "{}/{} {} is not a kind an agent creates (only velero.io/v1 Backup and PodVolumeBackup, oadp.openshift.io/v1alpha1 NonAdminBackup)",
                r.group, r.version, r.kind
            ));
        }
        // Names go into request paths as they are: a `/` or `?` in one would address another resource.
        if let Some(reason) = invalid_object_name(&r.name) {
            return Some(format!("{} {:?} is not a valid object name: {reason}", r.kind, r.name));
        }
        if r.kind == NonAdminBackup::KIND {
            if r.namespace.is_empty() {
                return Some("a NonAdminBackup needs a namespace".into());
            }
            if let Some(reason) = invalid_namespace_name(&r.namespace) {
                return Some(format!(
                    "NonAdminBackup namespace {:?} is not a valid namespace name: {reason}",
                    r.namespace
                ));
            }
            if r.namespace == self.velero_namespace {
                return Some(format!(
                    "no NonAdminBackup goes into a protected namespace: {:?} is this cluster's Velero/OADP namespace",
                    r.namespace
                ));
            }
            return self
                .protected
                .why_protected("", &r.namespace)
                .map(|why| format!("no NonAdminBackup goes into a protected namespace: {why}"));
        }
        (r.namespace != self.velero_namespace).then(|| {
            format!(
                "{} {}/{} is outside this cluster's Velero namespace {:?}",
                r.kind, r.namespace, r.name, self.velero_namespace
            )
        })
    }

    fn check_waits(&self, item: &DesiredItem) -> Option<String> {
        item.waits_for.iter().find_map(|w| {
            // What an item waits for is read by name, so its name must be one too.
            let invalid = match w.kind.as_str() {
                "Namespace" if w.group.is_empty() && w.namespace.is_empty() => invalid_namespace_name(&w.name),
                Backup::KIND | PodVolumeBackup::KIND if w.group == "velero.io" && w.namespace == self.velero_namespace => {
                    invalid_object_name(&w.name)
                }
                _ => {
                    return Some(format!(
                        "it waits for {} {}/{}, which is neither a Namespace nor a Backup or PodVolumeBackup in the Velero namespace",
                        w.kind, w.namespace, w.name
                    ));
                }
            };
            invalid.map(|reason| format!("it waits for {} {:?}, which is not a valid name: {reason}", w.kind, w.name))
        })
    }

    fn check_body(&self, r: &ObjectRef, body: &Value) -> Option<String> {
        let text = |pointer: &str| body.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
        let api_version = if r.group.is_empty() { r.version.clone() } else { format!("{}/{}", r.group, r.version) };
        let checks = [
            ("apiVersion", text("/apiVersion"), api_version.as_str()),
            ("kind", text("/kind"), r.kind.as_str()),
            ("metadata.namespace", text("/metadata/namespace"), r.namespace.as_str()),
            ("metadata.name", text("/metadata/name"), r.name.as_str()),
        ];
        if let Some((field, found, _)) = checks.iter().find(|(_, found, want)| found != want) {
            return Some(format!("the body's {field} is {found:?}, not the item's ({})", describe(r)));
        }
        if !is_ferry_managed_json(body) {
            return Some(format!(
                "the body lacks ferry's label {}={}",
                labels::FERRY_MANAGED_BY,
                labels::FERRY_MANAGED_BY_VALUE
            ));
        }
        // Every object ferry plans records where it came from; retirement and the agent's update rule read it.
        if let Some(missing) =
            PROVENANCE_KEYS.iter().find(|key| annotation(body, key).is_empty() && **key != labels::FERRY_SOURCE_PREFIX)
        {
            return Some(format!("the body lacks ferry's provenance annotation {missing}"));
        }
        if body
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(labels::FERRY_SOURCE_PREFIX))
            .is_none_or(|v| !v.is_string())
        {
            return Some(format!("the body lacks ferry's provenance annotation {}", labels::FERRY_SOURCE_PREFIX));
        }
        // The plan drops the source cluster's finalizers: one here would block every deletion of the object.
        if body.pointer("/metadata/finalizers").is_some_and(|f| f.as_array().is_none_or(|a| !a.is_empty())) {
            return Some("the body carries finalizers, which ferry never plans".into());
        }
        let done: &[&str] = match r.kind.as_str() {
            Backup::KIND => &BACKUP_DONE,
            PodVolumeBackup::KIND => &PVB_DONE,
            _ => return None,
        };
        let phase = text("/status/phase");
        (!done.contains(&phase)).then(|| {
            format!(
                "its status.phase is {phase:?}, not finished ({}): Velero would run it on this cluster",
                done.join(", ")
            )
        })
    }
}

/// The annotations that record an object's provenance; the prefix may be empty.
use crate::model::provenance::ANNOTATION_KEYS as PROVENANCE_KEYS;

fn text<'v>(body: &'v Value, pointer: &str) -> &'v str {
    body.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// A label of `body`, empty when absent: the guard's rules read an absent mark and an empty one alike.
fn label<'v>(body: &'v Value, key: &str) -> &'v str {
    json_meta::label(body, key).unwrap_or_default()
}

/// An annotation of `body`, empty when absent.
fn annotation<'v>(body: &'v Value, key: &str) -> &'v str {
    json_meta::annotation(body, key).unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod test_objects;

#[cfg(test)]
mod tests;
