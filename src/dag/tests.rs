//! Table tests (one per edge source, the error texts) and property tests of the DAG: every order respects every
//! edge, layers are a topological order, hold-and-retry terminates, the tarball reader never panics.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::edge::{EdgeKind, NodeId};
use super::graph::Graph;
use super::node::Object;
use super::order::{layers, traverse};
use super::priorities::Priorities;
use super::rules::Rule;

fn build(objects: Vec<Object>) -> Graph {
    Graph::build(objects, &Priorities::none(), &[])
}

fn find(g: &Graph, kind: &str, name: &str) -> NodeId {
    g.objects().iter().position(|o| o.kind == kind && o.name == name).expect("object") as NodeId
}

/// The objects `v` depends on directly or through virtual nodes.
fn object_deps(g: &Graph, v: NodeId) -> BTreeSet<NodeId> {
    let mut out = BTreeSet::new();
    let mut stack: Vec<NodeId> = g.dependencies(v).map(|(d, _)| d).collect();
    let mut seen = BTreeSet::new();
    while let Some(d) = stack.pop() {
        if !seen.insert(d) {
            continue;
        }
        if g.is_object(d) {
            out.insert(d);
        } else {
            stack.extend(g.dependencies(d).map(|(x, _)| x));
        }
    }
    out
}

fn edge(g: &Graph, from: (&str, &str), to: (&str, &str)) -> Option<EdgeKind> {
    let (f, t) = (find(g, from.0, from.1), find(g, to.0, to.1));
    g.dependencies(f).find(|(d, _)| *d == t).map(|(_, k)| k)
}

/// A namespace `a` with a Deployment → ReplicaSet → Pod → PVC → PV → StorageClass chain and the Pod's config.
fn workload() -> Vec<Object> {
    vec![
        Object::new("", "v1", "Namespace", "", "a").with_uid("ns"),
        Object::new("storage.k8s.io", "v1", "StorageClass", "", "gp3").with_uid("sc"),
        Object::new("apps", "v1", "Deployment", "a", "web").with_uid("d"),
        Object::new("apps", "v1", "ReplicaSet", "a", "web-1").with_uid("rs").owned_by("Deployment", "web", "d"),
        Object::new("", "v1", "Pod", "a", "web-1-x")
            .with_uid("p")
            .owned_by("ReplicaSet", "web-1", "rs")
            .referencing("", "PersistentVolumeClaim", "a", "data", "spec.volumes[].persistentVolumeClaim")
            .referencing("", "ConfigMap", "a", "conf", "spec.volumes[].configMap")
            .referencing("", "Secret", "a", "creds", "containers[].envFrom")
            .referencing("", "ServiceAccount", "a", "runner", "spec.serviceAccountName"),
        Object::new("", "v1", "PersistentVolumeClaim", "a", "data").with_uid("pvc").referencing(
            "",
            "PersistentVolume",
            "",
            "pv-1",
            "spec.volumeName",
        ),
        Object::new("", "v1", "PersistentVolume", "", "pv-1").with_uid("pv").referencing(
            "storage.k8s.io",
            "StorageClass",
            "",
            "gp3",
            "spec.storageClassName",
        ),
        Object::new("", "v1", "ConfigMap", "a", "conf").with_uid("cm"),
        Object::new("", "v1", "Secret", "a", "creds").with_uid("s"),
        Object::new("", "v1", "ServiceAccount", "a", "runner").with_uid("sa"),
        Object::new("rbac.authorization.k8s.io", "v1", "Role", "a", "reader").with_uid("r"),
        Object::new("rbac.authorization.k8s.io", "v1", "RoleBinding", "a", "runner-reads")
            .with_uid("rb")
            .referencing("rbac.authorization.k8s.io", "Role", "a", "reader", "roleRef")
            .referencing("", "ServiceAccount", "a", "runner", "subjects[]"),
    ]
}

