//! DAG benchmark (not a timed test): a backup of N objects with realistic chains (Deployment → ReplicaSet → Pod
//! → PVC → PV, the Pod also on a ConfigMap, a Secret and a ServiceAccount; Namespaces; one StorageClass), built
//! with Velero's default priorities and ordered (Kahn layers, and the hold-and-retry traversal). Side by side in
//! the same run: a naive repeated-scan ordering (scan every unplaced object until all its dependencies are
//! placed, again and again), and Velero's fixed priority order; for each order, how many objects it restores
//! before one of their dependencies. Each size runs in a child process, so its peak RSS is its own.
//!
//! `cargo bench --bench dag` (sizes from `FERRY_DAG_BENCH_SIZES`, default `100000,1000000`); without `--bench`
//! (as `cargo test --all-targets` runs it) a small smoke run checks the benchmark itself.

#[path = "support/proc_status.rs"]
mod proc_status;

use std::process::Command;
use std::time::Instant;

use ferry::dag::priorities::Priorities;
use ferry::dag::{EdgeKind, Graph, NodeId, Object, layers, traverse};

/// Workloads per namespace.
const WORKLOADS: usize = 100;

/// About `n` objects: per namespace a Namespace, a ServiceAccount and a ConfigMap, and per workload a
/// Deployment, ReplicaSet, Pod, PVC, PV and Secret.
fn objects(n: usize) -> Vec<Object> {
    let per_namespace = 3 + 6 * WORKLOADS;
    let namespaces = n.div_ceil(per_namespace).max(1);
    let mut out = Vec::with_capacity(namespaces * per_namespace + 1);
    out.push(Object::new("storage.k8s.io", "v1", "StorageClass", "", "gp3").with_uid("sc"));
    for k in 0..namespaces {
        let ns = format!("team-{k}");
        out.push(Object::new("", "v1", "Namespace", "", &ns).with_uid(&format!("ns-{k}")));
        out.push(Object::new("", "v1", "ServiceAccount", &ns, "default").with_uid(&format!("sa-{k}")));
        out.push(Object::new("", "v1", "ConfigMap", &ns, "app-config").with_uid(&format!("cm-{k}")));
        for w in 0..WORKLOADS {
            let id = format!("{k}-{w}");
            let (d, rs, pod, pvc, pv) = (
                format!("app-{w}"),
                format!("app-{w}-5d8f"),
                format!("app-{w}-5d8f-x2"),
                format!("data-{w}"),
                format!("pv-{id}"),
            );
            out.push(Object::new("apps", "v1", "Deployment", &ns, &d).with_uid(&format!("d-{id}")));
            out.push(Object::new("apps", "v1", "ReplicaSet", &ns, &rs).with_uid(&format!("rs-{id}")).owned_by(
                "Deployment",
                &d,
                &format!("d-{id}"),
            ));
            out.push(
                Object::new("", "v1", "Pod", &ns, &pod)
                    .with_uid(&format!("pod-{id}"))
                    .owned_by("ReplicaSet", &rs, &format!("rs-{id}"))
                    .referencing("", "PersistentVolumeClaim", &ns, &pvc, "spec.volumes[].persistentVolumeClaim")
                    .referencing("", "ConfigMap", &ns, "app-config", "spec.volumes[].configMap")
                    .referencing("", "Secret", &ns, &format!("{d}-creds"), "containers[].envFrom")
                    .referencing("", "ServiceAccount", &ns, "default", "spec.serviceAccountName"),
            );
            out.push(
                Object::new("", "v1", "PersistentVolumeClaim", &ns, &pvc)
                    .with_uid(&format!("pvc-{id}"))
                    .referencing("", "PersistentVolume", "", &pv, "spec.volumeName")
                    .referencing("storage.k8s.io", "StorageClass", "", "gp3", "spec.storageClassName"),
            );
            out.push(Object::new("", "v1", "PersistentVolume", "", &pv).with_uid(&format!("pv-{id}")).referencing(
                "storage.k8s.io",
                "StorageClass",
                "",
                "gp3",
                "spec.storageClassName",
            ));
            out.push(Object::new("", "v1", "Secret", &ns, &format!("{d}-creds")).with_uid(&format!("s-{id}")));
        }
    }
    out
}

/// Objects placed before at least one object they depend on by the backup's own facts (owner, reference,
/// namespace, CRD); `position[v]` is where object `v` is restored.
fn before_dependency(graph: &Graph, position: &[usize]) -> usize {
    (0..graph.object_count() as NodeId)
        .filter(|&v| {
            graph.dependencies(v).any(|(d, kind)| {
                kind <= EdgeKind::Crd && graph.is_object(d) && position[d as usize] >= position[v as usize]
            })
        })
        .count()
}

fn positions(n: usize, order: impl Iterator<Item = NodeId>) -> Vec<usize> {
    let mut p = vec![usize::MAX; n];
    for (i, v) in order.enumerate() {
        p[v as usize] = i;
    }
    p
}

