//! Where things are in a Velero backup tarball (`<name>.tar.gz`, docs/upstream.md §V2): the one place that knows the
//! layout, both ways. Building a path is for writers (the fixture's tarballs); parsing one is for readers
//! ([`super::tarball`], `catalog::legacy_volume_backups`). Pure: paths in, paths out.
//!
//! Items are at `resources/<resource.group>/namespaces/<ns>/<name>.json` or
//! `resources/<resource.group>/cluster/<name>.json`. Velero writes each preferred-version item a second time under
//! `<version>-preferredversion/`, and other versions under `<version>/` with `EnableAPIGroupVersions`; those are
//! copies of the same objects, which readers skip (as Velero's restore-side `archive.Parse` does).

/// The file holding the tarball's format version (`1.1.0`).
pub const FORMAT_VERSION_PATH: &str = "metadata/version";

/// Where an entry is in the tarball's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemPath<'p> {
    Item {
        resource: &'p str,
        namespace: &'p str,
        name: &'p str,
    },
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

/// The path of an item (`namespace` `""` for a cluster-scoped one): what [`item_path`] reads as
/// [`ItemPath::Item`].
pub fn path_of_item(resource: &str, namespace: &str, name: &str) -> String {
    format!("resources/{resource}/{}/{name}.json", scope(namespace))
}

/// The path of an item's preferred-version copy (`version` e.g. `v1`): what [`item_path`] reads as
/// [`ItemPath::Copy`].
pub fn path_of_preferred_copy(resource: &str, version: &str, namespace: &str, name: &str) -> String {
    format!("resources/{resource}/{version}-preferredversion/{}/{name}.json", scope(namespace))
}

fn scope(namespace: &str) -> String {
    if namespace.is_empty() { "cluster".to_string() } else { format!("namespaces/{namespace}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_paths() {
        let cases: &[(&str, Option<ItemPath<'_>>)] = &[
            (
                "resources/pods/namespaces/a/p.json",
                Some(ItemPath::Item { resource: "pods", namespace: "a", name: "p" }),
            ),
            (
                "resources/persistentvolumes/cluster/pv-1.json",
                Some(ItemPath::Item { resource: "persistentvolumes", namespace: "", name: "pv-1" }),
            ),
            ("resources/pods/v1-preferredversion/namespaces/a/p.json", Some(ItemPath::Copy)),
            ("resources/deployments.apps/v1beta1/namespaces/a/d.json", Some(ItemPath::Copy)),
            ("resources/pods/v1-preferredversion/cluster/x.json", Some(ItemPath::Copy)),
            ("metadata/version", Some(ItemPath::Other)),
            ("resources/pods/", Some(ItemPath::Other)),
            ("resources/pods/namespaces/a/p.yaml", None),
            ("resources/pods/namespaces/a/.json", None),
            ("resources/pods/elsewhere/a/b/c/d.json", None),
        ];
        for (path, expected) in cases {
            assert_eq!(&item_path(path), expected, "{path}");
        }
    }

    /// What the writer builds, the reader reads back.
    #[test]
    fn built_paths_parse_back() {
        for (resource, namespace, name) in
            [("pods", "shop", "web-0"), ("persistentvolumes", "", "pvc-1"), ("deployments.apps", "a", "d")]
        {
            let path = path_of_item(resource, namespace, name);
            assert_eq!(item_path(&path), Some(ItemPath::Item { resource, namespace, name }), "{path}");
            let copy = path_of_preferred_copy(resource, "v1", namespace, name);
            assert_eq!(item_path(&copy), Some(ItemPath::Copy), "{copy}");
        }
        assert_eq!(path_of_item("pods", "a", "p"), "resources/pods/namespaces/a/p.json");
        assert_eq!(path_of_item("namespaces", "", "a"), "resources/namespaces/cluster/a.json");
        assert_eq!(
            path_of_preferred_copy("pods", "v1", "a", "p"),
            "resources/pods/v1-preferredversion/namespaces/a/p.json"
        );
        assert_eq!(item_path(FORMAT_VERSION_PATH), Some(ItemPath::Other));
    }
}
