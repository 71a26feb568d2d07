//! Reading an object's metadata from its raw JSON (`serde_json::Value`), for code that holds objects untyped: the
//! agent judges and writes what the coordinator sent as JSON.

use serde_json::Value;

/// `metadata.labels[key]` as text, or `None` when absent or not a string.
pub fn label<'v>(object: &'v Value, key: &str) -> Option<&'v str> {
    object.pointer("/metadata/labels").and_then(|l| l.get(key)).and_then(Value::as_str)
}

/// `metadata.annotations[key]` as text, or `None` when absent or not a string.
pub fn annotation<'v>(object: &'v Value, key: &str) -> Option<&'v str> {
    object.pointer("/metadata/annotations").and_then(|a| a.get(key)).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_string_values_are_read() {
        let object = json!({"metadata": {"labels": {"a": "1", "n": 2}, "annotations": {"b": "2"}}});
        assert_eq!((label(&object, "a"), label(&object, "n"), label(&object, "b")), (Some("1"), None, None));
        assert_eq!((annotation(&object, "b"), annotation(&object, "a")), (Some("2"), None));
        assert_eq!(label(&json!({}), "a"), None);
    }
}
