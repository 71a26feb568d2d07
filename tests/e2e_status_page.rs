//! End to end on the real test bed: the coordinator's web status page, read by a real
//! headless Chromium. MinIO holds an admin backup (materialized on `b`) and a tenant backup whose NAC marks
//! claim team-a while it holds team-b (refused: tampered ownership); `ferry coordinator` with
//! `--status-page-listen 127.0.0.1:0` and both agents run over mTLS. Chromium loads the page, lets its script
//! poll `/api/status` and redraw, and the DOM it dumps must name both clusters as connected, the materialized
//! backup, and the refused one with the refusal's reason; its console must report no Content-Security-Policy
//! violation (the policy allows the page's inline style and script by hash only, so a hash that does not match
//! them shows there, and in a page its script never redrew). A screenshot is saved under the target directory.
//!
//! Needs Debian's `chromium` (e2e/test installs it: e2e/install-chromium.sh). Without it the test says so and passes, unless
//! FERRY_REQUIRE_BED is set (CI), where a missing browser fails it.

#[path = "e2e_support/mod.rs"]
mod e2e;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use e2e::*;
use ferry::fixture;
use ferry::model::BackupPhase;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);
const BROWSER: &str = "chromium";

/// `chromium` on PATH, if any.
fn browser() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(BROWSER)).find(|p| p.is_file())
}

