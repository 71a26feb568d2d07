//! Refresh bookkeeping: from a listing and the previous catalog, decide per backup what must be fetched.
//! An object whose version (ETag, or size + last-modified) is unchanged is never fetched again.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::layout::{BackupFile, Layout};
use super::{CatalogBackup, ObjectVersion};

/// What a listing says about one backup directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedBackup {
    pub name: String,
    pub metadata: Option<ObjectVersion>,
    pub pod_volume_backups: Option<ObjectVersion>,
    pub has_resource_list: bool,
}

/// Groups listed objects by backup. `names` (from the delimiter listing) define which backups exist;
/// objects of other directories are ignored until a listing names them.
pub fn group_listing<K: AsRef<str>>(
    layout: &Layout,
    names: impl IntoIterator<Item = String>,
    objects: impl IntoIterator<Item = (K, ObjectVersion)>,
) -> Vec<ListedBackup> {
    let mut by_name: BTreeMap<String, ListedBackup> = names
        .into_iter()
        .map(|name| {
            let listed =
                ListedBackup { name: name.clone(), metadata: None, pod_volume_backups: None, has_resource_list: false };
            (name, listed)
        })
        .collect();
    for (key, version) in objects {
        let Some((backup, file)) = layout.classify(key.as_ref()) else { continue };
        let Some(listed) = by_name.get_mut(backup) else { continue };
        match file {
            BackupFile::Metadata => listed.metadata = Some(version),
            BackupFile::PodVolumeBackups => listed.pod_volume_backups = Some(version),
            BackupFile::ResourceList => listed.has_resource_list = true,
            BackupFile::Tarball | BackupFile::Other => {}
        }
    }
    by_name.into_values().collect()
}

/// What to do for one listed backup.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Nothing changed: keep the previous entry (no request).
    Reuse(Arc<CatalogBackup>),
    /// Fetch what changed; the rest comes from `previous`.
    Fetch { listed: ListedBackup, metadata: bool, pod_volume_backups: bool, previous: Option<Arc<CatalogBackup>> },
    /// The directory has no `velero-backup.json` (half-written, or not Velero's).
    MissingMetadata { name: String },
}

