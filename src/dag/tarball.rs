//! A backup tarball (`<name>.tar.gz`) → [`Object`]s, streaming (flate2 + tar) over any `impl Read`, so a
//! multi-gigabyte backup is never held in memory whole. Where items are, and which entries are copies of them
//! (skipped, as Velero's restore-side `archive.Parse` does), is [`super::tarball_layout`]'s.

use std::io::Read;

use flate2::read::MultiGzDecoder;
use serde::Serialize;

use super::node::Object;
use super::object_json;
use super::tarball_layout::{FORMAT_VERSION_PATH, ItemPath, item_path};

/// Items larger than this are reported and skipped (a Kubernetes object is at most ~1.5 MiB in etcd).
pub const MAX_ITEM_BYTES: u64 = 16 * 1024 * 1024;

/// What one tarball may cost in all: [`MAX_ITEM_BYTES`] bounds one item, these the sum, so that a small
/// tarball inflating to millions of items (a gzip bomb) stops before it exhausts memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TarballLimits {
    /// Most entries read (items, copies, directories, everything).
    pub max_entries: usize,
    /// Most bytes of items read and parsed, in all.
    pub max_item_bytes: u64,
}

impl Default for TarballLimits {
    /// A backup of 1M objects (the dependency graph's benchmark size) has ~2M entries (each item and its
    /// preferred-version copy) and ~1–2 GiB of items; twice that is refused.
    fn default() -> Self {
        Self { max_entries: 4_000_000, max_item_bytes: 4 * 1024 * 1024 * 1024 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TarballError {
    #[error("not a readable gzip tar archive after {entries} entries: {source}")]
    Archive { entries: usize, source: std::io::Error },
    #[error("more than {max} entries: refused as a whole (a gzip bomb, or raise the limit)")]
    TooManyEntries { max: usize },
    #[error(
        "its items hold more than {max} bytes after {entries} entries: refused as a whole (a gzip bomb, or raise the limit)"
    )]
    TooLarge { max: u64, entries: usize },
}

/// An item that could not be used; the rest of the tarball is unaffected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ItemError {
    pub path: String,
    pub error: String,
}

#[derive(Debug, Clone, Default)]
pub struct TarballContents {
    pub objects: Vec<Object>,
    pub errors: Vec<ItemError>,
    /// Preferred-version and other-version copies skipped.
    pub copies: usize,
    /// `metadata/version`, e.g. `1.1.0`.
    pub format_version: Option<String>,
}

/// Reads every item of a gzip tarball under the default [`TarballLimits`].
pub fn read(reader: impl Read) -> Result<TarballContents, TarballError> {
    read_with(reader, &TarballLimits::default())
}

