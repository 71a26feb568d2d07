//! Fuzz harness over the config loader: YAML-ish noise and mutations of a valid config never panic, and a
//! config that loads holds what the loader promises to have checked.

use std::collections::BTreeSet;
use std::path::Path;

use proptest::prelude::*;
use proptest::sample::{Index, select};
use serde_json::Value;

use super::{ConfigError, LoadedConfig};
use crate::fuzz_input::{apply_byte_edits, byte_edits, mutated_json};

/// Every section, each key set.
const VALID: &str = r#"
locations:
  - name: shared
    url: s3://velero-backups
    bucket: velero-backups
    prefix: velero
    sourceCluster: cluster-a
    endpoint: http://127.0.0.1:9000
    region: us-east-1
    allowHttp: true
  - name: local
    url: file:///var/lib/ferry/bucket
    sourceCluster: cluster-b
clusters:
  - name: cluster-a
  - name: cluster-b
    veleroNamespace: openshift-adp
    inventory: inventories/cluster-b
    oadp: true
    kubeconfig: /etc/ferry/b.kubeconfig
    locations: [shared]
    storageLocations: {shared: dr-bsl}
    allowReadWriteLocations: false
namespaceMappings:
  - from: cluster-a
    to: cluster-b
    namespaces: {team-a: team-a-dr}
    prefix: {strip: "team-", add: "dr-"}
protectedNamespaces: [vault]
materialize: {veleroBackups: false}
catalog: {concurrency: 4}
coordinator:
  listen: 0.0.0.0:7443
  metricsListen: ""
  tls: {ca: ca.pem, cert: tls.crt, key: tls.key}
  trustDomain: example.org
  heartbeatInterval: 10s
  staleAfterMissedHeartbeats: 3
  catalogRefreshInterval: 1m
  debounce: 200ms
  resyncInterval: 5m
  maxMessageBytes: 1048576
dependencies:
  priorities: "namespaces,configmaps,-,services"
  rules:
    - {kind: Ingress, after: services, selector: {namespace: shop}, afterSelector: {matchLabels: {app: web}}}
"#;

/// YAML's syntax, some of it rarely written by hand.
const YAML_TOKENS: &[&str] = &[
    "- ",
    ": ",
    "? ",
    "  ",
    "\n",
    "{",
    "}",
    "[",
    "]",
    ",",
    "&a ",
    "*a",
    "<<: *a",
    "!!str ",
    "!!binary ",
    "!custom ",
    "|",
    ">-",
    "'",
    "\"",
    "#",
    "---\n",
    "...\n",
    "%YAML 1.2\n",
    "~",
    "null",
    "true",
    "0x1F",
    "0o17",
    ".inf",
    "-.nan",
    "1e400",
    "18446744073709551616",
    "-1",
    "0",
    "10s",
    "0s",
    "ms",
    "\"\\ud800\"",
    "\t",
    "\u{feff}",
    "locations",
    "clusters",
    "name",
    "url",
    "sourceCluster",
    "namespaceMappings",
    "from",
    "to",
    "coordinator",
    "heartbeatInterval",
    "dependencies",
    "priorities",
    "rules",
    "kind",
    "after",
    "-,",
    "x",
];

/// Every alias doubles the document: a loader without an expansion budget would run out of memory.
const ALIAS_BOMB: &str = "a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: &d [*c, *c]\ne: &e [*d, *d]\nf: &f [*e, *e]\n\
    g: &g [*f, *f]\nh: &h [*g, *g]\ni: &i [*h, *h]\nj: &j [*i, *i]\nk: &k [*j, *j]\nl: &l [*k, *k]\nm: &m [*l, *l]\n\
    n: &n [*m, *m]\no: &o [*n, *n]\np: &p [*o, *o]\nq: &q [*p, *p]\nr: &r [*q, *q]\ns: &s [*r, *r]\nt: &t [*s, *s]\n\
    locations: *t\n";

#[derive(Debug, Clone)]
enum LineEdit {
    Delete(Index),
    Duplicate(Index),
    Swap(Index, Index),
    Indent(Index),
    Outdent(Index),
    /// Replaces what follows the line's first `: `.
    Value(Index, String),
    Insert(Index, String),
}

fn yaml_noise() -> impl Strategy<Value = String> {
    proptest::collection::vec(select(YAML_TOKENS), 0..40).prop_map(|tokens| tokens.concat())
}

