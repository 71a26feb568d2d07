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

use crate::catalog::{CatalogBackup, LocationCatalog};
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

/// Shared objects: within one planning pass, or (between [`TemplateCache::begin_pass`] and
/// [`TemplateCache::end_pass`]) from one pass to the next, so that a set planned again from a grown catalog (a
/// cold load's partials, a refresh with a few new backups) reuses what it planned before instead of holding a
/// second copy of every object while the first is still published. Keys are entries' addresses: the cache holds
/// the catalogs of the passes its keys come from, so no key outlives its entry and no address is reused under it.
#[derive(Default)]
pub struct TemplateCache {
    /// Each object with the pass that last used it.
    objects: Mutex<HashMap<TemplateKey, (PlannedObject, u64)>>,
    pass: Mutex<Passes>,
    /// Each catalog entry's PVB file decoded once per pass (by the entry's address, as in [`TemplateKey`]):
    /// every cluster that lacks the PVBs reads the same file.
    pod_volume_backups: Mutex<HashMap<usize, Arc<Vec<Object<PodVolumeBackup>>>>>,
    /// Off: every object is built anew (for measuring what sharing saves).
    disabled: bool,
}

/// The passes a cache spans: the current one and the catalogs its keys point into.
#[derive(Default)]
struct Passes {
    current: u64,
    /// The catalogs of the previous pass and of this one: every key's entry lives in one of them.
    catalogs: Vec<Arc<LocationCatalog>>,
    previous_len: usize,
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
        let pass = self.passes().current;
        if let Some((found, used)) = self.lock().get_mut(&key) {
            *used = pass;
            return found.clone();
        }
        // Built outside the lock: two clusters racing for one key build it twice, harmlessly.
        let built = PlannedObject::new(build());
        self.lock().entry(key).or_insert((built, pass)).0.clone()
    }

    /// Starts a pass planned from `catalogs`: objects of the previous pass are found again for the entries these
    /// catalogs still hold (the same `Arc`s).
    pub fn begin_pass(&self, catalogs: &[Arc<LocationCatalog>]) {
        let mut passes = self.passes();
        passes.current += 1;
        passes.previous_len = passes.catalogs.len();
        passes.catalogs.extend(catalogs.iter().cloned());
        self.decoded().clear();
    }

    /// Ends the pass: what it did not use is dropped, and with it the previous pass's catalogs.
    pub fn end_pass(&self) {
        let mut passes = self.passes();
        let current = passes.current;
        self.lock().retain(|_, (_, used)| *used == current);
        let previous = passes.previous_len;
        passes.catalogs.drain(..previous);
        passes.previous_len = 0;
        self.decoded().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TemplateKey, (PlannedObject, u64)>> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn passes(&self) -> std::sync::MutexGuard<'_, Passes> {
        self.pass.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn decoded(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Arc<Vec<Object<PodVolumeBackup>>>>> {
        self.pod_volume_backups.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The PVBs of `entry`'s PVB file, decoded the first time in this pass.
    pub fn pod_volume_backups(&self, entry: &CatalogBackup) -> Arc<Vec<Object<PodVolumeBackup>>> {
        if self.disabled {
            return Arc::new(entry.pod_volume_backups.objects());
        }
        let key = std::ptr::from_ref(entry) as usize;
        if let Some(found) = self.decoded().get(&key) {
            return found.clone();
        }
        // Decoded outside the lock, like the objects.
        let fresh = Arc::new(entry.pod_volume_backups.objects());
        self.decoded().entry(key).or_insert(fresh).clone()
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
