//! The objects a dependency graph is built from: identity (group, version, kind, namespace, name, uid) and what
//! each one points at (owners by uid, well-known references by name), as read from a backup.

use std::fmt;

/// An object of a backup, with everything the graph needs to place it. Built by [`super::object_json`] from
/// the tarball, by [`super::resource_list`] from a resource list (no uid, no references), or by hand in tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Object {
    /// API group, `""` for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    /// The `resource.group` string (`pods`, `replicasets.apps`): what restore priorities name.
    pub resource: String,
    /// `""` for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
    /// `""` when unknown (resource lists carry no uids).
    pub uid: String,
    pub labels: Vec<(String, String)>,
    pub owners: Vec<OwnerRef>,
    pub references: Vec<Reference>,
    /// For a CustomResourceDefinition: the kind it defines, so custom resources can point at it.
    pub defines: Option<CrdDefinition>,
}

/// One entry of `metadata.ownerReferences`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnerRef {
    pub kind: String,
    pub name: String,
    pub uid: String,
}

/// A by-name reference from one object to another, e.g. a Pod's `persistentVolumeClaim.claimName`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub group: String,
    pub kind: String,
    /// `""` for a cluster-scoped target.
    pub namespace: String,
    pub name: String,
    /// The field it came from, for explanations (`spec.volumes[].persistentVolumeClaim`).
    pub field: &'static str,
}

/// What a CRD defines: `spec.group` and `spec.names.kind` (the kind is unknown when read from a resource list,
/// which only has the CRD's name `<plural>.<group>`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrdDefinition {
    pub group: String,
    pub kind: Option<String>,
}

impl Object {
    /// A bare object (no uid, labels or references), mostly for tests and resource lists.
    pub fn new(group: &str, version: &str, kind: &str, namespace: &str, name: &str) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            resource: super::kinds::resource_of_kind(group, kind),
            namespace: namespace.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    pub fn with_uid(mut self, uid: &str) -> Self {
        self.uid = uid.into();
        self
    }

    pub fn owned_by(mut self, kind: &str, name: &str, uid: &str) -> Self {
        self.owners.push(OwnerRef { kind: kind.into(), name: name.into(), uid: uid.into() });
        self
    }

    pub fn referencing(mut self, group: &str, kind: &str, namespace: &str, name: &str, field: &'static str) -> Self {
        self.references.push(Reference {
            group: group.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            field,
        });
        self
    }

    pub fn labelled(mut self, key: &str, value: &str) -> Self {
        self.labels.push((key.into(), value.into()));
        self
    }

    pub fn id(&self) -> ObjectId<'_> {
        ObjectId { group: &self.group, kind: &self.kind, namespace: &self.namespace, name: &self.name }
    }
}

/// How an object is named in output and error text: `Kind[.group] [namespace/]name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId<'a> {
    pub group: &'a str,
    pub kind: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
}

impl fmt::Display for ObjectId<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind)?;
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        f.write_str(" ")?;
        if !self.namespace.is_empty() {
            write!(f, "{}/", self.namespace)?;
        }
        f.write_str(self.name)
    }
}
