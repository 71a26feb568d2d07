//! The real Velero server (v1.18.3, built by e2e/testbed/build-velero.sh) on one cluster of the bed, run as a
//! process outside any pod, as e2e/testbed/README.md and docs/upstream.md describe: the bucket's credentials in
//! an AWS credentials file, its metrics and profiler on free loopback ports.
//!
//! Velero's controller-runtime metrics listener is fixed at `:8080` (no flag sets it), so two servers on one
//! machine collide there: run one at a time, or each in a network namespace of its own.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{TestBed, VELERO_NS};

/// A running `velero server`, in its own process group (its plugins too), killed with the group when dropped.
pub struct VeleroServer {
    child: Child,
    pub log: PathBuf,
}

/// The `velero server` command for `cluster`, with `extra` flags (e.g. `--fs-backup-timeout`), and the address
/// of its metrics listener.
pub fn velero_server_command(bed: &TestBed, cluster: &str, extra: &[&str]) -> (Command, SocketAddr) {
    let work = bed.state.path().join(format!("velero-{cluster}"));
    std::fs::create_dir_all(&work).expect("velero work dir");
    let credentials = work.join("credentials");
    std::fs::write(
        &credentials,
        format!(
            "[default]\naws_access_key_id={}\naws_secret_access_key={}\n",
            bed.var("FERRY_TESTBED_S3_ACCESS_KEY"),
            bed.var("FERRY_TESTBED_S3_SECRET_KEY")
        ),
    )
    .expect("credentials file");
    let metrics = free_loopback_port();
    let mut command = Command::new(bed.var("FERRY_TESTBED_VELERO"));
    command
        .args(["server", "--namespace", VELERO_NS])
        .args(["--metrics-address", &metrics.to_string(), "--profiler-address", &free_loopback_port().to_string()])
        .arg("--plugin-dir")
        .arg(bed.var("FERRY_TESTBED_VELERO_PLUGIN_DIR"))
        .arg("--kubeconfig")
        .arg(bed.admin_kubeconfig(cluster))
        .args(extra)
        .env("AWS_SHARED_CREDENTIALS_FILE", &credentials)
        .env("VELERO_NAMESPACE", VELERO_NS)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    (command, metrics)
}

impl VeleroServer {
    /// Starts Velero on `cluster` and waits until its controllers' metrics port (`:8080`) answers.
    pub fn start(bed: &TestBed, cluster: &str, extra: &[&str]) -> Self {
        use std::os::unix::process::CommandExt;
        let log = bed.state.path().join("logs").join(format!("velero-{cluster}.log"));
        let file = std::fs::File::create(&log).expect("velero log");
        let (mut command, _) = velero_server_command(bed, cluster, extra);
        let child = command.stderr(file).process_group(0).spawn().expect("start velero server");
        let mut server = Self { child, log };
        let deadline = Instant::now() + Duration::from_secs(90);
        while std::net::TcpStream::connect("127.0.0.1:8080").is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("velero server on {cluster} exited ({status}):\n{}", server.log_tail(30));
            }
            assert!(
                Instant::now() < deadline,
                "velero server on {cluster} not up after 90 s:\n{}",
                server.log_tail(30)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        server
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Stops the server and its plugins, and waits until `:8080` is free for the next one.
    pub fn stop(mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpListener::bind("0.0.0.0:8080").is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn kill(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return; // reaped already: its id may belong to another process now
        }
        // SAFETY: signalling the process group this helper created (its leader is our child, not yet reaped).
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

impl Drop for VeleroServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_loopback_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address")
}
