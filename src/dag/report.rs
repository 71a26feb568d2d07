//! What building a graph found besides the graph: repeated objects, references to objects not in the backup,
//! cycles among the backup's own facts, and the rules and priority pairs refused because they would close a
//! cycle (each with the cycle as a path).

use std::fmt;

use serde::Serialize;

use super::edge::{EdgeKind, NodeId};

/// An object that was in the backup twice; the first one is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Duplicate {
    pub object: String,
    /// `identity` (same group, kind, namespace, name) or `uid` (another object has its uid).
    pub reason: &'static str,
}

/// A reference to an object that is not in the backup (kept as external: no edge, reported).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct External {
    pub from: NodeId,
    pub via: EdgeKind,
    pub target: String,
}

/// A cycle as a path of node names, first = last (`a → b → c → a`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CyclePath(pub Vec<String>);

impl fmt::Display for CyclePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(" → "))
    }
}

/// A rule or priority pair that was not applied because it would close a cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    /// `rule 2 (Ingress after services)` or `priority pods < replicasets.apps`.
    pub rule: String,
    pub cycle: CyclePath,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} would close a cycle: {}", self.rule, self.cycle)
    }
}

/// What building found besides the graph.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildReport {
    pub duplicates: Vec<Duplicate>,
    pub external: Vec<External>,
    /// Cycles among the backup's own references (bad ownerReferences); their objects never become ready.
    pub cycles: Vec<CyclePath>,
    /// User rules refused: an error for `ferry graph`, a refusal reason in plans.
    pub refused_rules: Vec<Refusal>,
    /// Priority pairs not applied because the backup's references or the rules order those kinds the other way.
    pub refused_priorities: Vec<Refusal>,
    /// Rules that matched no object on one side (not an error: another backup may have them).
    pub unmatched_rules: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    #[error("{0}")]
    RuleCycle(Refusal),
}
