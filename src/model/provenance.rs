//! Where an object that ferry made came from: location, bucket, prefix, backup name and backup UID, written as
//! annotations on every object ferry creates. Retirement deletes only objects that carry ferry's label *and* a
//! whole provenance: an object made by an older ferry, or one whose marks were edited, is never retired.

use serde::Serialize;

use super::labels;
use super::meta::ObjectMeta;

/// The annotations that record a provenance, in [`Provenance::annotations`]' order.
pub const ANNOTATION_KEYS: [&str; 5] = [
    labels::FERRY_SOURCE_LOCATION,
    labels::FERRY_SOURCE_BUCKET,
    labels::FERRY_SOURCE_PREFIX,
    labels::FERRY_BACKUP_NAME,
    labels::FERRY_BACKUP_UID,
];

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    pub location: String,
    pub bucket: String,
    pub prefix: String,
    pub backup_name: String,
    pub backup_uid: String,
}

impl Provenance {
    /// The provenance of a ferry-made object, or `None` when it is not ferry's or any mark is missing.
    pub fn of(meta: &ObjectMeta) -> Option<Provenance> {
        if !super::ownership::is_ferry_managed(&meta.labels) {
            return None;
        }
        let get = |key| meta.annotation(key).map(str::to_string);
        let provenance = Provenance {
            location: get(labels::FERRY_SOURCE_LOCATION)?,
            bucket: get(labels::FERRY_SOURCE_BUCKET)?,
            prefix: get(labels::FERRY_SOURCE_PREFIX)?,
            backup_name: get(labels::FERRY_BACKUP_NAME)?,
            backup_uid: get(labels::FERRY_BACKUP_UID)?,
        };
        // Only the prefix may be empty (a location at the bucket's root): an empty mark on both sides would
        // otherwise compare equal and prove nothing.
        let whole = [&provenance.location, &provenance.bucket, &provenance.backup_name, &provenance.backup_uid]
            .iter()
            .all(|mark| !mark.is_empty());
        whole.then_some(provenance)
    }

    /// The annotations that record it.
    pub fn annotations(&self) -> [(&'static str, &str); 5] {
        [
            (labels::FERRY_SOURCE_LOCATION, &self.location),
            (labels::FERRY_SOURCE_BUCKET, &self.bucket),
            (labels::FERRY_SOURCE_PREFIX, &self.prefix),
            (labels::FERRY_BACKUP_NAME, &self.backup_name),
            (labels::FERRY_BACKUP_UID, &self.backup_uid),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Object;
    use serde_json::json;

    fn meta(labels_map: serde_json::Value, annotations: serde_json::Value) -> ObjectMeta {
        let object: Object<crate::model::Backup> =
            Object::from_value(json!({"metadata": {"name": "b", "labels": labels_map, "annotations": annotations}}))
                .unwrap();
        object.meta().clone()
    }

    #[test]
    fn only_a_ferry_object_with_every_mark_has_a_provenance() {
        let all = json!({labels::FERRY_SOURCE_LOCATION: "shared", labels::FERRY_SOURCE_BUCKET: "velero-backups",
            labels::FERRY_SOURCE_PREFIX: "", labels::FERRY_BACKUP_NAME: "daily-1", labels::FERRY_BACKUP_UID: "u1"});
        let ours = json!({labels::FERRY_MANAGED_BY: "ferry"});
        let p = Provenance::of(&meta(ours.clone(), all.clone())).expect("whole");
        assert_eq!((p.bucket.as_str(), p.prefix.as_str(), p.backup_uid.as_str()), ("velero-backups", "", "u1"));
        assert!(Provenance::of(&meta(json!({}), all.clone())).is_none(), "not ferry's");
        for missing in [labels::FERRY_SOURCE_BUCKET, labels::FERRY_BACKUP_UID, labels::FERRY_SOURCE_LOCATION] {
            let mut partial = all.clone();
            partial.as_object_mut().unwrap().remove(missing);
            assert!(Provenance::of(&meta(ours.clone(), partial)).is_none(), "{missing}");
        }
        // Every mark but the prefix must be non-empty, the bucket too.
        for key in [
            labels::FERRY_BACKUP_UID,
            labels::FERRY_SOURCE_BUCKET,
            labels::FERRY_SOURCE_LOCATION,
            labels::FERRY_BACKUP_NAME,
        ] {
            let mut empty = all.clone();
            empty[key] = "".into();
            assert!(Provenance::of(&meta(ours.clone(), empty)).is_none(), "{key}");
        }
    }
}
