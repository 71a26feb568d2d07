//! What the tests' local servers (MinIO, Azurite) share: a binary built once by an `e2e/` script and cached, free
//! ports on 127.0.0.1, and a watchdog that stops a server when the test process goes away.
//!
//! Included beside `minio.rs` wherever that is (`tests/support/mod.rs`, `benches/catalog.rs`).
#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Starts `"$@"` in the background with its output appended to `$1`, and a watchdog that sends it `SIGTERM` when
/// our stdin reaches end-of-file: the server is stopped when the test drops it, and also when the test process
/// exits for any reason, even `SIGKILL`. A background job's stdin is `/dev/null` in a shell without job control,
/// so the watchdog reads the pipe through fd 3. The script exits with the server's status, after removing
/// `$FERRY_REMOVE_DIR_ON_EXIT` when set.
pub const WATCHDOG: &str = r#"
log="$1"; shift
exec 3<&0
"$@" >>"$log" 2>&1 </dev/null &
pid=$!
{ cat <&3 >/dev/null; kill -TERM "$pid" 2>/dev/null; } &
exec 3<&-
wait "$pid"
status=$?
if [ -n "${FERRY_REMOVE_DIR_ON_EXIT:-}" ]; then rm -rf "$FERRY_REMOVE_DIR_ON_EXIT"; fi
exit "$status"
"#;

/// The path `e2e/<script>` prints: it builds or installs `what` on a fresh machine (`cold` says how long) and
/// then prints the cached path at once. Panics (the test fails, never skips) if the script fails.
pub fn cached_build(script: &str, what: &str, cold: &str) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e").join(script);
    eprintln!("running {} (builds {what} on a fresh machine, {cold}; then cached)", script.display());
    let output = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{} failed ({}); {what} is required for these tests, they are never skipped.\nstderr:\n{stderr}",
        script.display(),
        output.status
    );
    let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    assert!(
        path.is_file(),
        "{} printed {:?}, which is not a file.\nstderr:\n{stderr}",
        script.display(),
        path.display()
    );
    path
}

pub fn addr(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// Distinct free ports on 127.0.0.1 (bound to port 0 together, read, released).
pub fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<TcpListener> = (0..N).map(|_| TcpListener::bind(addr(0)).expect("bind 127.0.0.1:0")).collect();
    std::array::from_fn(|i| listeners[i].local_addr().expect("bound address").port())
}
