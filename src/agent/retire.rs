//! Applying a RETIRE item (docs/design.md §3 rule 5): the agent deletes one of ferry's objects only if what is on the
//! cluster *now* is still exactly what the coordinator decided on — ferry's label, the same provenance, the same
//! UID and resourceVersion — and deletes it with those as preconditions, so an object replaced or edited
//! meanwhile is left alone. A NAB is deleted plainly: never through `spec.deleteBackup`, so no backup data in
//! any bucket is touched (NAC then removes its Velero Backup CR, the CR only).

use serde_json::Value;

use super::cluster_api::{ApiError, ClusterApi, describe};
use super::guard::Guard;
use crate::grpc::proto::{ApplyOutcome, DesiredItem, ObjectRef};
use crate::model::json_meta::annotation;
use crate::model::labels;
use crate::model::ownership::is_ferry_managed_json;

/// The provenance annotations that must match exactly (`model::Provenance`).
use crate::model::provenance::ANNOTATION_KEYS as PROVENANCE_KEYS;

fn text<'v>(object: &'v Value, pointer: &str) -> Option<&'v str> {
    object.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Why `live` must not be deleted for a RETIRE item planned on `planned`, or `None`.
pub fn why_not(planned: &Value, live: &Value) -> Option<String> {
    if !is_ferry_managed_json(live) {
        return Some(format!("it does not carry {}={}", labels::FERRY_MANAGED_BY, labels::FERRY_MANAGED_BY_VALUE));
    }
    for key in PROVENANCE_KEYS {
        match (annotation(planned, key), annotation(live, key)) {
            // Equal and whole: only the prefix may be empty (a location at the bucket's root).
            (Some(p), Some(l)) if p == l && (!p.is_empty() || key == labels::FERRY_SOURCE_PREFIX) => {}
            (p, l) => return Some(format!("its provenance {key} is {l:?}, the coordinator planned on {p:?}")),
        }
    }
    for (field, pointer) in [("UID", "/metadata/uid"), ("resourceVersion", "/metadata/resourceVersion")] {
        let (p, l) = (text(planned, pointer), text(live, pointer));
        if p.is_none() || p != l {
            return Some(format!("its {field} is {l:?}, the coordinator planned on {p:?} (changed since)"));
        }
    }
    None
}

/// Deletes the object of a RETIRE item if every check passes; the outcome and a message for the coordinator.
pub async fn retire(api: &dyn ClusterApi, guard: &Guard, item: &DesiredItem, r: &ObjectRef) -> (ApplyOutcome, String) {
    if let Some(why) = guard.kind_refusal(r) {
        return (ApplyOutcome::Refused, format!("not retired: {why}"));
    }
    if !guard.policy().allow_retirement {
        let why = "this agent does not retire objects (it runs without --allow-retirement)";
        return (ApplyOutcome::Refused, format!("not retired: {why}"));
    }
    let planned: Value = match serde_json::from_slice(&item.raw_json) {
        Ok(object) => object,
        Err(e) => return (ApplyOutcome::Refused, format!("not retired: the coordinator sent invalid JSON: {e}")),
    };
    let live = match api.get_fresh(r).await {
        Ok(Some(live)) => live,
        Ok(None) => return (ApplyOutcome::Applied, "already gone".into()),
        Err(e) => return (ApplyOutcome::Failed, format!("reading {}: {e}", describe(r))),
    };
    if let Some(why) = why_not(&planned, &live) {
        let note = format!("{} left alone, not retired: {why}", describe(r));
        return (ApplyOutcome::Conflict, note);
    }
    let (uid, version) = (text(&live, "/metadata/uid"), text(&live, "/metadata/resourceVersion"));
    let (Some(uid), Some(version)) = (uid, version) else {
        return (ApplyOutcome::Conflict, "no UID or resourceVersion to delete with".into());
    };
    match api.delete(r, uid, version).await {
        Ok(()) => {
            tracing::info!(object = %describe(r), backup = %item.backup, reason = %item.reason, "retired");
            let note = format!("retired by ferry: {}", item.reason);
            api.event(r, Some(uid), "FerryRetired", &note, false).await;
            (ApplyOutcome::Applied, String::new())
        }
        Err(ApiError::NotFound) => (ApplyOutcome::Applied, "already gone".into()),
        Err(ApiError::PreconditionFailed(why)) => {
            (ApplyOutcome::Conflict, format!("{} changed while being retired; left alone: {why}", describe(r)))
        }
        Err(e) => (ApplyOutcome::Failed, format!("deleting {}: {e}", describe(r))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ferrys() -> Value {
        json!({"metadata": {"name": "b", "uid": "u1", "resourceVersion": "7",
            "labels": {labels::FERRY_MANAGED_BY: "ferry"},
            "annotations": {labels::FERRY_SOURCE_LOCATION: "shared", labels::FERRY_SOURCE_BUCKET: "bkt",
                labels::FERRY_SOURCE_PREFIX: "velero", labels::FERRY_BACKUP_NAME: "b", labels::FERRY_BACKUP_UID: "src"}}})
    }

    #[test]
    fn only_the_very_object_planned_on_is_deleted() {
        let planned = ferrys();
        assert_eq!(why_not(&planned, &ferrys()), None);
        let mut user = ferrys();
        user["metadata"]["labels"] = json!({});
        assert!(why_not(&planned, &user).unwrap().contains("does not carry"));
        let mut edited = ferrys();
        edited["metadata"]["annotations"][labels::FERRY_SOURCE_BUCKET] = "other".into();
        assert!(why_not(&planned, &edited).unwrap().contains("ferry.dev/source-bucket"));
        let mut replaced = ferrys();
        replaced["metadata"]["uid"] = "u2".into();
        assert!(why_not(&planned, &replaced).unwrap().contains("UID"));
        let mut changed = ferrys();
        changed["metadata"]["resourceVersion"] = "8".into();
        assert!(why_not(&planned, &changed).unwrap().contains("resourceVersion"));
        let mut no_provenance = ferrys();
        no_provenance["metadata"]["annotations"].as_object_mut().unwrap().remove(labels::FERRY_BACKUP_UID);
        assert!(why_not(&no_provenance, &no_provenance).is_some(), "no whole provenance, no retirement");
        // Empty marks on both sides are equal, and prove nothing: only the prefix may be empty.
        for key in [labels::FERRY_SOURCE_BUCKET, labels::FERRY_BACKUP_UID, labels::FERRY_SOURCE_LOCATION] {
            let mut empty = ferrys();
            empty["metadata"]["annotations"][key] = "".into();
            assert!(why_not(&empty, &empty).unwrap().contains(key), "{key}");
        }
        // The source-prefix mark counts like the others: planned on one prefix, another one is left alone.
        let mut root = ferrys();
        root["metadata"]["annotations"][labels::FERRY_SOURCE_PREFIX] = "".into();
        assert_eq!(why_not(&root, &root), None, "a location at the bucket's root");
        assert!(why_not(&planned, &root).unwrap().contains(labels::FERRY_SOURCE_PREFIX));
        let mut no_prefix = ferrys();
        no_prefix["metadata"]["annotations"].as_object_mut().unwrap().remove(labels::FERRY_SOURCE_PREFIX);
        assert!(why_not(&no_prefix, &no_prefix).unwrap().contains(labels::FERRY_SOURCE_PREFIX));
    }
}
