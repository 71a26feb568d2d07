//! What an agent accepts from its coordinator (docs/design.md §6, defence in depth): even a compromised coordinator
//! gets nothing applied but ferry's own Velero Backups and PodVolumeBackups in this cluster's Velero namespace
//! and NonAdminBackups outside protected namespaces, each body naming exactly its item, carrying ferry's label
//! and (for Velero's kinds) a finished status — so that Velero never *runs* a Backup ferry created, and its
//! node-agent never works on a PVB. Pure.

use serde_json::Value;

use super::cluster_api::describe;
use crate::grpc::convert::api_of;
use crate::grpc::proto::{DesiredItem, ObjectRef};
use crate::model::names::{invalid_namespace_name, invalid_object_name};
use crate::model::ownership::is_ferry_managed_json;
use crate::model::{Backup, Kind, NonAdminBackup, PodVolumeBackup, labels};
use crate::resolve::ProtectedNamespaces;

/// Phases after which Velero acts on a Backup no more (the plan materializes only these).
const BACKUP_DONE: [&str; 3] = ["Completed", "PartiallyFailed", "Failed"];
/// Phases after which Velero's node-agent acts on a PodVolumeBackup no more.
const PVB_DONE: [&str; 2] = ["Completed", "Failed"];

/// The agent's rules, for one cluster.
#[derive(Debug, Clone)]
pub struct Guard {
    velero_namespace: String,
    protected: ProtectedNamespaces,
}

impl Guard {
    /// `extra_protected`: namespaces to protect on top of `default`, `kube-*`, `openshift-*` and the Velero
    /// namespace (the agent's `--protected-namespaces`).
    pub fn new(velero_namespace: &str, extra_protected: &[String]) -> Self {
        let protected = ProtectedNamespaces { listed: extra_protected.iter().cloned().collect(), ..Default::default() };
        Self { velero_namespace: velero_namespace.to_string(), protected }
    }

    /// Why the agent refuses to apply `item` (whose JSON body, if any, is `body`), or `None`.
    pub fn refusal(&self, item: &DesiredItem, r: &ObjectRef, body: Option<&Value>) -> Option<String> {
        self.check_ref(r).or_else(|| self.check_waits(item)).or_else(|| body.and_then(|b| self.check_body(r, b)))
    }

