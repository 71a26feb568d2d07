//! A location's own credentials, kept apart from every other location's as Velero keeps one `credential` Secret
//! per BackupStorageLocation. They come from one file (the Secret's key, mounted) in the form the provider's
//! Velero plugin reads, or from named environment variables. Parsing is pure; the store adapter reads the files.
//!
//! What each form becomes is a list of object_store configuration keys and values, so every provider is set up
//! through the same `with_config` door.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::catalog::StoreKind;

/// The variable of Velero's Azure credentials file that holds the storage account key, when the location does
/// not name another one (velero-plugin-for-microsoft-azure's `storageAccountKeyEnvVar`).
pub const DEFAULT_AZURE_KEY_VARIABLE: &str = "AZURE_STORAGE_ACCOUNT_ACCESS_KEY";

/// Where one location's credentials come from. With any set, the process-wide `AWS_*`/`GOOGLE_*`/`AZURE_*`
/// variables are not read for that location, so one location can never borrow another's identity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CredentialSource {
    /// S3: an AWS shared credentials file; GCS: a service account (or other ADC) JSON key; Azure: Velero's
    /// `KEY=value` credentials file.
    pub file: Option<PathBuf>,
    /// S3: the section of the credentials file (Velero's `profile`); default `default`.
    pub profile: Option<String>,
    /// Azure: the variable of the file that holds the storage account key.
    pub storage_account_key_variable: Option<String>,
    /// Standard variable name (`AWS_ACCESS_KEY_ID`, `GOOGLE_SERVICE_ACCOUNT_KEY`, `AZURE_STORAGE_ACCOUNT_KEY`, …)
    /// → the environment variable that holds its value for this location.
    pub env: BTreeMap<String, String>,
}

impl CredentialSource {
    pub fn is_set(&self) -> bool {
        self.file.is_some() || !self.env.is_empty()
    }
}

/// object_store configuration keys (lower case) and their values. Debug shows the keys only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Settings(pub Vec<(String, String)>);

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(|(key, _)| key)).finish()
    }
}

/// The settings of a credentials file's text (read from `path`), as `kind`'s Velero plugin reads it.
pub fn from_file(kind: StoreKind, text: &str, path: &Path, source: &CredentialSource) -> Result<Settings, String> {
    match kind {
        StoreKind::S3 => aws_profile(text, source.profile.as_deref().unwrap_or("default")),
        StoreKind::Gcs => gcs_key(text, path),
        StoreKind::Azure => {
            azure_env_file(text, source.storage_account_key_variable.as_deref().unwrap_or(DEFAULT_AZURE_KEY_VARIABLE))
        }
        StoreKind::Local => Err("a local folder takes no credentials".into()),
    }
}

