//! The one ownership check: an object is ferry's when its labels carry `ferry.dev/managed-by=ferry`. ferry never
//! modifies or deletes an object without it, whether it holds the object as a typed view or as raw JSON.

use serde_json::Value;

use super::labels::{FERRY_MANAGED_BY, FERRY_MANAGED_BY_VALUE};
use super::string_map::StringMap;

/// True when `labels` (a typed view's) carry ferry's ownership mark.
pub fn is_ferry_managed(labels: &StringMap) -> bool {
    marks_ferry(labels.get(FERRY_MANAGED_BY))
}

/// True when a raw object's `metadata.labels` carry ferry's ownership mark.
pub fn is_ferry_managed_json(object: &Value) -> bool {
    marks_ferry(object.pointer("/metadata/labels").and_then(|l| l.get(FERRY_MANAGED_BY)).and_then(Value::as_str))
}

fn marks_ferry(value: Option<&str>) -> bool {
    value == Some(FERRY_MANAGED_BY_VALUE)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_the_exact_mark_counts() {
        let labels: StringMap = [(FERRY_MANAGED_BY, "ferry")].into_iter().collect();
        assert!(is_ferry_managed(&labels));
        let other: StringMap = [(FERRY_MANAGED_BY, "Ferry")].into_iter().collect();
        assert!(!is_ferry_managed(&other));
        assert!(!is_ferry_managed(&StringMap::default()));
        assert!(is_ferry_managed_json(&json!({"metadata": {"labels": {FERRY_MANAGED_BY: "ferry"}}})));
        assert!(!is_ferry_managed_json(&json!({"metadata": {"labels": {FERRY_MANAGED_BY: true}}})));
        assert!(!is_ferry_managed_json(&json!({"metadata": {"annotations": {FERRY_MANAGED_BY: "ferry"}}})));
    }
}
