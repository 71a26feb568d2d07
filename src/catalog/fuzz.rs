//! Fuzz harnesses over what a bucket holds: its keys, `velero-backup.json`, PVB files and resource lists.
//! Random bytes, random gzip and mutated valid documents never panic, and whatever decodes is the document.

use std::io::Read;

use flate2::read::MultiGzDecoder;
use proptest::prelude::*;
use serde_json::{Value, json};

use proptest::sample::select;

use super::decode::{
    backup_metadata, pod_volume_backup_array, pod_volume_backup_items, pod_volume_backups, resource_list,
};
use super::{BackupFile, Layout, PodVolumeBackupFile};
use crate::fixture::{self, gzip};
use crate::fuzz_input::{apply_byte_edits, byte_edits, mutated_json, random_bytes, text};
use crate::model::BackupPhase;

const ADMIN_BACKUP: &str = "daily-1";

fn nac_backup_name() -> String {
    fixture::nac_object_uuid("team-a", "nightly", "0b4c6e1a-1d2f-4c4b-9a57-1f2e3d4c5b6a")
}

/// Valid `velero-backup.json` documents with the directory each belongs in.
fn valid_backups() -> Vec<(String, Value)> {
    let nac = nac_backup_name();
    vec![
        (ADMIN_BACKUP.into(), fixture::admin_backup_json(ADMIN_BACKUP, BackupPhase::Completed, "default")),
        (nac.clone(), fixture::nac_backup_json("team-a", "nightly", &nac, BackupPhase::InProgress)),
    ]
}

fn valid_pod_volume_backups() -> Value {
    let pvb = |i| fixture::pod_volume_backup_json(ADMIN_BACKUP, "src-uid", "team-a", i);
    json!([pvb(0), pvb(1)])
}

fn valid_resource_list() -> Value {
    json!({"v1/Namespace": ["team-a"], "v1/Pod": ["team-a/app-0", "team-a/app-1"], "apps/v1/Deployment": ["team-a/app"]})
}

/// A directory name and the bytes found in it: mostly a mutated valid document in its own directory.
fn metadata_input() -> impl Strategy<Value = (String, Vec<u8>)> {
    let mutated = (0..valid_backups().len()).prop_flat_map(|i| {
        let (dir, document) = valid_backups().swap_remove(i);
        (prop_oneof![3 => Just(dir), 1 => text()], mutated_json(document))
    });
    prop_oneof![4 => mutated, 1 => (text(), random_bytes())]
}

/// A gzipped JSON document: mutated then gzipped, gzipped then its stream mutated, or random bytes.
fn gzip_input(document: Value) -> impl Strategy<Value = Vec<u8>> {
    let plain = serde_json::to_vec(&document).unwrap_or_default();
    prop_oneof![
        4 => mutated_json(document).prop_map(|bytes| gzip(&bytes)),
        1 => byte_edits().prop_map(move |edits| apply_byte_edits(gzip(&plain), &edits)),
        1 => random_bytes(),
    ]
}

/// A bucket key: path segments Velero's layout has, or not, joined by `/`.
fn bucket_key() -> impl Strategy<Value = String> {
    const SEGMENTS: &[&str] =
        &["", "velero", "backups", "restores", "b", "velero-backup.json", "b.tar.gz", "b-podvolumebackups.json.gz"];
    let segment = prop_oneof![3 => select(SEGMENTS).prop_map(str::to_string), 1 => text()];
    proptest::collection::vec(segment, 0..6).prop_map(|segments| segments.join("/"))
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut text = Vec::new();
    let _ = MultiGzDecoder::new(bytes).read_to_end(&mut text);
    text
}

/// The JSON tree of bytes that decoded: whatever a decoder accepts, a tree parser must accept too.
fn tree(bytes: &[u8]) -> Result<Value, TestCaseError> {
    serde_json::from_slice(bytes).map_err(|e| TestCaseError::fail(format!("decoded, but no JSON tree: {e}")))
}

/// The string at `pointer`, or empty (as the views read a missing or `null` field).
fn text_at<'v>(tree: &'v Value, pointer: &str) -> &'v str {
    tree.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