/// One profile of an AWS shared credentials file (INI: `[name]` sections of `key = value`; `#`/`;` comments).
pub fn aws_profile(text: &str, profile: &str) -> Result<Settings, String> {
    let mut section: Option<&str> = None;
    let mut found = false;
    let mut values = BTreeMap::new();
    for (number, line) in text.lines().map(str::trim).enumerate() {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            // `[profile x]` is the config file's spelling; accept it in a credentials file too.
            let name = name.trim();
            section = Some(name.strip_prefix("profile ").map(str::trim).unwrap_or(name));
            found |= section == Some(profile);
            continue;
        }
        if section != Some(profile) {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            // The line is not echoed: it may be a secret.
            return Err(format!("profile [{profile}]: line {} is not `key = value`", number + 1));
        };
        values.insert(key.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    if !found {
        return Err(format!("no [{profile}] profile"));
    }
    let mut settings = Vec::new();
    for (key, required) in [("aws_access_key_id", true), ("aws_secret_access_key", true), ("aws_session_token", false)]
    {
        match values.remove(key).filter(|v| !v.is_empty()) {
            Some(value) => settings.push((key.to_string(), value)),
            None if required => return Err(format!("profile [{profile}] has no {key}")),
            None => {}
        }
    }
    Ok(Settings(settings))
}

/// A GCS JSON key: a service account's key is used as such, any other kind (authorized user, workload identity
/// federation) as application default credentials read from `path`.
pub fn gcs_key(text: &str, path: &Path) -> Result<Settings, String> {
    let key: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not a JSON key: {e}"))?;
    let kind = key.get("type").and_then(|t| t.as_str()).ok_or("the JSON key has no \"type\"")?;
    if kind == "service_account" {
        for field in ["client_email", "private_key"] {
            if key.get(field).and_then(|v| v.as_str()).is_none() {
                return Err(format!("the service account key has no {field:?}"));
            }
        }
        return Ok(Settings(vec![("google_service_account_key".into(), text.to_string())]));
    }
    Ok(Settings(vec![("google_application_credentials".into(), path.display().to_string())]))
}

/// Velero's Azure credentials file (`KEY=value` lines): the storage account key (in `key_variable`), or a service
/// principal (`AZURE_CLIENT_ID`, `AZURE_CLIENT_SECRET`, `AZURE_TENANT_ID`).
pub fn azure_env_file(text: &str, key_variable: &str) -> Result<Settings, String> {
    let values = env_file(text)?;
    if let Some(key) = values.get(key_variable).filter(|v| !v.is_empty()) {
        return Ok(Settings(vec![("azure_storage_account_key".into(), key.clone())]));
    }
    let principal = ["AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_TENANT_ID"];
    let missing: Vec<&str> = principal.iter().copied().filter(|v| !values.contains_key(*v)).collect();
    if !missing.is_empty() {
        return Err(format!(
            "neither {key_variable} (a storage account key) nor a service principal ({} missing)",
            missing.join(", ")
        ));
    }
    Ok(Settings(principal.iter().map(|v| (v.to_ascii_lowercase(), values[*v].clone())).collect()))
}

/// `KEY=value` lines (an optional `export `, quotes around the value, `#` comments).
fn env_file(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut values = BTreeMap::new();
    for (number, line) in text.lines().map(str::trim).enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!("line {} is not KEY=value", number + 1));
        };
        let value = value.trim();
        let unquoted = [('"', '"'), ('\'', '\'')]
            .iter()
            .find_map(|(open, close)| value.strip_prefix(*open).and_then(|v| v.strip_suffix(*close)))
            .unwrap_or(value);
        values.insert(key.trim().to_string(), unquoted.to_string());
    }
    Ok(values)
}

