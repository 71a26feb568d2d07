//! An object as read (from a bucket or a cluster): its typed view for decisions, and its raw JSON so that
//! nothing we do not model is lost when we re-create it.
//!
//! The raw JSON is kept compact and compressed, not as a `serde_json::Value` tree: a catalog of 100k backups
//! holds it for every backup, and a tree costs several times the text. It is expanded only to build an object
//! ferry would create.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::compressed_json::{CompressedJson, compact};
use super::meta::ObjectMeta;

/// A Kubernetes kind ferry models.
pub trait Kind: DeserializeOwned {
    const API_VERSION: &'static str;
    const KIND: &'static str;
    fn metadata(&self) -> &ObjectMeta;
}

/// Typed view plus the exact JSON it came from.
#[derive(Debug, Clone)]
pub struct Object<K> {
    pub view: K,
    raw: CompressedJson,
}

impl<K: Kind> Object<K> {
    /// Parses `raw` as `K`. The raw JSON is kept whole, including fields `K` does not know.
    pub fn from_value(raw: Value) -> Result<Self, serde_json::Error> {
        let view = K::deserialize(&raw)?;
        let raw = CompressedJson::new(&serde_json::to_vec(&raw)?);
        Ok(Self { view, raw })
    }

    /// Parses JSON text (already known to be valid JSON) as `K` without building a tree: the view straight from
    /// the text, the raw JSON as the text with insignificant whitespace removed.
    pub fn from_json_text(text: &str) -> Result<Self, serde_json::Error> {
        let view = serde_json::from_str(text)?;
        Ok(Self { view, raw: CompressedJson::new(&compact(text)) })
    }

    pub fn meta(&self) -> &ObjectMeta {
        self.view.metadata()
    }

    pub fn name(&self) -> &str {
        &self.meta().name
    }

    pub fn namespace(&self) -> &str {
        self.meta().namespace()
    }

    /// The raw JSON as a tree, to be edited into the object ferry would create.
    pub fn to_value(&self) -> Value {
        // The text was produced by serde_json from a Value, so it parses back.
        serde_json::from_slice(&self.raw.text()).unwrap_or(Value::Null)
    }

    /// The compact raw JSON text.
    pub fn raw_json(&self) -> Vec<u8> {
        self.raw.text()
    }

    /// Heap bytes this object holds for its raw JSON (for memory accounting).
    pub fn raw_len(&self) -> usize {
        self.raw.len()
    }
}

impl<K: PartialEq> PartialEq for Object<K> {
    fn eq(&self, other: &Self) -> bool {
        self.view == other.view && self.raw == other.raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Backup;

    #[test]
    fn text_and_tree_give_the_same_object() {
        let text = "{\n  \"metadata\": {\"name\": \"b 1\", \"labels\": {\"a\": \"x \\\" y\\\\\"}},\n  \"spec\": {}\n}";
        let from_text = Object::<Backup>::from_json_text(text).unwrap();
        let from_tree = Object::<Backup>::from_value(serde_json::from_str(text).unwrap()).unwrap();
        assert_eq!(from_text, from_tree);
        assert_eq!(from_text.to_value()["metadata"]["name"], "b 1");
    }
}
