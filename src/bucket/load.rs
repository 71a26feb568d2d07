//! The catalog loader: lists a location and fetches, with bounded concurrency, only what changed since the
//! previous refresh. Every object it cannot use is reported by key and skipped; the rest is unaffected.

use std::collections::BTreeSet;
use std::sync::Arc;

use std::panic::AssertUnwindSafe;

use futures::{FutureExt, StreamExt};
use object_store::path::Path;
use object_store::{GetResult, ObjectStoreExt};

use super::budget::{ReadBudget, Reservation};
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

/// How an object is read, for its worst case in the budget ([`Loader::worst_case`]).
#[derive(Debug, Clone, Copy)]
enum Cost {
    /// Plain JSON decoded (`velero-backup.json`).
    Json,
    /// Gzip JSON kept compact (the PVB file).
    GzipJson,
    /// Gzip JSON decoded into a tree of small strings (the resource list).
    GzipJsonTree,
    /// A gzip tarball read as a stream.
    Tarball,
}

/// A download, or why it was not made.
enum Got {
    /// The bytes, and the budget they (and what is decoded from them) hold until dropped.
    Object(bytes::Bytes, ObjectVersion, Reservation),
    TooLarge(String),
}

/// What one bucket object may cost before it is refused as bad input (reported by key, skipped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogLimits {
    /// Largest object fetched (`catalog.maxObjectBytes`), checked against the listing before the download
    /// and against the response before its body is read.
    pub max_object_bytes: u64,
    pub decode: decode::DecodeLimits,
    /// Most backups read from one location (`catalog.maxBackupsPerLocation`). A listing with more is served
    /// cut to the first ones and marked incomplete, so that the backups left out are never read as deleted.
    pub max_backups: usize,
}

/// Backups per location unless configured otherwise: 2× the 100k-backup target (docs/performance.md), whose
/// catalog costs ~200 MB; past that one location alone would crowd the chart's 1 GiB.
pub const DEFAULT_MAX_BACKUPS_PER_LOCATION: usize = 200_000;

impl Default for CatalogLimits {
    fn default() -> Self {
        Self {
            max_object_bytes: 64 * 1024 * 1024,
            decode: decode::DecodeLimits::default(),
            max_backups: DEFAULT_MAX_BACKUPS_PER_LOCATION,
        }
    }
}

