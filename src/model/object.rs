//! An object as read (from a bucket or a cluster): its typed view for decisions, and its raw JSON so that
//! nothing we do not model is lost when we re-create it.
//!
//! The raw JSON is kept compact and compressed, not as a `serde_json::Value` tree: a catalog of 100k backups
//! holds it for every backup, and a tree costs several times the text. It is expanded only to build an object
//! ferry would create.

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::compressed_json::{CompressedJson, compact};
use super::meta::{FromObject, ObjectMeta};

/// A Kubernetes kind ferry models.
pub trait Kind: DeserializeOwned {
    const API_VERSION: &'static str;
    const KIND: &'static str;
    fn metadata(&self) -> &ObjectMeta;
}

/// Typed view plus the exact JSON it came from. Both are shared, so a clone is two reference counts: the
/// coordinator hands every plan pass its clusters' inventories without copying them.
#[derive(Debug, Clone)]
pub struct Object<K> {
    pub view: Arc<K>,
    raw: CompressedJson,
}

impl<K: Kind> Object<K> {
    /// Parses `raw` as `K`. The raw JSON is kept whole, including fields `K` does not know.
    pub fn from_value(raw: Value) -> Result<Self, serde_json::Error> {
        let FromObject(view) = FromObject::<K>::deserialize(&raw)?;
        let raw = CompressedJson::new(&serde_json::to_vec(&raw)?);
        Ok(Self { view: Arc::new(view), raw })
    }

    /// Parses JSON text as `K` without building a tree: the view straight from the text (see
    /// [`view_from_json_text`]), the raw JSON as the text with insignificant whitespace removed.
    pub fn from_json_text(text: &str) -> Result<Self, serde_json::Error> {
        let view = view_from_json_text(text)?;
        Ok(Self { view: Arc::new(view), raw: CompressedJson::new(&compact(text)) })
    }

    /// Parses JSON text as `K` (as [`Object::from_json_text`]) and keeps only the typed view: for objects nothing is ever built from (a cluster's
    /// inventory as the coordinator holds it, where the raw JSON would be most of the memory).
    /// [`Object::to_value`] is then `{}`.
    pub fn view_only_text(text: &str) -> Result<Self, serde_json::Error> {
        Ok(Self { view: Arc::new(view_from_json_text(text)?), raw: CompressedJson::default() })
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
        // Both constructors keep only text a tree parser takes, so it parses back.
        if self.raw.is_empty() {
            return Value::Object(Default::default());
        }
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

/// The typed view of an object's JSON text, once the text is known to be what [`Object::to_value`] parses
/// again: a JSON object whose numbers fit, strings decode and nesting stays within serde_json's limit. Text
/// that was only scanned (a `RawValue`, fields the view does not know) may be none of these.
pub fn view_from_json_text<K: DeserializeOwned>(text: &str) -> Result<K, serde_json::Error> {
    serde_json::from_str::<TreeParsable>(text)?;
    let FromObject(view) = serde_json::from_str(text)?;
    Ok(view)
}

/// Any JSON value, read as serde_json reads one into a tree (every number, string and level of nesting
/// checked) without keeping anything.
struct TreeParsable;

impl<'de> Deserialize<'de> for TreeParsable {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TreeParsable)
    }
}

impl<'de> Visitor<'de> for TreeParsable {
    type Value = TreeParsable;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_unit<E>(self) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<TreeParsable>()?.is_some() {}
        Ok(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self, A::Error> {
        while map.next_entry::<TreeParsable, TreeParsable>()?.is_some() {}
        Ok(self)
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

    #[test]
    fn only_what_parses_back_into_a_tree_is_taken() {
        // Each passes a scan that skips unknown fields, and once made `to_value` give `null`.
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        for field in ["1e400", "-1e400", "\"\\ud800\"", deep.as_str()] {
            let text = format!(r#"{{"metadata": {{"name": "b"}}, "spec": {{"futureField": {field}}}}}"#);
            assert!(serde_json::from_str::<Backup>(&text).is_ok(), "{field}: the view alone takes it");
            assert!(Object::<Backup>::from_json_text(&text).is_err(), "{field}");
        }
        let fits = r#"{"metadata": {"name": "b"}, "spec": {"x": [1e300, -0, 18446744073709551615, "\ud83d\ude00"]}}"#;
        assert_eq!(Object::<Backup>::from_json_text(fits).unwrap().to_value()["spec"]["x"][3], "\u{1f600}");
        // A derived struct takes an array field by field; the planner would then see a Backup the raw JSON is not.
        for array in [r#"[{"name": "b"}]"#, r#"{"metadata": ["b"]}"#, r#"{"metadata": {"name": "b"}, "spec": [["*"]]}"#]
        {
            assert!(Object::<Backup>::from_json_text(array).is_err(), "{array}");
            assert!(Object::<Backup>::from_value(serde_json::from_str(array).unwrap()).is_err(), "{array}");
        }
    }
}
