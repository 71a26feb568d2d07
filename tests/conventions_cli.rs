//! The CLI's conventions: shell completion, man pages, `-o yaml` wherever there is `-o json`,
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

/// A stand-in Kubernetes API server (plain HTTP) that knows one ferry-made tenant Backup in `openshift-adp` and
/// the namespace `team-a-dr`, answers everything else 404, and records every request's method and path.
fn fake_kube_api() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            // The headers; a body (a POST) is not needed to answer.
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let mut parts = request_line.split_whitespace();
            let (method, path) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
            log.lock().expect("lock").push(format!("{method} {path}"));
            let path = path.split('?').next().unwrap_or_default();
            let body = match (method, path) {
                ("GET", "/apis/velero.io/v1/namespaces/openshift-adp/backups/team-a-nightly") => {
                    Some(serde_json::json!({
                    "apiVersion": "velero.io/v1", "kind": "Backup",
                    "metadata": {"name": "team-a-nightly", "namespace": "openshift-adp",
                        "labels": {"ferry.dev/managed-by": "ferry"},
                        "annotations": {"ferry.dev/source-cluster": "cluster-a"}},
                    "spec": {"includedNamespaces": ["team-a"]}}))
                }
                ("GET", "/api/v1/namespaces/team-a-dr") => Some(serde_json::json!({
                    "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a-dr"}})),
                _ => None,
            };
            let (status, body) = match body {
                Some(body) => ("200 OK", body.to_string()),
                None => (
                    "404 Not Found",
                    r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#
                        .to_string(),
                ),
            };
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (format!("http://{addr}"), seen)
}

/// A kubeconfig whose current context points nowhere and whose context `fake` points at `server`.
fn kubeconfig(dir: &std::path::Path, server: &str) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: dead\n\
         clusters:\n- name: dead\n  cluster: {{server: 'http://127.0.0.1:9'}}\n- name: fake\n  cluster: {{server: '{server}'}}\n\
         users:\n- name: admin\n  user: {{token: t}}\n\
         contexts:\n- name: dead\n  context: {{cluster: dead, user: admin}}\n- name: fake\n  context: {{cluster: fake, user: admin}}\n"
    );
    std::fs::write(&path, text).expect("write kubeconfig");
    path
}

