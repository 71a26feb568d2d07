//! Objects the planner builds, shared between clusters. In one planning pass, every cluster that reads a
//! location through a same-named BSL in a same-named Velero namespace (and maps a tenant backup to the same
//! namespace) gets byte for byte the same Backup CR, PVB templates and NAB: each is built once — decompressed,
//! parsed, edited, serialized — and every cluster's set holds a reference to it, down to the bytes each stream
//! sends (`bytes::Bytes`).

use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::catalog::CatalogBackup;
use crate::model::{Object, PodVolumeBackup};

/// An object to apply, held as its JSON text: that is what every set and stream sends, and a `serde_json::Value`
/// costs several times its text (at 10,000 backups the coordinator held 30,000 of them per pass). The value is
/// parsed again only where it is read (`ferry plan` output, tests).
pub struct Template {
    json: Bytes,
    value: OnceLock<Value>,
    /// SHA-256 of `json`, for the sets' content versions (hashed once, not once per cluster).
    digest: OnceLock<[u8; 32]>,
}

/// A planned object: cheap to clone, compared and serialized as its JSON value.
#[derive(Clone)]
pub struct PlannedObject(Arc<Template>);

impl PlannedObject {
    pub fn new(value: Value) -> Self {
        // Boxed first: the writer's buffer grows by doubling, and Bytes would keep its spare capacity.
        let json = Bytes::from(serde_json::to_vec(&value).unwrap_or_default().into_boxed_slice());
        Self(Arc::new(Template { json, value: OnceLock::new(), digest: OnceLock::new() }))
    }

    /// The object's JSON text, serialized once however many sets and streams carry it.
    pub fn json(&self) -> Bytes {
        self.0.json.clone()
    }

    /// SHA-256 of [`PlannedObject::json`].
    pub fn digest(&self) -> [u8; 32] {
        *self.0.digest.get_or_init(|| {
            use sha2::Digest;
            sha2::Sha256::digest(&self.0.json).into()
        })
    }

    /// Whether `other` is the very same shared object (not only an equal one).
    pub fn shares(&self, other: &PlannedObject) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    fn value(&self) -> &Value {
        // The text was written from a Value: it parses.
        self.0.value.get_or_init(|| serde_json::from_slice(&self.0.json).unwrap_or(Value::Null))
    }
}

impl Deref for PlannedObject {
    type Target = Value;
    fn deref(&self) -> &Value {
        self.value()
    }
}

impl From<Value> for PlannedObject {
    fn from(value: Value) -> Self {
        Self::new(value)
    }
}

impl PartialEq for PlannedObject {
    fn eq(&self, other: &Self) -> bool {
        self.shares(other) || self.0.json == other.0.json || self.value() == other.value()
    }
}

impl fmt::Debug for PlannedObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value().fmt(f)
    }
}

impl Serialize for PlannedObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(serializer)
    }
}

/// What makes two clusters' copies of one object identical: the source entry (by identity: the catalogs live
/// through the pass), the kind and name, and every target property the object is edited with.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TemplateKey {
    /// `Arc::as_ptr` of the catalog entry: equal only for the same entry of the same catalog.
    pub entry: usize,
    pub kind: &'static str,
    pub name: String,
    /// The target's BSL, Velero namespace, tenant namespace and anything else written into the object.
    pub target: Vec<String>,
}

/// One planning pass's shared objects. Dropped with the pass, so entries never outlive the catalogs their keys
/// point at.
#[derive(Default)]
pub struct TemplateCache {
    objects: Mutex<HashMap<TemplateKey, PlannedObject>>,
    /// Each catalog entry's PVB file decoded once per pass (by the entry's address, as in [`TemplateKey`]):
    /// every cluster that lacks the PVBs reads the same file.
    pod_volume_backups: Mutex<HashMap<usize, Arc<Vec<Object<PodVolumeBackup>>>>>,
    /// Off: every object is built anew (for measuring what sharing saves).
    disabled: bool,
}

impl TemplateCache {
    /// A cache that shares nothing.
    pub fn disabled() -> Self {
        Self { disabled: true, ..Self::default() }
    }

    /// The object for `key`, built by `build` the first time in this pass.
    pub fn get_or_build(&self, key: TemplateKey, build: impl FnOnce() -> Value) -> PlannedObject {
        if self.disabled {
            return PlannedObject::new(build());
        }
        if let Some(found) = self.lock().get(&key) {
            return found.clone();
        }
        // Built outside the lock: two clusters racing for one key build it twice, harmlessly.
        let built = PlannedObject::new(build());
        self.lock().entry(key).or_insert(built).clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TemplateKey, PlannedObject>> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The PVBs of `entry`'s PVB file, decoded the first time in this pass.
    pub fn pod_volume_backups(&self, entry: &CatalogBackup) -> Arc<Vec<Object<PodVolumeBackup>>> {
        if self.disabled {
            return Arc::new(entry.pod_volume_backups.objects());
        }
        let key = std::ptr::from_ref(entry) as usize;
        let decoded = || self.pod_volume_backups.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = decoded().get(&key) {
            return found.clone();
        }
        // Decoded outside the lock, like the objects.
        let fresh = Arc::new(entry.pod_volume_backups.objects());
        decoded().entry(key).or_insert(fresh).clone()
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
