//! The objects of a named backup, read from the configured locations for `ferry graph` and `ferry overlap`:
//! the tarball when there is one, else the resource list.

use anyhow::{Context, bail};

use ferry::bucket::{self, BackupResources};
use ferry::catalog::Layout;
use ferry::config::LoadedConfig;
use ferry::dag::tarball::{self, ItemError};
use ferry::dag::{Object, resource_list};

/// A backup's objects and where they came from.
#[derive(Debug)]
pub struct BackupObjects {
    pub backup: String,
    pub location: String,
    /// `tarball` or `resource list`.
    pub source: &'static str,
    pub key: String,
    pub objects: Vec<Object>,
    /// Items that could not be read (reported, skipped).
    pub item_errors: Vec<ItemError>,
}

/// Looks for `backup` in `only` (a location name) or in every configured location, in config order.
pub async fn load(config: &LoadedConfig, backup: &str, only: Option<&str>) -> anyhow::Result<BackupObjects> {
    let locations: Vec<_> = config.config.locations.iter().filter(|l| only.is_none_or(|o| o == l.name)).collect();
    if locations.is_empty() {
        bail!("no location named {:?} in {}", only.unwrap_or_default(), config.path.display());
    }
    for location in &locations {
        let store =
            bucket::open(&config.store_config(location)).with_context(|| format!("location {:?}", location.name))?;
        let layout = Layout::new(&location.prefix);
        let found = bucket::backup_resources(&store, &layout, backup)
            .await
            .with_context(|| format!("location {:?}: backup {backup}", location.name))?;
        let Some(found) = found else { continue };
        let key = found.key().to_string();
        let (source, objects, item_errors) = match found {
            BackupResources::Tarball { bytes, .. } => {
                // Decompressing and parsing is CPU work: off the async runtime's threads.
                let limits = config.config.catalog.tarball_limits();
                let contents = tokio::task::spawn_blocking(move || tarball::read_with(bytes.as_ref(), &limits))
                    .await
                    .context("tarball reader stopped")?
                    .with_context(|| format!("location {:?}: {key}", location.name))?;
                ("tarball", contents.objects, contents.errors)
            }
            BackupResources::ResourceList { list, .. } => {
                let (objects, errors) = resource_list::objects(&list);
                let errors = errors.into_iter().map(|(path, error)| ItemError { path, error }).collect();
                ("resource list", objects, errors)
            }
        };
        return Ok(BackupObjects {
            backup: backup.to_string(),
            location: location.name.clone(),
            source,
            key,
            objects,
            item_errors,
        });
    }
    let names: Vec<&str> = locations.iter().map(|l| l.name.as_str()).collect();
    bail!("backup {backup:?} has neither a tarball nor a resource list in location(s) {}", names.join(", "))
}