#[test]
fn restore_dry_run_prints_the_restore_from_the_chosen_context_and_creates_nothing() {
    let (server, seen) = fake_kube_api();
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = kubeconfig(dir.path(), &server);
    let kubeconfig = kubeconfig.to_str().expect("UTF-8 path");
    let restore = |extra: &[&str]| {
        let args = ["restore", "team-a-nightly", "--cluster", "cluster-b", "--config", "examples/ferry.yaml"];
        ferry(&[&args[..], &["--kubeconfig", kubeconfig, "--name", "r1"], extra].concat())
    };

    let json: Value =
        serde_json::from_str(&stdout(&restore(&["--context", "fake", "--dry-run", "-o", "json"]))).expect("JSON");
    assert_eq!(json["kind"], "Restore");
    assert_eq!(json["metadata"]["name"], "r1");
    assert_eq!(json["metadata"]["namespace"], "openshift-adp");
    assert_eq!(json["spec"]["namespaceMapping"]["team-a"], "team-a-dr");
    let yaml: Value =
        serde_saphyr::from_str(&stdout(&restore(&["--context", "fake", "--dry-run", "-o", "yaml"]))).expect("YAML");
    assert_eq!(yaml, json);
    let requests = seen.lock().expect("lock").clone();
    assert!(requests.iter().any(|r| r.starts_with("GET /apis/velero.io/v1/namespaces/openshift-adp/backups/")));
    assert!(requests.iter().all(|r| r.starts_with("GET ")), "a dry run only reads: {requests:?}");

    // The current context (nowhere) when none is named: the cluster is unreachable (exit 3); an unknown
    // context is named in the error.
    let unreachable = restore(&["--dry-run"]);
    assert_eq!(unreachable.status.code(), Some(3), "{}", String::from_utf8_lossy(&unreachable.stderr));
    let unknown = restore(&["--context", "nope", "--dry-run"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("nope"), "{}", String::from_utf8_lossy(&unknown.stderr));
    // -o means nothing without --dry-run: a usage error.
    assert_eq!(restore(&["-o", "json"]).status.code(), Some(2));
}

fn code(out: &std::process::Output) -> Option<i32> {
    out.status.code()
}

#[test]
fn exit_codes_tell_usage_from_unreachable() {
    // Usage (clap's own), and a config file that does not load: 2.
    assert_eq!(code(&ferry(&["status", "--no-such-flag"])), Some(2));
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("client.yaml");
    std::fs::write(&bad, "contexts: [this is: not, a: list of contexts\n").expect("write");
    let out = ferry(&["status", "--client-config", bad.to_str().expect("UTF-8")]);
    assert_eq!(code(&out), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("client config"));
    let out = ferry(&["graph", "x", "--config", bad.to_str().expect("UTF-8")]);
    assert_eq!(code(&out), Some(2), "a bad ferry config: {}", String::from_utf8_lossy(&out.stderr));
    // A coordinator nobody listens on: 3.
    let out = ferry(&["status", "--coordinator", "http://127.0.0.1:9", "--insecure-dev"]);
    assert_eq!(code(&out), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach the coordinator at http://127.0.0.1:9"));
    // Any other failure: 1.
    assert_eq!(code(&ferry(&["graph", "no-such-backup", "--config", "examples/ferry.yaml"])), Some(1));
}

#[test]
fn client_config_contexts_choose_the_coordinator_and_flags_override_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("client.yaml");
    std::fs::write(
        &file,
        "current-context: broken\ncontexts:\n  - {name: broken, coordinator: 'not a uri'}\n  - {name: down, coordinator: \
         'http://127.0.0.1:9'}\n",
    )
    .expect("write");
    let file = file.to_str().expect("UTF-8");
    let status = |extra: &[&str]| ferry(&[&["status", "--insecure-dev", "--client-config", file][..], extra].concat());

    let current = status(&[]);
    assert_eq!(code(&current), Some(2), "the current context's address is invalid");
    assert!(
        String::from_utf8_lossy(&current.stderr).contains("not a uri"),
        "{}",
        String::from_utf8_lossy(&current.stderr)
    );
    let chosen = status(&["--client-context", "down"]);
    assert_eq!(code(&chosen), Some(3));
    assert!(String::from_utf8_lossy(&chosen.stderr).contains("http://127.0.0.1:9"));
    // The flag wins over the context.
    let flag = status(&["--coordinator", "http://127.0.0.1:1"]);
    assert_eq!(code(&flag), Some(3));
    assert!(String::from_utf8_lossy(&flag.stderr).contains("http://127.0.0.1:1"));
    let unknown = status(&["--client-context", "nope"]);
    assert_eq!(code(&unknown), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("\"nope\""));
    // Without TLS flags or a context's files, mTLS cannot start: a configuration error.
    assert_eq!(code(&ferry(&["status", "--client-config", file, "--client-context", "down"])), Some(2));
}

#[test]
fn a_bad_log_filter_is_warned_about_and_rust_log_comes_first() {
    let run = |vars: &[(&str, &str)]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ferry"));
        // `plan` logs each location it reads at info.
        command.args(["plan", "--config", "examples/ferry.yaml", "-o", "json"]);
        command.current_dir(env!("CARGO_MANIFEST_DIR")).env_remove("RUST_LOG").env_remove("FERRY_LOG");
        for (name, value) in vars {
            command.env(name, value);
        }
        let out = command.output().expect("run ferry");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let stderr = run(&[("RUST_LOG", "garbage===")]);
    assert!(stderr.contains("warning: ignoring RUST_LOG=\"garbage===\""), "{stderr}");
    assert!(stderr.contains(" INFO "), "the default level after the warning: {stderr}");
    let stderr = run(&[("FERRY_LOG", "garbage===")]);
    assert!(stderr.contains("warning: ignoring FERRY_LOG="), "{stderr}");
    // RUST_LOG wins: a good one there hides the bad FERRY_LOG (and turns logging off).
    let stderr = run(&[("RUST_LOG", "off"), ("FERRY_LOG", "garbage===")]);
    assert!(stderr.is_empty(), "{stderr}");
    let stderr = run(&[("RUST_LOG", "warn"), ("FERRY_LOG", "info")]);
    assert!(!stderr.contains(" INFO "), "{stderr}");
    assert!(!run(&[("FERRY_LOG", "warn")]).contains(" INFO "), "FERRY_LOG still works alone");
    assert!(run(&[]).contains(" INFO "), "info by default");
}

#[test]
fn a_cold_load_logs_its_progress_when_stderr_is_not_a_terminal() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["plan", "--config", "examples/ferry.yaml", "-o", "json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("RUST_LOG")
        .env("FERRY_LOG", "info")
        .output()
        .expect("run ferry");
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Plain lines, no bar (no carriage returns or cursor movement).
    let line = stderr.lines().find(|l| l.contains("location listed")).unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("location=\"shared\"") || line.contains("location=shared"), "{line}");
    assert!(line.contains("to_fetch=") && line.contains("reused=0"), "{line}");
    assert!(!stderr.contains('\r') && !stderr.contains('\x1b'), "{stderr}");
}
