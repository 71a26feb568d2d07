//! One backed-up item's JSON → [`Object`]: identity from `apiVersion`, `kind` and `metadata`, owners from
//! `metadata.ownerReferences`, well-known references from the spec, what a CRD defines.

use serde_json::Value;

use super::kinds::resource_of_kind;
use super::node::{CrdDefinition, Object, OwnerRef};
use super::references;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    #[error("not valid JSON: {0}")]
    Json(String),
    #[error("not a JSON object")]
    NotAnObject,
    #[error("missing {0}")]
    Missing(&'static str),
    #[error("{field} is not a string")]
    NotAString { field: &'static str },
}

/// Parses an item. `resource` is its `resource.group` (from the tarball path); `None` derives it from the kind.
pub fn parse(bytes: &[u8], resource: Option<&str>) -> Result<Object, ObjectError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| ObjectError::Json(e.to_string()))?;
    from_value(&value, resource)
}

pub fn from_value(value: &Value, resource: Option<&str>) -> Result<Object, ObjectError> {
    if !value.is_object() {
        return Err(ObjectError::NotAnObject);
    }
    let api_version = required("apiVersion", &value["apiVersion"])?;
    let kind = required("kind", &value["kind"])?;
    let meta = &value["metadata"];
    if !meta.is_object() {
        return Err(ObjectError::Missing("metadata"));
    }
    let name = required("metadata.name", &meta["name"])?;
    let namespace = optional("metadata.namespace", &meta["namespace"])?;
    let uid = optional("metadata.uid", &meta["uid"])?;
    let (group, version) = match api_version.rsplit_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    let labels = meta["labels"]
        .as_object()
        .map(|m| m.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string()))).collect())
        .unwrap_or_default();
    let owners = meta["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let uid = r["uid"].as_str().filter(|u| !u.is_empty())?;
            Some(OwnerRef {
                kind: r["kind"].as_str().unwrap_or_default().into(),
                name: r["name"].as_str().unwrap_or_default().into(),
                uid: uid.into(),
            })
        })
        .collect();
    let defines = (group == "apiextensions.k8s.io" && kind == "CustomResourceDefinition")
        .then(|| {
            let spec = &value["spec"];
            let crd_group = spec["group"].as_str()?;
            Some(CrdDefinition { group: crd_group.into(), kind: spec["names"]["kind"].as_str().map(str::to_string) })
        })
        .flatten();
    Ok(Object {
        resource: resource.map(str::to_string).unwrap_or_else(|| resource_of_kind(group, kind)),
        references: references::extract(group, kind, namespace, value),
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        namespace: namespace.into(),
        name: name.into(),
        uid: uid.into(),
        labels,
        owners,
        defines,
    })
}

fn required<'v>(field: &'static str, value: &'v Value) -> Result<&'v str, ObjectError> {
    match value {
        Value::Null => Err(ObjectError::Missing(field)),
        Value::String(s) if s.is_empty() => Err(ObjectError::Missing(field)),
        Value::String(s) => Ok(s),
        _ => Err(ObjectError::NotAString { field }),
    }
}

fn optional<'v>(field: &'static str, value: &'v Value) -> Result<&'v str, ObjectError> {
    match value {
        Value::Null => Ok(""),
        Value::String(s) => Ok(s),
        _ => Err(ObjectError::NotAString { field }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_identity_owners_and_references() {
        let pod = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a","uid":"u1",
            "labels":{"app":"web"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u0"}]},
            "spec":{"volumes":[{"persistentVolumeClaim":{"claimName":"data"}}]}}"#;
        let o = parse(pod, Some("pods")).unwrap();
        assert_eq!((o.group.as_str(), o.version.as_str(), o.kind.as_str()), ("", "v1", "Pod"));
        assert_eq!((o.namespace.as_str(), o.name.as_str(), o.uid.as_str()), ("a", "p", "u1"));
        assert_eq!(o.owners[0].uid, "u0");
        assert_eq!(o.references[0].name, "data");
        assert_eq!(o.labels, vec![("app".to_string(), "web".to_string())]);
        let crd = br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
            "metadata":{"name":"widgets.example.com"},"spec":{"group":"example.com","names":{"kind":"Widget"}}}"#;
        let c = parse(crd, None).unwrap();
        assert_eq!(c.defines, Some(CrdDefinition { group: "example.com".into(), kind: Some("Widget".into()) }));
        assert_eq!(c.resource, "customresourcedefinitions.apiextensions.k8s.io");
    }

    #[test]
    fn bad_items_say_what_is_wrong() {
        let cases: &[(&[u8], &str)] = &[
            (b"{", "not valid JSON"),
            (b"[1]", "not a JSON object"),
            (br#"{"apiVersion":"v1","metadata":{"name":"x"}}"#, "missing kind"),
            (br#"{"kind":"Pod","metadata":{"name":"x"}}"#, "missing apiVersion"),
            (br#"{"apiVersion":"v1","kind":"Pod"}"#, "missing metadata"),
            (br#"{"apiVersion":"v1","kind":"Pod","metadata":{}}"#, "missing metadata.name"),
            (br#"{"apiVersion":"v1","kind":7,"metadata":{"name":"x"}}"#, "kind is not a string"),
            (
                br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","namespace":1}}"#,
                "metadata.namespace is not a string",
            ),
        ];
        for (bytes, expected) in cases {
            let err = parse(bytes, None).unwrap_err().to_string();
            assert!(err.contains(expected), "{err} ≠ {expected}");
        }
    }
}
