//! `ferry plan -c CONFIG -o json` as a user runs it, for the tests of bucket access: the child gets none of the
//! test process's variables that `strip` names (cloud credentials, proxies), only the `env` given.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// Runs the plan in the config's folder.
pub fn run(config: &Path, env: &[(&str, &str)], strip: impl Fn(&str) -> bool) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ferry"));
    command.args(["plan", "-c"]).arg(config).args(["-o", "json"]).env("FERRY_LOG", "warn");
    for (name, _) in std::env::vars() {
        if strip(&name) || name.to_ascii_lowercase().ends_with("_proxy") {
            command.env_remove(name);
        }
    }
    command.envs(env.iter().copied());
    command.current_dir(config.parent().expect("the config's folder")).output().expect("run ferry plan")
}

/// The Backups the plan materializes on its first cluster, sorted; panics with the output if the plan failed.
pub fn planned_backups(output: &Output) -> Vec<String> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "ferry plan failed: {}\n{stdout}", String::from_utf8_lossy(&output.stderr));
    let plan: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let mut names: Vec<String> = plan["clusters"][0]["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items: {plan:#}"))
        .iter()
        .filter(|item| item["kind"] == "Backup")
        .map(|item| item["name"].as_str().unwrap_or_default().to_string())
        .collect();
    names.sort();
    names
}
