//! `ferry graph <backup>`: the dependency graph of one backup, in restore order (Kahn layers), with what each
//! object waits on, the hold-and-retry summary (docs/design.md §4), and everything the graph refused or could not resolve.
//! A user rule that would close a cycle makes the command fail, after printing the graph it could build.
//! `ferry plan --backup` shows the same objects and findings through [`objects_output`], [`objects_table`] and
//! [`report_sections`].

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::Serialize;

use ferry::config::LoadedConfig;
use ferry::dag::tarball::ItemError;
use ferry::dag::{BuildReport, Graph, Layers, NodeId, Traversal, layers, traverse};

use super::backup_objects::{self, BackupObjects};
use super::output::{ObjectFormat, object_text};
use super::table::Table;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    #[default]
    Table,
    Json,
    /// The same fields as `json`.
    Yaml,
    /// Graphviz: `dot -Tsvg`.
    Dot,
}

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// The backup's name (its folder under `<prefix>/backups/`).
    pub backup: String,
    /// The ferry config file (YAML): locations, and `dependencies` (priorities, rules).
    #[arg(long, short = 'c', env = "FERRY_CONFIG")]
    pub config: PathBuf,
    /// Only look in this location (default: every location, in config order).
    #[arg(long)]
    pub location: Option<String>,
    /// Output format: a human table, JSON/YAML for scripts, or Graphviz dot.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: GraphFormat,
}

/// `-o json|yaml`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphOutput {
    pub backup: String,
    pub location: String,
    pub source: &'static str,
    pub key: String,
    pub layers: usize,
    pub objects: Vec<ObjectOutput>,
    pub hold_and_retry: HoldAndRetry,
    pub never_ready: Vec<String>,
    pub report: BuildReportOutput,
    pub item_errors: Vec<ItemError>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectOutput {
    pub layer: Option<u32>,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub waits_on: Vec<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HoldAndRetry {
    /// Times an object was reached before its parents were done and put on hold.
    pub holds: usize,
    /// Objects done on a retry.
    pub retried: usize,
    /// Traversal layers (breadth from the root).
    pub rounds: u32,
}

/// [`BuildReport`] with node ids replaced by names.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildReportOutput {
    pub refused_rules: Vec<String>,
    pub refused_priorities: Vec<String>,
    pub unmatched_rules: Vec<String>,
    pub cycles: Vec<String>,
    pub duplicates: Vec<String>,
    pub external: Vec<ExternalOutput>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalOutput {
    pub from: String,
    pub via: &'static str,
    pub target: String,
}

pub async fn run(args: GraphArgs) -> anyhow::Result<()> {
    let config = LoadedConfig::load(&args.config)?;
    let loaded = backup_objects::load(&config, &args.backup, args.location.as_deref()).await?;
    let BackupObjects { backup, location, source, key, objects, item_errors } = loaded;
    let graph = Graph::build(objects, &config.priorities, &config.config.dependencies.rules);
    let l = layers(&graph);
    let t = traverse(&graph);
    let output = GraphOutput {
        backup,
        location,
        source,
        key,
        layers: l.layers.len(),
        objects: objects_output(&graph, &l),
        hold_and_retry: HoldAndRetry {
            holds: t.holds,
            retried: t.steps.iter().filter(|s| s.retried).count(),
            rounds: t.steps.last().map_or(0, |s| s.layer + 1),
        },
        never_ready: t.never_ready.iter().map(|v| graph.name(*v)).collect(),
        report: report_output(&graph, &graph.report),
        item_errors,
    };
    let text = match args.output {
        GraphFormat::Json => object_text(&output, ObjectFormat::Json)?,
        GraphFormat::Yaml => object_text(&output, ObjectFormat::Yaml)?,
        GraphFormat::Dot => dot(&graph, &l, &output.backup),
        GraphFormat::Table => render(&output, &t),
    };
    print!("{text}");
    graph.check()?;
    Ok(())
}

/// The objects in apply order (layer by layer, then those never ready), with what each waits on. Shared with
/// `ferry plan --backup`.
pub fn objects_output(graph: &Graph, l: &Layers) -> Vec<ObjectOutput> {
    let layer_of = l.layer_of(graph.object_count());
    let order = l.order().chain(l.never_ready.iter().copied());
    order
        .map(|v| {
            let o = &graph.objects()[v as usize];
            ObjectOutput {
                layer: (layer_of[v as usize] != u32::MAX).then_some(layer_of[v as usize]),
                group: o.group.clone(),
                version: o.version.clone(),
                kind: o.kind.clone(),
                namespace: o.namespace.clone(),
                name: o.name.clone(),
                uid: o.uid.clone(),
                waits_on: graph.waits_on(v),
            }
        })
        .collect()
}

pub fn report_output(graph: &Graph, r: &BuildReport) -> BuildReportOutput {
    BuildReportOutput {
        refused_rules: r.refused_rules.iter().map(|x| x.to_string()).collect(),
        refused_priorities: r.refused_priorities.iter().map(|x| x.to_string()).collect(),
        unmatched_rules: r.unmatched_rules.clone(),
        cycles: r.cycles.iter().map(|c| c.to_string()).collect(),
        duplicates: r.duplicates.iter().map(|d| format!("{} (same {})", d.object, d.reason)).collect(),
        external: r
            .external
            .iter()
            .map(|e| ExternalOutput { from: graph.name(e.from), via: e.via.as_str(), target: e.target.clone() })
            .collect(),
    }
}

/// The table: a summary line, objects by layer with what they wait on, then every finding.
pub fn render(o: &GraphOutput, t: &Traversal) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "BACKUP {} (location {}, from {}): {} objects in {} layers; hold-and-retry: {} holds, {} retried, {} never ready",
        o.backup,
        o.location,
        o.source,
        o.objects.len(),
        o.layers,
        t.holds,
        o.hold_and_retry.retried,
        o.never_ready.len()
    );
    out.push_str(&objects_table(&o.objects));
    out.push_str(&report_sections(&o.report, &o.item_errors));
    out
}

