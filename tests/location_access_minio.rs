//! Bucket access like Velero's BSLs, against real MinIO servers on 127.0.0.1: each location with its own
//! credentials (a file or named variables, never the process's `AWS_*`), a private CA (`caCert`) or
//! `insecureSkipTLSVerify`, virtual-hosted requests (`s3ForcePathStyle: false`), and a `file://` location that
//! does not exist. Everything goes through `ferry plan` as a user runs it.

mod cli_support;
mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Output;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use ferry::catalog::{BackupFile, Layout};
use ferry::grpc::certs::{Ca, Validity};

use support::ferry_plan::{self, planned_backups};
use support::minio::{Minio, MinioOptions};
use support::{put_all, velero};

const PREFIX: &str = "velero";

/// `ferry plan` with none of the test's `AWS_*` variables (a location with a credential must not need them).
fn plan(config: &Path, env: &[(&str, &str)]) -> Output {
    ferry_plan::run(config, env, |name: &str| name.starts_with("AWS_"))
}

/// One Completed backup of namespace `team-a` in `bucket` on `minio`.
async fn put_backup(minio: &Minio, bucket: &str, name: &str, insecure: bool) {
    minio.create_bucket(bucket);
    let config = ferry::bucket::StoreConfig { insecure_skip_tls_verify: insecure, ..minio.store_config(bucket) };
    let store = ferry::bucket::open(&config).expect("open the writer's store");
    let layout = Layout::new(PREFIX);
    put_all(
        &store,
        vec![
            (layout.key(name, BackupFile::Metadata), velero::backup_json(name, &["team-a"], "Completed")),
            (layout.key(name, BackupFile::PodVolumeBackups), velero::pvb_file(&velero::pvbs(name, "team-a", 1))),
        ],
    )
    .await;
}

/// A config over `locations` (YAML list items, already indented) read by one cluster, whose recorded inventory
/// has a read-only BSL on each location's bucket (named like the location).
fn write_config(dir: &Path, names: &[&str], locations: &str) -> std::path::PathBuf {
    let buckets: Vec<&str> = locations.lines().filter_map(|line| line.trim().strip_prefix("url: s3://")).collect();
    assert_eq!(buckets.len(), names.len(), "one s3:// url per location");
    let bsls: Vec<Value> = names
        .iter()
        .zip(&buckets)
        .map(|(name, bucket)| {
            json!({
                "apiVersion": "velero.io/v1",
                "kind": "BackupStorageLocation",
                "metadata": {"name": name, "namespace": "velero", "uid": format!("uid-{name}")},
                "spec": {
                    "provider": "aws",
                    "accessMode": "ReadOnly",
                    "objectStorage": {"bucket": bucket, "prefix": PREFIX},
                },
                "status": {"phase": "Available"},
            })
        })
        .collect();
    let inventory = dir.join("inventory.json");
    let list = json!({"apiVersion": "v1", "kind": "List", "items": bsls});
    std::fs::write(&inventory, serde_json::to_vec(&list).unwrap()).expect("write the inventory");
    let config = dir.join("ferry.yaml");
    let storage_locations: Vec<String> = names.iter().map(|n| format!("{n}: {n}")).collect();
    let text = format!(
        "locations:\n{locations}clusters:\n  - name: cluster-b\n    inventory: inventory.json\n    \
         storageLocations: {{{}}}\n",
        storage_locations.join(", ")
    );
    std::fs::write(&config, text).expect("write the config");
    config
}

