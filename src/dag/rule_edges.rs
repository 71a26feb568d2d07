//! The user's rules as edges: each rule, in order, adds one virtual node (its waiting objects depend on it, it
//! depends on the awaited objects), unless that would close a cycle; then the whole rule is refused, with the
//! cycle as a path.

use super::adjacency::Adjacency;
use super::edge::{Edge, EdgeKind, NodeId, Virtual, node_name};
use super::node::Object;
use super::report::{BuildReport, CyclePath, Refusal};
use super::rules::Rule;

/// User rules in order: each adds one virtual node (waiting objects → it → awaited objects), unless an awaited
/// object already (transitively) depends on a waiting one, in which case the rule is refused with that path.
pub(super) fn apply_rules(
    objects: &[Object],
    rules: &[Rule],
    edges: &mut Vec<Edge>,
    virtuals: &mut Vec<Virtual>,
    report: &mut BuildReport,
) {
    let n = objects.len();
    let mut adjacency = Adjacency::new(n, edges);
    for (index, rule) in rules.iter().enumerate() {
        let waiting: Vec<bool> = objects.iter().map(|o| rule.waits(o)).collect();
        let awaited: Vec<NodeId> =
            objects.iter().enumerate().filter(|(_, o)| rule.awaited(o)).map(|(i, _)| i as NodeId).collect();
        let text = rule.to_string();
        if awaited.is_empty() || !waiting.iter().any(|w| *w) {
            report.unmatched_rules.push(format!("rule {} ({text})", index + 1));
            continue;
        }
        let label = Virtual::Rule { index, text: text.clone() };
        if let Some(path) = adjacency.path(&awaited, &waiting) {
            // waiting → (rule) → awaited → … → waiting
            let last = path[path.len() - 1];
            let mut names = vec![node_name(objects, virtuals, last), label.to_string()];
            names.extend(path.iter().map(|v| node_name(objects, virtuals, *v)));
            report
                .refused_rules
                .push(Refusal { rule: format!("rule {} ({text})", index + 1), cycle: CyclePath(names) });
            continue;
        }
        let r = (n + virtuals.len()) as NodeId;
        virtuals.push(label);
        adjacency.grow(n + virtuals.len());
        for (i, _) in waiting.iter().enumerate().filter(|(_, w)| **w) {
            edges.push((i as NodeId, r, EdgeKind::Rule));
            adjacency.add(i as NodeId, r);
        }
        for &a in &awaited {
            edges.push((r, a, EdgeKind::Rule));
            adjacency.add(r, a);
        }
    }
}
