//! A real MinIO server on 127.0.0.1 for integration tests.
//!
//! The binary comes from `e2e/build-minio.sh` (which builds it once into `$HOME/.cache/ferry-testbed` and then
//! prints the cached path). Each instance has its own data directory and log file in a temporary directory and
//! its own pair of free ports. [`Minio::shared`] is one instance per test binary (distinct buckets per test);
//! a test that stops or restarts MinIO starts its own with [`Minio::start`].
//!
//! MinIO runs under a small `sh` watchdog whose stdin is a pipe from the test process: when that pipe closes
//! (the instance is stopped or dropped, or the test process exits for any reason, even `SIGKILL`), the watchdog
//! sends MinIO `SIGTERM`. This is what ends the shared instance, whose `Drop` never runs (it lives in a static).
//!
//! Included by several targets (`tests/support/mod.rs`, `benches/catalog.rs`, each beside `local_server.rs`), each
//! using part of it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ferry::bucket::{S3Credentials, Store, StoreConfig};

use super::local_server::{Watched, addr, cached_build, free_ports, watched_command};

/// The root credentials of every instance.
pub const ACCESS_KEY: &str = "ferry-test";
pub const SECRET_KEY: &str = "ferry-test-secret";
pub const REGION: &str = "us-east-1";

const READY_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// How [`Minio::start_with`] sets an instance up; the default is [`Minio::start`]'s.
#[derive(Debug, Clone, Default)]
pub struct MinioOptions {
    /// Root credentials other than [`ACCESS_KEY`]/[`SECRET_KEY`].
    pub credentials: Option<(String, String)>,
    /// A PEM certificate (chain) and its key: MinIO then serves HTTPS only.
    pub tls: Option<(String, String)>,
    /// `MINIO_DOMAIN`: MinIO also answers virtual-hosted requests (`<bucket>.<domain>`).
    pub domain: Option<String>,
}

pub struct Minio {
    /// `http://127.0.0.1:<port>` (`https://` with TLS).
    pub endpoint: String,
    pub access_key: String,
    pub secret_key: String,
    pub port: u16,
    console_port: u16,
    binary: PathBuf,
    /// Holds `data/` and `minio.log`. `None` for the shared instance, whose directory the watchdog removes.
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    remove_dir_on_exit: bool,
    process: Option<Watched>,
    options: MinioOptions,
}

