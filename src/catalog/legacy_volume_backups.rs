//! Legacy volume backups: backups written before Velero stored PVB files (`<name>-podvolumebackups.json.gz`)
//! name their file-system volume snapshots only in `snapshot.velero.io/<volume>` annotations (value: the snapshot
//! ID) of the Pods inside the tarball (docs/upstream.md §V6). Velero's restore falls back to them for a pod that no
//! PodVolumeBackup matches, so they are shown, never turned into PodVolumeBackups.
//!
//! Pure: a tarball's bytes in, the annotations out. The whole stream is held to [`DecodeLimits`] (a gzip bomb
//! is refused, not inflated), each Pod item to [`MAX_ITEM_BYTES`]; a Pod that cannot be read is reported by
//! its tarball path and skipped.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::io::Read;
use std::rc::Rc;

use flate2::read::MultiGzDecoder;
use serde::{Deserialize, Serialize};

use super::decode::DecodeLimits;
use crate::dag::tarball::{ItemError, MAX_ITEM_BYTES};
use crate::dag::tarball_layout::{ItemPath, item_path};

/// Velero's `podAnnotationPrefix` (`pkg/podvolume/util.go`); the rest of the key is the volume name.
pub const SNAPSHOT_ANNOTATION_PREFIX: &str = "snapshot.velero.io/";

/// Where a volume backup was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum VolumeBackupSource {
    /// A `snapshot.velero.io/<volume>` annotation of a Pod in the tarball.
    PodAnnotation,
}

impl VolumeBackupSource {
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeBackupSource::PodAnnotation => "from pod annotation",
        }
    }
}

/// One pod volume snapshot of a legacy backup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyVolumeBackup {
    pub pod_namespace: String,
    pub pod_name: String,
    pub volume: String,
    pub snapshot_id: String,
    pub source: VolumeBackupSource,
}

/// What a tarball's Pods say about their volume snapshots.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyVolumeBackups {
    /// Sorted by pod namespace, pod name, volume.
    pub volume_backups: Vec<LegacyVolumeBackup>,
    /// Pod items (or annotations) that could not be used, by tarball path; the rest is unaffected.
    pub errors: Vec<ItemError>,
}

#[derive(Debug, thiserror::Error)]
pub enum LegacyVolumeBackupError {
    #[error("not a readable gzip tar archive after {entries} entries: {source}")]
    Archive { entries: usize, source: std::io::Error },
    #[error(
        "decompresses to more than {cap} bytes from {compressed} (limits: catalog.maxDecompressedBytes, catalog.maxDecompressionRatio)"
    )]
    TooLarge { cap: u64, compressed: usize },
}

/// The legacy volume backups in the Pods of tarball `bytes` (`<name>.tar.gz`). Only `resources/pods/…` items are
/// read (the unversioned layout; version-directory copies are the same Pods); other resources' annotations do
/// not count, as Velero's restore reads them from Pods only.
pub fn legacy_volume_backups(
    bytes: &[u8],
    limits: &DecodeLimits,
) -> Result<LegacyVolumeBackups, LegacyVolumeBackupError> {
    let cap = limits.cap_for(bytes.len());
    let over_cap = Rc::new(Cell::new(false));
    let reader = CappedReader { inner: MultiGzDecoder::new(bytes), left: cap, over_cap: over_cap.clone() };
    let archive_error = |entries: usize, source: std::io::Error| {
        if over_cap.get() {
            LegacyVolumeBackupError::TooLarge { cap, compressed: bytes.len() }
        } else {
            LegacyVolumeBackupError::Archive { entries, source }
        }
    };
    let mut archive = tar::Archive::new(reader);
    let mut out = LegacyVolumeBackups::default();
    let entries = archive.entries().map_err(|e| archive_error(0, e))?;
    for (read_before, entry) in entries.enumerate() {
        let mut entry = entry.map_err(|e| archive_error(read_before, e))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = match entry.path() {
            Ok(p) => p.to_string_lossy().into_owned(),
            Err(e) => {
                out.errors.push(ItemError { path: String::from("?"), error: format!("unreadable path: {e}") });
                continue;
            }
        };
        let Some(ItemPath::Item { resource: "pods", namespace, name }) = item_path(&path) else { continue };
        let (namespace, name) = (namespace.to_string(), name.to_string());
        let size = entry.header().size().unwrap_or(u64::MAX);
        if size > MAX_ITEM_BYTES {
            out.errors.push(ItemError { path, error: format!("larger than {MAX_ITEM_BYTES} bytes") });
            continue;
        }
        let mut item = Vec::with_capacity(size as usize);
        (&mut entry).take(MAX_ITEM_BYTES).read_to_end(&mut item).map_err(|e| archive_error(read_before + 1, e))?;
        match pod_annotations(&item, &namespace, &name) {
            Ok(annotations) => collect(&path, &namespace, &name, annotations, &mut out),
            Err(error) => out.errors.push(ItemError { path, error }),
        }
    }
    out.volume_backups
        .sort_by(|a, b| (&a.pod_namespace, &a.pod_name, &a.volume).cmp(&(&b.pod_namespace, &b.pod_name, &b.volume)));
    Ok(out)
}