fn line_edit() -> impl Strategy<Value = LineEdit> {
    prop_oneof![
        any::<Index>().prop_map(LineEdit::Delete),
        any::<Index>().prop_map(LineEdit::Duplicate),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| LineEdit::Swap(a, b)),
        any::<Index>().prop_map(LineEdit::Indent),
        any::<Index>().prop_map(LineEdit::Outdent),
        (any::<Index>(), yaml_noise()).prop_map(|(at, value)| LineEdit::Value(at, value)),
        (any::<Index>(), yaml_noise()).prop_map(|(at, line)| LineEdit::Insert(at, line)),
    ]
}

fn apply_line_edits(text: &str, edits: &[LineEdit]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for edit in edits {
        if lines.is_empty() {
            break;
        }
        let pick = |i: &Index| i.index(lines.len());
        match edit {
            LineEdit::Delete(i) => {
                lines.remove(pick(i));
            }
            LineEdit::Duplicate(i) => {
                let i = pick(i);
                lines.insert(i, lines[i].clone());
            }
            LineEdit::Swap(a, b) => {
                let (a, b) = (pick(a), pick(b));
                lines.swap(a, b);
            }
            LineEdit::Indent(i) => {
                let i = pick(i);
                lines[i].insert_str(0, "  ");
            }
            LineEdit::Outdent(i) => {
                let i = pick(i);
                let line = &mut lines[i];
                *line = line.strip_prefix("  ").unwrap_or(line).to_string();
            }
            LineEdit::Value(i, value) => {
                let i = pick(i);
                if let Some((key, _)) = lines[i].split_once(": ") {
                    lines[i] = format!("{key}: {value}");
                }
            }
            LineEdit::Insert(i, line) => {
                let i = pick(i);
                lines.insert(i, line.clone());
            }
        }
    }
    lines.join("\n")
}

/// The valid config as a JSON tree (JSON is YAML), for value mutations.
fn valid_tree() -> Value {
    serde_saphyr::from_str(VALID).unwrap_or_default()
}

fn config_input() -> impl Strategy<Value = String> {
    let line_edited = (proptest::collection::vec(line_edit(), 1..6), byte_edits()).prop_map(|(lines, bytes)| {
        let text = apply_line_edits(VALID, &lines).into_bytes();
        String::from_utf8_lossy(&apply_byte_edits(text, &bytes)).into_owned()
    });
    prop_oneof![
        4 => line_edited,
        3 => mutated_json(valid_tree()).prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
        2 => yaml_noise(),
        1 => any::<String>(),
        1 => Just(ALIAS_BOMB.to_string()),
    ]
}

fn load(text: &str) -> Result<LoadedConfig, ConfigError> {
    LoadedConfig::from_yaml(text, Path::new("/etc/ferry/ferry.yaml"))
}

#[test]
fn the_valid_config_loads_as_text_and_as_a_json_tree() {
    let c = load(VALID).unwrap();
    assert_eq!(c.config.clusters.len(), 2);
    assert_eq!(c.config.dependencies.rules.len(), 1);
    assert!(load(&valid_tree().to_string()).is_ok());
    assert!(load(ALIAS_BOMB).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_loaded_config_is_a_checked_one(text in config_input()) {
        let Ok(loaded) = load(&text) else { return Ok(()) };
        let config = &loaded.config;
        let locations: BTreeSet<&str> = config.locations.iter().map(|l| l.name.as_str()).collect();
        let clusters: BTreeSet<&str> = config.clusters.iter().map(|c| c.name.as_str()).collect();
        prop_assert_eq!(locations.len(), config.locations.len());
        prop_assert_eq!(clusters.len(), config.clusters.len());
        prop_assert!(!locations.contains("") && !clusters.contains(""));
        for cluster in &config.clusters {
            prop_assert!(cluster.granted_locations().iter().all(|l| locations.contains(l.as_str())));
        }
        prop_assert!(config.namespace_mappings.iter().all(|m| clusters.contains(m.to.as_str())));
        prop_assert!(!config.coordinator.heartbeat_interval.is_zero());
        prop_assert!(config.coordinator.stale_after_missed_heartbeats > 0);
        prop_assert!(config.catalog.concurrency > 0);
    }
}
