//! Well-known references between built-in kinds, read from an object's JSON: Pod → PVC, ConfigMap, Secret,
//! ServiceAccount; PVC → PV (and its StorageClass); PV → StorageClass; RoleBinding/ClusterRoleBinding → Role,
//! ClusterRole, ServiceAccount. Namespace and CRD edges need no field and are added by the graph.

use serde_json::Value;

use super::node::Reference;

/// The references `object` (of `group`/`kind` in `namespace`) makes by name to other objects.
pub fn extract(group: &str, kind: &str, namespace: &str, object: &Value) -> Vec<Reference> {
    let mut out = Vec::new();
    let spec = &object["spec"];
    match (group, kind) {
        ("", "Pod") => pod_spec(namespace, spec, &mut out),
        ("", "PersistentVolumeClaim") => {
            push(&mut out, "", "PersistentVolume", "", &spec["volumeName"], "spec.volumeName");
            push(&mut out, "storage.k8s.io", "StorageClass", "", &spec["storageClassName"], "spec.storageClassName");
        }
        ("", "PersistentVolume") => {
            push(&mut out, "storage.k8s.io", "StorageClass", "", &spec["storageClassName"], "spec.storageClassName");
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            let role = &object["roleRef"];
            match role["kind"].as_str() {
                Some("Role") => {
                    push(&mut out, "rbac.authorization.k8s.io", "Role", namespace, &role["name"], "roleRef")
                }
                Some("ClusterRole") => {
                    push(&mut out, "rbac.authorization.k8s.io", "ClusterRole", "", &role["name"], "roleRef")
                }
                _ => {}
            }
            for subject in object["subjects"].as_array().into_iter().flatten() {
                if subject["kind"] == "ServiceAccount" {
                    // A RoleBinding's subject without a namespace is in the binding's namespace.
                    let ns = subject["namespace"].as_str().filter(|s| !s.is_empty()).unwrap_or(namespace);
                    push(&mut out, "", "ServiceAccount", ns, &subject["name"], "subjects[]");
                }
            }
        }
        _ => {}
    }
    out
}

fn pod_spec(ns: &str, spec: &Value, out: &mut Vec<Reference>) {
    let sa = spec["serviceAccountName"].as_str().filter(|s| !s.is_empty()).map(Value::from);
    // `serviceAccount` is the deprecated alias, still set by older clients.
    let sa = sa.unwrap_or_else(|| spec["serviceAccount"].clone());
    push(out, "", "ServiceAccount", ns, &sa, "spec.serviceAccountName");
    for secret in spec["imagePullSecrets"].as_array().into_iter().flatten() {
        push(out, "", "Secret", ns, &secret["name"], "spec.imagePullSecrets[]");
    }
    for volume in spec["volumes"].as_array().into_iter().flatten() {
        let claim = &volume["persistentVolumeClaim"]["claimName"];
        push(out, "", "PersistentVolumeClaim", ns, claim, "spec.volumes[].persistentVolumeClaim");
        push(out, "", "ConfigMap", ns, &volume["configMap"]["name"], "spec.volumes[].configMap");
        push(out, "", "Secret", ns, &volume["secret"]["secretName"], "spec.volumes[].secret");
        for source in volume["projected"]["sources"].as_array().into_iter().flatten() {
            push(out, "", "ConfigMap", ns, &source["configMap"]["name"], "spec.volumes[].projected");
            push(out, "", "Secret", ns, &source["secret"]["name"], "spec.volumes[].projected");
        }
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for container in spec[list].as_array().into_iter().flatten() {
            for from in container["envFrom"].as_array().into_iter().flatten() {
                push(out, "", "ConfigMap", ns, &from["configMapRef"]["name"], "containers[].envFrom");
                push(out, "", "Secret", ns, &from["secretRef"]["name"], "containers[].envFrom");
            }
            for env in container["env"].as_array().into_iter().flatten() {
                let from = &env["valueFrom"];
                push(out, "", "ConfigMap", ns, &from["configMapKeyRef"]["name"], "containers[].env");
                push(out, "", "Secret", ns, &from["secretKeyRef"]["name"], "containers[].env");
            }
        }
    }
    // The same target named twice (a volume and an env) is one dependency.
    out.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    out.dedup_by(|a, b| a.kind == b.kind && a.name == b.name && a.namespace == b.namespace);
}

