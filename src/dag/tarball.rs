//! A backup tarball (`<name>.tar.gz`) → [`Object`]s, streaming (flate2 + tar) over any `impl Read`, so a
//! multi-gigabyte backup is never held in memory whole.
//!
//! Layout (velero.md §2): items are at `resources/<resource.group>/namespaces/<ns>/<name>.json` or
//! `resources/<resource.group>/cluster/<name>.json`. Velero writes each preferred-version item a second time under
//! `<version>-preferredversion/`, and other versions under `<version>/` with `EnableAPIGroupVersions`; those are
//! copies of the same objects and are skipped (as Velero's restore-side `archive.Parse` does).

use std::io::Read;

use flate2::read::MultiGzDecoder;
use serde::Serialize;

use super::node::Object;
use super::object_json;

/// Items larger than this are reported and skipped (a Kubernetes object is at most ~1.5 MiB in etcd).
pub const MAX_ITEM_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum TarballError {
    #[error("not a readable gzip tar archive after {entries} entries: {source}")]
    Archive { entries: usize, source: std::io::Error },
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

/// Where an entry is in the tarball's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemPath<'p> {
    Item { resource: &'p str, namespace: &'p str, name: &'p str },
    /// A version directory's copy of an item.
    Copy,
    /// Not under `resources/` (metadata, …) or not an item.
    Other,
}

/// Parses an entry path; `None` for a path under `resources/` that fits no layout.
pub fn item_path(path: &str) -> Option<ItemPath<'_>> {
    let Some(rest) = path.strip_prefix("resources/") else { return Some(ItemPath::Other) };
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        [resource, "namespaces", ns, file] if !resource.is_empty() && !ns.is_empty() => item(resource, ns, file),
        [resource, "cluster", file] if !resource.is_empty() => item(resource, "", file),
        [_, _version, "namespaces", _, _] | [_, _version, "cluster", _] => Some(ItemPath::Copy),
        // Directory entries some tar writers add.
        [_] | [_, ""] | [_, _, ""] | [_, _, _, ""] => Some(ItemPath::Other),
        _ => None,
    }
}

fn item<'p>(resource: &'p str, namespace: &'p str, file: &'p str) -> Option<ItemPath<'p>> {
    let name = file.strip_suffix(".json").filter(|n| !n.is_empty())?;
    Some(ItemPath::Item { resource, namespace, name })
}

/// Reads every item of a gzip tarball. A corrupt stream is an error; a bad item is reported and skipped.
pub fn read(reader: impl Read) -> Result<TarballContents, TarballError> {
    let mut archive = tar::Archive::new(MultiGzDecoder::new(reader));
    let mut out = TarballContents::default();
    let mut entries_read = 0usize;
    let entries = archive.entries().map_err(|source| TarballError::Archive { entries: 0, source })?;
    for entry in entries {
        let mut entry = entry.map_err(|source| TarballError::Archive { entries: entries_read, source })?;
        entries_read += 1;
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
        if path == "metadata/version" && size < 64 {
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