/// How many backups a cold load reads before it hands out its first partial catalog (then twice as many each time).
const FIRST_PARTIAL: usize = 16;

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
    /// Shared by every loader of the process (see [`Loader::with_budget`]).
    budget: ReadBudget,
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
            budget: ReadBudget::default(),
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

    /// The same loader, its reads held to `budget` (give every loader of a process the same one: the budget
    /// bounds the process, not one location).
    pub fn with_budget(mut self, budget: ReadBudget) -> Self {
        self.budget = budget;
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
        self.refresh_streaming(previous, &mut |_| {}).await
    }

    /// [`Loader::refresh`], handing `partial` the catalog read so far while a cold load runs (no `previous`, or
    /// a `previous` that was itself partial), so that planning need not wait for the last of 100,000 backups.
    /// A partial catalog's listing is `Incomplete` and names what is still to be read in `pending`: nothing is
    /// retired from it and no later location takes a name it holds. Partials come after 16, 32, 64, … backups
    /// read, so planning them all costs about as much as planning the final catalog once more.
    pub async fn refresh_streaming(
        &self,
        previous: Option<&LocationCatalog>,
        partial: &mut (dyn FnMut(LocationCatalog) + Send),
    ) -> Result<LocationCatalog, LoadError> {
        let cold = previous.is_none_or(|p| !p.pending.is_empty());
        let (mut names, objects) = self.list(previous).await?;
        let mut catalog = LocationCatalog::empty(self.location.clone());
        let capped = self.cap(&mut names.names);
        let incomplete = names.incomplete.clone().or(capped).or_else(|| objects.incomplete.clone());
        if let Some(reason) = &incomplete {
            catalog.error(self.layout.backups_dir(), format!("listing incomplete, previous entries kept: {reason}"));
            catalog.listing = Listing::Incomplete { reason: reason.clone() };
        }
        let listed = group_listing(&self.layout, names.names, objects.objects);
        let prev_entry = |name: &str| previous.and_then(|p| p.backups.get(name));

        let mut seen = BTreeSet::new();
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
            // Listed by an earlier load that did not get to read them: still known to exist, still unread.
            for name in previous.iter().flat_map(|p| p.pending.iter()) {
                if !seen.contains(name) {
                    catalog.pending.insert(name.clone());
                }
            }
        }
        let to_fetch = fetches.len();
        if let Some(progress) = &self.progress {
            progress.listed(&self.location.name, to_fetch, catalog.backups.len());
        }
        let mut done = 0;
        let mut pending: BTreeSet<String> =
            if cold { fetches.iter().map(|(listed, ..)| listed.name.clone()).collect() } else { BTreeSet::new() };
        let mut next_partial = FIRST_PARTIAL;
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
            pending.remove(&name);
            let partial_due = cold && done >= next_partial && done < to_fetch;
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
            if partial_due {
                next_partial = done.saturating_mul(2);
                partial(self.partial_catalog(&catalog, &pending, done, to_fetch));
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

    /// What a cold load has read so far, as a catalog that claims no more than that: incomplete, with the
    /// names still to read pending.
    fn partial_catalog(
        &self,
        read: &LocationCatalog,
        pending: &BTreeSet<String>,
        done: usize,
        to_fetch: usize,
    ) -> LocationCatalog {
        let mut catalog = read.clone();
        catalog.errors.sort();
        catalog.pending.extend(pending.iter().cloned());
        let reason = format!("loading: {done} of {to_fetch} backups read");
        catalog.listing = match &read.listing {
            Listing::Complete => Listing::Incomplete { reason },
            Listing::Incomplete { reason: listing } => Listing::Incomplete { reason: format!("{listing}; {reason}") },
        };
        catalog
    }

    /// Cuts `names` to `catalog.maxBackupsPerLocation`; returns why when it did. The caller marks the listing
    /// incomplete: a backup left out is unknown, not gone, so it keeps its previous entry and rule 5 retires
    /// nothing on this location (docs/design.md §3 rule 5; `plan::retirement` skips incomplete listings).
    fn cap(&self, names: &mut Vec<String>) -> Option<String> {
        let max = self.limits.max_backups;
        let listed = names.len();
        if listed <= max {
            return None;
        }
        names.truncate(max);
        Some(format!(
            "location {:?} lists {listed} backups, over the limit of {max} (catalog.maxBackupsPerLocation): \
             only the first {max} are read and nothing is retired here",
            self.location.name
        ))
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
            _ => match self.get(&meta_key, listed.metadata.as_ref(), Cost::Json).await {
                // The reservation (`_held`) ends with the arm, once the metadata is decoded.
                Ok(Got::Object(bytes, version, _held)) => match decode::backup_metadata(name, &bytes) {
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
            (true, _) => match self.get(&pvb_key, listed.pod_volume_backups.as_ref(), Cost::GzipJson).await {
                Ok(Got::Object(bytes, version, _held)) => {
                    match PodVolumeBackupFile::from_gzip(&bytes, &self.limits.decode) {
                        Ok(items) => (items, Some(version), None),
                        Err(e) => unusable(e.to_string(), Some(version)),
                    }
                }
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

    /// Downloads an object unless the listing (`listed`) or the response says it is over the size limit,
    /// after reserving the worst case of reading it as `cost` from the budget.
    async fn get(&self, key: &str, listed: Option<&ObjectVersion>, cost: Cost) -> Result<Got, object_store::Error> {
        if let Some(error) = listed.and_then(|v| self.oversized(v.size)) {
            return Ok(Got::TooLarge(error));
        }
        // Reserved before the request where the listing gives the size, so that a read waiting for the budget
        // holds no connection open.
        let mut reserved = match listed {
            Some(v) => Some((v.size, self.budget.reserve(self.worst_case(cost, v.size)).await)),
            None => None,
        };
        let result: GetResult = self.store.objects.get(&Path::from(key)).await?;
        let size = result.meta.size;
        if let Some(error) = self.oversized(size) {
            return Ok(Got::TooLarge(error));
        }
        if reserved.as_ref().is_none_or(|(basis, _)| size > *basis) {
            // Given back before waiting for the larger amount: no read holds a reservation while it waits, so
            // reads never deadlock on each other.
            drop(reserved.take());
            reserved = Some((size, self.budget.reserve(self.worst_case(cost, size)).await));
        }
        let version = version_of(&result.meta);
        let bytes = result.bytes().await?;
        match reserved {
            Some((_, reservation)) => Ok(Got::Object(bytes, version, reservation)),
            // Set just above; kept total rather than unwrapped.
            None => Ok(Got::Object(bytes, version, self.budget.reserve(self.worst_case(cost, size)).await)),
        }
    }

    /// The most memory reading a `size`-byte object as `cost` may take at once: the download, plus what is
    /// inflated and built from it before the result is compact.
    fn worst_case(&self, cost: Cost, size: u64) -> u64 {
        let inflated = self.limits.decode.cap_for(usize::try_from(size).unwrap_or(usize::MAX));
        match cost {
            // The bytes and the decoded object beside them.
            Cost::Json => size.saturating_mul(2),
            // The inflated text and its compact copy (`decode::pod_volume_backup_items`) beside the download.
            Cost::GzipJson => size.saturating_add(inflated.saturating_mul(2)),
            // The inflated text, its JSON tree and the map built from it: short strings cost several times
            // their text.
            Cost::GzipJsonTree => size.saturating_add(inflated.saturating_mul(4)),
            // Streamed: one item at a time, whatever the tarball inflates to.
            Cost::Tarball => size.saturating_add(crate::dag::tarball::MAX_ITEM_BYTES),
        }
    }

    fn oversized(&self, size: u64) -> Option<String> {
        let max = self.limits.max_object_bytes;
        (size > max)
            .then(|| format!("is {size} bytes, over the limit of {max} (catalog.maxObjectBytes); not downloaded"))
    }

    /// Reads `<name>-resource-list.json.gz` (on demand: plans do not need it).
    pub async fn resource_list(&self, name: &str) -> Result<ResourceList, FetchError> {
        match self.get(&self.layout.key(name, BackupFile::ResourceList), None, Cost::GzipJsonTree).await? {
            Got::Object(bytes, _, _held) => Ok(decode::resource_list(&bytes, &self.limits.decode)?),
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
        let (bytes, _held) = match self.get(&self.layout.key(name, BackupFile::Tarball), None, Cost::Tarball).await? {
            Got::Object(bytes, _, held) => (bytes, held),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bucket::{StoreConfig, open};
    use crate::catalog::StoreKind;
    use crate::fixture::{self, FixtureSpec};

    async fn loader_of(backups: usize) -> (tempfile::TempDir, Loader) {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("file://{}", dir.path().join("bucket").display());
        let store = open(&StoreConfig { url, create_folder: true, ..Default::default() }).expect("store");
        let spec = FixtureSpec { backups, prefix: "velero".into(), ..Default::default() };
        fixture::write(&store, &spec, 4).await.expect("fixture");
        let location = Location {
            name: "capped".into(),
            kind: StoreKind::Local,
            bucket: store.bucket.clone(),
            prefix: "velero".into(),
            source_cluster: "cluster-a".into(),
        };
        (dir, Loader::new(store, location, 4))
    }

    /// docs/design.md §3 rule 5: a listing cut by `catalog.maxBackupsPerLocation` is incomplete, so the backups
    /// it left out keep their entries and the location gives no evidence of absence (`plan::retirement` skips
    /// incomplete listings: `plan::retirement::tests::no_guard_can_be_skipped`).
    #[tokio::test]
    async fn a_capped_listing_is_incomplete_keeps_what_it_left_out_and_says_so() {
        let (_dir, loader) = loader_of(3).await;
        let full = loader.refresh(None).await.expect("readable");
        let all = full.backups.len();
        assert!(all > 2 && full.listing == Listing::Complete, "{all} {:?}", full.listing);
        let capped = loader.with_limits(CatalogLimits { max_backups: 2, ..CatalogLimits::default() });
        let warm = capped.refresh(Some(&full)).await.expect("readable");
        let Listing::Incomplete { reason } = &warm.listing else { panic!("a capped listing is complete") };
        assert!(reason.contains("\"capped\"") && reason.contains("catalog.maxBackupsPerLocation"), "{reason}");
        assert!(reason.contains(&format!("lists {all} backups, over the limit of 2")), "{reason}");
        assert_eq!(warm.backups.keys().collect::<Vec<_>>(), full.backups.keys().collect::<Vec<_>>(), "none lost");
        assert!(warm.errors.iter().any(|e| e.error.contains("catalog.maxBackupsPerLocation")), "{:?}", warm.errors);
        // Cold, the cap bounds what is read; still incomplete, so nothing absent counts as gone.
        let cold = capped.refresh(None).await.expect("readable");
        assert_eq!(cold.backups.len() + cold.skipped.len() + cold.foreign_folders.len(), 2);
        assert!(matches!(cold.listing, Listing::Incomplete { .. }));
    }

    /// Issue 30: a cold load hands out what it has read so far, claiming no more than that. Every partial is
    /// incomplete (so nothing is retired from it), accounts for every listed name (read, or pending), and holds
    /// the very entries the final catalog holds; a warm refresh hands out none.
    #[tokio::test]
    async fn a_cold_load_hands_out_growing_incomplete_partials_that_account_for_every_listed_name() {
        let (_dir, loader) = loader_of(150).await;
        let mut partials = Vec::new();
        let whole = loader.refresh_streaming(None, &mut |c| partials.push(c)).await.expect("readable");
        assert_eq!(whole.listing, Listing::Complete);
        assert!(whole.pending.is_empty());
        let names = |c: &LocationCatalog| -> BTreeSet<String> {
            c.backups.keys().chain(&c.skipped).chain(&c.foreign_folders).chain(&c.pending).cloned().collect()
        };
        let read_sizes: Vec<usize> = partials.iter().map(|p| p.backups.len() + p.skipped.len()).collect();
        assert_eq!(read_sizes, [16, 32, 64, 128], "after 16 read, then twice as many each time");
        for partial in &partials {
            let Listing::Incomplete { reason } = &partial.listing else { panic!("a partial is complete") };
            assert!(reason.starts_with("loading: ") && reason.ends_with(" backups read"), "{reason}");
            assert_eq!(names(partial), names(&whole), "every listed name is read or pending");
            assert!(partial.backups.keys().all(|b| !partial.pending.contains(b)));
            for (name, entry) in &partial.backups {
                assert_eq!(whole.backups.get(name), Some(entry), "{name}: the entry the final catalog holds");
            }
        }
        let mut warm_partials = 0;
        let warm = loader.refresh_streaming(Some(&whole), &mut |_| warm_partials += 1).await.expect("readable");
        assert_eq!((warm_partials, warm.backups.len()), (0, whole.backups.len()), "a warm refresh is whole at once");
        // A cold load that ended early (its last partial kept, say after a failed refresh) is cold again, and
        // its next refresh reads what was pending.
        let last = partials.pop().expect("partials");
        let resumed = loader.refresh_streaming(Some(&last), &mut |_| {}).await.expect("readable");
        assert_eq!(resumed.backups.keys().collect::<Vec<_>>(), whole.backups.keys().collect::<Vec<_>>());
        assert!(resumed.pending.is_empty() && resumed.listing == Listing::Complete);
    }

    #[tokio::test]
    async fn a_budget_smaller_than_one_object_still_reads_everything() {
        let (_dir, loader) = loader_of(3).await;
        let budget = ReadBudget::new(1);
        let catalog = loader.with_budget(budget.clone()).refresh(None).await.expect("readable");
        assert!(catalog.errors.is_empty(), "{:?}", catalog.errors);
        assert!(catalog.backups.len() > 2);
        assert_eq!(budget.available_bytes(), budget.total_bytes(), "every reservation is given back");
    }

    /// A store whose GETs of keys containing `poisoned` panic (a decoder or client bug while reading one backup).
    #[derive(Debug)]
    struct PanickingGets {
        inner: Arc<dyn object_store::ObjectStore>,
        poisoned: String,
    }

    impl std::fmt::Display for PanickingGets {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "PanickingGets({})", self.inner)
        }
    }

    #[async_trait::async_trait]
    impl object_store::ObjectStore for PanickingGets {
        async fn put_opts(
            &self,
            location: &object_store::path::Path,
            payload: object_store::PutPayload,
            opts: object_store::PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            self.inner.put_opts(location, payload, opts).await
        }
        async fn put_multipart_opts(
            &self,
            location: &object_store::path::Path,
            opts: object_store::PutMultipartOptions,
        ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
            self.inner.put_multipart_opts(location, opts).await
        }
        async fn get_opts(
            &self,
            location: &object_store::path::Path,
            options: object_store::GetOptions,
        ) -> object_store::Result<object_store::GetResult> {
            assert!(!location.as_ref().contains(&self.poisoned), "a bug while reading {location}");
            self.inner.get_opts(location, options).await
        }
        fn delete_stream(
            &self,
            locations: futures::stream::BoxStream<'static, object_store::Result<object_store::path::Path>>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::path::Path>> {
            self.inner.delete_stream(locations)
        }
        fn list(
            &self,
            prefix: Option<&object_store::path::Path>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
            self.inner.list(prefix)
        }
        async fn list_with_delimiter(
            &self,
            prefix: Option<&object_store::path::Path>,
        ) -> object_store::Result<object_store::ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }
        async fn copy_opts(
            &self,
            from: &object_store::path::Path,
            to: &object_store::path::Path,
            options: object_store::CopyOptions,
        ) -> object_store::Result<()> {
            self.inner.copy_opts(from, to, options).await
        }
    }

    /// Issue 29 (9): a fetch task that fails (here: panics) records its backup as skipped, with an error naming
    /// its folder: listed, so never counted absent (nothing retired), and the rest of the location is read.
    #[tokio::test]
    async fn a_failed_fetch_task_is_recorded_as_skipped_and_named() {
        let (_dir, loader) = loader_of(3).await;
        let full = loader.refresh(None).await.expect("readable");
        let victim = full.backups.keys().next().expect("a backup").clone();
        let store = Store {
            objects: Arc::new(PanickingGets { inner: loader.store.objects.clone(), poisoned: format!("/{victim}/") }),
            ..loader.store.clone()
        };
        let poisoned = Loader::new(store, loader.location.clone(), 4);
        let catalog = poisoned.refresh(None).await.expect("the listing is readable");
        assert!(catalog.skipped.contains(&victim), "{:?}", catalog.skipped);
        assert!(!catalog.backups.contains_key(&victim));
        assert_eq!(catalog.backups.len(), full.backups.len() - 1, "the others are read");
        let error = catalog.errors.iter().find(|e| e.object.contains(&victim)).expect("an error naming the backup");
        assert!(error.error.contains("internal error while reading this backup"), "{error:?}");
        assert_eq!(catalog.listing, Listing::Complete, "and the listing itself is whole");
    }
}
