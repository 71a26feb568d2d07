//! A real Azure Blob server on 127.0.0.1 for integration tests: Azurite, Microsoft's storage emulator.
//!
//! Azurite comes from `e2e/build-azurite.sh` (which installs a pinned version with npm once into
//! `$HOME/.cache/ferry-testbed` and then prints the cached path); it runs on the `node` on PATH. Each instance has
//! its own workspace and log in a temporary directory, its own free port and one storage account, [`ACCOUNT`]
//! with key [`KEY`] (set through `AZURITE_ACCOUNTS`, so Azurite's well-known `devstoreaccount1` key is not what
//! makes anything work). Requests name the account in the path (`http://127.0.0.1:PORT/<account>/<container>`),
//! as Azure's SDKs address an IP endpoint.
//!
//! Azurite runs under the same `sh` watchdog as MinIO (tests/support/minio.rs): when the pipe from the test process
//! closes (the instance is dropped, or the test process exits for any reason, even `SIGKILL`), it sends Azurite
//! `SIGTERM`; a stop that takes too long kills the process group.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ferry::bucket::{CredentialSource, Store, StoreConfig};

use super::local_server::{Watched, addr, cached_build, free_ports, watched_command};

/// The storage account of every instance.
pub const ACCOUNT: &str = "ferryacct";
/// Its key: 64 random bytes, base64 (as Azure's account keys are).
pub const KEY: &str = "iy7vk7K6VOEWPsiJ1DnWZTlIPLZtMYU2/j8+rPb2pagN7zhFXGjnRHfaCRbrb0nyPux8iKmdoFn4CXuz0pP0rQ==";

const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Creates container `$AZ_CONTAINER` with a SharedKey-signed `PUT /<account>/<container>?restype=container`
/// (Azurite has no command for it; node's own crypto and http, no package). Exits 0 on 201 Created.
const CREATE_CONTAINER: &str = r#"
const crypto = require("crypto");
const http = require("http");
const { AZ_PORT: port, AZ_ACCOUNT: account, AZ_KEY: key, AZ_CONTAINER: container } = process.env;
const path = `/${account}/${container}`;
const headers = { "x-ms-date": new Date().toUTCString(), "x-ms-version": "2021-08-06", "Content-Length": "0" };
// VERB, then Content-Encoding ... Range (all empty; a zero Content-Length is signed empty), then the x-ms-
// headers and the resource: the account, the request's path (which starts with the account too) and the query.
const stringToSign = ["PUT", "", "", "", "", "", "", "", "", "", "", ""].join("\n") + "\n" +
  `x-ms-date:${headers["x-ms-date"]}\nx-ms-version:${headers["x-ms-version"]}\n` +
  `/${account}${path}\nrestype:container`;
const signature = crypto.createHmac("sha256", Buffer.from(key, "base64")).update(stringToSign, "utf8").digest("base64");
headers.Authorization = `SharedKey ${account}:${signature}`;
const request = http.request({ host: "127.0.0.1", port, method: "PUT", path: `${path}?restype=container`, headers }, (res) => {
  let body = "";
  res.setEncoding("utf8");
  res.on("data", (chunk) => (body += chunk));
  res.on("end", () => {
    if (res.statusCode === 201) process.exit(0);
    console.error(`HTTP ${res.statusCode}: ${body}`);
    process.exit(1);
  });
});
request.on("error", (e) => { console.error(e.message); process.exit(1); });
request.end();
"#;

pub struct Azurite {
    /// The blob endpoint with the account in the path: `http://127.0.0.1:<port>/<account>`.
    pub endpoint: String,
    pub port: u16,
    /// Holds `data/` (Azurite's workspace), `azurite.log`, `debug.log` and `azure-credentials`.
    dir: tempfile::TempDir,
    process: Option<Watched>,
}