#[test]
fn valid_documents_decode() {
    for (dir, document) in valid_backups() {
        let bytes = serde_json::to_vec_pretty(&document).unwrap();
        assert_eq!(backup_metadata(&dir, &bytes).unwrap().to_value(), document);
    }
    let pvbs = gzip(&serde_json::to_vec(&valid_pod_volume_backups()).unwrap());
    assert_eq!(pod_volume_backups(&pvbs, &Default::default()).unwrap().len(), 2);
    assert_eq!(PodVolumeBackupFile::from_gzip(&pvbs, &Default::default()).unwrap().objects().len(), 2);
    let list = gzip(&serde_json::to_vec(&valid_resource_list()).unwrap());
    assert_eq!(resource_list(&list, &Default::default()).unwrap().len(), 3);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn bucket_keys_classify_as_they_were_made(prefix in bucket_key(), key in bucket_key(), backup in text()) {
        let layout = Layout::new(&prefix);
        let _ = (layout.classify(&key), layout.backup_of_dir(&key));
        if !backup.is_empty() && !backup.contains('/') {
            for file in [BackupFile::Metadata, BackupFile::PodVolumeBackups, BackupFile::ResourceList, BackupFile::Tarball] {
                let made = layout.key(&backup, file);
                prop_assert_eq!(layout.classify(&made), Some((backup.as_str(), file)));
            }
            let dir = layout.backup_dir(&backup);
            prop_assert_eq!(layout.backup_of_dir(&dir), Some(backup.as_str()));
        }
    }

    #[test]
    fn backup_metadata_takes_only_what_it_can_give_back((dir, bytes) in metadata_input()) {
        if let Ok(backup) = backup_metadata(&dir, &bytes) {
            prop_assert_eq!(backup.name(), dir.as_str());
            // The planner decides on the view and builds the Backup it creates from the tree: they must agree.
            let tree = tree(&bytes)?;
            prop_assert_eq!(backup.to_value(), tree.clone());
            prop_assert_eq!(text_at(&tree, "/metadata/name"), backup.name());
            prop_assert_eq!(text_at(&tree, "/metadata/namespace"), backup.namespace());
            prop_assert_eq!(text_at(&tree, "/spec/storageLocation"), &backup.view.spec.storage_location);
            let included: Vec<&str> = tree.pointer("/spec/includedNamespaces").and_then(Value::as_array)
                .map(|names| names.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
            prop_assert_eq!(included, backup.view.spec.included_namespaces.iter().map(String::as_str).collect::<Vec<_>>());
        }
    }

    #[test]
    fn pod_volume_backup_decoders_agree(bytes in gzip_input(valid_pod_volume_backups())) {
        let objects = pod_volume_backups(&bytes, &Default::default());
        let items = pod_volume_backup_items(&bytes, &Default::default());
        let file = PodVolumeBackupFile::from_gzip(&bytes, &Default::default());
        prop_assert_eq!(objects.is_ok(), items.is_ok(), "{:?} / {:?}", objects.as_ref().err(), items.as_ref().err());
        prop_assert_eq!(objects.is_ok(), file.is_ok());
        if let (Ok(objects), Ok((names, array)), Ok(file)) = (objects, items, file) {
            let object_names: Vec<&str> = objects.iter().map(|o| o.name()).collect();
            prop_assert_eq!(names.iter().map(|n| &**n).collect::<Vec<_>>(), object_names.clone());
            prop_assert_eq!(file.names().collect::<Vec<_>>(), object_names);
            prop_assert_eq!(&pod_volume_backup_array(&array).map_err(|e| TestCaseError::fail(e.to_string()))?, &objects);
            // A file validated when read decodes again, to the same PVBs.
            prop_assert_eq!(&file.objects(), &objects);
            let expected = match tree(&gunzip(&bytes))? {
                Value::Array(items) => items,
                _ => Vec::new(),
            };
            for (object, tree) in objects.iter().zip(&expected) {
                prop_assert_eq!(text_at(tree, "/metadata/name"), object.name());
                prop_assert_eq!(text_at(tree, "/metadata/namespace"), object.namespace());
                prop_assert_eq!(text_at(tree, "/spec/pod/namespace"), &object.view.spec.pod.namespace);
            }
            prop_assert_eq!(objects.iter().map(|o| o.to_value()).collect::<Vec<_>>(), expected);
        }
    }

    #[test]
    fn pod_volume_backup_array_never_panics(
        bytes in prop_oneof![mutated_json(valid_pod_volume_backups()), random_bytes()],
    ) {
        if let Ok(objects) = pod_volume_backup_array(&bytes) {
            prop_assert_eq!(objects.iter().map(|o| o.to_value()).collect::<Vec<_>>(), tree(&bytes)?.as_array().cloned().unwrap_or_default());
        }
    }

    #[test]
    fn resource_list_takes_only_a_map_of_names(bytes in gzip_input(valid_resource_list())) {
        if let Ok(list) = resource_list(&bytes, &Default::default()) {
            prop_assert_eq!(serde_json::to_value(&list).unwrap_or_default(), tree(&gunzip(&bytes))?);
        }
    }
}