fn location(name: &str, bucket: &str, minio: &Minio, extra: &str) -> String {
    format!(
        "  - name: {name}\n    url: s3://{bucket}\n    prefix: {PREFIX}\n    sourceCluster: cluster-a\n    \
         endpoint: {}\n    region: us-east-1\n    allowHttp: true\n{extra}",
        minio.endpoint
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_location_reads_with_its_own_credentials_never_the_processes() {
    let with_keys = |user: &str| MinioOptions {
        credentials: Some((user.to_string(), format!("{user}-secret-key"))),
        ..Default::default()
    };
    let (a, b) = (Minio::start_with(with_keys("writer-a")), Minio::start_with(with_keys("writer-b")));
    put_backup(&a, "bucket-a", "backup-from-a", false).await;
    put_backup(&b, "bucket-b", "backup-from-b", false).await;
    let dir = tempfile::tempdir().unwrap();
    // Velero's form: one AWS credentials file per BSL Secret; here one file with a profile per location.
    std::fs::write(
        dir.path().join("cloud"),
        "[default]\naws_access_key_id = nobody\naws_secret_access_key = wrong\n\n\
         [site-a]\naws_access_key_id = writer-a\naws_secret_access_key = writer-a-secret-key\n",
    )
    .unwrap();
    let locations = location("a", "bucket-a", &a, "    credential: {file: cloud, profile: site-a}\n")
        + &location(
            "b",
            "bucket-b",
            &b,
            "    credential:\n      env: {AWS_ACCESS_KEY_ID: SITE_B_KEY_ID, AWS_SECRET_ACCESS_KEY: SITE_B_SECRET}\n",
        );
    let config = write_config(dir.path(), &["a", "b"], &locations);
    // Process-wide variables that would break both locations if either read them: a session token MinIO does not
    // know is refused whatever the keys.
    let process_wide = [
        ("AWS_ACCESS_KEY_ID", "writer-a"),
        ("AWS_SECRET_ACCESS_KEY", "writer-a-secret-key"),
        ("AWS_SESSION_TOKEN", "not-a-session-token"),
    ];
    let site_b = [("SITE_B_KEY_ID", "writer-b"), ("SITE_B_SECRET", "writer-b-secret-key")];
    let env: Vec<_> = process_wide.iter().chain(&site_b).copied().collect();
    assert_eq!(planned_backups(&plan(&config, &env)), ["backup-from-a", "backup-from-b"]);
    // The token does break a location without a credential of its own (so the above proves something).
    let plain = location("a", "bucket-a", &a, "");
    let output = plan(&write_config(dir.path(), &["a"], &plain), &process_wide);
    assert!(
        !output.status.success(),
        "the process's token was not refused: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    let without_token = [process_wide[0], process_wide[1]];
    assert_eq!(planned_backups(&plan(&write_config(dir.path(), &["a"], &plain), &without_token)), ["backup-from-a"]);

    // Location b's variables are its own: one missing is not filled from the process's, and the error names the
    // location and the variable.
    let config = write_config(dir.path(), &["a", "b"], &locations);
    let mut partial = process_wide.to_vec();
    partial.push(site_b[0]);
    let output = plan(&config, &partial);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "a credential that cannot be read is a configuration error: {stderr}");
    assert!(
        stderr.contains("location \"b\"") && stderr.contains("SITE_B_SECRET (for AWS_SECRET_ACCESS_KEY)"),
        "{stderr}"
    );

    // The default profile holds keys MinIO refuses: the location fails, named, and nothing else is planned.
    let locations = location("a", "bucket-a", &a, "    credential: {file: cloud}\n");
    let config = write_config(dir.path(), &["a"], &locations);
    let output = plan(&config, &process_wide);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("location \"a\""), "{stderr}");
    assert!(output.stdout.is_empty(), "no partial plan: {}", String::from_utf8_lossy(&output.stdout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_ca_is_trusted_through_ca_cert_and_only_through_it() {
    let validity = Validity::days_from_now(1);
    let ca = Ca::generate("minio.test", validity).unwrap();
    let server = ca.server_cert(&["127.0.0.1".to_string()], validity).unwrap();
    let minio = Minio::start_with(MinioOptions { tls: Some((server.cert_pem, server.key_pem)), ..Default::default() });
    assert!(minio.endpoint.starts_with("https://"), "{}", minio.endpoint);
    put_backup(&minio, "bucket-tls", "backup-over-tls", true).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("minio-ca.pem"), ca.cert_pem()).unwrap();
    std::fs::write(
        dir.path().join("cloud"),
        format!("[default]\naws_access_key_id={}\naws_secret_access_key={}\n", minio.access_key, minio.secret_key),
    )
    .unwrap();
    let with = |extra: &str| {
        let tls = location("tls", "bucket-tls", &minio, &format!("    credential: {{file: cloud}}\n{extra}"));
        write_config(dir.path(), &["tls"], &tls)
    };

    let trusted = with("    caCert: minio-ca.pem\n");
    assert_eq!(planned_backups(&plan(&trusted, &[])), ["backup-over-tls"]);

    let untrusted = with("");
    let output = plan(&untrusted, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "an unknown CA must fail the location: {stderr}");
    assert!(stderr.contains("location \"tls\""), "{stderr}");

    let skip = with("    insecureSkipTLSVerify: true\n");
    assert_eq!(planned_backups(&plan(&skip, &[])), ["backup-over-tls"]);

    let wrong_ca = Ca::generate("other.test", validity).unwrap();
    std::fs::write(dir.path().join("other-ca.pem"), wrong_ca.cert_pem()).unwrap();
    let output = plan(&with("    caCert: other-ca.pem\n"), &[]);
    assert!(!output.status.success(), "another CA is not this server's");
}

/// A forward proxy on 127.0.0.1 that sends every connection to `target` and records each request's first
/// line: the client names `<bucket>.<domain>`, which nothing resolves here, and MinIO reads the host from the
/// absolute request URI.
fn proxy_to(target: u16) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { return };
            let Ok(mut server) = TcpStream::connect(("127.0.0.1", target)) else { return };
            let record = record.clone();
            let (mut client_read, mut server_write) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || {
                let mut buffer = [0u8; 16 * 1024];
                loop {
                    let n = match client_read.read(&mut buffer) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let text = String::from_utf8_lossy(&buffer[..n]);
                    for line in text.lines().filter(|l| l.contains(" HTTP/1.1")) {
                        record.lock().unwrap().push(line.to_string());
                    }
                    if server_write.write_all(&buffer[..n]).is_err() {
                        break;
                    }
                }
                let _ = server_write.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut server, &mut client);
                let _ = client.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (port, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_hosted_style_puts_the_bucket_in_the_host() {
    let minio = Minio::start_with(MinioOptions { domain: Some("minio.test".into()), ..Default::default() });
    put_backup(&minio, "velero-vh", "backup-virtual-hosted", false).await;
    let (proxy, seen) = proxy_to(minio.port);
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("http://minio.test:{}", minio.port);
    let config = write_config(
        dir.path(),
        &["vh"],
        &format!(
            "  - name: vh\n    url: s3://velero-vh\n    prefix: {PREFIX}\n    sourceCluster: cluster-a\n    \
             endpoint: {endpoint}\n    region: us-east-1\n    allowHttp: true\n    s3ForcePathStyle: false\n    \
             credential:\n      env: {{AWS_ACCESS_KEY_ID: VH_KEY, AWS_SECRET_ACCESS_KEY: VH_SECRET}}\n"
        ),
    );
    let proxy_url = format!("http://127.0.0.1:{proxy}");
    let env = [
        ("VH_KEY", minio.access_key.as_str()),
        ("VH_SECRET", minio.secret_key.as_str()),
        ("HTTP_PROXY", proxy_url.as_str()),
        ("http_proxy", proxy_url.as_str()),
    ];
    assert_eq!(planned_backups(&plan(&config, &env)), ["backup-virtual-hosted"]);
    let requests = std::mem::take(&mut *seen.lock().unwrap());
    let host = format!("http://velero-vh.minio.test:{}/", minio.port);
    assert!(!requests.is_empty() && requests.iter().all(|line| line.contains(&host)), "requests: {requests:#?}");

    // Path style (the default) names the bucket in the path instead, through the same proxy.
    let path_style = std::fs::read_to_string(&config).unwrap().replace("    s3ForcePathStyle: false\n", "");
    std::fs::write(&config, path_style).unwrap();
    assert_eq!(planned_backups(&plan(&config, &env)), ["backup-virtual-hosted"]);
    let requests = std::mem::take(&mut *seen.lock().unwrap());
    let path = format!("http://minio.test:{}/velero-vh", minio.port);
    assert!(!requests.is_empty() && requests.iter().all(|line| line.contains(&path)), "requests: {requests:#?}");
}

#[test]
fn a_file_location_that_does_not_exist_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ferry.yaml");
    std::fs::write(
        &config,
        "locations:\n  - {name: shared, url: 'file://bukcet', prefix: velero, sourceCluster: cluster-a}\nclusters: []\n",
    )
    .unwrap();
    let output = cli_support::ferry(&["plan", "-c", config.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let missing = dir.path().join("bukcet");
    assert!(
        stderr.contains("location \"shared\"")
            && stderr.contains(&format!("folder {} does not exist", missing.display())),
        "{stderr}"
    );
    assert!(!missing.exists(), "a reader creates nothing");
}
