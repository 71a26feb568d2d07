//! Restores made before for the same request: a second `ferry restore` of a backup reports the one that exists
//! instead of making Velero restore the same objects over themselves ("already exists … the in-cluster version is
//! different"). Only ferry's Restores count (its label), of the same backup into the same namespace mapping. Pure.

use std::time::SystemTime;

use serde_json::Value;

use crate::model::labels;

/// A Restore found for the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExistingRestore {
    pub name: String,
    /// Velero's phase; `New` while Velero has not picked it up.
    pub phase: String,
    pub created: Option<SystemTime>,
}

impl ExistingRestore {
    /// `phase Completed, created 5m ago` (ages as `kubectl get` prints them).
    pub fn summary(&self, now: SystemTime) -> String {
        let age = match self.created {
            Some(created) => format!("{} ago", age(now.duration_since(created).unwrap_or_default().as_secs())),
            None => "at an unknown time".to_string(),
        };
        format!("phase {}, created {age}", self.phase)
    }
}

/// Whether `restore` is ferry's Restore of `backup` with the mapping `from` → `to`.
pub fn is_same_request(restore: &Value, backup: &str, from: &str, to: &str) -> bool {
    let managed =
        restore.pointer("/metadata/labels").and_then(|l| l.get(labels::FERRY_MANAGED_BY)).and_then(Value::as_str)
            == Some(labels::FERRY_MANAGED_BY_VALUE);
    let spec = |p: &str| restore.pointer(p);
    let mapping = spec("/spec/namespaceMapping").and_then(Value::as_object);
    let same_mapping = mapping.is_some_and(|m| m.len() == 1 && m.get(from).and_then(Value::as_str) == Some(to));
    managed && spec("/spec/backupName").and_then(Value::as_str) == Some(backup) && same_mapping
}

/// The newest of `restores` made for the same request, if any (by creation time, then name).
pub fn newest_same_request(restores: &[Value], backup: &str, from: &str, to: &str) -> Option<ExistingRestore> {
    restores
        .iter()
        .filter(|r| is_same_request(r, backup, from, to))
        .map(existing_restore)
        .max_by(|x, y| (x.created, &x.name).cmp(&(y.created, &y.name)))
}

/// The name, phase and creation time of a Restore object.
pub fn existing_restore(restore: &Value) -> ExistingRestore {
    let text = |p: &str| restore.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
    let phase = text("/status/phase");
    ExistingRestore {
        name: text("/metadata/name"),
        phase: if phase.is_empty() { "New".into() } else { phase },
        created: humantime::parse_rfc3339(&text("/metadata/creationTimestamp")).ok(),
    }
}

/// `42s`, `5m`, `3h`, `2d`: the largest whole unit, as kubectl's AGE column.
fn age(s: u64) -> String {
    match s {
        0..60 => format!("{s}s"),
        60..3_600 => format!("{}m", s / 60),
        3_600..86_400 => format!("{}h", s / 3_600),
        _ => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn restore(name: &str, backup: &str, mapping: Value, created: &str, managed: bool) -> Value {
        let labels = if managed { json!({labels::FERRY_MANAGED_BY: "ferry"}) } else { json!({}) };
        json!({"metadata": {"name": name, "labels": labels, "creationTimestamp": created},
               "spec": {"backupName": backup, "namespaceMapping": mapping},
               "status": {"phase": "Completed"}})
    }

    #[test]
    fn only_ferrys_restores_of_the_same_backup_and_mapping_count() {
        let m = json!({"shop": "shop-dr"});
        let restores = vec![
            restore("old", "shop-1", m.clone(), "2026-12-01T10:00:00Z", true),
            restore("newer", "shop-1", m.clone(), "2026-12-02T10:00:00Z", true),
            restore("someone-elses", "shop-1", m.clone(), "2026-12-03T10:00:00Z", false),
            restore("other-backup", "shop-2", m.clone(), "2026-12-03T10:00:00Z", true),
            restore("other-mapping", "shop-1", json!({"shop": "shop-qa"}), "2026-12-03T10:00:00Z", true),
            restore("wider-mapping", "shop-1", json!({"shop": "shop-dr", "x": "y"}), "2026-12-03T10:00:00Z", true),
        ];
        let found = newest_same_request(&restores, "shop-1", "shop", "shop-dr").expect("found");
        assert_eq!(found.name, "newer");
        assert_eq!(found.phase, "Completed");
        assert_eq!(newest_same_request(&restores, "shop-3", "shop", "shop-dr"), None);
        assert_eq!(newest_same_request(&restores[2..3], "shop-1", "shop", "shop-dr"), None);
    }

    #[test]
    fn a_restore_velero_has_not_seen_is_new_and_ages_read_like_kubectl() {
        let mut r = restore("r", "b", json!({"a": "b"}), "2026-12-07T10:00:00Z", true);
        r["status"] = json!({});
        let found = existing_restore(&r);
        assert_eq!(found.phase, "New");
        let now = humantime::parse_rfc3339("2026-12-07T10:05:30Z").expect("time");
        assert_eq!(found.summary(now), "phase New, created 5m ago");
        let later = humantime::parse_rfc3339("2026-12-09T11:00:00Z").expect("time");
        assert_eq!(found.summary(later), "phase New, created 2d ago");
        r["metadata"]["creationTimestamp"] = json!("not a time");
        assert_eq!(existing_restore(&r).summary(now), "phase New, created at an unknown time");
    }
}
