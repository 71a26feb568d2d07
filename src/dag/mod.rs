//! The resource dependency DAG of a backup (docs/design.md §4). Pure: no IO, no clock, no async.
//!
//! - [`node`]: the objects (identity, owners, references); [`kinds`]: what discovery would say of a kind.
//! - Reading them from a backup: [`tarball_layout`] (where items are in a tarball, for readers and writers),
//!   [`tarball`] (the streaming reader), [`object_json`] (one item), [`references`] (well-known references
//!   in an item), [`resource_list`] (the fallback without a tarball).
//! - [`priorities`]: Velero's restore priorities; [`rules`]: user rules.
//! - [`graph`]: the public graph (building, reading, its cycles), over [`edge`] (node ids, edge kinds, virtual
//!   nodes) and [`report`] (what building found); its edges come from `fact_edges` (owners, references,
//!   namespaces, CRDs, joined through sorted key indexes), `rule_edges` and `priority_edges`, stored in
//!   `adjacency` (CSR rows, bit matrix).
//! - [`order`]: Kahn layers and hold-and-retry traversal.
//! - [`overlap`](mod@overlap): objects several backups share; [`apply_order`](mod@apply_order): ordering any small
//!   set (the agent's apply).
//! - [`intern`]: hashing and interning for the build.
//!
//! Dependencies run one way: `kinds` ← `node` ← `references` ← `object_json` ← `tarball`; `edge` ← `report` ←
//! the edge passes ← `graph` ← `order` (`a ← b`: `b` uses `a`). Nothing here uses the catalog: the catalog
//! reads tarballs (`catalog::legacy_volume_backups`) and resource lists (`catalog::decode`) through this module.

mod adjacency;
pub mod apply_order;
pub mod edge;
mod fact_edges;
pub mod graph;
pub mod intern;
pub mod kinds;
pub mod node;
pub mod object_json;
pub mod order;
pub mod overlap;
pub mod priorities;
mod priority_edges;
pub mod references;
pub mod report;
pub mod resource_list;
mod rule_edges;
pub mod rules;
pub mod tarball;
pub mod tarball_layout;

#[cfg(test)]
mod tests;

pub use apply_order::{ApplyOrderError, apply_order};
pub use edge::{EdgeKind, NodeId};
pub use graph::Graph;
pub use node::{Object, ObjectId};
pub use order::{Layers, Traversal, layers, traverse};
pub use overlap::{Overlap, ResourceSet, overlap};
pub use priorities::Priorities;
pub use report::{BuildReport, CyclePath, GraphError, Refusal};
pub use rules::{Rule, Selector};
pub use tarball::TarballContents;