fn push(out: &mut Vec<Reference>, group: &str, kind: &str, ns: &str, name: &Value, field: &'static str) {
    if let Some(name) = name.as_str().filter(|n| !n.is_empty()) {
        out.push(Reference { group: group.into(), kind: kind.into(), namespace: ns.into(), name: name.into(), field });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn targets(group: &str, kind: &str, object: Value) -> Vec<String> {
        extract(group, kind, "a", &object)
            .into_iter()
            .map(|r| format!("{} {}/{} ({})", r.kind, r.namespace, r.name, r.field))
            .collect()
    }

    #[test]
    fn well_known_references_table() {
        let pod = json!({"spec": {
            "serviceAccountName": "runner",
            "imagePullSecrets": [{"name": "pull"}],
            "volumes": [
                {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "c", "configMap": {"name": "conf"}},
                {"name": "s", "secret": {"secretName": "tls"}},
                {"name": "p", "projected": {"sources": [{"configMap": {"name": "conf"}}, {"secret": {"name": "extra"}}]}}
            ],
            "containers": [{"envFrom": [{"secretRef": {"name": "creds"}}],
                            "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "env-conf", "key": "x"}}}]}]
        }});
        let cases: Vec<(&str, &str, Value, Vec<&str>)> = vec![
            (
                "",
                "Pod",
                pod,
                vec![
                    "ConfigMap a/conf (spec.volumes[].configMap)",
                    "ConfigMap a/env-conf (containers[].env)",
                    "PersistentVolumeClaim a/data (spec.volumes[].persistentVolumeClaim)",
                    "Secret a/creds (containers[].envFrom)",
                    "Secret a/extra (spec.volumes[].projected)",
                    "Secret a/pull (spec.imagePullSecrets[])",
                    "Secret a/tls (spec.volumes[].secret)",
                    "ServiceAccount a/runner (spec.serviceAccountName)",
                ],
            ),
            (
                "",
                "Pod",
                json!({"spec": {"serviceAccount": "old"}}),
                vec!["ServiceAccount a/old (spec.serviceAccountName)"],
            ),
            (
                "",
                "PersistentVolumeClaim",
                json!({"spec": {"volumeName": "pv-1", "storageClassName": "gp3"}}),
                vec!["PersistentVolume /pv-1 (spec.volumeName)", "StorageClass /gp3 (spec.storageClassName)"],
            ),
            (
                "",
                "PersistentVolume",
                json!({"spec": {"storageClassName": "gp3", "claimRef": {"name": "x"}}}),
                vec!["StorageClass /gp3 (spec.storageClassName)"],
            ),
            (
                "rbac.authorization.k8s.io",
                "RoleBinding",
                json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "sa"},
                       {"kind": "ServiceAccount", "name": "sb", "namespace": "b"}, {"kind": "User", "name": "u"}]}),
                vec!["Role a/r (roleRef)", "ServiceAccount a/sa (subjects[])", "ServiceAccount b/sb (subjects[])"],
            ),
            (
                "rbac.authorization.k8s.io",
                "ClusterRoleBinding",
                json!({"roleRef": {"kind": "ClusterRole", "name": "view"}}),
                vec!["ClusterRole /view (roleRef)"],
            ),
            ("", "Pod", json!({"spec": {"volumes": [{"persistentVolumeClaim": {"claimName": 7}}]}}), vec![]),
            ("", "ConfigMap", json!({"data": {}}), vec![]),
            ("", "Pod", json!("not an object"), vec![]),
        ];
        for (group, kind, object, expected) in cases {
            assert_eq!(targets(group, kind, object), expected, "{kind}");
        }
    }
}
