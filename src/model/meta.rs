//! The slice of Kubernetes `ObjectMeta` ferry reasons about. The full object always travels as raw JSON beside it,
//! so fields ferry only copies (owner references, resourceVersion, …) are not duplicated here.

use serde::de::Visitor;
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
    /// Opaque; kept so that a deletion can be made conditional on the object being unchanged (retirement).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
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

/// A list, `null` read as empty (as [`null_as_default`]), holding no spare capacity: read from text, whose
/// arrays give no length up front, a list grows by doubling, and a view is kept for as long as its object.
pub fn list_or_null<'de, D, T>(deserializer: D) -> Result<Box<[T]>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let list: Vec<T> = null_as_default(deserializer)?;
    Ok(list.into_boxed_slice())
}

/// A struct read from a JSON object only. A derived struct also takes an array, field by field, which no
/// Kubernetes object has: the view would then hold values the raw JSON (built into objects) does not.
pub fn struct_from_object<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(FromObject::<T>::deserialize(deserializer)?.0)
}

/// [`struct_from_object`], or `null` (as Go writes a nil pointer) for none.
pub fn optional_struct_from_object<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<FromObject<T>>::deserialize(deserializer)?.map(|o| o.0))
}

/// [`struct_from_object`], with `null` read as empty (as [`null_as_default`]).
pub fn struct_from_object_or_null<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(optional_struct_from_object(deserializer)?.unwrap_or_default())
}

/// A `T` deserialized through [`StructAsMap`].
pub struct FromObject<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for FromObject<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(StructAsMap(deserializer)).map(FromObject)
    }
}

/// Asks the wrapped deserializer for a map where a struct is asked for; passes everything else on.
struct StructAsMap<D>(D);

impl<'de, D: Deserializer<'de>> Deserializer<'de> for StructAsMap<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit unit_struct
        newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(default)]
    struct Outer {
        #[serde(deserialize_with = "struct_from_object")]
        meta: ObjectMeta,
        #[serde(deserialize_with = "struct_from_object_or_null")]
        spec: ObjectMeta,
        #[serde(deserialize_with = "optional_struct_from_object")]
        status: Option<ObjectMeta>,
    }

    #[test]
    fn structs_come_from_objects_only() {
        let named = ObjectMeta { name: "n".into(), ..Default::default() };
        let text = r#"{"meta": {"name": "n"}, "spec": {"name": "n"}, "status": {"name": "n"}}"#;
        let outer: Outer = serde_json::from_str(text).unwrap();
        assert_eq!((&outer.meta, &outer.spec, outer.status.as_ref()), (&named, &named, Some(&named)));
        let nulls: Outer = serde_json::from_value(json!({"spec": null, "status": null})).unwrap();
        assert_eq!(nulls, Outer::default());
        assert!(serde_json::from_value::<Outer>(json!({"meta": null})).is_err(), "null is no object");
        for field in ["meta", "spec", "status"] {
            let arrays = json!({field: ["n"]});
            assert!(serde_json::from_str::<Outer>(&arrays.to_string()).is_err(), "{field} from text");
            assert!(serde_json::from_value::<Outer>(arrays).is_err(), "{field} from a tree");
            assert!(serde_json::from_value::<ObjectMeta>(json!(["n"])).is_ok(), "what a derived struct does");
        }
    }
}
