//! What the tests' local servers (MinIO, Azurite) share: a binary built once by an `e2e/` script and cached, free
//! ports on 127.0.0.1, and a watchdog that stops a server when the test process goes away.
//!
//! Included beside `minio.rs` wherever that is (`tests/support/mod.rs`, `benches/catalog.rs`).
#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long a server has to stop after SIGTERM before its process group is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

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

/// A server running under [`WATCHDOG`], in a process group of its own (so a last-resort kill reaches it too).
pub struct Watched {
    watchdog: Child,
    /// Dropping it closes the pipe, which stops the server.
    lifeline: Option<ChildStdin>,
}

/// The command that runs `program` under the watchdog, its output appended to `log`; add its arguments and
/// environment, then [`Watched::spawn`] it.
pub fn watched_command(name: &str, log: &Path, program: &Path) -> Command {
    let mut command = Command::new("/bin/sh");
    command.arg("-c").arg(WATCHDOG).arg(format!("ferry-{name}-watchdog")).arg(log).arg(program);
    command
}

impl Watched {
    pub fn spawn(mut command: Command, name: &str) -> Watched {
        command.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut watchdog = command.spawn().unwrap_or_else(|e| panic!("cannot start /bin/sh to run {name}: {e}"));
        let lifeline = watchdog.stdin.take();
        Watched { watchdog, lifeline }
    }

    /// The server's exit status, if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.watchdog.try_wait().ok().flatten()
    }

    /// Stops the server (SIGTERM through the watchdog, SIGKILL to its process group after 20 s) and waits for it.
    pub fn stop(mut self) {
        drop(self.lifeline.take());
        let started = Instant::now();
        loop {
            match self.watchdog.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if started.elapsed() < STOP_TIMEOUT => std::thread::sleep(Duration::from_millis(50)),
                _ => {
                    // The group id is the watchdog's pid (process_group(0)); it holds the server and the watchdog.
                    let group = format!("-{}", self.watchdog.id());
                    let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
                    let _ = self.watchdog.wait();
                    return;
                }
            }
        }
    }
}

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