/// The `snapshot.velero.io/<volume>` annotations of one Pod as entries; an empty volume or snapshot ID is
/// reported (Velero would try to restore it and fail), the Pod's other volumes still count.
fn collect(
    path: &str,
    namespace: &str,
    pod: &str,
    annotations: BTreeMap<String, String>,
    out: &mut LegacyVolumeBackups,
) {
    for (key, snapshot_id) in annotations {
        let Some(volume) = key.strip_prefix(SNAPSHOT_ANNOTATION_PREFIX) else { continue };
        if volume.is_empty() || snapshot_id.is_empty() {
            out.errors.push(ItemError {
                path: path.to_string(),
                error: format!("annotation {key:?} has an empty volume name or snapshot ID"),
            });
            continue;
        }
        out.volume_backups.push(LegacyVolumeBackup {
            pod_namespace: namespace.to_string(),
            pod_name: pod.to_string(),
            volume: volume.to_string(),
            snapshot_id,
            source: VolumeBackupSource::PodAnnotation,
        });
    }
}

/// A Pod item's annotations, after checking that it is the Pod its path names.
fn pod_annotations(item: &[u8], namespace: &str, name: &str) -> Result<BTreeMap<String, String>, String> {
    #[derive(Deserialize)]
    struct Pod {
        kind: Option<String>,
        metadata: Option<Metadata>,
    }
    #[derive(Deserialize)]
    struct Metadata {
        #[serde(default)]
        name: String,
        #[serde(default)]
        namespace: String,
        annotations: Option<BTreeMap<String, String>>,
    }
    let pod: Pod = serde_json::from_slice(item).map_err(|e| format!("not a readable Pod: {e}"))?;
    if let Some(kind) = pod.kind.filter(|k| k != "Pod") {
        return Err(format!("kind is {kind:?}, expected \"Pod\""));
    }
    let metadata = pod.metadata.ok_or("missing metadata")?;
    if metadata.namespace != namespace || metadata.name != name {
        return Err(format!(
            "the file is {namespace}/{name} but the object is {}/{}",
            metadata.namespace, metadata.name
        ));
    }
    Ok(metadata.annotations.unwrap_or_default())
}

/// Fails the read once more than `left` bytes came out of the decoder, and says so in `over_cap`.
struct CappedReader<R> {
    inner: R,
    left: u64,
    over_cap: Rc<Cell<bool>>,
}

