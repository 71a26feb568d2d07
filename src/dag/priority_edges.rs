//! Restore priorities as edges, last: kind-level preferences, applied as pairs "B after A" between the resources
//! present, through one gate and one done node per resource (O(n) edges, not O(n²)). A pair that would close a
//! cycle with the facts, the rules or the pairs already taken is dropped for that pair only, with the cycle as a
//! path.

use std::collections::{BTreeMap, VecDeque};

use super::adjacency::BitMatrix;
use super::edge::{Edge, EdgeKind, NodeId, Virtual, node_name};
use super::fact_edges::Resources;
use super::intern::FastHashMap;
use super::node::Object;
use super::priorities::Priorities;
use super::report::{BuildReport, CyclePath, Refusal};

/// Priorities as kind-level edges. Every resource present is a kind node; the facts and rules give kind edges
/// ("some object of kind A depends on some object of kind B"). Pairs "B after A" (A in an earlier tier) are
/// added nearest tiers first, each unless A already reaches B (it would close a cycle; refused with the path),
/// and skipped when implied. The kind graph stays acyclic, so the object graph gains no cycle: any object cycle
/// would map onto a kind cycle through at least one priority pair.
pub(super) fn apply_priorities(
    objects: &[Object],
    resources: &Resources,
    priorities: &Priorities,
    edges: &mut Vec<Edge>,
    virtuals: &mut Vec<Virtual>,
    report: &mut BuildReport,
) {
    if priorities.high.is_empty() && priorities.low.is_empty() {
        return;
    }
    let kinds = &resources.names;
    let kind_of = &resources.of;
    let tier: Vec<u32> = resources
        .first
        .iter()
        .map(|&v| {
            let o = &objects[v as usize];
            priorities.tier(&o.resource, &o.group, &o.kind)
        })
        .collect();
    let k = kinds.len();
    if tier.iter().all(|t| *t == tier[0]) {
        return;
    }
    // A kind-level edge through a virtual (rule) node joins the kinds on both sides.
    let n = objects.len();
    let kind_at = |v: NodeId| kind_of.get(v as usize).copied();
    let mut example: FastHashMap<(u32, u32), Edge> = FastHashMap::default();
    let mut reach = BitMatrix::new(k);
    // By rule node, so the earliest rule explains a kind pair whatever the hasher (rules are few).
    let mut rule_in: BTreeMap<NodeId, Vec<u32>> = BTreeMap::new();
    let mut rule_out: FastHashMap<NodeId, Vec<(u32, Edge)>> = FastHashMap::default();
    for &(from, to, kind) in edges.iter() {
        match (kind_at(from), kind_at(to)) {
            (Some(a), Some(b)) if a != b && !reach.get(a, b) => {
                reach.set(a, b);
                example.insert((a, b), (from, to, kind));
            }
            (Some(a), None) => rule_in.entry(to).or_default().push(a),
            (None, Some(b)) => rule_out.entry(from).or_default().push((b, (from, to, kind))),
            _ => {}
        }
    }
    for (r, ins) in &rule_in {
        for a in ins {
            for (b, e) in rule_out.get(r).into_iter().flatten() {
                if a != b && !reach.get(*a, *b) {
                    reach.set(*a, *b);
                    example.insert((*a, *b), *e);
                }
            }
        }
    }
    let direct = reach.clone();
    reach.close();
    // Candidate pairs (earlier, later), nearest tiers first.
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    for a in 0..k as u32 {
        for b in 0..k as u32 {
            if tier[a as usize] < tier[b as usize] {
                pairs.push((a, b));
            }
        }
    }
    pairs.sort_by_key(|&(a, b)| {
        (tier[b as usize] - tier[a as usize], tier[a as usize], kinds.resolve(a), kinds.resolve(b))
    });
    let mut accepted: Vec<(u32, u32)> = Vec::new();
    let mut accepted_edges = BitMatrix::new(k);
    for (a, b) in pairs {
        if reach.get(a, b) {
            // The refused pair is b → a; the path a ⇝ b closes the cycle.
            let path = kind_path(&direct, &accepted_edges, a, b);
            let mut names = vec![kinds.resolve(b).to_string(), format!("{} (priority)", kinds.resolve(a))];
            for w in path.windows(2) {
                names.push(match example.get(&(w[0], w[1])) {
                    Some(&(f, t, kind)) if direct.get(w[0], w[1]) => format!(
                        "{} ({}: {} → {})",
                        kinds.resolve(w[1]),
                        kind.as_str(),
                        node_name(objects, virtuals, f),
                        node_name(objects, virtuals, t)
                    ),
                    _ => format!("{} (priority)", kinds.resolve(w[1])),
                });
            }
            report.refused_priorities.push(Refusal {
                rule: format!("priority {} < {}", kinds.resolve(a), kinds.resolve(b)),
                cycle: CyclePath(names),
            });
            continue;
        }
        if reach.get(b, a) {
            continue; // implied by earlier pairs or facts
        }
        reach.add_edge(b, a);
        accepted_edges.set(b, a);
        accepted.push((a, b));
    }
    if accepted.is_empty() {
        return;
    }
    // Virtual nodes: gate(b) → done(a) for each accepted pair; objects of b → gate(b); done(a) → objects of a.
    let base = (n + virtuals.len()) as NodeId;
    let mut done: Vec<Option<NodeId>> = vec![None; k];
    let mut gate: Vec<Option<NodeId>> = vec![None; k];
    let mut next = base;
    let mut fresh = |slot: &mut Option<NodeId>, v: Virtual, virtuals: &mut Vec<Virtual>| -> NodeId {
        *slot.get_or_insert_with(|| {
            virtuals.push(v);
            next += 1;
            next - 1
        })
    };
    for &(a, b) in &accepted {
        let d = fresh(&mut done[a as usize], Virtual::PriorityDone { resource: kinds.resolve(a).into() }, virtuals);
        let g = fresh(&mut gate[b as usize], Virtual::PriorityGate { resource: kinds.resolve(b).into() }, virtuals);
        edges.push((g, d, EdgeKind::Priority));
    }
    for (i, &kind) in kind_of.iter().enumerate() {
        if let Some(g) = gate[kind as usize] {
            edges.push((i as NodeId, g, EdgeKind::Priority));
        }
        if let Some(d) = done[kind as usize] {
            edges.push((d, i as NodeId, EdgeKind::Priority));
        }
    }
}

/// A shortest kind path from `a` to `b` over direct fact/rule kind edges and accepted priority pairs.
fn kind_path(direct: &BitMatrix, accepted: &BitMatrix, a: u32, b: u32) -> Vec<u32> {
    let k = direct.size;
    let mut parent = vec![u32::MAX; k];
    parent[a as usize] = a;
    let mut queue = VecDeque::from([a]);
    while let Some(v) = queue.pop_front() {
        if v == b {
            break;
        }
        for w in 0..k as u32 {
            if parent[w as usize] == u32::MAX && (direct.get(v, w) || accepted.get(v, w)) {
                parent[w as usize] = v;
                queue.push_back(w);
            }
        }
    }
    let mut path = vec![b];
    let mut at = b;
    while at != a && parent[at as usize] != u32::MAX {
        at = parent[at as usize];
        path.push(at);
    }
    path.reverse();
    path
}