    /// Why the agent refuses to touch `r` at all (kind, name, namespace), or `None`: what a RETIRE item is
    /// checked against before anything is read.
    pub fn kind_refusal(&self, r: &ObjectRef) -> Option<String> {
        self.check_ref(r)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::convert::object_ref;
    use serde_json::json;

    fn guard() -> Guard {
        Guard::new("velero", &["vault".to_string()])
    }

    fn body(kind: &str, ns: &str, name: &str, phase: Option<&str>) -> Value {
        let api = if kind == "NonAdminBackup" { "oadp.openshift.io/v1alpha1" } else { "velero.io/v1" };
        let mut b = json!({"apiVersion": api, "kind": kind,
            "metadata": {"name": name, "namespace": ns, "labels": {labels::FERRY_MANAGED_BY: labels::FERRY_MANAGED_BY_VALUE}}});
        if let Some(phase) = phase {
            b["status"] = json!({"phase": phase});
        }
        b
    }

    fn check(r: ObjectRef, waits: Vec<ObjectRef>, b: Option<Value>) -> Option<String> {
        let item = DesiredItem { r#ref: Some(r.clone()), waits_for: waits, ..Default::default() };
        guard().refusal(&item, &r, b.as_ref())
    }

    #[test]
    fn what_ferry_plans_passes() {
        let backup = object_ref("Backup", "velero", "b1");
        assert_eq!(check(backup, vec![], Some(body("Backup", "velero", "b1", Some("Completed")))), None);
        let pvb = object_ref("PodVolumeBackup", "velero", "p1");
        let waits = vec![object_ref("Backup", "velero", "b1")];
        assert_eq!(check(pvb, waits, Some(body("PodVolumeBackup", "velero", "p1", Some("Failed")))), None);
        let nab = object_ref("NonAdminBackup", "team-a", "nightly");
        let waits = vec![object_ref("Namespace", "", "team-a"), object_ref("Backup", "velero", "b1")];
        assert_eq!(check(nab, waits, Some(body("NonAdminBackup", "team-a", "nightly", None))), None);
        assert_eq!(check(object_ref("Backup", "velero", "b1"), vec![], None), None, "a template-less wait");
    }

    #[test]
    fn a_hostile_coordinators_items_are_each_refused_with_the_reason() {
        // (what, item ref, what it waits for, body, expected reason)
        type Case = (&'static str, ObjectRef, Vec<ObjectRef>, Option<Value>, &'static str);
        let cases: Vec<Case> = vec![
            ("other kind", object_ref("Namespace", "", "evil"), vec![], None, "not a kind an agent creates"),
            (
                "a Secret",
                ObjectRef {
                    group: String::new(),
                    version: "v1".into(),
                    kind: "Secret".into(),
                    namespace: "velero".into(),
                    name: "s".into(),
                },
                vec![],
                None,
                "not a kind",
            ),
            (
                "Backup elsewhere",
                object_ref("Backup", "kube-system", "b"),
                vec![],
                None,
                "outside this cluster's Velero namespace",
            ),
            ("NAB in kube-system", object_ref("NonAdminBackup", "kube-system", "n"), vec![], None, "protected"),
            ("NAB in velero", object_ref("NonAdminBackup", "velero", "n"), vec![], None, "Velero/OADP namespace"),
            ("NAB in listed", object_ref("NonAdminBackup", "vault", "n"), vec![], None, "protectedNamespaces"),
            ("NAB in default", object_ref("NonAdminBackup", "default", "n"), vec![], None, "protected"),
            ("no name", object_ref("Backup", "velero", ""), vec![], None, "not a valid object name"),
            (
                "a name that is a path",
                object_ref("Backup", "velero", "b1/status"),
                vec![],
                Some(body("Backup", "velero", "b1/status", Some("Completed"))),
                "not a valid object name",
            ),
            ("NAB namespace a path", object_ref("NonAdminBackup", "a/b", "n"), vec![], None, "not a valid namespace"),
            (
                "waits for a path",
                object_ref("NonAdminBackup", "team-a", "n"),
                vec![object_ref("Namespace", "", "team-a/secrets/s")],
                None,
                "not a valid name",
            ),
            (
                "body renamed",
                object_ref("Backup", "velero", "b1"),
                vec![],
                Some(body("Backup", "velero", "other", Some("Completed"))),
                "metadata.name is \"other\"",
            ),
            (
                "body moved",
                object_ref("NonAdminBackup", "team-a", "n"),
                vec![],
                Some(body("NonAdminBackup", "kube-system", "n", None)),
                "metadata.namespace is \"kube-system\"",
            ),
            (
                "body of another kind",
                object_ref("Backup", "velero", "b1"),
                vec![],
                Some(body("PodVolumeBackup", "velero", "b1", Some("Completed"))),
                "kind is \"PodVolumeBackup\"",
            ),
            (
                "Backup without status",
                object_ref("Backup", "velero", "b1"),
                vec![],
                Some(body("Backup", "velero", "b1", None)),
                "Velero would run it",
            ),
            (
                "PVB in progress",
                object_ref("PodVolumeBackup", "velero", "p"),
                vec![],
                Some(body("PodVolumeBackup", "velero", "p", Some("InProgress"))),
                "\"InProgress\"",
            ),
            (
                "waits for a Secret",
                object_ref("NonAdminBackup", "team-a", "n"),
                vec![ObjectRef {
                    group: String::new(),
                    version: "v1".into(),
                    kind: "Secret".into(),
                    namespace: "team-a".into(),
                    name: "s".into(),
                }],
                None,
                "neither a Namespace nor a Backup",
            ),
        ];
        for (what, r, waits, b, expected) in cases {
            let why = check(r, waits, b).unwrap_or_else(|| panic!("{what}: accepted"));
            assert!(why.contains(expected), "{what}: {why}");
        }
        let mut unlabelled = body("Backup", "velero", "b1", Some("Completed"));
        unlabelled["metadata"]["labels"] = json!({});
        let why = check(object_ref("Backup", "velero", "b1"), vec![], Some(unlabelled)).unwrap();
        assert!(why.contains("lacks ferry's label"), "{why}");
    }
}
