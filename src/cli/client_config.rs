//! The operator's client config file, like a kubeconfig's contexts: which coordinator `ferry status` and
//! `ferry describe` ask, and with which certificate, so they need not be passed on every call.
//!
//! ```yaml
//! current-context: prod
//! contexts:
//!   - name: prod
//!     coordinator: https://ferry.example.com:7443
//!     ca: certs/ca.pem            # relative paths: from the file's folder
//!     cert: certs/operator.pem
//!     key: certs/operator-key.pem
//!     tls-server-name: ferry.example.com   # optional
//! ```
//!
//! Read from `--client-config`, else `$FERRY_CLIENT_CONFIG`, else `$XDG_CONFIG_HOME/ferry/client.yaml`
//! (`~/.config/ferry/client.yaml`) when it exists. Flags (and their environment variables) override it.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;

use super::exit::usage;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ClientConfig {
    #[serde(default)]
    pub current_context: Option<String>,
    #[serde(default)]
    pub contexts: Vec<ClientContext>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ClientContext {
    pub name: String,
    pub coordinator: Option<String>,
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub tls_server_name: Option<String>,
}

/// The default file, when the user has a config folder.
pub fn default_path() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".config"),
    };
    Some(base.join("ferry").join("client.yaml"))
}

/// The context to use: `name`, else the file's current-context; `None` when there is no file (at the default
/// place) or no context is chosen. Every error here is a configuration error (exit code 2).
pub fn select(explicit: Option<&Path>, name: Option<&str>) -> anyhow::Result<Option<ClientContext>> {
    let path = match explicit {
        Some(path) => path.to_path_buf(),
        None => match default_path().filter(|p| p.exists()) {
            Some(path) => path,
            None if name.is_some() => {
                return Err(usage(anyhow::anyhow!(
                    "--client-context given but there is no client config file (--client-config, FERRY_CLIENT_CONFIG \
                     or ~/.config/ferry/client.yaml)"
                )));
            }
            None => return Ok(None),
        },
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read client config {}", path.display()))
        .map_err(usage)?;
    let config = parse(&text).with_context(|| format!("client config {}", path.display())).map_err(usage)?;
    let Some(wanted) = name.map(str::to_string).or(config.current_context.clone()) else {
        return Ok(None);
    };
    let mut context = config
        .contexts
        .into_iter()
        .find(|c| c.name == wanted)
        .with_context(|| format!("client config {}: no context named {wanted:?}", path.display()))
        .map_err(usage)?;
    // Relative certificate paths are from the file's folder, as in a kubeconfig.
    let base = path.parent().unwrap_or(Path::new("."));
    for file in [&mut context.ca, &mut context.cert, &mut context.key].into_iter().flatten() {
        if file.is_relative() {
            *file = base.join(&*file);
        }
    }
    Ok(Some(context))
}

pub fn parse(text: &str) -> anyhow::Result<ClientConfig> {
    Ok(serde_saphyr::from_str(text)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_named_or_current_context_with_paths_from_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("client.yaml");
        std::fs::write(
            &path,
            "current-context: a\ncontexts:\n  - {name: a, coordinator: 'https://a:7443', ca: ca.pem}\n  - {name: b, \
             coordinator: 'https://b:7443', cert: /abs/b.pem}\n",
        )
        .expect("write");
        let a = select(Some(&path), None).expect("ok").expect("current");
        assert_eq!(a.coordinator.as_deref(), Some("https://a:7443"));
        assert_eq!(a.ca, Some(dir.path().join("ca.pem")));
        let b = select(Some(&path), Some("b")).expect("ok").expect("named");
        assert_eq!(b.cert, Some(PathBuf::from("/abs/b.pem")));
        let missing = select(Some(&path), Some("c")).expect_err("no such context");
        assert_eq!(super::super::exit::kind_of(&missing), super::super::exit::ExitKind::Usage);
        assert!(format!("{missing:#}").contains("\"c\""));

        std::fs::write(&path, "contexts: [{name: a, coordinatr: x}]\n").expect("write");
        let typo = select(Some(&path), None).expect_err("unknown field");
        assert!(format!("{typo:#}").contains("coordinatr"), "{typo:#}");
        assert!(select(Some(&dir.path().join("absent.yaml")), None).is_err());
    }
}
