//! The slice of Kubernetes `ObjectMeta` ferry reasons about. The full object always travels as raw JSON beside it,
//! so fields ferry only copies (owner references, resourceVersion, …) are not duplicated here.

use serde::{Deserialize, Deserializer, Serialize};

use super::string_map::StringMap;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMeta {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Only the keys ferry reads ([`READ_KEYS`](super::labels::READ_KEYS)); the raw JSON has them all.
    #[serde(skip_serializing_if = "StringMap::is_empty")]
    pub labels: StringMap,
    /// Only the keys ferry reads ([`READ_KEYS`](super::labels::READ_KEYS)); the raw JSON has them all.
    #[serde(skip_serializing_if = "StringMap::is_empty")]
    pub annotations: StringMap,
}

impl ObjectMeta {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key)
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key)
    }

    pub fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or("")
    }
}

/// Go's `encoding/json` writes nil slices and maps as `null`; read those as empty.
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}
