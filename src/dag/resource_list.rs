//! A backup's resource list (`<name>-resource-list.json.gz`, `"<group>/<version>/<Kind>" → ["ns/name"]`) →
//! [`Object`]s: the fallback when a backup has no tarball. No uids or specs, so only namespace and CRD edges
//! (and rules, priorities) apply; a CRD's kind is unknown, so a custom resource waits for every CRD of its group.

use std::collections::BTreeMap;

use super::node::{CrdDefinition, Object};

/// `<name>-resource-list.json.gz`: `"<group>/<version>/<Kind>"` (core: `"v1/Pod"`) → `["ns/name" | "name"]`.
/// Decoded from the bucket's bytes by `catalog::decode::resource_list`.
pub type ResourceList = BTreeMap<String, Vec<String>>;

/// Entries that cannot be read are returned as errors next to the objects (`kind key`, reason).
pub fn objects(list: &ResourceList) -> (Vec<Object>, Vec<(String, String)>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (key, names) in list {
        // `v1/Pod` (core) or `apps/v1/Deployment`.
        let parts: Vec<&str> = key.split('/').collect();
        let (group, version, kind) = match parts.as_slice() {
            [v, k] => ("", *v, *k),
            [g, v, k] => (*g, *v, *k),
            _ => {
                errors.push((key.clone(), "expected <group>/<version>/<Kind> or <version>/<Kind>".into()));
                continue;
            }
        };
        if version.is_empty() || kind.is_empty() {
            errors.push((key.clone(), "empty version or kind".into()));
            continue;
        }
        for entry in names {
            let (namespace, name) = entry.split_once('/').unwrap_or(("", entry.as_str()));
            if name.is_empty() || name.contains('/') {
                errors.push((key.clone(), format!("bad entry {entry:?}")));
                continue;
            }
            let mut o = Object::new(group, version, kind, namespace, name);
            if group == "apiextensions.k8s.io" && kind == "CustomResourceDefinition" {
                // The name is `<plural>.<group>`.
                if let Some((_, crd_group)) = name.split_once('.') {
                    o.defines = Some(CrdDefinition { group: crd_group.into(), kind: None });
                }
            }
            out.push(o);
        }
    }
    (out, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_keys_and_entries() {
        let mut list = ResourceList::new();
        list.insert("v1/Pod".into(), vec!["a/p1".into()]);
        list.insert("v1/Namespace".into(), vec!["a".into()]);
        list.insert("apiextensions.k8s.io/v1/CustomResourceDefinition".into(), vec!["widgets.example.com".into()]);
        list.insert("bad".into(), vec!["x".into()]);
        list.insert("apps/v1/Deployment".into(), vec!["a/b/c".into()]);
        let (objects, errors) = objects(&list);
        assert_eq!(objects.len(), 3);
        let pod = objects.iter().find(|o| o.kind == "Pod").unwrap();
        assert_eq!((pod.namespace.as_str(), pod.name.as_str(), pod.resource.as_str()), ("a", "p1", "pods"));
        let crd = objects.iter().find(|o| o.defines.is_some()).unwrap();
        assert_eq!(crd.defines.as_ref().unwrap().group, "example.com");
        assert_eq!(errors.len(), 2);
    }
}