/// The settings named by `env` (standard name → the variable holding it), read through `lookup`. A standard name
/// becomes its object_store key by lower-casing (`AWS_ACCESS_KEY_ID` → `aws_access_key_id`), as object_store's
/// own `from_env` does; the store adapter refuses a key its provider does not know.
pub fn from_env(env: &BTreeMap<String, String>, lookup: impl Fn(&str) -> Option<String>) -> Result<Settings, String> {
    let mut settings = Vec::new();
    for (standard, variable) in env {
        let value = lookup(variable)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("environment variable {variable} (for {standard}) is not set"))?;
        settings.push((standard.to_ascii_lowercase(), value));
    }
    Ok(Settings(settings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(settings: &Settings) -> Vec<&str> {
        settings.0.iter().map(|(k, _)| k.as_str()).collect()
    }

    #[test]
    fn aws_profiles_as_velero_reads_them() {
        let text = "# Velero's secret\n[default]\naws_access_key_id = AKIA1\naws_secret_access_key=s1\n\n\
                    [profile dr]\nAWS_ACCESS_KEY_ID=AKIA2\naws_secret_access_key = s2\naws_session_token = t2\n";
        let default = aws_profile(text, "default").unwrap();
        assert_eq!(
            default.0,
            vec![("aws_access_key_id".into(), "AKIA1".into()), ("aws_secret_access_key".into(), "s1".into())]
        );
        let dr = aws_profile(text, "dr").unwrap();
        assert_eq!(keys(&dr), ["aws_access_key_id", "aws_secret_access_key", "aws_session_token"]);
        assert_eq!(dr.0[2].1, "t2");
        assert_eq!(aws_profile(text, "other").unwrap_err(), "no [other] profile");
        let err = aws_profile("[default]\naws_access_key_id=x\n", "default").unwrap_err();
        assert_eq!(err, "profile [default] has no aws_secret_access_key");
        let err = aws_profile("[default]\nsecret-without-equals\n", "default").unwrap_err();
        assert_eq!(err, "profile [default]: line 2 is not `key = value`");
        assert!(!format!("{default:?}").contains("s1"), "Debug shows no secret: {default:?}");
    }

    #[test]
    fn gcs_keys() {
        let sa =
            r#"{"type":"service_account","client_email":"v@p.iam.gserviceaccount.com","private_key":"-----BEGIN"}"#;
        let path = Path::new("/creds/cloud");
        assert_eq!(keys(&gcs_key(sa, path).unwrap()), ["google_service_account_key"]);
        let user = r#"{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r"}"#;
        let settings = gcs_key(user, path).unwrap();
        assert_eq!(settings.0, vec![("google_application_credentials".into(), "/creds/cloud".into())]);
        assert!(gcs_key("{\"type\":\"service_account\"}", path).unwrap_err().contains("client_email"));
        assert!(gcs_key("[default]", path).unwrap_err().starts_with("not a JSON key"));
    }

    #[test]
    fn azure_files_as_velero_writes_them() {
        let key = "AZURE_SUBSCRIPTION_ID=sub\nAZURE_RESOURCE_GROUP=rg\nAZURE_STORAGE_ACCOUNT_ACCESS_KEY=\"k==\"\nAZURE_CLOUD_NAME=AzurePublicCloud\n";
        let settings = azure_env_file(key, DEFAULT_AZURE_KEY_VARIABLE).unwrap();
        assert_eq!(settings.0, vec![("azure_storage_account_key".into(), "k==".into())]);
        let principal = "export AZURE_CLIENT_ID=c\nAZURE_CLIENT_SECRET='s'\nAZURE_TENANT_ID=t\n";
        let settings = azure_env_file(principal, DEFAULT_AZURE_KEY_VARIABLE).unwrap();
        assert_eq!(keys(&settings), ["azure_client_id", "azure_client_secret", "azure_tenant_id"]);
        assert_eq!(settings.0[1].1, "s");
        let err = azure_env_file("AZURE_CLIENT_ID=c\n", "MY_KEY").unwrap_err();
        assert!(err.contains("MY_KEY") && err.contains("AZURE_CLIENT_SECRET, AZURE_TENANT_ID"), "{err}");
        let err = azure_env_file("# key\nAZURE_STORAGE_ACCOUNT_ACCESS_KEY hunter2\n", "X").unwrap_err();
        assert_eq!(err, "line 2 is not KEY=value", "the line (a secret, maybe) is not echoed");
    }

    #[test]
    fn env_names_the_missing_variable() {
        let env = BTreeMap::from([
            ("AWS_ACCESS_KEY_ID".to_string(), "SHARED_KEY_ID".to_string()),
            ("AWS_SECRET_ACCESS_KEY".to_string(), "SHARED_SECRET".to_string()),
        ]);
        let all = |v: &str| Some(format!("value-of-{v}"));
        let settings = from_env(&env, all).unwrap();
        assert_eq!(settings.0[0], ("aws_access_key_id".into(), "value-of-SHARED_KEY_ID".into()));
        let err = from_env(&env, |v| (v == "SHARED_KEY_ID").then(|| "x".to_string())).unwrap_err();
        assert_eq!(err, "environment variable SHARED_SECRET (for AWS_SECRET_ACCESS_KEY) is not set");
    }
}