/// Runs headless Chromium on `url` with `args`, killed after two minutes (a hung browser fails the test
/// rather than the CI run's time).
fn run_browser(browser: &Path, profile: &Path, args: &[String], url: &str) -> Output {
    let child = Command::new(browser)
        .args(["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run"])
        // No update checks, sync or metrics: the machine has no network beyond the bed.
        .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let id = child.id();
    let (done, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match wait.recv_timeout(Duration::from_secs(120)) {
        Ok(output) => output.expect("chromium output"),
        Err(_) => {
            // The child is owned by the waiting thread; end it by its own id.
            let _ = Command::new("kill").args(["-9", &id.to_string()]).status();
            panic!("chromium did not finish within two minutes on {url}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_in_a_real_browser() {
    let Some(browser) = browser() else {
        let required = std::env::var_os("FERRY_REQUIRE_BED").is_some();
        assert!(!required, "FERRY_REQUIRE_BED is set but `{BROWSER}` is not on PATH (apt-get install -y chromium)");
        eprintln!(
            "SKIPPED the_status_page_in_a_real_browser: `{BROWSER}` is not on PATH (apt-get install -y chromium; \
             set FERRY_REQUIRE_BED=1 to make this a failure)"
        );
        return;
    };
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let bed = TestBed::up();
    let b = bed.admin("b").await;
    create_bsl(&bed, &b, "dr-bsl").await;

    let admin = "nightly-shop";
    let admin_backup = fixture::admin_backup_json(admin, BackupPhase::Completed, "default");
    put_backup(&bed, admin, &admin_backup, &[]).await;
    // Tampered ownership: NAC marks for team-a, but the backup holds team-b.
    let (tampered, mut tampered_backup, _) = nac_backup("team-a", "stolen", "0b7c1e2a-5d4f-4e3a-9c8b-7a6f5e4d3c2b");
    tampered_backup["spec"]["includedNamespaces"] = json!(["team-b"]);
    put_backup(&bed, &tampered, &tampered_backup, &[]).await;

    let mut ferry = Ferry::start_with_status_page(&bed, "  []");
    let page = ferry.status_page.clone().expect("the coordinator printed its status page address");
    assert!(page.starts_with("http://127.0.0.1:"), "{page}");
    ferry.start_agent(&bed, "a");
    ferry.start_agent(&bed, "b");

    // What `ferry status` says is what the page must show: b refuses the tampered backup, with a reason.
    let reason = eventually("b refuses the tampered backup", WAIT, || async {
        let items = status_items(&ferry, &tampered);
        items.iter().find(|i| i["action"] == "refuse").and_then(|i| i["reason"].as_str().map(str::to_string))
    })
    .await;
    assert!(reason.contains("team-b"), "{reason}");
    eventually("the admin backup materialized on b", WAIT, || async {
        backups(&b).get_opt(admin).await.expect("get").map(|_| ())
    })
    .await;
    eventually("both agents connected", WAIT, || async {
        let status = ferry.status(None);
        let clusters = status["clusters"].as_array().cloned().unwrap_or_default();
        (clusters.len() == 2 && clusters.iter().all(|c| c["state"] == "connected")).then_some(())
    })
    .await;

    let profile = tempfile::Builder::new().prefix("ferry-chromium-").tempdir().expect("profile dir");
    let started = Instant::now();
    // The virtual time budget lets the page's script run its first poll (and the next, 2 s later) before
    // the DOM is dumped: what is checked is the script's redraw, not only the server's rendering.
    // The page's console goes to stderr: a Content-Security-Policy violation (the page's own style or script
    // blocked by a hash that does not match) is logged there as "... violates the following Content Security
    // Policy directive ...".
    let console = ["--enable-logging=stderr".into(), "--v=0".into()];
    let dom_args = [&console[..], &["--virtual-time-budget=5000".into(), "--dump-dom".into()]].concat();
    let dom = run_browser(&browser, profile.path(), &dom_args, &page);
    let html = String::from_utf8_lossy(&dom.stdout);
    let hint = || format!("chromium stderr: {}\n{}", String::from_utf8_lossy(&dom.stderr), logs_hint(&ferry));
    assert!(dom.status.success(), "chromium --dump-dom failed: {}", hint());
    eprintln!("chromium --dump-dom took {:?}", started.elapsed());
    let stderr = String::from_utf8_lossy(&dom.stderr);
    let violations: Vec<&str> = stderr.lines().filter(|l| l.contains("Content Security Policy")).collect();
    assert!(violations.is_empty(), "the page's CSP blocked its own code: {violations:#?}\n{}", hint());
    // The policy the browser applied is the hash-only one (no 'unsafe-inline' to make the check above moot).
    let host = page.trim_start_matches("http://").trim_end_matches('/');
    let (_, head, _) = http_response(host, "/");
    let policy = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().starts_with("content-security-policy:").then(|| l.to_string()))
        .unwrap_or_else(|| panic!("no CSP header: {head}"));
    assert!(policy.contains("script-src 'sha256-") && !policy.contains("unsafe-inline"), "{policy}");

    assert!(html.contains("live: generated "), "the page's script fetched /api/status and redrew: {html}\n{}", hint());
    for cluster in ["a", "b"] {
        assert!(html.contains(&format!("<td>{cluster}</td>")), "cluster {cluster} listed: {html}");
    }
    assert!(html.contains("connected ("), "clusters shown connected: {html}");
    assert!(!html.contains("disconnected ("), "no cluster shown disconnected: {html}");
    assert!(html.contains("<td>shared</td>"), "the location listed: {html}");
    // The refused backup: its name, REFUSED with the owner check's reason, and b's refuse item with its own.
    assert!(html.contains(&tampered), "{html}");
    let refusal = tampered_reason_fragment();
    assert!(html.contains(&format!("REFUSED: {refusal}")), "the refusal is shown: {html}");
    let item = format!("refuse Backup {VELERO_NS}/{tampered}: ");
    assert!(html.contains(&item), "b's refuse item: {html}");
    assert!(html.contains(&escape_text(&reason)), "b's reason {reason:?} is shown: {html}");
    assert!(html.contains(">refused</td>"), "b's verdict for it: {html}");
    // The admin backup is there on b.
    assert!(html.contains(admin) && html.contains(&format!("Backup {VELERO_NS}/{admin}")), "{html}");
    assert!(html.contains(">materialized</td>"), "{html}");

    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("status-page.png");
    let _ = std::fs::remove_file(&shot);
    let out = run_browser(
        &browser,
        profile.path(),
        &[
            "--virtual-time-budget=5000".into(),
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,900".into(),
        ],
        &page,
    );
    assert!(out.status.success(), "chromium --screenshot failed: {}", String::from_utf8_lossy(&out.stderr));
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot at {}: {e}", shot.display()));
    assert!(png.len() > 1000 && png.starts_with(b"\x89PNG\r\n\x1a\n"), "{} is a PNG", shot.display());
    eprintln!("status page screenshot: {} ({} bytes)", shot.display(), png.len());
}

/// The start of the owner check's refusal for the tampered backup (resolve::owner_of), as text.
fn tampered_reason_fragment() -> String {
    escape_text("owner namespace \"team-a\" but spec.includedNamespaces is [\"team-b\"]")
}

/// Text as Chromium serializes it in element content: `&`, `<`, `>` escaped, quotes kept.
fn escape_text(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
