//! The resource dependency DAG of a backup (DESIGN §4, seed 004). Pure: no IO, no clock, no async.
//!
//! - [`node`]: the objects (identity, owners, references); [`object_json`], [`tarball`], [`resource_list`]:
//!   reading them from a backup.
//! - [`references`]: well-known references; [`priorities`]: Velero's restore priorities; [`rules`]: user rules.
//! - [`graph`]: building and validating the graph; [`order`]: Kahn layers and hold-and-retry traversal.
//! - [`overlap`]: objects several backups share; [`apply_order`]: ordering any small set (the agent's apply).

pub mod apply_order;
pub mod graph;
pub mod intern;
pub mod node;
pub mod object_json;
pub mod order;
pub mod overlap;
pub mod priorities;
pub mod references;
pub mod resource_list;
pub mod rules;
pub mod tarball;

#[cfg(test)]
mod tests;

pub use apply_order::{ApplyOrderError, apply_order};
pub use graph::{BuildReport, CyclePath, EdgeKind, Graph, GraphError, NodeId, Refusal};
pub use node::{Object, ObjectId};
pub use order::{Layers, Traversal, layers, traverse};
pub use overlap::{Overlap, ResourceSet, overlap};
pub use priorities::Priorities;
pub use rules::{Rule, Selector};
pub use tarball::TarballContents;