#[test]
fn edges_by_source() {
    let mut objects = workload();
    objects.push(Object {
        defines: Some(super::node::CrdDefinition { group: "example.com".into(), kind: Some("Widget".into()) }),
        ..Object::new("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "", "widgets.example.com")
    });
    objects.push(Object::new("example.com", "v1", "Widget", "a", "w1"));
    let g = build(objects);
    type Case<'a> = ((&'a str, &'a str), (&'a str, &'a str), EdgeKind);
    let cases: &[Case<'_>] = &[
        (("ReplicaSet", "web-1"), ("Deployment", "web"), EdgeKind::OwnerReference),
        (("Pod", "web-1-x"), ("ReplicaSet", "web-1"), EdgeKind::OwnerReference),
        (("Pod", "web-1-x"), ("PersistentVolumeClaim", "data"), EdgeKind::Reference),
        (("Pod", "web-1-x"), ("ConfigMap", "conf"), EdgeKind::Reference),
        (("Pod", "web-1-x"), ("Secret", "creds"), EdgeKind::Reference),
        (("Pod", "web-1-x"), ("ServiceAccount", "runner"), EdgeKind::Reference),
        (("PersistentVolumeClaim", "data"), ("PersistentVolume", "pv-1"), EdgeKind::Reference),
        (("PersistentVolume", "pv-1"), ("StorageClass", "gp3"), EdgeKind::Reference),
        (("RoleBinding", "runner-reads"), ("Role", "reader"), EdgeKind::Reference),
        (("RoleBinding", "runner-reads"), ("ServiceAccount", "runner"), EdgeKind::Reference),
        (("Pod", "web-1-x"), ("Namespace", "a"), EdgeKind::Namespace),
        (("Widget", "w1"), ("CustomResourceDefinition", "widgets.example.com"), EdgeKind::Crd),
        (("Widget", "w1"), ("Namespace", "a"), EdgeKind::Namespace),
    ];
    for (from, to, kind) in cases {
        assert_eq!(edge(&g, *from, *to), Some(*kind), "{from:?} → {to:?}");
    }
    // Nothing points the other way.
    assert_eq!(edge(&g, ("Deployment", "web"), ("ReplicaSet", "web-1")), None);
    assert_eq!(edge(&g, ("PersistentVolume", "pv-1"), ("PersistentVolumeClaim", "data")), None);
    assert!(g.report.external.is_empty(), "{:?}", g.report.external);
    assert!(g.report.cycles.is_empty());

    // Layer 0: what depends on nothing but the root.
    let l = layers(&g);
    let names = |layer: usize| -> Vec<String> { l.layers[layer].iter().map(|v| g.name(*v)).collect() };
    assert_eq!(
        names(0),
        [
            "Namespace a",
            "StorageClass.storage.k8s.io gp3",
            "CustomResourceDefinition.apiextensions.k8s.io widgets.example.com"
        ]
    );
    let layer_of = l.layer_of(g.object_count());
    assert_eq!(layer_of[find(&g, "Pod", "web-1-x") as usize], 3); // Namespace → Deployment → ReplicaSet → Pod
    assert!(l.never_ready.is_empty());
}

#[test]
fn bad_references_are_reported_not_fatal() {
    let objects = vec![
        Object::new("", "v1", "Pod", "a", "p").with_uid("p").owned_by("ReplicaSet", "gone", "uid-not-here"),
        Object::new("", "v1", "Pod", "a", "p").with_uid("p2"), // same identity
        Object::new("", "v1", "ConfigMap", "a", "c").with_uid("p"), // same uid as the first Pod
        Object::new("example.com", "v1", "Widget", "a", "w"),
    ];
    let g = build(objects);
    assert_eq!(g.object_count(), 3);
    let dups: Vec<(String, &str)> = g.report.duplicates.iter().map(|d| (d.object.clone(), d.reason)).collect();
    assert_eq!(dups, [("Pod a/p".to_string(), "identity"), ("ConfigMap a/c".to_string(), "uid")]);
    let external: Vec<&str> = g.report.external.iter().map(|e| e.target.as_str()).collect();
    assert_eq!(
        external,
        [
            "ReplicaSet gone (uid uid-not-here)",
            "Namespace a",
            "Namespace a",
            "Namespace a",
            "CustomResourceDefinition of Widget.example.com"
        ]
    );
    assert_eq!(layers(&g).layers[0].len(), 3);
}

#[test]
fn owner_reference_cycles_are_reported_and_never_ready() {
    let objects = vec![
        Object::new("", "v1", "ConfigMap", "", "a").with_uid("a").owned_by("ConfigMap", "c", "c"),
        Object::new("", "v1", "ConfigMap", "", "b").with_uid("b").owned_by("ConfigMap", "a", "a"),
        Object::new("", "v1", "ConfigMap", "", "c").with_uid("c").owned_by("ConfigMap", "b", "b"),
        Object::new("", "v1", "ConfigMap", "", "behind").with_uid("d").owned_by("ConfigMap", "a", "a"),
        Object::new("", "v1", "ConfigMap", "", "fine").with_uid("e"),
        Object::new("", "v1", "ConfigMap", "", "self").with_uid("s").owned_by("ConfigMap", "self", "s"),
    ];
    let g = build(objects);
    let cycles: Vec<String> = g.report.cycles.iter().map(|c| c.to_string()).collect();
    assert_eq!(cycles, ["ConfigMap a → ConfigMap c → ConfigMap b → ConfigMap a", "ConfigMap self → ConfigMap self"]);
    let l = layers(&g);
    assert_eq!(l.order().map(|v| g.name(v)).collect::<Vec<_>>(), ["ConfigMap fine"]);
    assert_eq!(l.never_ready.len(), 5);
    let t = traverse(&g);
    assert_eq!(t.never_ready, l.never_ready);
    assert_eq!(t.steps.len(), 1);
}

#[test]
fn a_rule_that_closes_a_cycle_is_refused_with_the_path() {
    let objects = vec![
        Object::new("", "v1", "Namespace", "", "shop"),
        Object::new("", "v1", "Service", "shop", "front"),
        Object::new("networking.k8s.io", "v1", "Ingress", "shop", "front").labelled("tier", "web"),
        Object::new("", "v1", "ConfigMap", "shop", "routes"),
    ];
    let rules =
        [Rule::new("Ingress", "services"), Rule::new("ConfigMap", "Ingress"), Rule::new("Service", "configmaps")];
    let g = Graph::build(objects.clone(), &Priorities::none(), &rules);
    let refused: Vec<String> = g.report.refused_rules.iter().map(|r| r.to_string()).collect();
    assert_eq!(
        refused,
        [
            "rule 3 (Service after configmaps) would close a cycle: Service shop/front → (rule 3: Service after configmaps) → \
          ConfigMap shop/routes → (rule 2: ConfigMap after Ingress) → Ingress.networking.k8s.io shop/front → \
          (rule 1: Ingress after services) → Service shop/front"
        ]
    );
    assert_eq!(g.check().unwrap_err().to_string(), refused[0]);
    // The accepted rules still order.
    let order: Vec<String> = layers(&g).order().map(|v| g.name(v)).collect();
    assert_eq!(
        order,
        ["Namespace shop", "Service shop/front", "Ingress.networking.k8s.io shop/front", "ConfigMap shop/routes"]
    );

    // A kind after itself, and selectors.
    let g = Graph::build(objects.clone(), &Priorities::none(), &[Rule::new("Service", "Service")]);
    assert_eq!(
        g.report.refused_rules[0].cycle.to_string(),
        "Service shop/front → (rule 1: Service after Service) → Service shop/front"
    );
    let mut narrow = Rule::new("Ingress", "Service");
    narrow.selector.match_labels.insert("tier".into(), "db".into());
    let g = Graph::build(objects, &Priorities::none(), &[narrow]);
    assert_eq!(g.report.unmatched_rules, ["rule 1 (Ingress[tier=db] after Service)"]);
    assert!(g.check().is_ok());
}

#[test]
fn priorities_order_kinds_and_yield_to_owner_references() {
    let g = Graph::build(workload(), &Priorities::velero_default(), &[]);
    // Velero restores pods before replicasets.apps; ownerReferences say the opposite: that pair is refused.
    let refused: Vec<String> = g.report.refused_priorities.iter().map(|r| r.rule.clone()).collect();
    assert!(refused.contains(&"priority pods < replicasets.apps".to_string()), "{refused:?}");
    let pair = g.report.refused_priorities.iter().find(|r| r.rule == "priority pods < replicasets.apps").unwrap();
    assert_eq!(
        pair.cycle.to_string(),
        "replicasets.apps → pods (priority) → replicasets.apps (ownerReference: Pod a/web-1-x → ReplicaSet.apps a/web-1)"
    );
    assert!(g.report.refused_rules.is_empty());
    let l = layers(&g);
    assert!(l.never_ready.is_empty());
    let layer_of = l.layer_of(g.object_count());
    let at = |kind: &str, name: &str| layer_of[find(&g, kind, name) as usize];
    // Tiers the backup does not contradict are kept: secrets before configmaps, serviceaccounts before secrets,
    // roles before serviceaccounts.
    assert!(at("Role", "reader") < at("ServiceAccount", "runner"));
    assert!(at("ServiceAccount", "runner") < at("Secret", "creds"));
    assert!(at("Secret", "creds") < at("ConfigMap", "conf"));
    assert!(at("Namespace", "a") < at("StorageClass", "gp3"));
    // And the references still hold.
    assert!(at("Deployment", "web") < at("ReplicaSet", "web-1"));
    assert!(at("ReplicaSet", "web-1") < at("Pod", "web-1-x"));
    assert!(check_order(&g, &l.order().collect::<Vec<_>>()).is_ok());
    // A user list in Velero's syntax.
    let g = Graph::build(workload(), &Priorities::parse("configmaps,-,secrets").unwrap(), &[]);
    let l = layers(&g).layer_of(g.object_count());
    assert!(l[find(&g, "ConfigMap", "conf") as usize] < l[find(&g, "Secret", "creds") as usize]);
}

#[test]
fn hold_and_retry_holds_what_breadth_first_reaches_early() {
    // Pod is a child of the Namespace (depth 1) but also waits for the ReplicaSet (depth 2 via the Deployment).
    let g = build(workload());
    let t = traverse(&g);
    assert!(t.never_ready.is_empty());
    assert_eq!(t.steps.len(), g.object_count());
    assert!(t.holds > 0);
    let pod = t.steps.iter().find(|s| s.node == find(&g, "Pod", "web-1-x")).unwrap();
    assert!(pod.retried);
    assert!(check_order(&g, &t.steps.iter().map(|s| s.node).collect::<Vec<_>>()).is_ok());
}

/// Every object comes after every object it depends on (through virtual nodes too).
fn check_order(g: &Graph, order: &[NodeId]) -> Result<(), String> {
    let mut position = vec![usize::MAX; g.object_count()];
    for (i, &v) in order.iter().enumerate() {
        position[v as usize] = i;
    }
    for &v in order {
        for d in object_deps(g, v) {
            if position[d as usize] >= position[v as usize] {
                return Err(format!("{} before its dependency {}", g.name(v), g.name(d)));
            }
        }
    }
    Ok(())
}

const KINDS: [(&str, &str); 8] = [
    ("", "Namespace"),
    ("", "Pod"),
    ("", "Secret"),
    ("", "ConfigMap"),
    ("apps", "ReplicaSet"),
    ("apps", "Deployment"),
    ("", "Service"),
    ("networking.k8s.io", "Ingress"),
];

/// Random objects; owners point only backwards (acyclic) unless `cyclic`.
fn objects_strategy(cyclic: bool) -> impl Strategy<Value = Vec<Object>> {
    proptest::collection::vec((0..KINDS.len(), 0..3usize, proptest::collection::vec(0..64usize, 0..3)), 1..48).prop_map(
        move |specs| {
            let n = specs.len();
            specs
                .iter()
                .enumerate()
                .map(|(i, (kind, ns, owners))| {
                    let (group, kind) = KINDS[*kind];
                    let namespace = if kind == "Namespace" { String::new() } else { format!("ns{ns}") };
                    let mut o = Object::new(group, "v1", kind, &namespace, &format!("o{i}")).with_uid(&format!("u{i}"));
                    for &owner in owners {
                        let target = if cyclic {
                            owner % n
                        } else if i == 0 {
                            continue;
                        } else {
                            owner % i
                        };
                        o = o.owned_by("Any", "x", &format!("u{target}"));
                    }
                    o
                })
                .collect()
        },
    )
}

fn rules_strategy() -> impl Strategy<Value = Vec<Rule>> {
    proptest::collection::vec((0..KINDS.len(), 0..KINDS.len()), 0..4)
        .prop_map(|pairs| pairs.into_iter().map(|(a, b)| Rule::new(KINDS[a].1, KINDS[b].1)).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn orders_respect_every_edge(objects in objects_strategy(false), rules in rules_strategy(), velero in any::<bool>()) {
        let priorities = if velero { Priorities::velero_default() } else { Priorities::none() };
        let g = Graph::build(objects, &priorities, &rules);
        // Facts are acyclic here, and rules/priorities never close a cycle.
        prop_assert!(g.report.cycles.is_empty(), "{:?}", g.report.cycles);
        let l = layers(&g);
        prop_assert!(l.never_ready.is_empty());
        let order: Vec<NodeId> = l.order().collect();
        prop_assert_eq!(order.len(), g.object_count());
        prop_assert!(check_order(&g, &order).is_ok(), "{:?}", check_order(&g, &order));
        // Layers: each object is exactly one layer after its deepest dependency.
        let layer_of = l.layer_of(g.object_count());
        for v in 0..g.object_count() as NodeId {
            let deepest = object_deps(&g, v).iter().map(|d| layer_of[*d as usize] + 1).max().unwrap_or(0);
            prop_assert!(layer_of[v as usize] >= deepest);
        }
        let t = traverse(&g);
        prop_assert!(t.never_ready.is_empty());
        let walked: Vec<NodeId> = t.steps.iter().map(|s| s.node).collect();
        prop_assert!(check_order(&g, &walked).is_ok(), "{:?}", check_order(&g, &walked));
    }

    #[test]
    fn hold_and_retry_terminates_on_any_graph(objects in objects_strategy(true), rules in rules_strategy()) {
        let g = Graph::build(objects, &Priorities::velero_default(), &rules);
        let t = traverse(&g);
        let l = layers(&g);
        // Done + never ready = every object, and both orders agree on which never become ready.
        prop_assert_eq!(t.steps.len() + t.never_ready.len(), g.object_count());
        prop_assert_eq!(&t.never_ready, &l.never_ready);
        prop_assert_eq!(l.never_ready.is_empty(), g.report.cycles.is_empty());
        let walked: Vec<NodeId> = t.steps.iter().map(|s| s.node).collect();
        prop_assert!(check_order(&g, &walked).is_ok());
    }
}
