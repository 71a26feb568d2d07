//! An Azure location read with its own credentials, against a real Azure Blob server (Azurite, Microsoft's
//! emulator; tests/support/azurite.rs): Velero's Azure credentials file with the storage account key, under its
//! default variable or the one `storageAccountKeyEnvVar` names; a wrong key fails the location, named; and a
//! location with a credential never reads the process's `AZURE_*` variables.
//!
//! Azurite is installed with npm on first use (e2e/build-azurite.sh) and runs on `node`; never skipped.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::json;

use ferry::catalog::{BackupFile, Layout};

use support::azurite::{self, Azurite};
use support::ferry_plan::{self, planned_backups};
use support::{put_all, velero};

const PREFIX: &str = "velero";
/// The container, which the BSLs name as their `objectStorage.bucket`.
const CONTAINER: &str = "velero";
/// A well-formed account key (64 bytes, base64) that is not the account's.
const WRONG_KEY: &str = "8qzDhiQO6tufbANrFWijTEKzulmPOWNxyYNBGqV/XqxSI7Zrn8Bz+Ec+PU8+Q0uhNyKOMc7lhoPQuRsv0lh4Bw==";

/// `ferry plan` with none of the test's `AZURE_*` (nor Azurite's) variables.
fn plan(config: &Path, env: &[(&str, &str)]) -> Output {
    ferry_plan::run(config, env, |name: &str| name.starts_with("AZURE_") || name.starts_with("AZURITE_"))
}

/// One Completed backup of namespace `team-a` in `container`, written through ferry's own Azure store (opened
/// from the location keys and Velero's credentials file).
async fn put_backup(azurite: &Azurite, container: &str, name: &str) {
    azurite.create_container(container);
    let store = azurite.store(container);
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

/// A config with location `az` (the container on `azurite`, plus `extra` lines) read by one cluster, whose
/// recorded inventory has a read-only Azure BSL `az` on that container.
fn write_config(dir: &Path, azurite: &Azurite, extra: &str) -> PathBuf {
    let bsl = json!({
        "apiVersion": "velero.io/v1",
        "kind": "BackupStorageLocation",
        "metadata": {"name": "az", "namespace": "velero", "uid": "uid-az"},
        "spec": {
            "provider": "velero.io/azure",
            "accessMode": "ReadOnly",
            "objectStorage": {"bucket": CONTAINER, "prefix": PREFIX},
            "config": {"resourceGroup": "velero", "storageAccount": azurite::ACCOUNT},
        },
        "status": {"phase": "Available"},
    });
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [bsl]});
    std::fs::write(dir.join("inventory.json"), serde_json::to_vec(&list).unwrap()).expect("write the inventory");
    let config = dir.join("ferry.yaml");
    let text = format!(
        "locations:\n  - name: az\n    url: az://{CONTAINER}\n    prefix: {PREFIX}\n    sourceCluster: cluster-a\n    \
         endpoint: {}\n    allowHttp: true\n    storageAccount: {}\n{extra}\
         clusters:\n  - name: cluster-b\n    inventory: inventory.json\n    storageLocations: {{az: az}}\n",
        azurite.endpoint,
        azurite::ACCOUNT,
    );
    std::fs::write(&config, text).expect("write the config");
    config
}

/// A failed plan: not a partial one, and its error names location `az`.
fn assert_location_fails(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "the plan should fail: {}", String::from_utf8_lossy(&output.stdout));
    assert!(stderr.contains("location \"az\""), "the error names the location: {stderr}");
    assert!(output.stdout.is_empty(), "no partial plan: {}", String::from_utf8_lossy(&output.stdout));
    stderr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_azure_location_reads_with_velero_s_credentials_file() {
    let azurite = Azurite::start();
    put_backup(&azurite, CONTAINER, "backup-from-azure").await;
    let dir = tempfile::tempdir().unwrap();
    let with_file = "    credential: {file: azure-credentials}\n";
    // Process-wide variables that would break the location if it read them: the account's name with a wrong key.
    let process_wide = [("AZURE_STORAGE_ACCOUNT_NAME", azurite::ACCOUNT), ("AZURE_STORAGE_ACCOUNT_KEY", WRONG_KEY)];

    // Velero's form of the Secret, the key under its default variable.
    let secret = azurite::velero_credentials_file("AZURE_STORAGE_ACCOUNT_ACCESS_KEY", azurite::KEY);
    std::fs::write(dir.path().join("azure-credentials"), secret).unwrap();
    let config = write_config(dir.path(), &azurite, with_file);
    assert_eq!(planned_backups(&plan(&config, &process_wide)), ["backup-from-azure"]);

    // The process's wrong key does break a location without a credential of its own (so the above proves
    // something), and the right one there works.
    let plain = write_config(dir.path(), &azurite, "");
    let stderr = assert_location_fails(&plan(&plain, &process_wide));
    assert!(stderr.contains("403 Forbidden"), "Azurite refused the key: {stderr}");
    let right = [("AZURE_STORAGE_ACCOUNT_KEY", azurite::KEY)];
    assert_eq!(planned_backups(&plan(&plain, &right)), ["backup-from-azure"]);

    // A wrong key in the file: Azurite refuses it (403) and the location fails, named; nothing is planned.
    let secret = azurite::velero_credentials_file("AZURE_STORAGE_ACCOUNT_ACCESS_KEY", WRONG_KEY);
    std::fs::write(dir.path().join("azure-credentials"), secret).unwrap();
    let config = write_config(dir.path(), &azurite, with_file);
    let right_in_process =
        [("AZURE_STORAGE_ACCOUNT_NAME", azurite::ACCOUNT), ("AZURE_STORAGE_ACCOUNT_KEY", azurite::KEY)];
    let stderr = assert_location_fails(&plan(&config, &right_in_process));
    assert!(stderr.contains("403 Forbidden"), "Azurite refused the key: {stderr}");

    // `storageAccountKeyEnvVar` names the file's variable that holds the key; the default one (wrong here) is
    // then not read.
    let secret = azurite::velero_credentials_file("MY_KEY", azurite::KEY)
        + &format!("AZURE_STORAGE_ACCOUNT_ACCESS_KEY={WRONG_KEY}\n");
    std::fs::write(dir.path().join("azure-credentials"), secret).unwrap();
    let named = "    credential: {file: azure-credentials, storageAccountKeyEnvVar: MY_KEY}\n";
    let config = write_config(dir.path(), &azurite, named);
    assert_eq!(planned_backups(&plan(&config, &process_wide)), ["backup-from-azure"]);

    // Without it, a file holding only MY_KEY has neither the default variable nor a service principal: a
    // configuration error naming the location and the variable.
    let secret = azurite::velero_credentials_file("MY_KEY", azurite::KEY);
    std::fs::write(dir.path().join("azure-credentials"), secret).unwrap();
    let config = write_config(dir.path(), &azurite, with_file);
    let output = plan(&config, &right_in_process);
    let stderr = assert_location_fails(&output);
    assert_eq!(output.status.code(), Some(2), "a credential that cannot be read is a configuration error: {stderr}");
    assert!(stderr.contains("AZURE_STORAGE_ACCOUNT_ACCESS_KEY"), "{stderr}");
}
