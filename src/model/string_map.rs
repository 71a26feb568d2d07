//! A small, sorted map of the labels or annotations ferry reads ([`labels::READ_KEYS`]) to their values.
//!
//! Objects carry a handful of labels each, and a catalog holds 100k+ objects: a `BTreeMap` allocates a node of
//! room for eleven entries per map, this holds exactly what is there; keys are ferry's own constants, so only
//! the values take heap. Other keys are dropped (the raw JSON beside the view has them all).

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::labels;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StringMap(Box<[(&'static str, Box<str>)]>);

/// ferry's constant for `key`, if ferry reads that key.
fn known_key(key: &str) -> Option<&'static str> {
    labels::READ_KEYS.iter().copied().find(|k| *k == key)
}

impl StringMap {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.binary_search_by(|(k, _)| (*k).cmp(key)).ok().map(|i| &*self.0[i].1)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (*k, &**v))
    }
}

/// Keys ferry does not read are dropped.
impl<K: AsRef<str>, V: Into<Box<str>>> FromIterator<(K, V)> for StringMap {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut entries: Vec<(&'static str, Box<str>)> =
            iter.into_iter().filter_map(|(k, v)| Some((known_key(k.as_ref())?, v.into()))).collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        // A later duplicate wins, as in a JSON object read by Kubernetes.
        entries.reverse();
        entries.dedup_by(|a, b| a.0 == b.0);
        entries.reverse();
        Self(entries.into_boxed_slice())
    }
}

impl Serialize for StringMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for StringMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor;
        impl<'de> Visitor<'de> for MapVisitor {
            type Value = StringMap;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of strings to strings, or null")
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<StringMap, E> {
                Ok(StringMap::default())
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<StringMap, E> {
                Ok(StringMap::default())
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<StringMap, D::Error> {
                d.deserialize_any(self)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<StringMap, A::Error> {
                let mut entries: Vec<(&'static str, String)> = Vec::new();
                while let Some((key, value)) = access.next_entry::<String, String>()? {
                    if let Some(key) = known_key(&key) {
                        entries.push((key, value));
                    }
                }
                Ok(entries.into_iter().collect())
            }
        }
        deserializer.deserialize_any(MapVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_json_objects_and_null() {
        let (a, b) = (labels::VELERO_BACKUP_NAME, labels::VELERO_STORAGE_LOCATION);
        let text = format!(r#"{{"{b}": "2", "unread.example/key": "x", "{a}": "1"}}"#);
        let m: StringMap = serde_json::from_str(&text).unwrap();
        assert_eq!((m.get(a), m.get(b), m.get("unread.example/key")), (Some("1"), Some("2"), None));
        assert_eq!(m.iter().map(|(k, _)| k).collect::<Vec<_>>(), [a, b]);
        let empty: StringMap = serde_json::from_str("null").unwrap();
        assert!(empty.is_empty());
        assert!(serde_json::from_str::<StringMap>(&format!(r#"{{"{a}": 1}}"#)).is_err());
        assert!(serde_json::from_str::<StringMap>(r#"{"unread.example/key": 1}"#).is_err());
        assert_eq!(serde_json::to_string(&m).unwrap(), format!(r#"{{"{a}":"1","{b}":"2"}}"#));
        let dup: StringMap = [(a, "1"), (a, "2")].into_iter().collect();
        assert_eq!(dup.get(a), Some("2"));
    }
}
