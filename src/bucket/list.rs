//! Listing a location: backup names by delimiter (as Velero's `ListBackups` does), then every object under
//! `backups/` with its version, in parallel shards where the store pages (S3, GCS, Azure). A refresh with a
//! complete previous catalog takes the shard boundaries from it and the names from the objects, skipping the
//! delimiter listing (at 100k backups, 100 pages of a folder the store reads and sorts for every page).

use futures::StreamExt;
use object_store::list::PaginatedListOptions;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore};

use super::store::Store;
use crate::catalog::{Layout, LocationCatalog, ObjectVersion};

/// Backup names from the delimiter listing of `<prefix>/backups/`.
#[derive(Debug, Default)]
pub struct Names {
    /// In the store's key order.
    pub names: Vec<String>,
    /// Set when a page after the first failed: `names` holds what the earlier pages said.
    pub incomplete: Option<String>,
}

/// Every object under `<prefix>/backups/` with its version.
#[derive(Debug, Default)]
pub struct Objects {
    pub objects: Vec<(String, ObjectVersion)>,
    pub incomplete: Option<String>,
}

pub fn version_of(meta: &ObjectMeta) -> ObjectVersion {
    ObjectVersion::new(meta.e_tag.as_deref(), meta.size, meta.last_modified.timestamp_millis())
}

/// Lists backup names. Fails only when nothing could be listed: an unreadable location is an error, never
/// an empty catalog (which would later read as "every backup was deleted").
pub async fn backup_names(store: &Store, layout: &Layout) -> Result<Names, object_store::Error> {
    let dir = layout.backups_dir();
    let mut names = Vec::new();
    let Some(pager) = &store.pager else {
        let listing = store.objects.list_with_delimiter(Some(&Path::from(dir.as_str()))).await?;
        names.extend(
            listing.common_prefixes.iter().filter_map(|p| layout.backup_of_dir(p.as_ref()).map(str::to_string)),
        );
        sort_like_store(&mut names);
        return Ok(Names { names, incomplete: None });
    };
    let mut page_token = None;
    let mut page = 0usize;
    loop {
        let opts =
            PaginatedListOptions { delimiter: Some("/".into()), page_token: page_token.take(), ..Default::default() };
        let result = match pager.list_paginated(Some(&dir), opts).await {
            Ok(result) => result,
            Err(e) if page == 0 => return Err(e),
            Err(e) => {
                let reason = format!("listing {dir} failed on page {}: {e}", page + 1);
                return Ok(Names { names, incomplete: Some(reason) });
            }
        };
        page += 1;
        names.extend(
            result.result.common_prefixes.iter().filter_map(|p| layout.backup_of_dir(p.as_ref()).map(str::to_string)),
        );
        match result.page_token {
            Some(token) => page_token = Some(token),
            None => break,
        }
    }
    sort_like_store(&mut names);
    names.dedup();
    Ok(Names { names, incomplete: None })
}

/// The backup names a delimiter listing would give for `objects` (the folders they are in), sorted as the
/// store sorts.
pub fn names_in(layout: &Layout, objects: &[(String, ObjectVersion)]) -> Vec<String> {
    let mut names: Vec<String> =
        objects.iter().filter_map(|(key, _)| layout.folder_of_key(key)).map(str::to_string).collect();
    sort_like_store(&mut names);
    names.dedup();
    names
}

/// Shard boundaries for a refresh: every folder the previous catalog saw, sorted as the store sorts. New
/// backups fall into some shard all the same (the shards cover the whole key space); the boundaries only spread
/// the work.
pub fn previous_names(previous: &LocationCatalog) -> Vec<String> {
    let mut names: Vec<String> =
        previous.backups.keys().chain(&previous.skipped).chain(&previous.foreign_folders).cloned().collect();
    sort_like_store(&mut names);
    names.dedup();
    names
}

/// Object stores order keys by their bytes; a backup's keys all start with `backups/<name>/`.
fn sort_like_store(names: &mut [String]) {
    names.sort_by(|a, b| a.bytes().chain(Some(b'/')).cmp(b.bytes().chain(Some(b'/'))));
}

/// Lists every object under `<prefix>/backups/`. With a pager, `names` (sorted as the store sorts) split the
/// key space into up to `shards` ranges listed concurrently.
pub async fn backup_objects(store: &Store, layout: &Layout, names: &[String], shards: usize) -> Objects {
    let dir = layout.backups_dir();
    let Some(pager) = &store.pager else {
        let mut objects = Vec::new();
        let mut stream = store.objects.list(Some(&Path::from(dir.as_str())));
        while let Some(item) = stream.next().await {
            match item {
                Ok(meta) => {
                    let version = version_of(&meta);
                    objects.push((String::from(meta.location), version));
                }
                Err(e) => return Objects { objects, incomplete: Some(format!("listing {dir} failed: {e}")) },
            }
        }
        return Objects { objects, incomplete: None };
    };
    // At least a few hundred backups per shard: each shard costs a request even when small.
    let per_shard = names.len().div_ceil(shards.max(1)).max(256);
    let starts: Vec<Option<String>> = std::iter::once(None)
        .chain(names.chunks(per_shard).skip(1).map(|chunk| Some(layout.backup_dir(&chunk[0]))))
        .collect();
    let ranges: Vec<(Option<String>, Option<String>)> =
        starts.iter().enumerate().map(|(i, start)| (start.clone(), starts.get(i + 1).cloned().flatten())).collect();
    let results: Vec<Objects> = futures::stream::iter(ranges)
        .map(|(start, end)| {
            let pager = pager.clone();
            let dir = dir.clone();
            async move { list_range(pager.as_ref(), &dir, start, end).await }
        })
        .buffer_unordered(shards.max(1))
        .collect()
        .await;
    let mut all = Objects::default();
    for part in results {
        all.objects.extend(part.objects);
        if all.incomplete.is_none() {
            all.incomplete = part.incomplete;
        }
    }
    all
}

/// Lists keys `k` under `dir` with `start <= k < end`.
async fn list_range(
    pager: &dyn object_store::list::PaginatedListStore,
    dir: &str,
    start: Option<String>,
    end: Option<String>,
) -> Objects {
    let mut out = Objects::default();
    // `offset` is exclusive ("start after"); the start key without its trailing '/' sorts just before it.
    let offset = start.as_ref().map(|s| s.trim_end_matches('/').to_string());
    let mut page_token = None;
    loop {
        let opts = PaginatedListOptions { offset: offset.clone(), page_token: page_token.take(), ..Default::default() };
        let result = match pager.list_paginated(Some(dir), opts).await {
            Ok(result) => result,
            Err(e) => {
                out.incomplete = Some(format!("listing {dir} from {:?} failed: {e}", start.as_deref().unwrap_or(dir)));
                return out;
            }
        };
        for meta in result.result.objects {
            let key = meta.location.as_ref();
            if start.as_deref().is_some_and(|s| key < s) {
                continue;
            }
            if end.as_deref().is_some_and(|e| key >= e) {
                return out;
            }
            let version = version_of(&meta);
            out.objects.push((String::from(meta.location), version));
        }
        match result.page_token {
            Some(token) => page_token = Some(token),
            None => return out,
        }
    }
}
