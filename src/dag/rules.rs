//! User rules from the config (`dependencies.rules`): "objects of kind A (matching a selector) come after
//! objects of kind B (matching a selector)". They add what neither priorities nor references can know, e.g. an
//! Ingress after its Services, or a Cluster API ClusterResourceSetBinding after its Cluster (docs/upstream.md §V9d).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::node::Object;
use super::priorities::entry_matches;

/// `{kind: Ingress, after: services, selector: {...}, afterSelector: {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Rule {
    /// The objects that wait: a kind (`Ingress`), `kind.group`, a resource (`ingresses`) or `resource.group`.
    pub kind: String,
    /// What they wait for, in the same forms.
    pub after: String,
    /// Narrows `kind`'s objects.
    #[serde(default)]
    pub selector: Selector,
    /// Narrows `after`'s objects.
    #[serde(default)]
    pub after_selector: Selector,
}

/// A namespace and/or labels every one of which an object must carry (Kubernetes' `matchLabels`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Selector {
    pub namespace: Option<String>,
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

impl Selector {
    pub fn is_empty(&self) -> bool {
        self.namespace.is_none() && self.match_labels.is_empty()
    }

    pub fn matches(&self, object: &Object) -> bool {
        if self.namespace.as_ref().is_some_and(|ns| *ns != object.namespace) {
            return false;
        }
        self.match_labels.iter().all(|(k, v)| object.labels.iter().any(|(ok, ov)| ok == k && ov == v))
    }
}

impl Rule {
    pub fn new(kind: &str, after: &str) -> Self {
        Self {
            kind: kind.into(),
            after: after.into(),
            selector: Selector::default(),
            after_selector: Selector::default(),
        }
    }

    pub fn waits(&self, object: &Object) -> bool {
        pattern_matches(&self.kind, object) && self.selector.matches(object)
    }

    pub fn awaited(&self, object: &Object) -> bool {
        pattern_matches(&self.after, object) && self.after_selector.matches(object)
    }
}

/// A kind pattern against an object: see [`Rule::kind`]; case-insensitive.
pub fn pattern_matches(pattern: &str, object: &Object) -> bool {
    entry_matches(&pattern.to_ascii_lowercase(), &object.resource, &object.group, &object.kind)
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self.namespace.iter().map(|ns| format!("namespace={ns}")).collect();
        parts.extend(self.match_labels.iter().map(|(k, v)| format!("{k}={v}")));
        f.write_str(&parts.join(","))
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.kind)?;
        if !self.selector.is_empty() {
            write!(f, "[{}]", self.selector)?;
        }
        write!(f, " after {}", self.after)?;
        if !self.after_selector.is_empty() {
            write!(f, "[{}]", self.after_selector)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_and_selectors() {
        let ing = Object::new("networking.k8s.io", "v1", "Ingress", "shop", "front").labelled("tier", "web");
        for p in ["Ingress", "ingress", "ingresses", "ingresses.networking.k8s.io", "Ingress.networking.k8s.io"] {
            assert!(pattern_matches(p, &ing), "{p}");
        }
        for p in ["Service", "ingresses.extensions", "ingress.apps"] {
            assert!(!pattern_matches(p, &ing), "{p}");
        }
        let mut rule = Rule::new("Ingress", "services");
        assert!(rule.waits(&ing));
        rule.selector.match_labels.insert("tier".into(), "web".into());
        assert!(rule.waits(&ing));
        rule.selector.namespace = Some("other".into());
        assert!(!rule.waits(&ing));
        assert_eq!(rule.to_string(), "Ingress[namespace=other,tier=web] after services");
        assert!(rule.awaited(&Object::new("", "v1", "Service", "shop", "front")));
    }
}