/// The naive ordering: scan all unplaced nodes, place those whose dependencies are all placed (visible from the
/// next scan on), repeat until a scan places nothing.
fn naive_order(graph: &Graph) -> (Vec<NodeId>, usize) {
    let total = graph.node_count();
    let mut placed = vec![false; total];
    let mut remaining: Vec<NodeId> = (0..total as NodeId).collect();
    let mut order = Vec::with_capacity(total);
    let mut scans = 0;
    loop {
        scans += 1;
        let ready: Vec<NodeId> =
            remaining.iter().copied().filter(|&v| graph.dependencies(v).all(|(d, _)| placed[d as usize])).collect();
        if ready.is_empty() {
            break;
        }
        for &v in &ready {
            placed[v as usize] = true;
        }
        order.extend(ready.iter().copied().filter(|v| graph.is_object(*v)));
        remaining.retain(|v| !placed[*v as usize]);
    }
    (order, scans)
}

/// Velero's `getOrderedResources`: the high list, every other resource alphabetically, the low list; within a
/// resource, the objects in backup order.
fn velero_order(graph: &Graph) -> Vec<NodeId> {
    let p = Priorities::velero_default();
    let mut order: Vec<NodeId> = (0..graph.object_count() as NodeId).collect();
    order.sort_by_cached_key(|&v| {
        let o = &graph.objects()[v as usize];
        let tier = p.tier(&o.resource, &o.group, &o.kind);
        let alphabetical = if tier as usize == p.high.len() { o.resource.clone() } else { String::new() };
        (tier, alphabetical, v)
    });
    order
}

/// This thread's CPU time (ms): on a shared, loaded machine wall time also counts waiting for a core.
fn cpu_ms() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 * 1000.0 + t.tv_nsec as f64 / 1e6
}

fn rss_kb(field: &str) -> u64 {
    proc_status::own_kb(field)
}

/// One size, in this process; prints one result line.
fn child(n: usize) {
    let input = objects(n);
    let count = input.len();
    let (started, cpu) = (Instant::now(), cpu_ms());
    let graph = Graph::build(input, &Priorities::velero_default(), &[]);
    let build_ms = started.elapsed().as_secs_f64() * 1000.0;
    let build_cpu = cpu_ms() - cpu;
    let (started, cpu) = (Instant::now(), cpu_ms());
    let l = layers(&graph);
    let order_ms = started.elapsed().as_secs_f64() * 1000.0;
    let order_cpu = cpu_ms() - cpu;
    let started = Instant::now();
    let t = traverse(&graph);
    let traverse_ms = started.elapsed().as_secs_f64() * 1000.0;
    let rss_mb = rss_kb("VmHWM:") as f64 / 1024.0;
    assert!(l.never_ready.is_empty() && t.never_ready.is_empty());
    let started = Instant::now();
    let (naive, scans) = naive_order(&graph);
    let naive_ms = started.elapsed().as_secs_f64() * 1000.0;
    let ferry_bad = before_dependency(&graph, &positions(count, l.order()));
    let traverse_bad = before_dependency(&graph, &positions(count, t.steps.iter().map(|s| s.node)));
    let naive_bad = before_dependency(&graph, &positions(count, naive.into_iter()));
    let velero_bad = before_dependency(&graph, &positions(count, velero_order(&graph).into_iter()));
    println!(
        "{count} {} {build_ms:.1} {order_ms:.1} {traverse_ms:.1} {rss_mb:.0} {ferry_bad} {traverse_bad} {naive_bad} {velero_bad} {naive_ms:.1} {scans} {} {} {build_cpu:.0} {order_cpu:.0}",
        graph.edge_count(),
        l.layers.len(),
        t.holds
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        child(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000));
        return;
    }
    let smoke = !args.iter().any(|a| a == "--bench");
    let default_sizes = if smoke { "2000" } else { "100000,1000000" };
    let sizes: Vec<usize> = std::env::var("FERRY_DAG_BENCH_SIZES")
        .unwrap_or_else(|_| default_sizes.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let exe = std::env::current_exe().expect("own path");
    println!(
        "| objects | edges | build (ms wall / CPU) | order: layers (ms wall / CPU) | hold-and-retry (ms) | peak RSS (MB) | layers | holds | restored before a dependency: ferry layers / ferry hold-and-retry / naive scan / Velero priorities | naive scan (ms, scans) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    for n in sizes {
        let out = Command::new(&exe).args(["--child", &n.to_string()]).output().expect("run child");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let line = String::from_utf8_lossy(&out.stdout);
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 16, "{line}");
        let objects: f64 = f[0].parse().unwrap_or(1.0);
        println!(
            "| {} | {} | {} / {} | {} / {} | {} | {} | {} | {} | {} / {} / {} / {} ({:.1}%) | {} ({}) |",
            f[0],
            f[1],
            f[2],
            f[14],
            f[3],
            f[15],
            f[4],
            f[5],
            f[12],
            f[13],
            f[6],
            f[7],
            f[8],
            f[9],
            f[9].parse::<f64>().unwrap_or(0.0) * 100.0 / objects,
            f[10],
            f[11]
        );
        if smoke {
            assert_eq!((f[6], f[7], f[8]), ("0", "0", "0"), "ferry's and the naive orders respect every dependency");
            assert_ne!(f[9], "0", "Velero's fixed order restores Pods before their ReplicaSets");
        }
    }
}