/// Decides what to fetch for `listed`. With an incomplete listing (`complete == false`) a PVB file or resource
/// list that the listing did not show may simply not have been reached: it is unknown, not gone, so the previous
/// value is kept, and without one the PVB file is probed (a GET; NotFound means there is none).
pub fn decide(mut listed: ListedBackup, previous: Option<&Arc<CatalogBackup>>, complete: bool) -> Step {
    let Some(metadata) = listed.metadata.clone() else {
        return Step::MissingMetadata { name: listed.name };
    };
    let pvbs_unknown = !complete && listed.pod_volume_backups.is_none();
    if pvbs_unknown && let Some(prev) = previous {
        listed.pod_volume_backups = prev.pod_volume_backups_version.clone();
        listed.has_resource_list |= prev.has_resource_list;
    }
    let Some(prev) = previous else {
        let pvbs = listed.pod_volume_backups.is_some() || pvbs_unknown;
        return Step::Fetch { listed, metadata: true, pod_volume_backups: pvbs, previous: None };
    };
    let metadata_changed = !prev.metadata_version.same_as(&metadata);
    let pvbs_changed = match (&listed.pod_volume_backups, &prev.pod_volume_backups_version) {
        (Some(now), Some(before)) => !now.same_as(before),
        (Some(_), None) => true,
        // Absent now (gone: nothing to fetch, but the entry changes) or absent before and now.
        (None, _) => false,
    };
    let pvbs_vanished = listed.pod_volume_backups.is_none() && prev.pod_volume_backups_version.is_some();
    let resource_list_changed = listed.has_resource_list != prev.has_resource_list;
    if !metadata_changed && !pvbs_changed && !pvbs_vanished && !resource_list_changed {
        return Step::Reuse(Arc::clone(prev));
    }
    Step::Fetch {
        listed,
        metadata: metadata_changed,
        pod_volume_backups: pvbs_changed,
        previous: Some(Arc::clone(prev)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Object;

    fn v(tag: &str) -> ObjectVersion {
        ObjectVersion::new(Some(tag), 10, 1)
    }

    fn entry(meta: &str, pvbs: Option<&str>) -> Arc<CatalogBackup> {
        let backup = Object::from_value(serde_json::json!({"metadata": {"name": "b"}})).unwrap();
        Arc::new(CatalogBackup {
            name: "b".into(),
            backup,
            pod_volume_backups: Default::default(),
            metadata_version: v(meta),
            pod_volume_backups_version: pvbs.map(v),
            pod_volume_backups_error: None,
            has_resource_list: false,
        })
    }

    fn listed(meta: Option<&str>, pvbs: Option<&str>) -> ListedBackup {
        ListedBackup {
            name: "b".into(),
            metadata: meta.map(v),
            pod_volume_backups: pvbs.map(v),
            has_resource_list: false,
        }
    }

    #[test]
    fn grouping_uses_the_layout() {
        let layout = Layout::new("velero");
        let keys = [
            ("velero/backups/b/velero-backup.json".to_string(), v("1")),
            ("velero/backups/b/b-podvolumebackups.json.gz".to_string(), v("2")),
            ("velero/backups/b/b-resource-list.json.gz".to_string(), v("3")),
            ("velero/backups/late/velero-backup.json".to_string(), v("4")),
        ];
        let grouped = group_listing(
            &layout,
            ["b".to_string(), "empty".to_string()],
            keys.iter().map(|(k, v)| (k.as_str(), v.clone())),
        );
        assert_eq!(grouped.len(), 2);
        assert_eq!(grouped[0].metadata, Some(v("1")));
        assert!(grouped[0].has_resource_list);
        assert_eq!(grouped[1].name, "empty");
        assert_eq!(grouped[1].metadata, None);
    }

    #[test]
    fn unchanged_is_reused_changed_is_fetched() {
        let prev = entry("m1", Some("p1"));
        assert!(matches!(decide(listed(Some("m1"), Some("p1")), Some(&prev), true), Step::Reuse(_)));
        assert!(matches!(
            decide(listed(Some("m2"), Some("p1")), Some(&prev), true),
            Step::Fetch { metadata: true, pod_volume_backups: false, .. }
        ));
        assert!(matches!(
            decide(listed(Some("m1"), Some("p2")), Some(&prev), true),
            Step::Fetch { metadata: false, pod_volume_backups: true, .. }
        ));
        assert!(matches!(
            decide(listed(Some("m1"), None), Some(&prev), true),
            Step::Fetch { metadata: false, pod_volume_backups: false, .. }
        ));
        assert!(matches!(
            decide(listed(Some("m1"), None), None, true),
            Step::Fetch { metadata: true, pod_volume_backups: false, .. }
        ));
        assert!(matches!(decide(listed(None, Some("p1")), Some(&prev), true), Step::MissingMetadata { .. }));
    }

    #[test]
    fn an_incomplete_listing_never_reads_as_a_vanished_file() {
        let prev = entry("m1", Some("p1"));
        assert!(matches!(decide(listed(Some("m1"), None), Some(&prev), false), Step::Reuse(_)));
        assert!(matches!(
            decide(listed(Some("m1"), None), None, false),
            Step::Fetch { metadata: true, pod_volume_backups: true, .. }
        ));
    }

    #[test]
    fn without_etags_size_and_mtime_decide() {
        let a = ObjectVersion { e_tag: None, size: 5, last_modified_ms: 7 };
        assert!(a.same_as(&ObjectVersion { e_tag: None, size: 5, last_modified_ms: 7 }));
        assert!(!a.same_as(&ObjectVersion { e_tag: None, size: 5, last_modified_ms: 8 }));
    }
}