impl<R: Read> Read for CappedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // One byte past the cap tells "exactly the cap" from "over it".
        let allowed = buf.len().min(usize::try_from(self.left.saturating_add(1)).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..allowed])?;
        if n as u64 > self.left {
            self.over_cap.set(true);
            return Err(std::io::Error::other("decompressed size over the limit"));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::GzEncoder;

    fn tarball(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
        for (path, data) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o755);
            header.set_entry_type(tar::EntryType::Regular);
            tar.append_data(&mut header, path, *data).unwrap();
        }
        tar.into_inner().unwrap().finish().unwrap()
    }

    fn pod(namespace: &str, name: &str, annotations: &[(&str, &str)]) -> Vec<u8> {
        let annotations: serde_json::Map<String, serde_json::Value> =
            annotations.iter().map(|(k, v)| (k.to_string(), serde_json::json!(v))).collect();
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
            "spec": {"volumes": [{"name": "data"}, {"name": "logs"}]}
        })
        .to_string()
        .into_bytes()
    }

    fn entry(ns: &str, pod: &str, volume: &str, id: &str) -> LegacyVolumeBackup {
        LegacyVolumeBackup {
            pod_namespace: ns.into(),
            pod_name: pod.into(),
            volume: volume.into(),
            snapshot_id: id.into(),
            source: VolumeBackupSource::PodAnnotation,
        }
    }

    fn read(bytes: &[u8]) -> LegacyVolumeBackups {
        legacy_volume_backups(bytes, &DecodeLimits::default()).unwrap()
    }

    #[test]
    fn annotations_of_pods_are_volume_backups_sorted() {
        let web = pod(
            "shop",
            "web-0",
            &[
                ("snapshot.velero.io/logs", "9c1d2e3f"),
                ("snapshot.velero.io/data", "4f5a6b7c"),
                // The opt-in list restic-era users set: which volumes to back up, not what was backed up.
                ("backup.velero.io/backup-volumes", "data,logs"),
                ("kubectl.kubernetes.io/last-applied-configuration", "{}"),
            ],
        );
        let db = pod("crm", "db-0", &[("snapshot.velero.io/pgdata", "0a1b2c3d")]);
        let bytes = tarball(&[
            ("metadata/version", b"1.0.0\n"),
            ("resources/pods/namespaces/shop/web-0.json", &web),
            ("resources/pods/v1-preferredversion/namespaces/shop/web-0.json", &web),
            ("resources/pods/namespaces/crm/db-0.json", &db),
        ]);
        let found = read(&bytes);
        assert_eq!(found.errors, []);
        assert_eq!(
            found.volume_backups,
            [
                entry("crm", "db-0", "pgdata", "0a1b2c3d"),
                entry("shop", "web-0", "data", "4f5a6b7c"),
                entry("shop", "web-0", "logs", "9c1d2e3f"),
            ]
        );
        let json = serde_json::to_value(&found.volume_backups[0]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"podNamespace": "crm", "podName": "db-0", "volume": "pgdata",
                "snapshotId": "0a1b2c3d", "source": "podAnnotation"})
        );
    }

    #[test]
    fn pods_without_annotations_give_nothing() {
        let bare = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a"}}"#;
        let other = pod("a", "q", &[("app", "web")]);
        let bytes =
            tarball(&[("resources/pods/namespaces/a/p.json", bare), ("resources/pods/namespaces/a/q.json", &other)]);
        assert_eq!(read(&bytes), LegacyVolumeBackups::default());
        assert_eq!(read(&tarball(&[])), LegacyVolumeBackups::default());
    }

    #[test]
    fn a_non_pod_resource_with_the_annotation_is_ignored() {
        let config_map = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"a","annotations":{"snapshot.velero.io/data":"deadbeef"}}}"#;
        let deployment = br#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"a","annotations":{"snapshot.velero.io/data":"deadbeef"}}}"#;
        let bytes = tarball(&[
            ("resources/configmaps/namespaces/a/c.json", config_map),
            ("resources/deployments.apps/namespaces/a/d.json", deployment),
        ]);
        assert_eq!(read(&bytes), LegacyVolumeBackups::default());
    }

    #[test]
    fn a_bad_pod_is_reported_by_path_and_the_others_still_count() {
        let good = pod("a", "good", &[("snapshot.velero.io/data", "11112222")]);
        let wrong_kind = br#"{"kind":"Service","metadata":{"name":"svc","namespace":"a"}}"#;
        let moved = pod("b", "elsewhere", &[("snapshot.velero.io/data", "33334444")]);
        let not_strings =
            br#"{"kind":"Pod","metadata":{"name":"n","namespace":"a","annotations":{"snapshot.velero.io/data":7}}}"#;
        let empty_id = pod("a", "empty", &[("snapshot.velero.io/data", ""), ("snapshot.velero.io/logs", "55556666")]);
        let bytes = tarball(&[
            ("resources/pods/namespaces/a/bad.json", b"{\"metadata\": {"),
            ("resources/pods/namespaces/a/svc.json", wrong_kind),
            ("resources/pods/namespaces/a/moved.json", &moved),
            ("resources/pods/namespaces/a/n.json", not_strings),
            ("resources/pods/namespaces/a/empty.json", &empty_id),
            ("resources/pods/namespaces/a/good.json", &good),
        ]);
        let found = read(&bytes);
        assert_eq!(
            found.volume_backups,
            [entry("a", "empty", "logs", "55556666"), entry("a", "good", "data", "11112222")]
        );
        let errors: Vec<String> = found.errors.iter().map(|e| format!("{}: {}", e.path, e.error)).collect();
        assert_eq!(errors.len(), 5, "{errors:?}");
        assert!(errors[0].starts_with("resources/pods/namespaces/a/bad.json: not a readable Pod: "), "{}", errors[0]);
        assert_eq!(errors[1], "resources/pods/namespaces/a/svc.json: kind is \"Service\", expected \"Pod\"");
        assert_eq!(
            errors[2],
            "resources/pods/namespaces/a/moved.json: the file is a/moved but the object is b/elsewhere"
        );
        assert!(
            errors[3].starts_with("resources/pods/namespaces/a/n.json: not a readable Pod: invalid type"),
            "{}",
            errors[3]
        );
        assert_eq!(
            errors[4],
            "resources/pods/namespaces/a/empty.json: annotation \"snapshot.velero.io/data\" has an empty volume name or snapshot ID"
        );
    }

    #[test]
    fn a_corrupt_stream_is_an_error() {
        let err = legacy_volume_backups(b"not gzip", &DecodeLimits::default()).unwrap_err();
        assert!(matches!(err, LegacyVolumeBackupError::Archive { .. }), "{err}");
        let mut cut = tarball(&[("resources/pods/namespaces/a/p.json", &pod("a", "p", &[]))]);
        cut.truncate(cut.len() / 2);
        assert!(legacy_volume_backups(&cut, &DecodeLimits::default()).is_err());
    }

    #[test]
    fn a_gzip_bomb_is_refused_by_the_decode_limits() {
        // 64 MiB of zeros in one non-pod item compresses to ~64 KB: over 200× and over the 1 MiB floor.
        let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
        let mut header = tar::Header::new_gnu();
        let size = 64 * 1024 * 1024;
        header.set_size(size);
        header.set_mode(0o755);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, "resources/secrets/namespaces/a/s.json", std::io::repeat(0).take(size)).unwrap();
        let bomb = tar.into_inner().unwrap().finish().unwrap();
        assert!(bomb.len() < 256 * 1024, "{}", bomb.len());
        let limits = DecodeLimits::default();
        match legacy_volume_backups(&bomb, &limits) {
            Err(LegacyVolumeBackupError::TooLarge { cap, compressed }) => {
                assert_eq!((cap, compressed), (limits.cap_for(bomb.len()), bomb.len()));
                assert!(cap < size);
            }
            other => panic!("not refused: {other:?}"),
        }
        let message = legacy_volume_backups(&bomb, &limits).unwrap_err().to_string();
        assert!(message.contains("catalog.maxDecompressionRatio"), "{message}");
        // With limits that allow it, the same stream reads (and holds no pods).
        let lenient = DecodeLimits { max_decompressed_bytes: 1 << 30, max_ratio: 100_000 };
        assert_eq!(legacy_volume_backups(&bomb, &lenient).unwrap(), LegacyVolumeBackups::default());
    }

    #[test]
    fn an_oversized_pod_is_reported_and_skipped() {
        let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
        let mut header = tar::Header::new_gnu();
        let size = MAX_ITEM_BYTES + 1;
        header.set_size(size);
        header.set_mode(0o755);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, "resources/pods/namespaces/a/huge.json", std::io::repeat(b' ').take(size))
            .unwrap();
        let small = pod("a", "p", &[("snapshot.velero.io/data", "77778888")]);
        let mut header = tar::Header::new_gnu();
        header.set_size(small.len() as u64);
        header.set_mode(0o755);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, "resources/pods/namespaces/a/p.json", small.as_slice()).unwrap();
        let bytes = tar.into_inner().unwrap().finish().unwrap();
        let lenient = DecodeLimits { max_decompressed_bytes: 1 << 30, max_ratio: 100_000 };
        let found = legacy_volume_backups(&bytes, &lenient).unwrap();
        assert_eq!(found.volume_backups, [entry("a", "p", "data", "77778888")]);
        assert_eq!(
            found.errors,
            [ItemError {
                path: "resources/pods/namespaces/a/huge.json".into(),
                error: format!("larger than {MAX_ITEM_BYTES} bytes")
            }]
        );
    }
}
