//! The CLI's conventions (issue 17): shell completion, man pages, `-o yaml` wherever there is `-o json`,
//! `--context`, exit codes, the log filter, the client config file.

use serde_json::Value;

#[path = "cli_support/mod.rs"]
mod cli_support;

use cli_support::ferry;

fn stdout(out: &std::process::Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).expect("UTF-8")
}

#[test]
fn bash_completion_knows_the_subcommands() {
    let script = stdout(&ferry(&["completion", "bash"]));
    for command in ["status", "describe", "restore", "graph", "completion", "man"] {
        assert!(script.contains(command), "{command} missing from the bash completion");
    }
    assert!(script.contains("complete -F"), "a bash completion function is registered");
    // The words offered after `ferry `: every subcommand, and the global flags.
    let top = script.lines().find(|l| l.contains("opts=\"") && l.contains("--log-format")).expect("top-level words");
    for word in ["status", "describe", "restore", "completion", "man", "--log-format"] {
        assert!(top.split_whitespace().any(|w| w.trim_matches('"') == word), "{word} not offered: {top}");
    }
    assert!(stdout(&ferry(&["completion", "zsh"])).starts_with("#compdef ferry"));
    assert!(!ferry(&["completion", "tcsh"]).status.success(), "an unknown shell is a usage error");
}

#[test]
fn man_pages_are_roff_one_per_command() {
    let page = stdout(&ferry(&["man"]));
    // roff: after the quote-character preamble (`.ie`/`.el`), the title macro comes first.
    let first = page.lines().find(|l| !l.starts_with(".ie") && !l.starts_with(".el")).unwrap_or_default();
    assert!(first.starts_with(".TH ferry 1"), "{}", &page[..page.len().min(200)]);
    assert!(page.contains(".SH SUBCOMMANDS") || page.contains("ferry\\-status"), "subcommands listed");

    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("man1");
    stdout(&ferry(&["man", "--out", out.to_str().expect("UTF-8 path")]));
    for name in ["ferry.1", "ferry-status.1", "ferry-restore.1", "ferry-describe.1", "ferry-describe-backup.1"] {
        let text = std::fs::read_to_string(out.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(text.contains(".TH "), "{name} is not roff");
    }
    assert!(!out.join("ferry-fixture.1").exists(), "no page for the hidden fixtures");
}

#[test]
fn graph_yaml_has_the_same_fields_as_json() {
    let args = ["graph", "manual-2", "--config", "examples/ferry.yaml", "-o"];
    let json: Value = serde_json::from_str(&stdout(&ferry(&[&args[..], &["json"]].concat()))).expect("JSON");
    let yaml: Value = serde_saphyr::from_str(&stdout(&ferry(&[&args[..], &["yaml"]].concat()))).expect("YAML");
    assert_eq!(yaml, json);
    assert!(json["objects"].as_array().is_some_and(|o| !o.is_empty()));
}