/// Reads every item of a gzip tarball. A corrupt stream, or one past `limits`, is an error (the caller names
/// the tarball); a bad item is reported and skipped.
pub fn read_with(reader: impl Read, limits: &TarballLimits) -> Result<TarballContents, TarballError> {
    let mut archive = tar::Archive::new(MultiGzDecoder::new(reader));
    let mut out = TarballContents::default();
    let mut item_bytes = 0u64;
    let entries = archive.entries().map_err(|source| TarballError::Archive { entries: 0, source })?;
    for (read_before, entry) in entries.enumerate() {
        let mut entry = entry.map_err(|source| TarballError::Archive { entries: read_before, source })?;
        let entries_read = read_before + 1;
        if entries_read > limits.max_entries {
            return Err(TarballError::TooManyEntries { max: limits.max_entries });
        }
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
        let size = entry.header().size().unwrap_or(u64::MAX);
        if path == FORMAT_VERSION_PATH && size < 64 {
            let mut text = String::new();
            if entry.read_to_string(&mut text).is_ok() {
                out.format_version = Some(text.trim().to_string());
            }
            continue;
        }
        let (resource, namespace, name) = match item_path(&path) {
            Some(ItemPath::Item { resource, namespace, name }) => (resource, namespace, name),
            Some(ItemPath::Copy) => {
                out.copies += 1;
                continue;
            }
            Some(ItemPath::Other) => continue,
            None => {
                out.errors.push(ItemError { path, error: "not in Velero's resources/ layout".into() });
                continue;
            }
        };
        if size > MAX_ITEM_BYTES {
            out.errors.push(ItemError { path, error: format!("larger than {MAX_ITEM_BYTES} bytes") });
            continue;
        }
        // Checked against the header's size before reading: a lying header is cut at `MAX_ITEM_BYTES` below.
        item_bytes = item_bytes.saturating_add(size);
        if item_bytes > limits.max_item_bytes {
            return Err(TarballError::TooLarge { max: limits.max_item_bytes, entries: entries_read });
        }
        let mut bytes = Vec::with_capacity(size as usize);
        if let Err(source) = (&mut entry).take(MAX_ITEM_BYTES).read_to_end(&mut bytes) {
            return Err(TarballError::Archive { entries: entries_read, source });
        }
        match object_json::parse(&bytes, Some(resource)) {
            Ok(object) if object.namespace != namespace || object.name != name => out.errors.push(ItemError {
                error: format!("the file is {namespace}/{name} but the object is {}/{}", object.namespace, object.name),
                path,
            }),
            Ok(object) => out.objects.push(object),
            Err(e) => out.errors.push(ItemError { path, error: e.to_string() }),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dag::{Graph, Priorities, layers, traverse};
    use crate::fixture::{self, FixtureSpec};
    use crate::fuzz_input::mutated_json;
    use flate2::Compression;
    use flate2::write::GzEncoder;
    use proptest::prelude::*;

    fn fixture_tarball() -> Vec<u8> {
        let spec = FixtureSpec::default();
        let objects = fixture::objects_for(&spec, 0);
        objects.into_iter().find(|o| o.key.ends_with(".tar.gz")).expect("a tarball").body.to_vec()
    }

    fn tar_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        for (path, data) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o755);
            header.set_entry_type(tar::EntryType::Regular);
            tar.append_data(&mut header, path, *data).unwrap();
        }
        tar.into_inner().unwrap()
    }

    fn gz(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn reads_the_fixture_tarball_once_per_item() {
        let contents = read(fixture_tarball().as_slice()).unwrap();
        assert!(contents.errors.is_empty(), "{:?}", contents.errors);
        assert_eq!(contents.format_version.as_deref(), Some("1.1.0"));
        assert_eq!(contents.copies, contents.objects.len(), "each item has one preferred-version copy");
        let pods: Vec<_> = contents.objects.iter().filter(|o| o.kind == "Pod").collect();
        assert!(!pods.is_empty() && pods.iter().all(|p| p.owners.len() == 1 && p.resource == "pods"));
        let graph = Graph::build(contents.objects, &Priorities::velero_default(), &[]);
        assert!(graph.report.cycles.is_empty());
        assert!(graph.report.duplicates.is_empty());
        // Every owner is in the backup; the StorageClass is not (the fixture does not back it up).
        assert!(graph.report.external.iter().all(|e| e.target.starts_with("StorageClass.storage.k8s.io gp3-csi")));
        let l = layers(&graph);
        assert!(l.never_ready.is_empty());
        assert!(l.layers[0].iter().all(|v| graph.object(*v).unwrap().kind == "Namespace"));
    }

    #[test]
    fn bad_input() {
        assert!(read(&b"not gzip at all"[..]).is_err());
        let mut truncated = fixture_tarball();
        truncated.truncate(truncated.len() / 2);
        assert!(read(truncated.as_slice()).is_err());
        let items = tar_of(&[
            ("resources/pods/namespaces/a/bad.json", b"{not json"),
            ("resources/pods/namespaces/a/nokind.json", br#"{"apiVersion":"v1","metadata":{"name":"nokind"}}"#),
            ("resources/pods/namespaces/a/nometa.json", br#"{"apiVersion":"v1","kind":"Pod"}"#),
            (
                "resources/pods/namespaces/a/other.json",
                br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","namespace":"a"}}"#,
            ),
            (
                "resources/pods/namespaces/a/ok.json",
                br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"ok","namespace":"a"}}"#,
            ),
            ("resources/pods/namespaces/a/b/c.json", b"{}"),
        ]);
        let contents = read(gz(&items).as_slice()).unwrap();
        assert_eq!(contents.objects.len(), 1);
        let errors: Vec<String> = contents.errors.iter().map(|e| format!("{}: {}", e.path, e.error)).collect();
        assert_eq!(errors.len(), 5, "{errors:?}");
        assert!(errors[0].contains("bad.json: not valid JSON"));
        assert!(errors[1].contains("nokind.json: missing kind"));
        assert!(errors[2].contains("nometa.json: missing metadata"));
        assert!(errors[3].contains("the file is a/other but the object is a/x"));
        assert!(errors[4].contains("not in Velero's resources/ layout"));
    }

    #[test]
    fn a_tarball_past_its_total_limits_is_refused_whole() {
        let item = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a"}}"#;
        let names: Vec<String> = (0..10).map(|i| format!("resources/pods/namespaces/a/p{i}.json")).collect();
        let entries: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &item[..])).collect();
        let tarball = gz(&tar_of(&entries));
        assert_eq!(
            read(tarball.as_slice()).unwrap().errors.len(),
            10,
            "names differ from the object: read, not refused"
        );
        let few = TarballLimits { max_entries: 9, ..TarballLimits::default() };
        let error = read_with(tarball.as_slice(), &few).unwrap_err().to_string();
        assert!(error.contains("more than 9 entries"), "{error}");
        let small = TarballLimits { max_item_bytes: 5 * item.len() as u64, ..TarballLimits::default() };
        let error = read_with(tarball.as_slice(), &small).unwrap_err().to_string();
        assert!(error.contains(&format!("more than {} bytes after 6 entries", 5 * item.len())), "{error}");
        let exact = TarballLimits { max_entries: 10, max_item_bytes: 10 * item.len() as u64 };
        assert!(read_with(tarball.as_slice(), &exact).is_ok());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096), gzip in any::<bool>()) {
            let input = if gzip { gz(&bytes) } else { bytes };
            let _ = read(input.as_slice());
        }

        #[test]
        fn mutated_tarballs_never_panic(
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16),
            cut in proptest::option::of(any::<prop::sample::Index>()),
        ) {
            // Mutate the tar stream (headers, sizes, JSON), then gzip it, so the tar and JSON parsers see it.
            static PLAIN: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
            let mut tar = PLAIN
                .get_or_init(|| {
                    let mut plain = Vec::new();
                    MultiGzDecoder::new(fixture_tarball().as_slice()).read_to_end(&mut plain).unwrap();
                    plain
                })
                .clone();
            for (at, byte) in flips {
                let i = at.index(tar.len());
                tar[i] = byte;
            }
            if let Some(cut) = cut {
                tar.truncate(cut.index(tar.len()));
            }
            if let Ok(contents) = read(gz(&tar).as_slice()) {
                let _ = layers(&Graph::build(contents.objects, &Priorities::velero_default(), &[]));
            }
        }

        #[test]
        fn tarballs_with_a_mutated_item_never_panic(
            (which, item) in (0..fixture_items().len())
                .prop_flat_map(|i| (Just(i), mutated_json(serde_json::from_slice(&fixture_items()[i].1).unwrap_or_default()))),
        ) {
            // Byte flips rarely keep an item JSON; value edits (other types, odd numbers, deep nesting, repeated
            // keys) do, and reach the item reader and the graph's reference extraction.
            let mut entries = fixture_items().to_vec();
            entries[which].1 = item;
            let entries: Vec<(&str, &[u8])> = entries.iter().map(|(path, data)| (path.as_str(), data.as_slice())).collect();
            let contents = read(gz(&tar_of(&entries)).as_slice()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert!(contents.objects.len() + contents.errors.len() + contents.copies <= entries.len());
            let graph = Graph::build(contents.objects, &Priorities::velero_default(), &[]);
            let _ = (layers(&graph), traverse(&graph));
        }
    }

    /// The fixture tarball's file entries, in order.
    fn fixture_items() -> &'static [(String, Vec<u8>)] {
        static ITEMS: std::sync::OnceLock<Vec<(String, Vec<u8>)>> = std::sync::OnceLock::new();
        ITEMS.get_or_init(|| {
            let tarball = fixture_tarball();
            let mut archive = tar::Archive::new(MultiGzDecoder::new(tarball.as_slice()));
            let mut items = Vec::new();
            for entry in archive.entries().expect("fixture tar") {
                let mut entry = entry.expect("fixture entry");
                if entry.header().entry_type().is_file() {
                    let path = entry.path().expect("fixture path").to_string_lossy().into_owned();
                    let mut data = Vec::new();
                    entry.read_to_end(&mut data).expect("fixture data");
                    items.push((path, data));
                }
            }
            items
        })
    }
}
