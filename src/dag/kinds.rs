//! What API discovery would say about a kind, without a cluster: whether its group is served by Kubernetes itself
//! (so it has no CRD), and its `resource.group` name for objects that come without a tarball path (resource
//! lists, tests). Used by [`super::node`] to name an object's resource and by the graph's CRD edges.

/// API groups served by Kubernetes itself: their kinds have no CRD.
pub const BUILT_IN_GROUPS: [&str; 21] = [
    "",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "internal.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
];

pub fn is_built_in_group(group: &str) -> bool {
    BUILT_IN_GROUPS.contains(&group)
}

/// The `resource.group` of a kind, as discovery would name it: a table of irregular built-in plurals, else the
/// English rule Kubernetes' own `UnsafeGuessKindToResource` uses (lower case; `s`/`x`/`z`/`ch`/`sh` + `es`;
/// consonant + `y` → `ies`; else + `s`).
pub fn resource_of_kind(group: &str, kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    let plural = match lower.as_str() {
        "endpoints" => lower.clone(),
        "networkpolicy" => "networkpolicies".to_string(),
        "podsecuritypolicy" => "podsecuritypolicies".to_string(),
        _ if lower.is_empty() => String::new(),
        _ if ["s", "x", "z", "ch", "sh"].iter().any(|e| lower.ends_with(e)) => format!("{lower}es"),
        _ if lower.ends_with('y') && !lower.ends_with("ay") && !lower.ends_with("ey") && !lower.ends_with("oy") => {
            format!("{}ies", &lower[..lower.len() - 1])
        }
        _ => format!("{lower}s"),
    };
    if group.is_empty() { plural } else { format!("{plural}.{group}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_of_kinds() {
        for (group, kind, resource) in [
            ("", "Pod", "pods"),
            ("apps", "ReplicaSet", "replicasets.apps"),
            ("", "Endpoints", "endpoints"),
            ("networking.k8s.io", "Ingress", "ingresses.networking.k8s.io"),
            ("networking.k8s.io", "NetworkPolicy", "networkpolicies.networking.k8s.io"),
            ("storage.k8s.io", "StorageClass", "storageclasses.storage.k8s.io"),
            ("", "PersistentVolumeClaim", "persistentvolumeclaims"),
            ("example.com", "Gateway", "gateways.example.com"),
            ("example.com", "Policy", "policies.example.com"),
        ] {
            assert_eq!(resource_of_kind(group, kind), resource);
        }
    }
}
