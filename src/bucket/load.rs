//! The catalog loader: lists a location and fetches, with bounded concurrency, only what changed since the
//! previous refresh. Every object it cannot use is reported by key and skipped; the rest is unaffected.

use std::sync::Arc;

use std::panic::AssertUnwindSafe;

use futures::{FutureExt, StreamExt};
use object_store::path::Path;
use object_store::{GetResult, ObjectStoreExt};

use super::list::{Names, Objects, backup_names, backup_objects, names_in, previous_names, version_of};
use super::store::Store;
use crate::catalog::decode::{self, ResourceList};
use crate::catalog::legacy_volume_backups::{LegacyVolumeBackupError, LegacyVolumeBackups, legacy_volume_backups};
use crate::catalog::refresh::{ListedBackup, Step, decide, group_listing};
use crate::catalog::{
    BackupFile, CatalogBackup, Layout, Listing, Location, LocationCatalog, ObjectVersion, PodVolumeBackupFile,
};

/// Concurrent requests per location unless configured otherwise.
pub const DEFAULT_CONCURRENCY: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("location {location:?}: cannot list {key}: {source}")]
    Unreadable { location: String, key: String, source: object_store::Error },
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot read: {0}")]
    Read(#[from] object_store::Error),
    #[error("{0}")]
    Decode(#[from] decode::DecodeError),
    #[error("{0}")]
    TooLarge(String),
    #[error("{0}")]
    LegacyVolumeBackups(#[from] LegacyVolumeBackupError),
    #[error("the tarball reader did not finish: {0}")]
    ReaderStopped(tokio::task::JoinError),
}

/// A download, or why it was not made.
enum Got {
    Object(bytes::Bytes, ObjectVersion),
    TooLarge(String),
}

/// What one bucket object may cost before it is refused as bad input (reported by key, skipped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogLimits {
    /// Largest object fetched (`catalog.maxObjectBytes`), checked against the listing before the download
    /// and against the response before its body is read.
    pub max_object_bytes: u64,
    pub decode: decode::DecodeLimits,
}

impl Default for CatalogLimits {
    fn default() -> Self {
        Self { max_object_bytes: 64 * 1024 * 1024, decode: decode::DecodeLimits::default() }
    }
}

/// What a refresh tells as it goes, for whoever shows progress (the CLI's progress bar or log lines on a long
/// cold load). The library prints nothing itself; without a reporter nothing is reported.
pub trait LoadProgress: Send + Sync + std::fmt::Debug {
    /// The listing is done: `to_fetch` backups are to be downloaded, `reused` were kept from the previous
    /// catalog without a request.
    fn listed(&self, location: &str, to_fetch: usize, reused: usize);
    /// One more backup was fetched (or failed to be): `done` of the `to_fetch` so far.
    fn fetched(&self, location: &str, done: usize, to_fetch: usize);
}

/// Reads one location into a [`LocationCatalog`].
#[derive(Debug, Clone)]
pub struct Loader {
    store: Store,
    layout: Layout,
    location: Location,
    concurrency: usize,
    limits: CatalogLimits,
    progress: Option<Arc<dyn LoadProgress>>,
}

/// The outcome of fetching one backup.
enum Fetched {
    Ok(Arc<CatalogBackup>),
    /// The store failed (possibly transiently): keep what we had.
    ReadFailed {
        key: String,
        error: String,
    },
    /// The bytes are bad: report and skip.
    Bad {
        key: String,
        error: String,
    },
}

impl Loader {
    pub fn new(store: Store, location: Location, concurrency: usize) -> Self {
        let layout = Layout::new(&location.prefix);
        Self {
            store,
            layout,
            location,
            concurrency: concurrency.max(1),
            limits: CatalogLimits::default(),
            progress: None,
        }
    }

    /// The same loader, telling `progress` how its refreshes go.
    pub fn with_progress(mut self, progress: Arc<dyn LoadProgress>) -> Self {
        self.progress = Some(progress);
        self
    }

    /// The same loader with other limits.
    pub fn with_limits(mut self, limits: CatalogLimits) -> Self {
        self.limits = limits;
        self
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The location's backup names and objects. Where the store pages and `previous` was listed completely,
    /// its names give the shard boundaries and the delimiter listing is skipped; a listing that read nothing
    /// at all falls back to the delimiter listing, so that an unreadable location is an error as on a cold load.
    async fn list(&self, previous: Option<&LocationCatalog>) -> Result<(Names, Objects), LoadError> {
        let reusable = previous.filter(|p| self.store.pager.is_some() && p.listing == Listing::Complete);
        if let Some(previous) = reusable {
            let objects = backup_objects(&self.store, &self.layout, &previous_names(previous), self.concurrency).await;
            if objects.incomplete.is_none() || !objects.objects.is_empty() {
                let names = Names { names: names_in(&self.layout, &objects.objects), incomplete: None };
                return Ok((names, objects));
            }
        }
        let names = backup_names(&self.store, &self.layout).await.map_err(|source| LoadError::Unreadable {
            location: self.location.name.clone(),
            key: self.layout.backups_dir(),
            source,
        })?;
        let objects = backup_objects(&self.store, &self.layout, &names.names, self.concurrency).await;
        Ok((names, objects))
    }

    /// Lists the location and returns its catalog, reusing every entry of `previous` whose objects did not
    /// change (no request for those beyond the listing).
    pub async fn refresh(&self, previous: Option<&LocationCatalog>) -> Result<LocationCatalog, LoadError> {
        let (names, objects) = self.list(previous).await?;
        let mut catalog = LocationCatalog::empty(self.location.clone());
        let incomplete = names.incomplete.clone().or_else(|| objects.incomplete.clone());
        if let Some(reason) = &incomplete {
            catalog.error(self.layout.backups_dir(), format!("listing incomplete, previous entries kept: {reason}"));
            catalog.listing = Listing::Incomplete { reason: reason.clone() };
        }
        let listed = group_listing(&self.layout, names.names, objects.objects);
        let prev_entry = |name: &str| previous.and_then(|p| p.backups.get(name));

        let mut seen = std::collections::BTreeSet::new();
        let mut fetches = Vec::new();
        for item in listed {
            if incomplete.is_some() {
                seen.insert(item.name.clone());
            }
            let prev = prev_entry(&item.name);
            match decide(item, prev, incomplete.is_none()) {
                Step::Reuse(entry) => {
                    catalog.backups.insert(entry.name.clone(), entry);
                }
                // A name whose objects a failed listing page did not reach is not "missing".
                Step::MissingMetadata { name } if incomplete.is_some() => {
                    if let Some(entry) = prev {
                        catalog.backups.insert(name, entry.clone());
                    } else {
                        catalog.skipped.insert(name);
                    }
                }
                // Not a backup (Velero's `BackupExists` is false): counted, not an error on every refresh.
                Step::MissingMetadata { name } => {
                    catalog.foreign_folders.insert(name);
                }
                Step::Fetch { listed, metadata, pod_volume_backups, previous } => {
                    fetches.push((listed, metadata, pod_volume_backups, previous));
                }
            }
        }
        if incomplete.is_some() {
            // Backups the listing did not reach keep their previous entries: absence proves nothing.
            for (name, entry) in previous.iter().flat_map(|p| p.backups.iter()) {
                if !seen.contains(name) {
                    catalog.backups.insert(name.clone(), entry.clone());
                }
            }
            for name in previous.iter().flat_map(|p| p.skipped.iter()) {
                if !seen.contains(name) {
                    catalog.skipped.insert(name.clone());
                }
            }
            for name in previous.iter().flat_map(|p| p.foreign_folders.iter()) {
                if !seen.contains(name) {
                    catalog.foreign_folders.insert(name.clone());
                }
            }
        }
        let to_fetch = fetches.len();
        if let Some(progress) = &self.progress {
            progress.listed(&self.location.name, to_fetch, catalog.backups.len());
        }
        let mut done = 0;
        let mut results = futures::stream::iter(fetches)
            .map(|(listed, metadata, pvbs, previous)| {
                let this = self.clone();
                let name = listed.name.clone();
                let kept = previous.clone();
                let task = tokio::spawn(async move {
                    let fetch = this.fetch(&listed, metadata, pvbs, previous.as_deref());
                    // A panic while decoding one backup must not lose it silently: it becomes a failed read,
                    // which keeps the previous entry.
                    AssertUnwindSafe(fetch).catch_unwind().await.unwrap_or_else(|_| Fetched::ReadFailed {
                        key: this.layout.backup_dir(&listed.name),
                        error: "internal error while reading this backup".into(),
                    })
                });
                let key = self.layout.backup_dir(&name);
                async move {
                    // A task that did not finish (runtime shutting down) is a failed read, never an absence.
                    let fetched = task.await.unwrap_or_else(|e| Fetched::ReadFailed {
                        key,
                        error: format!("the fetch task did not finish: {e}"),
                    });
                    (name, kept, fetched)
                }
            })
            .buffer_unordered(self.concurrency);
        // Results go into the catalog as they come: no second list of 100k results.
        while let Some((name, previous, fetched)) = results.next().await {
            done += 1;
            if let Some(progress) = &self.progress {
                progress.fetched(&self.location.name, done, to_fetch);
            }
            match fetched {
                Fetched::Ok(entry) => {
                    // Re-allocated here, away from the fetch tasks' short-lived buffers: the catalog outlives
                    // them, and interleaving the two fragments the heap (peak RSS at 100k backups drops ~5%).
                    catalog.backups.insert(name, Arc::new(CatalogBackup::clone(&entry)));
                }
                Fetched::ReadFailed { key, error } => {
                    catalog.error(key, error);
                    match previous {
                        Some(entry) => {
                            catalog.backups.insert(name, entry);
                        }
                        None => {
                            catalog.skipped.insert(name);
                        }
                    }
                }
                Fetched::Bad { key, error } => {
                    catalog.error(key, error);
                    catalog.skipped.insert(name);
                }
            }
        }
        // An unusable PVB file is reported on every refresh, like any bad object, also when its entry is reused.
        let pvb_errors: Vec<(String, String)> = catalog
            .backups
            .values()
            .filter_map(|b| {
                let error = b.pod_volume_backups_error.clone()?;
                Some((self.layout.key(&b.name, BackupFile::PodVolumeBackups), error))
            })
            .collect();
        for (key, error) in pvb_errors {
            catalog.error(key, error);
        }
        catalog.errors.sort();
        Ok(catalog)
    }

    /// Fetches the changed parts of one backup; unchanged parts come from `previous`.
    async fn fetch(
        &self,
        listed: &ListedBackup,
        metadata: bool,
        pvbs: bool,
        previous: Option<&CatalogBackup>,
    ) -> Fetched {
        let name = listed.name.as_str();
        let meta_key = self.layout.key(name, BackupFile::Metadata);
        let (backup, metadata_version) = match (metadata, previous) {
            (false, Some(prev)) => (prev.backup.clone(), prev.metadata_version.clone()),
            _ => match self.get(&meta_key, listed.metadata.as_ref()).await {
                Ok(Got::Object(bytes, version)) => match decode::backup_metadata(name, &bytes) {
                    Ok(backup) => (backup, version),
                    Err(e) => return Fetched::Bad { key: meta_key, error: e.to_string() },
                },
                Ok(Got::TooLarge(error)) => return Fetched::Bad { key: meta_key, error },
                Err(e) => return Fetched::ReadFailed { key: meta_key, error: e.to_string() },
            },
        };
        let pvb_key = self.layout.key(name, BackupFile::PodVolumeBackups);
        let listed_pvbs = listed.pod_volume_backups.is_some();
        // A bad PVB file costs the PVBs only (Velero's sync also creates the Backup and skips them); its version
        // is kept so that an unchanged bad file is not downloaded again.
        let unusable =
            |error: String, version: Option<ObjectVersion>| (PodVolumeBackupFile::default(), version, Some(error));
        let (pod_volume_backups, pod_volume_backups_version, pod_volume_backups_error) = match (pvbs, previous) {
            (false, Some(prev)) if listed_pvbs => (
                prev.pod_volume_backups.clone(),
                prev.pod_volume_backups_version.clone(),
                prev.pod_volume_backups_error.clone(),
            ),
            (false, _) => (PodVolumeBackupFile::default(), None, None),
            (true, _) => match self.get(&pvb_key, listed.pod_volume_backups.as_ref()).await {
                Ok(Got::Object(bytes, version)) => match PodVolumeBackupFile::from_gzip(&bytes, &self.limits.decode) {
                    Ok(items) => (items, Some(version), None),
                    Err(e) => unusable(e.to_string(), Some(version)),
                },
                Ok(Got::TooLarge(error)) => unusable(error, listed.pod_volume_backups.clone()),
                Err(object_store::Error::NotFound { .. }) => (PodVolumeBackupFile::default(), None, None),
                Err(e) => return Fetched::ReadFailed { key: pvb_key, error: e.to_string() },
            },
        };
        let has_resource_list = listed.has_resource_list;
        Fetched::Ok(Arc::new(CatalogBackup {
            name: name.to_string(),
            backup,
            pod_volume_backups,
            metadata_version,
            pod_volume_backups_version,
            pod_volume_backups_error,
            has_resource_list,
        }))
    }

    /// Downloads an object unless the listing (`listed`) or the response says it is over the size limit.
    async fn get(&self, key: &str, listed: Option<&ObjectVersion>) -> Result<Got, object_store::Error> {
        if let Some(error) = listed.and_then(|v| self.oversized(v.size)) {
            return Ok(Got::TooLarge(error));
        }
        let result: GetResult = self.store.objects.get(&Path::from(key)).await?;
        if let Some(error) = self.oversized(result.meta.size) {
            return Ok(Got::TooLarge(error));
        }
        let version = version_of(&result.meta);
        Ok(Got::Object(result.bytes().await?, version))
    }

    fn oversized(&self, size: u64) -> Option<String> {
        let max = self.limits.max_object_bytes;
        (size > max)
            .then(|| format!("is {size} bytes, over the limit of {max} (catalog.maxObjectBytes); not downloaded"))
    }

    /// Reads `<name>-resource-list.json.gz` (on demand: plans do not need it).
    pub async fn resource_list(&self, name: &str) -> Result<ResourceList, FetchError> {
        match self.get(&self.layout.key(name, BackupFile::ResourceList), None).await? {
            Got::Object(bytes, _) => Ok(decode::resource_list(&bytes, &self.limits.decode)?),
            Got::TooLarge(error) => Err(FetchError::TooLarge(error)),
        }
    }

    /// Whether backup `name` has `file` (one HEAD request).
    pub async fn has_file(&self, name: &str, file: BackupFile) -> Result<bool, FetchError> {
        match self.store.objects.head(&Path::from(self.layout.key(name, file))).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Reads `<name>.tar.gz` for the `snapshot.velero.io/<volume>` annotations of its Pods: the volume backups of
    /// a backup from before Velero stored PVB files. On demand only (a tarball per backup would not scale to a
    /// fleet's catalog); held to `catalog.maxObjectBytes` and the decode limits.
    pub async fn legacy_volume_backups(&self, name: &str) -> Result<LegacyVolumeBackups, FetchError> {
        let bytes = match self.get(&self.layout.key(name, BackupFile::Tarball), None).await? {
            Got::Object(bytes, _) => bytes,
            Got::TooLarge(error) => return Err(FetchError::TooLarge(error)),
        };
        let limits = self.limits.decode;
        // Inflating and parsing is CPU work: off the async runtime's threads.
        let found = tokio::task::spawn_blocking(move || legacy_volume_backups(&bytes, &limits))
            .await
            .map_err(FetchError::ReaderStopped)?;
        Ok(found?)
    }
}