impl Minio {
    /// The instance shared by all tests of this binary; give each test its own bucket. Never stop it.
    pub fn shared() -> &'static Minio {
        static SHARED: OnceLock<Minio> = OnceLock::new();
        SHARED.get_or_init(|| Minio::launch(true, MinioOptions::default()))
    }

    /// A fresh instance of the test's own, stopped when dropped (also when the test panics).
    pub fn start() -> Minio {
        Minio::launch(false, MinioOptions::default())
    }

    /// [`Minio::start`], set up by `options`.
    pub fn start_with(options: MinioOptions) -> Minio {
        Minio::launch(false, options)
    }

    fn launch(shared: bool, options: MinioOptions) -> Minio {
        let binary = minio_binary().to_path_buf();
        let dir = tempfile::Builder::new().prefix("ferry-minio-").tempdir().expect("create a temporary directory");
        let root = dir.path().to_path_buf();
        std::fs::create_dir_all(root.join("data")).expect("create MinIO's data directory");
        if let Some((cert, key)) = &options.tls {
            std::fs::create_dir_all(root.join("certs")).expect("create MinIO's certs directory");
            std::fs::write(root.join("certs/public.crt"), cert).expect("write public.crt");
            std::fs::write(root.join("certs/private.key"), key).expect("write private.key");
        }
        let scheme = if options.tls.is_some() { "https" } else { "http" };
        let (access_key, secret_key) =
            options.credentials.clone().unwrap_or((ACCESS_KEY.to_string(), SECRET_KEY.to_string()));
        let (dir, remove_dir_on_exit) = if shared {
            // A static is never dropped: the watchdog removes the directory once MinIO has exited.
            let _ = dir.keep();
            (None, true)
        } else {
            (Some(dir), false)
        };
        let [port, console_port] = free_ports();
        let mut minio = Minio {
            endpoint: format!("{scheme}://127.0.0.1:{port}"),
            access_key,
            secret_key,
            port,
            console_port,
            binary,
            dir,
            root,
            remove_dir_on_exit,
            process: None,
            options,
        };
        minio.spawn();
        minio
    }

    pub fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    pub fn log_path(&self) -> PathBuf {
        self.root.join("minio.log")
    }

    /// MinIO's output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path())
            .unwrap_or_else(|e| format!("(no log at {}: {e})", self.log_path().display()))
    }

    pub fn is_running(&self) -> bool {
        self.process.is_some()
    }

    fn spawn(&mut self) {
        assert!(self.process.is_none(), "MinIO on port {} is already running", self.port);
        let mut cmd = watched_command("minio", &self.log_path(), &self.binary);
        cmd.arg("server")
            .arg(self.data_dir())
            .arg("--address")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--console-address")
            .arg(format!("127.0.0.1:{}", self.console_port))
            .env("MINIO_ROOT_USER", &self.access_key)
            .env("MINIO_ROOT_PASSWORD", &self.secret_key)
            .env("MINIO_UPDATE", "off")
            .env("MINIO_BROWSER", "off")
            .arg("--certs-dir")
            .arg(self.root.join("certs"));
        if self.remove_dir_on_exit {
            cmd.env("FERRY_REMOVE_DIR_ON_EXIT", &self.root);
        }
        if let Some(domain) = &self.options.domain {
            cmd.env("MINIO_DOMAIN", domain);
        }
        self.process = Some(Watched::spawn(cmd, "MinIO"));
        self.wait_until_live();
    }

    fn wait_until_live(&mut self) {
        let started = Instant::now();
        loop {
            // `live` answers 200 as soon as the HTTP server runs; `cluster` once the object layer, bucket metadata
            // and IAM are initialized (before that, requests fail with XMinioServerNotInitialized).
            let healthy = |check| match self.options.tls {
                Some(_) => https_health(self.port, check),
                None => health(self.port, check),
            };
            if healthy("live") && healthy("cluster") {
                return;
            }
            let exited = self.process.as_mut().and_then(Watched::exited);
            if let Some(status) = exited {
                self.process = None;
                panic!(
                    "MinIO exited ({status}) before {}/minio/health/{{live,cluster}} answered 200; its log ({}):\n{}",
                    self.endpoint,
                    self.log_path().display(),
                    self.log()
                );
            }
            if started.elapsed() > READY_TIMEOUT {
                let log = self.log();
                self.stop();
                panic!(
                    "MinIO did not answer 200 on {}/minio/health/{{live,cluster}} within {READY_TIMEOUT:?}; its log ({}):\n{log}",
                    self.endpoint,
                    self.log_path().display(),
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops MinIO (SIGTERM through the watchdog, SIGKILL to its process group after 20 s) and waits for it.
    /// The data directory and port are kept for [`Self::restart`].
    pub fn stop(&mut self) {
        let Some(process) = self.process.take() else { return };
        process.stop();
        // The port must be free again before a restart binds it.
        let deadline = Instant::now() + STOP_TIMEOUT;
        while TcpStream::connect_timeout(&addr(self.port), Duration::from_millis(200)).is_ok()
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts MinIO again on the same port with the same data.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Creates `name` with a SigV4-signed `PUT /<name>` (curl's `--aws-sigv4`). Panics unless MinIO says 200.
    pub fn create_bucket(&self, name: &str) {
        const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let curl = if Path::new("/usr/bin/curl").exists() { "/usr/bin/curl" } else { "curl" };
        let output = Command::new(curl)
            .args(["--silent", "--show-error", "--max-time", "30", "--output", "-", "--write-out", "\n%{http_code}"])
            .args(["--aws-sigv4", &format!("aws:amz:{REGION}:s3")])
            .args(["--user", &format!("{}:{}", self.access_key, self.secret_key)])
            .args(["--header", &format!("x-amz-content-sha256: {EMPTY_SHA256}")])
            .args(self.options.tls.as_ref().map(|_| "--insecure"))
            .args(["--request", "PUT", &format!("{}/{name}", self.endpoint)])
            .output()
            .unwrap_or_else(|e| panic!("cannot run {curl} to create bucket {name:?}: {e}"));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let (body, status) = stdout.trim_end().rsplit_once('\n').unwrap_or(("", stdout.trim_end()));
        assert!(
            output.status.success() && status == "200",
            "creating bucket {name:?} on {}: curl {}, HTTP {status}: {body}\n{}",
            self.endpoint,
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// `s3://<bucket>` on this instance, opened the way ferry opens a location ([`ferry::bucket::open`]).
    pub fn store(&self, bucket: &str) -> Store {
        ferry::bucket::open(&self.store_config(bucket))
            .unwrap_or_else(|e| panic!("opening s3://{bucket} on {}: {e}", self.endpoint))
    }

    /// How ferry reaches `bucket` on this instance (explicit credentials: no process-global variables).
    pub fn store_config(&self, bucket: &str) -> StoreConfig {
        StoreConfig {
            url: format!("s3://{bucket}"),
            endpoint: Some(self.endpoint.clone()),
            region: Some(REGION.to_string()),
            allow_http: Some(true),
            credentials: Some(S3Credentials {
                access_key_id: self.access_key.clone(),
                secret_access_key: self.secret_key.clone(),
                session_token: None,
            }),
            ..Default::default()
        }
    }
}

impl Drop for Minio {
    fn drop(&mut self) {
        // `dir` (when owned) is removed after this, with MinIO already gone.
        self.stop();
    }
}

/// The MinIO binary from `e2e/build-minio.sh` (run once per test binary).
fn minio_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| cached_build("build-minio.sh", "MinIO", "~6 min"))
}

/// Whether `GET /minio/health/<check>` answers 200 over HTTPS (any certificate: only liveness is asked).
fn https_health(port: u16, check: &str) -> bool {
    let url = format!("https://127.0.0.1:{port}/minio/health/{check}");
    Command::new("curl")
        .args(["--silent", "--insecure", "--fail", "--max-time", "2", "--output", "/dev/null", &url])
        .status()
        .is_ok_and(|status| status.success())
}

/// Whether `GET /minio/health/<check>` answers 200.
fn health(port: u16, check: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr(port), Duration::from_millis(500)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /minio/health/{check} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 16];
    let mut read = 0;
    while read < head.len() {
        match stream.read(&mut head[read..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
    let status_line = String::from_utf8_lossy(&head[..read]);
    status_line.starts_with("HTTP/1.1 200") || status_line.starts_with("HTTP/1.0 200")
}