/// LAYER, KIND, NAMESPACE, NAME, WAITS ON: one row per object, in the order given.
pub fn objects_table(objects: &[ObjectOutput]) -> String {
    let mut table = Table::new(&["LAYER", "KIND", "NAMESPACE", "NAME", "WAITS ON"]);
    for obj in objects {
        let kind = if obj.group.is_empty() { obj.kind.clone() } else { format!("{}.{}", obj.kind, obj.group) };
        let layer = obj.layer.map_or_else(|| "never".to_string(), |l| l.to_string());
        table.row(vec![layer, kind, obj.namespace.clone(), obj.name.clone(), obj.waits_on.join(", ")]);
    }
    table.render("  ")
}

/// Every finding of the build, one titled section each (empty ones left out).
pub fn report_sections(r: &BuildReportOutput, item_errors: &[ItemError]) -> String {
    let mut out = String::new();
    let mut section = |title: &str, lines: &[String]| {
        if !lines.is_empty() {
            let _ = writeln!(out, "\n{title} ({}):", lines.len());
            for line in lines {
                let _ = writeln!(out, "  {line}");
            }
        }
    };
    section("REFUSED RULES", &r.refused_rules);
    section("CYCLES (never ready)", &r.cycles);
    section("PRIORITIES NOT APPLIED", &r.refused_priorities);
    section("RULES THAT MATCHED NOTHING", &r.unmatched_rules);
    section("DUPLICATES (first kept)", &r.duplicates);
    let external: Vec<String> = r.external.iter().map(|e| format!("{} → {} ({})", e.from, e.target, e.via)).collect();
    section("REFERENCES OUTSIDE THE BACKUP", &external);
    let errors: Vec<String> = item_errors.iter().map(|e| format!("{}: {}", e.path, e.error)).collect();
    section("ITEMS SKIPPED", &errors);
    out
}

/// Graphviz, edges from what is restored first to what waits on it; the backup is the root.
fn dot(graph: &Graph, l: &Layers, backup: &str) -> String {
    let quote = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
    let mut out = format!("digraph {} {{\n  rankdir=LR;\n  node [shape=box];\n", quote(backup));
    let _ = writeln!(out, "  root [label={}, shape=doubleoctagon];", quote(&format!("backup {backup}")));
    for v in 0..graph.node_count() as NodeId {
        let shape = if graph.is_object(v) { "" } else { ", shape=ellipse, style=dashed" };
        let _ = writeln!(out, "  n{v} [label={}{shape}];", quote(&graph.name(v)));
    }
    for v in l.layers.first().into_iter().flatten() {
        let _ = writeln!(out, "  root -> n{v};");
    }
    for v in 0..graph.node_count() as NodeId {
        for (d, kind) in graph.dependencies(v) {
            let _ = writeln!(out, "  n{d} -> n{v} [label={}];", quote(kind.as_str()));
        }
    }
    out.push_str("}\n");
    out
}