impl Azurite {
    /// A fresh instance of the test's own, stopped when dropped (also when the test panics).
    pub fn start() -> Azurite {
        let binary = azurite_binary();
        let dir = tempfile::Builder::new().prefix("ferry-azurite-").tempdir().expect("create a temporary directory");
        std::fs::create_dir_all(dir.path().join("data")).expect("create Azurite's workspace");
        // Velero's form of the Secret, for writers opened with `store_config`.
        std::fs::write(
            dir.path().join("azure-credentials"),
            velero_credentials_file("AZURE_STORAGE_ACCOUNT_ACCESS_KEY", KEY),
        )
        .expect("write the credentials file");
        let [port] = free_ports();
        let mut cmd = watched_command("azurite", &dir.path().join("azurite.log"), binary);
        cmd.args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string(), "--location"])
            .arg(dir.path().join("data"))
            .arg("--debug")
            .arg(dir.path().join("debug.log"))
            .args(["--skipApiVersionCheck", "--disableTelemetry"])
            .env("AZURITE_ACCOUNTS", format!("{ACCOUNT}:{KEY}"));
        let mut azurite = Azurite {
            endpoint: format!("http://127.0.0.1:{port}/{ACCOUNT}"),
            port,
            dir,
            process: Some(Watched::spawn(cmd, "Azurite")),
        };
        azurite.wait_until_live();
        azurite
    }

    /// Azurite's output so far (one access log line per request).
    pub fn log(&self) -> String {
        let path = self.dir.path().join("azurite.log");
        std::fs::read_to_string(&path).unwrap_or_else(|e| format!("(no log at {}: {e})", path.display()))
    }

    /// Velero's Azure credentials file holding [`KEY`] in `AZURE_STORAGE_ACCOUNT_ACCESS_KEY`.
    pub fn credentials_file(&self) -> PathBuf {
        self.dir.path().join("azure-credentials")
    }

    fn wait_until_live(&mut self) {
        let started = Instant::now();
        loop {
            if answers_http(self.port) {
                return;
            }
            let exited = self.process.as_mut().and_then(Watched::exited);
            if let Some(status) = exited {
                self.process = None;
                panic!("Azurite exited ({status}) before {} answered; its log:\n{}", self.endpoint, self.log());
            }
            if started.elapsed() > READY_TIMEOUT {
                let log = self.log();
                self.stop();
                panic!("Azurite did not answer on {} within {READY_TIMEOUT:?}; its log:\n{log}", self.endpoint);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops Azurite (SIGTERM through the watchdog, SIGKILL to its process group after 20 s) and waits for it.
    pub fn stop(&mut self) {
        if let Some(process) = self.process.take() {
            process.stop();
        }
    }

    /// Creates container `name` in [`ACCOUNT`]. Panics unless Azurite says 201 Created.
    pub fn create_container(&self, name: &str) {
        let output = Command::new("node")
            .args(["-e", CREATE_CONTAINER])
            .env("AZ_PORT", self.port.to_string())
            .env("AZ_ACCOUNT", ACCOUNT)
            .env("AZ_KEY", KEY)
            .env("AZ_CONTAINER", name)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run node to create container {name:?}: {e}"));
        assert!(
            output.status.success(),
            "creating container {name:?} on {}: node {}: {}\nAzurite's log:\n{}",
            self.endpoint,
            output.status,
            String::from_utf8_lossy(&output.stderr),
            self.log()
        );
    }

    /// `az://<container>` on this instance, opened the way ferry opens a location ([`ferry::bucket::open`]).
    pub fn store(&self, container: &str) -> Store {
        ferry::bucket::open(&self.store_config(container))
            .unwrap_or_else(|e| panic!("opening az://{container} on {}: {e}", self.endpoint))
    }

    /// How ferry reaches `container` here: the location keys of an Azure location, with the key in Velero's
    /// credentials file (no process-global variables).
    pub fn store_config(&self, container: &str) -> StoreConfig {
        StoreConfig {
            url: format!("az://{container}"),
            endpoint: Some(self.endpoint.clone()),
            allow_http: Some(true),
            storage_account: Some(ACCOUNT.to_string()),
            credential: CredentialSource { file: Some(self.credentials_file()), ..Default::default() },
            ..Default::default()
        }
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        // `dir` is removed after this, with Azurite already gone.
        self.stop();
    }
}

/// Velero's Azure credentials file (the Secret `velero install --provider azure` reads), with `key` in `variable`.
pub fn velero_credentials_file(variable: &str, key: &str) -> String {
    format!(
        "AZURE_SUBSCRIPTION_ID=00000000-0000-0000-0000-000000000000\nAZURE_RESOURCE_GROUP=velero\n\
         {variable}={key}\nAZURE_CLOUD_NAME=AzurePublicCloud\n"
    )
}

/// `azurite-blob` from `e2e/build-azurite.sh` (run once per test binary).
fn azurite_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| cached_build("build-azurite.sh", "Azurite", "an npm install, ~30 s"))
}

/// Whether `GET /` gets an HTTP answer (Azurite says 400 to it: any status means it serves).
fn answers_http(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr(port), Duration::from_millis(500)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 9];
    let mut read = 0;
    while read < head.len() {
        match stream.read(&mut head[read..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
    head[..read].starts_with(b"HTTP/1.")
}
