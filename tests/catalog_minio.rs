//! The catalog loader against a real MinIO on 127.0.0.1: paged and sharded listings, warm refreshes that cost no
//! GETs, bad objects reported by key, unreadable locations, and listing failures on later pages.
//!
//! Every key is built with `ferry::catalog::Layout`; object bodies come from `support::velero`.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};

use ferry::bucket::{CatalogLimits, DEFAULT_CONCURRENCY, LoadError, Loader, Store, metered};
use ferry::catalog::{BackupFile, Layout, Listing, Location, LocationCatalog, StoreKind};
use ferry::model::BackupPhase;

use support::minio::Minio;
use support::{faults, put_all, velero};

/// One backup as the tests write it: `velero-backup.json` plus a PVB file with `pvbs` items (`null` for 0).
#[derive(Debug, Clone)]
struct Spec {
    name: String,
    namespace: String,
    pvbs: usize,
}

impl Spec {
    fn new(name: impl Into<String>, namespace: impl Into<String>, pvbs: usize) -> Self {
        Spec { name: name.into(), namespace: namespace.into(), pvbs }
    }

    fn objects(&self, layout: &Layout) -> Vec<(String, Vec<u8>)> {
        vec![
            (
                layout.key(&self.name, BackupFile::Metadata),
                velero::backup_json(&self.name, &[&self.namespace], "Completed"),
            ),
            (
                layout.key(&self.name, BackupFile::PodVolumeBackups),
                velero::pvb_file(&velero::pvbs(&self.name, &self.namespace, self.pvbs)),
            ),
        ]
    }
}

fn objects_of(layout: &Layout, specs: &[Spec]) -> Vec<(String, Vec<u8>)> {
    specs.iter().flat_map(|s| s.objects(layout)).collect()
}

fn location(store: &Store, name: &str, prefix: &str) -> Location {
    Location {
        name: name.to_string(),
        kind: StoreKind::S3,
        bucket: store.bucket.clone(),
        prefix: prefix.to_string(),
        source_cluster: "cluster-a".to_string(),
    }
}

async fn put(store: &Store, key: String, body: Vec<u8>) {
    store
        .objects
        .put(&Path::from(key.as_str()), PutPayload::from(body))
        .await
        .unwrap_or_else(|e| panic!("put {key}: {e}"));
}

/// Asserts that `spec` is in `catalog` exactly as written.
fn assert_loaded(catalog: &LocationCatalog, spec: &Spec) {
    let name = spec.name.as_str();
    let entry = catalog.backups.get(name).unwrap_or_else(|| panic!("backup {name} is not in the catalog"));
    assert_eq!(entry.name, name);
    assert_eq!(entry.backup.name(), name);
    assert_eq!(entry.backup.view.spec.included_namespaces[..], *std::slice::from_ref(&spec.namespace), "{name}");
    assert_eq!(entry.backup.view.status.phase, BackupPhase::Completed, "{name}");
    let pvb_names: Vec<&str> = entry.pod_volume_backups.names().collect();
    let expected: Vec<String> = (0..spec.pvbs).map(|i| velero::pvb_name(name, i)).collect();
    assert_eq!(pvb_names, expected, "PVBs of {name}");
    for pvb in &entry.pod_volume_backups.objects() {
        assert_eq!(pvb.view.spec.pod.namespace, spec.namespace, "{name}");
    }
    assert!(entry.pod_volume_backups_version.is_some(), "{name} has a PVB file (null when empty)");
    assert!(entry.metadata_version.e_tag.is_some(), "MinIO gives ETags ({name})");
}

/// Asserts that `catalog` holds exactly `specs`, complete and without errors.
fn assert_exactly(catalog: &LocationCatalog, specs: &[Spec]) {
    assert_eq!(catalog.errors, [], "errors");
    assert_eq!(catalog.listing, Listing::Complete);
    assert!(catalog.skipped.is_empty(), "skipped: {:?}", catalog.skipped);
    let names: BTreeSet<&str> = catalog.backups.keys().map(String::as_str).collect();
    let expected: BTreeSet<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names.len(), expected.len());
    assert!(names == expected, "names differ: extra {:?}, missing {:?}", &names - &expected, &expected - &names);
    for spec in specs {
        assert_loaded(catalog, spec);
    }
}

/// The error entries of `catalog` by object key.
fn errors_by_key(catalog: &LocationCatalog) -> BTreeMap<&str, &str> {
    for e in &catalog.errors {
        assert_eq!(e.location, catalog.location.name);
    }
    let map: BTreeMap<&str, &str> = catalog.errors.iter().map(|e| (e.object.as_str(), e.error.as_str())).collect();
    assert_eq!(map.len(), catalog.errors.len(), "one error per key: {:#?}", catalog.errors);
    map
}

/// `(location, key, error)` of an unreadable-location failure; panics on a catalog.
fn unreadable(result: Result<LocationCatalog, LoadError>) -> (String, String, String) {
    match result {
        Ok(catalog) => panic!(
            "an unreadable location must be an error, got a catalog of {} backups, errors {:#?}",
            catalog.backups.len(),
            catalog.errors
        ),
        Err(LoadError::Unreadable { location, key, source }) => (location, key, source.to_string()),
    }
}

/// Names whose store order differs from their plain order (`-` < `.` < `/`), some sorting after
/// `velero-backup.json` inside their own directory (`zz-…`).
fn varied_spec(i: usize) -> Spec {
    let n = i / 4;
    let name = match i % 4 {
        0 => format!("daily-{n:04}"),
        1 => format!("daily-{n:04}-retry"),
        2 => format!("daily-{n:04}.manual"),
        _ => format!("zz-{n:04}"),
    };
    Spec::new(name, format!("shop-{}", i % 10), (i % 7) % 4)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_load_of_2500_backups_pages_the_listing_and_shards_it() {
    let minio = Minio::shared();
    minio.create_bucket("cold-load");
    let prefix = "velero/cluster-a";
    let layout = Layout::new(prefix);
    let specs: Vec<Spec> = (0..2500).map(varied_spec).collect();
    let store = minio.store("cold-load");
    put_all(&store, objects_of(&layout, &specs)).await;

    let cold = location(&store, "cold", prefix);
    let (recorded, calls) = faults::record_pager(store);
    let (metered, counts) = metered::meter(recorded);
    // Concurrency 4: four shards of 625 backups (1,250 keys), so each shard pages too.
    let loader = Loader::new(metered, cold, 4);
    let started = Instant::now();
    let catalog = loader.refresh(None).await.expect("the location is readable");
    eprintln!("cold load of {} backups from MinIO: {:?}", specs.len(), started.elapsed());

    assert_exactly(&catalog, &specs);
    let tally = counts.tally();
    assert_eq!((tally.get, tally.head), (2 * specs.len() as u64, 0), "one GET per object, no HEADs");

    // MinIO pages at 1,000: the delimiter listing took 3 pages and saw every backup directory once.
    let delimited = calls.delimited();
    assert_eq!(delimited.len(), 3, "delimiter listing pages: {delimited:#?}");
    assert_eq!(delimited.iter().map(|c| c.prefixes).sum::<usize>(), specs.len());
    assert!(delimited.iter().all(|c| c.prefix.as_deref() == Some(layout.backups_dir().as_str())));
    // The object listing ran in several shards (distinct start offsets), and shards paged.
    let undelimited = calls.undelimited();
    let shards: BTreeSet<Option<String>> = undelimited.iter().map(|c| c.offset.clone()).collect();
    assert!(shards.len() >= 2, "one shard only: {undelimited:#?}");
    assert!(undelimited.iter().any(|c| c.continued), "no shard needed a second page: {undelimited:#?}");
    assert!(undelimited.iter().map(|c| c.objects).sum::<usize>() >= 2 * specs.len());
    eprintln!(
        "{} delimiter pages, {} shards, {} object-listing pages",
        delimited.len(),
        shards.len(),
        undelimited.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_refresh_shards_by_the_previous_names_without_a_delimiter_listing_and_sees_new_and_gone_backups() {
    let minio = Minio::shared();
    minio.create_bucket("warm-shards");
    let prefix = "velero";
    let layout = Layout::new(prefix);
    let specs: Vec<Spec> = (0..2500).map(varied_spec).collect();
    let store = minio.store("warm-shards");
    put_all(&store, objects_of(&layout, &specs)).await;
    let (recorded, calls) = faults::record_pager(store.clone());
    let (metered, counts) = metered::meter(recorded);
    let loader = Loader::new(metered, location(&store, "warm-shards", prefix), 4);
    let cold = loader.refresh(None).await.expect("readable");
    assert_exactly(&cold, &specs);
    let cold_pages = counts.tally();
    assert_eq!(cold_pages.list_delimited, 3, "a cold load lists names by delimiter: {cold_pages:?}");

    // A backup lands before the first name, one between two shards' names and one after the last; one goes.
    let mut now = specs.clone();
    let gone = now.remove(1300);
    store.objects.delete(&Path::from(layout.key(&gone.name, BackupFile::Metadata).as_str())).await.expect("delete");
    store
        .objects
        .delete(&Path::from(layout.key(&gone.name, BackupFile::PodVolumeBackups).as_str()))
        .await
        .expect("delete");
    let landed = [
        Spec::new("0-first", "shop", 1),
        Spec::new(format!("{}-b", specs[1250].name), "shop", 2),
        Spec::new("zzzz-last", "shop", 0),
    ];
    put_all(&store, objects_of(&layout, &landed)).await;
    now.extend(landed.iter().cloned());

    let before = counts.tally();
    let undelimited_before = calls.undelimited().len();
    let warm = loader.refresh(Some(&cold)).await.expect("readable");
    let cost = counts.tally() - before;
    assert_eq!(cost.list_delimited, 0, "no delimiter listing: {cost:?}");
    assert_eq!((cost.get, cost.head), (2 * landed.len() as u64, 0), "only the new backups are read: {cost:?}");
    assert_eq!(warm.listing, Listing::Complete);
    assert_exactly(&warm, &now);
    // Still sharded: several start offsets, from the previous catalog's names.
    let shards: BTreeSet<Option<String>> =
        calls.undelimited()[undelimited_before..].iter().map(|c| c.offset.clone()).collect();
    assert!(shards.len() >= 2, "{shards:?}");
    // The same as a cold load of the bucket as it is now.
    let fresh = loader.refresh(None).await.expect("readable");
    assert_eq!(warm.backups.keys().collect::<Vec<_>>(), fresh.backups.keys().collect::<Vec<_>>());
    eprintln!(
        "warm refresh of {} backups: {} listing pages, was {} cold (of which {} by delimiter)",
        now.len(),
        cost.list,
        cold_pages.list,
        cold_pages.list_delimited
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_refresh_costs_no_gets_and_fetches_only_what_changed() {
    let minio = Minio::shared();
    minio.create_bucket("warm-refresh");
    let prefix = "velero";
    let layout = Layout::new(prefix);
    let specs: Vec<Spec> =
        (0..300).map(|i| Spec::new(format!("backup-{i:04}"), format!("team-{}", i % 5), i % 3)).collect();
    let (store, counts) = metered::meter(minio.store("warm-refresh"));
    put_all(&store, objects_of(&layout, &specs)).await;
    let loader = Loader::new(store.clone(), location(&store, "warm", prefix), DEFAULT_CONCURRENCY);

    let before = counts.tally();
    let first = loader.refresh(None).await.expect("readable");
    assert_exactly(&first, &specs);
    assert_eq!((counts.tally() - before).get, 600);

    // Nothing changed: the listing alone, no GET or HEAD, and the very same entries.
    let before = counts.tally();
    let warm = loader.refresh(Some(&first)).await.expect("readable");
    let cost = counts.tally() - before;
    assert_eq!((cost.get, cost.head), (0, 0), "a warm refresh must not read objects: {cost:?}");
    assert!(cost.list >= 1, "{cost:?}");
    assert_eq!(cost.list_delimited, 0, "the previous catalog gives the names: no delimiter listing {cost:?}");
    assert_eq!(warm, first);
    assert!(warm.backups.iter().all(|(name, entry)| Arc::ptr_eq(entry, &first.backups[name])));

    // velero-backup.json rewritten (as Velero does when the phase advances): exactly one GET.
    let changed = "backup-0123";
    let mut value = velero::backup(changed, &["team-3"], "PartiallyFailed");
    value["metadata"]["labels"]["example.com/reviewed"] = "yes".into();
    put(&store, layout.key(changed, BackupFile::Metadata), velero::json_bytes(&value)).await;
    let before = counts.tally();
    let after_meta = loader.refresh(Some(&warm)).await.expect("readable");
    let cost = counts.tally() - before;
    assert_eq!((cost.get, cost.head), (1, 0), "{cost:?}");
    assert_eq!(after_meta.errors, []);
    let entry = &after_meta.backups[changed];
    assert_eq!(entry.backup.view.status.phase, BackupPhase::PartiallyFailed);
    // The typed view keeps only the labels ferry reads; the raw JSON (what is re-created) keeps them all.
    assert_eq!(entry.backup.to_value()["metadata"]["labels"]["example.com/reviewed"], "yes");
    assert_ne!(entry.metadata_version, warm.backups[changed].metadata_version);
    assert_eq!(entry.pod_volume_backups, warm.backups[changed].pod_volume_backups);
    assert_eq!(after_meta.backups.len(), specs.len());
    for (name, entry) in &after_meta.backups {
        if name != changed {
            assert!(Arc::ptr_eq(entry, &warm.backups[name]), "{name} was not reused");
        }
    }

    // The PVB file rewritten: exactly one GET, the metadata kept.
    let pvb_changed = "backup-0200";
    let items = velero::pvbs(pvb_changed, "team-0", 5);
    put(&store, layout.key(pvb_changed, BackupFile::PodVolumeBackups), velero::pvb_file(&items)).await;
    let before = counts.tally();
    let after_pvb = loader.refresh(Some(&after_meta)).await.expect("readable");
    let cost = counts.tally() - before;
    assert_eq!((cost.get, cost.head), (1, 0), "{cost:?}");
    let entry = &after_pvb.backups[pvb_changed];
    assert_eq!(entry.pod_volume_backups.len(), 5);
    assert_eq!(entry.backup, after_meta.backups[pvb_changed].backup);
    assert_eq!(entry.metadata_version, after_meta.backups[pvb_changed].metadata_version);
    assert_eq!(after_pvb.backups[changed], after_meta.backups[changed]);

    // A backup deleted from the bucket: gone, at no GET.
    let deleted = "backup-0001";
    let keys = [layout.key(deleted, BackupFile::Metadata), layout.key(deleted, BackupFile::PodVolumeBackups)];
    support::delete_all(&store, &keys).await;
    let before = counts.tally();
    let after_delete = loader.refresh(Some(&after_pvb)).await.expect("readable");
    assert_eq!((counts.tally() - before).get, 0);
    assert!(!after_delete.backups.contains_key(deleted) && !after_delete.skipped.contains(deleted));
    assert_eq!(after_delete.backups.len(), specs.len() - 1);
    assert_eq!(after_delete.errors, []);

    // A new backup: its two objects.
    let added = Spec::new("backup-0300", "team-9", 2);
    put_all(&store, added.objects(&layout)).await;
    let before = counts.tally();
    let after_add = loader.refresh(Some(&after_delete)).await.expect("readable");
    assert_eq!((counts.tally() - before).get, 2);
    assert_loaded(&after_add, &added);
    assert_eq!(after_add.backups.len(), specs.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_objects_are_reported_by_key_and_skipped() {
    let minio = Minio::shared();
    minio.create_bucket("bad-input");
    let prefix = "velero/bad";
    let layout = Layout::new(prefix);
    let store = minio.store("bad-input");
    let good: Vec<Spec> = (0..20).map(|i| Spec::new(format!("good-{i:02}"), "shop", i % 3)).collect();
    put_all(&store, objects_of(&layout, &good)).await;

    let meta = |name: &str| layout.key(name, BackupFile::Metadata);
    let pvb = |name: &str| layout.key(name, BackupFile::PodVolumeBackups);
    let good_pvbs = |name: &str| velero::pvb_file(&velero::pvbs(name, "shop", 1));
    let good_meta = |name: &str| velero::backup_json(name, &["shop"], "Completed");
    // (backup directory, key expected in the error, a fragment of the message)
    let mut expected: Vec<(String, String, &str)> = Vec::new();
    let mut objects: Vec<(String, Vec<u8>)> = Vec::new();

    // A PVB file that is not gzip at all, and one cut short.
    objects.push((meta("corrupt-gzip"), good_meta("corrupt-gzip")));
    objects.push((pvb("corrupt-gzip"), b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03this is not deflate".to_vec()));
    expected.push(("corrupt-gzip".into(), pvb("corrupt-gzip"), "gzip"));
    let mut cut = good_pvbs("truncated-gzip");
    cut.truncate(cut.len() / 2);
    objects.push((meta("truncated-gzip"), good_meta("truncated-gzip")));
    objects.push((pvb("truncated-gzip"), cut));
    expected.push(("truncated-gzip".into(), pvb("truncated-gzip"), "gzip"));

    // velero-backup.json cut short, and not JSON at all.
    let whole = good_meta("truncated-metadata");
    objects.push((meta("truncated-metadata"), whole[..whole.len() / 2].to_vec()));
    objects.push((pvb("truncated-metadata"), good_pvbs("truncated-metadata")));
    expected.push(("truncated-metadata".into(), meta("truncated-metadata"), "JSON"));
    objects.push((meta("not-json"), b"<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code></Error>".to_vec()));
    expected.push(("not-json".into(), meta("not-json"), "JSON"));

    // A directory with only a PVB file (half-written, or foreign): no backup and no error, counted apart.
    objects.push((pvb("pvb-only"), good_pvbs("pvb-only")));

    // A PVB file holding a JSON object instead of an array.
    objects.push((meta("pvb-object"), good_meta("pvb-object")));
    objects.push((
        pvb("pvb-object"),
        velero::gzip_json(&serde_json::json!({"items": velero::pvbs("pvb-object", "shop", 1)})),
    ));
    expected.push(("pvb-object".into(), pvb("pvb-object"), "array"));

    // A phase this Velero version does not know.
    objects.push((meta("unknown-phase"), velero::backup_json("unknown-phase", &["shop"], "Exploded")));
    expected.push(("unknown-phase".into(), meta("unknown-phase"), "Exploded"));

    // Metadata naming another backup than its directory.
    objects.push((meta("name-mismatch"), good_meta("someone-else")));
    objects.push((pvb("name-mismatch"), good_pvbs("name-mismatch")));
    expected.push(("name-mismatch".into(), meta("name-mismatch"), "someone-else"));

    // A Backup of another kind.
    let mut restore = velero::backup("wrong-kind", &["shop"], "Completed");
    restore["kind"] = "Restore".into();
    objects.push((meta("wrong-kind"), velero::json_bytes(&restore)));
    expected.push(("wrong-kind".into(), meta("wrong-kind"), "Restore"));

    put_all(&store, objects).await;

    // A directory name longer than Kubernetes allows. MinIO limits each key segment to 255 bytes (its backend
    // stores segments as file names), so 300 characters may be refused; 254 is then the longest invalid name.
    let long300 = "a".repeat(300);
    let long =
        match store.objects.put(&Path::from(meta(&long300).as_str()), PutPayload::from(good_meta(&long300))).await {
            Ok(_) => long300,
            Err(e) => {
                let code =
                    if e.to_string().contains("XMinioInvalidObjectName") { "XMinioInvalidObjectName" } else { "error" };
                eprintln!("MinIO refused a 300-character backup directory ({code}); testing 254 characters instead");
                let long254 = "a".repeat(254);
                put(&store, meta(&long254), good_meta(&long254)).await;
                long254
            }
        };
    expected.push((long.clone(), meta(&long), "characters long"));

    let loader = Loader::new(store.clone(), location(&store, "bad", prefix), DEFAULT_CONCURRENCY);
    let catalog = loader.refresh(None).await.expect("readable");

    assert_eq!(catalog.listing, Listing::Complete);
    let errors = errors_by_key(&catalog);
    let expected_keys: BTreeSet<&str> = expected.iter().map(|(_, key, _)| key.as_str()).collect();
    let found_keys: BTreeSet<&str> = errors.keys().copied().collect();
    assert!(
        found_keys == expected_keys,
        "error keys: extra {:?}, missing {:?}",
        &found_keys - &expected_keys,
        &expected_keys - &found_keys
    );
    // A bad PVB file costs only the PVBs (as in Velero's sync): the backup is loaded without them.
    let pvb_file_only = |key: &str| key.ends_with("-podvolumebackups.json.gz");
    for (name, key, fragment) in &expected {
        let message = errors[key.as_str()];
        assert!(message.contains(fragment), "error for {key} should mention {fragment:?}: {message}");
        if pvb_file_only(key) {
            let entry = catalog.backups.get(name).unwrap_or_else(|| panic!("{name} lost with its PVB file"));
            assert!(entry.pod_volume_backups.is_empty(), "{name}: PVBs from an unusable file");
            assert!(entry.pod_volume_backups_error.as_deref().is_some_and(|e| e.contains(fragment)), "{name}");
            assert!(!catalog.skipped.contains(name), "{name}");
        } else {
            assert!(!catalog.backups.contains_key(name), "{name} is bad but was loaded");
            assert!(catalog.skipped.contains(name), "{name} is present (so not deleted) but unusable: must be skipped");
        }
    }
    let bad: BTreeSet<String> =
        expected.iter().filter(|(_, key, _)| !pvb_file_only(key)).map(|(name, _, _)| name.clone()).collect();
    assert_eq!(catalog.skipped, bad);
    assert_eq!(catalog.foreign_folders, BTreeSet::from(["pvb-only".to_string()]));
    let pvb_file_bad = expected.iter().filter(|(_, key, _)| pvb_file_only(key)).count();
    assert_eq!(catalog.backups.len(), good.len() + pvb_file_bad);
    for spec in &good {
        assert_loaded(&catalog, spec);
    }

    // The next refresh fetches nothing unchanged, and reports the same errors: each bad object once per
    // refresh, the foreign directory never.
    let again = loader.refresh(Some(&catalog)).await.expect("readable");
    assert_eq!(again.errors, catalog.errors);
    assert_eq!(again.foreign_folders, catalog.foreign_folders);
    for (name, key, _) in expected.iter().filter(|(_, key, _)| pvb_file_only(key)) {
        assert!(Arc::ptr_eq(&again.backups[name], &catalog.backups[name]), "{key} was fetched again");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bucket_is_unreadable_not_empty() {
    let minio = Minio::shared();
    let store = minio.store("no-such-bucket");
    let layout = Layout::new("velero");
    let loader = Loader::new(store.clone(), location(&store, "missing", "velero"), DEFAULT_CONCURRENCY);
    let (location, key, error) = unreadable(loader.refresh(None).await);
    assert_eq!(location, "missing");
    assert_eq!(key, layout.backups_dir());
    eprintln!("missing bucket: {error}");

    // Also with a previous catalog in hand: an error, not "every backup was deleted".
    let previous = LocationCatalog::empty(loader.location().clone());
    unreadable(loader.refresh(Some(&previous)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minio_down_is_unreadable_and_loads_again_after_restart() {
    let mut minio = Minio::start();
    minio.create_bucket("outage");
    let prefix = "velero";
    let layout = Layout::new(prefix);
    let specs: Vec<Spec> = (0..40).map(|i| Spec::new(format!("outage-{i:02}"), "shop", i % 2)).collect();
    let (store, counts) = metered::meter(minio.store("outage"));
    put_all(&store, objects_of(&layout, &specs)).await;
    let loader = Loader::new(store.clone(), location(&store, "outage", prefix), DEFAULT_CONCURRENCY);
    let before_outage = loader.refresh(None).await.expect("readable");
    assert_exactly(&before_outage, &specs);

    minio.stop();
    let started = Instant::now();
    let (location, key, error) = unreadable(loader.refresh(Some(&before_outage)).await);
    eprintln!("with MinIO stopped, refresh failed after {:?}: {error}", started.elapsed());
    assert_eq!((location.as_str(), key), ("outage", layout.backups_dir()));

    minio.restart();
    let before = counts.tally();
    let after = loader.refresh(Some(&before_outage)).await.expect("readable again after the restart");
    assert_eq!(after, before_outage);
    assert_eq!((counts.tally() - before).get, 0, "nothing changed while MinIO was down");
    // And a cold load through the same store object works too.
    let cold = loader.refresh(None).await.expect("readable");
    assert_exactly(&cold, &specs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_second_delimiter_page_keeps_every_previous_backup() {
    let minio = Minio::shared();
    minio.create_bucket("delimiter-fault");
    let prefix = "velero/paged";
    let layout = Layout::new(prefix);
    let specs: Vec<Spec> =
        (0..1200).map(|i| Spec::new(format!("nightly-{i:05}"), format!("ns-{}", i % 4), 1 + i % 2)).collect();
    let store = minio.store("delimiter-fault");
    put_all(&store, objects_of(&layout, &specs)).await;
    let paged = location(&store, "paged", prefix);
    let full = Loader::new(store.clone(), paged.clone(), DEFAULT_CONCURRENCY).refresh(None).await.expect("readable");
    assert_exactly(&full, &specs);

    // Every delimiter listing fails on its second page. A refresh lists by delimiter only when the previous
    // listing was incomplete (a complete one gives the names), so the previous catalog here is marked so.
    let (faulty, calls) = faults::wrap_pager(store, |call| call.delimiter && call.continued);
    let (faulty, counts) = metered::meter(faulty);
    let loader = Loader::new(faulty, paged, DEFAULT_CONCURRENCY);
    let mut previous = full.clone();
    previous.listing = Listing::Incomplete { reason: "an earlier page failed".into() };
    let catalog = loader.refresh(Some(&previous)).await.expect("the first page was read: not unreadable");

    assert!(calls.delimited().iter().any(|c| c.failed), "the fault was not hit: {:#?}", calls.delimited());
    let Listing::Incomplete { reason } = &catalog.listing else { panic!("listing should be incomplete") };
    assert!(reason.contains("page 2"), "{reason}");
    let errors = errors_by_key(&catalog);
    assert_eq!(errors.keys().copied().collect::<Vec<_>>(), [layout.backups_dir().as_str()], "{:#?}", catalog.errors);
    // Nothing lost: every backup of the previous catalog is still there, unchanged, and nothing was fetched.
    assert_eq!(catalog.backups.len(), full.backups.len());
    for (name, entry) in &full.backups {
        assert_eq!(catalog.backups.get(name), Some(entry), "{name}");
    }
    assert!(catalog.skipped.is_empty());
    assert_eq!(counts.tally().get, 0);

    // Without a previous catalog: what the first page named, marked incomplete.
    let cold = loader.refresh(None).await.expect("the first page was read");
    assert!(matches!(cold.listing, Listing::Incomplete { .. }));
    assert_eq!(cold.backups.len(), 1000, "MinIO's first page names 1,000 backups");
    for name in cold.backups.keys() {
        assert_eq!(cold.backups[name], full.backups[name]);
    }
}

/// A page boundary inside one backup's directory: the page that failed held the rest of that backup's files.
/// Names starting with `z` sort their `velero-backup.json` first, so the backup cut by the boundary is listed
/// with its metadata but without its PVB file and resource list. Absence on an incomplete listing proves
/// nothing: its previous entry must be kept whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_object_listing_page_keeps_previous_entries_whole() {
    let minio = Minio::shared();
    minio.create_bucket("object-page-fault");
    let prefix = "velero/cut";
    let layout = Layout::new(prefix);
    // 3 keys per backup: velero-backup.json, z-NNNN-podvolumebackups.json.gz, z-NNNN-resource-list.json.gz.
    let specs: Vec<Spec> = (0..400).map(|i| Spec::new(format!("z-{i:04}"), "shop", 2)).collect();
    let store = minio.store("object-page-fault");
    let mut objects = objects_of(&layout, &specs);
    for spec in &specs {
        objects.push((
            layout.key(&spec.name, BackupFile::ResourceList),
            velero::resource_list_file("shop", &["db-0", "db-1"]),
        ));
    }
    put_all(&store, objects).await;
    let cut_location = location(&store, "cut", prefix);
    let full =
        Loader::new(store.clone(), cut_location.clone(), DEFAULT_CONCURRENCY).refresh(None).await.expect("readable");
    assert_exactly(&full, &specs);
    assert!(full.backups.values().all(|b| b.has_resource_list));

    // Concurrency 1: one shard listing all 1,200 keys, whose second page fails.
    let (faulty, calls) = faults::wrap_pager(store, |call| !call.delimiter && call.continued);
    let loader = Loader::new(faulty, cut_location, 1);
    let catalog = loader.refresh(Some(&full)).await.expect("the first page was read");

    let undelimited = calls.undelimited();
    assert!(undelimited.iter().any(|c| c.failed), "the fault was not hit: {undelimited:#?}");
    // The precondition: MinIO's first page of 1,000 keys ends with z-0333's velero-backup.json.
    let cut = "z-0333";
    assert_eq!(
        undelimited[0].last_object.as_deref(),
        Some(layout.key(cut, BackupFile::Metadata).as_str()),
        "MinIO paged differently than this test assumes: {undelimited:#?}"
    );
    assert!(matches!(catalog.listing, Listing::Incomplete { .. }));
    assert_eq!(errors_by_key(&catalog).len(), 1, "{:#?}", catalog.errors);
    assert_eq!(catalog.backups.len(), full.backups.len());
    let damaged: Vec<&String> = full
        .backups
        .iter()
        .filter(|(name, entry)| catalog.backups.get(*name) != Some(*entry))
        .map(|(name, _)| name)
        .collect();
    assert!(
        damaged.is_empty(),
        "entries changed by an incomplete listing: {damaged:?}; {cut} now has {} PVBs (was {}), resource list {} (was {})",
        catalog.backups[cut].pod_volume_backups.len(),
        full.backups[cut].pod_volume_backups.len(),
        catalog.backups[cut].has_resource_list,
        full.backups[cut].has_resource_list,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucket_root_layout_with_empty_prefix() {
    let minio = Minio::shared();
    minio.create_bucket("root-layout");
    let layout = Layout::new("");
    let store = minio.store("root-layout");
    let specs: Vec<Spec> = (0..60).map(|i| Spec::new(format!("root-{i:03}"), "apps", i % 4)).collect();
    let mut objects = objects_of(&layout, &specs);
    // What else lives in a BSL root, and another location's backups under a prefix: none of it is a backup here.
    let other = Layout::new("other-cluster");
    objects.extend(Spec::new("foreign-1", "apps", 1).objects(&other));
    objects.push(("restores/restore-1/restore-restore-1-logs.gz".to_string(), velero::gzip(b"log line\n")));
    objects.push(("metadata/revision".to_string(), b"6c1f0c6e-0a55-4b1b-9d11-1f0e0a3b1c2d".to_vec()));
    // Deeper than Velero's layout, and a file directly in backups/: ignored.
    objects.push((format!("{}nested/file.json", layout.backup_dir("root-000")), b"{}".to_vec()));
    objects.push((format!("{}stray-file", layout.backups_dir()), b"x".to_vec()));
    put_all(&store, objects).await;

    let loader = Loader::new(store.clone(), location(&store, "root", ""), DEFAULT_CONCURRENCY);
    let catalog = loader.refresh(None).await.expect("readable");
    assert_exactly(&catalog, &specs);
    let warm = loader.refresh(Some(&catalog)).await.expect("readable");
    assert_eq!(warm, catalog);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_objects_are_not_downloaded_and_gzip_bombs_are_refused_by_key() {
    let minio = Minio::shared();
    minio.create_bucket("limits");
    let layout = Layout::new("velero");
    let store = minio.store("limits");
    let good: Vec<Spec> = (0..5).map(|i| Spec::new(format!("good-{i}"), "shop", 1)).collect();
    put_all(&store, objects_of(&layout, &good)).await;
    let meta = |name: &str| layout.key(name, BackupFile::Metadata);
    let pvb = |name: &str| layout.key(name, BackupFile::PodVolumeBackups);

    // velero-backup.json padded past the size limit (a 200 KB annotation).
    let mut big = velero::backup("big", &["shop"], "Completed");
    big["metadata"]["annotations"]["padding"] = "x".repeat(200_000).into();
    // A PVB file of some 64 KB that inflates to 64 MiB of valid JSON: one PVB, then whitespace.
    let one = serde_json::to_string(&velero::pvbs("bomb", "shop", 1)[0]).expect("json");
    let bomb = velero::gzip(format!("[{one}{}]", " ".repeat(64 * 1024 * 1024)).as_bytes());
    assert!(bomb.len() < 128 * 1024, "a bomb is small: {} bytes", bomb.len());
    put_all(
        &store,
        vec![
            (meta("big"), velero::json_bytes(&big)),
            (meta("bomb"), velero::backup_json("bomb", &["shop"], "Completed")),
            (pvb("bomb"), bomb),
        ],
    )
    .await;

    let (metered, counts) = metered::meter(store.clone());
    let limits = CatalogLimits { max_object_bytes: 128 * 1024, ..CatalogLimits::default() };
    let loader = Loader::new(metered, location(&store, "limits", "velero"), 4).with_limits(limits);
    let catalog = loader.refresh(None).await.expect("readable");

    let errors = errors_by_key(&catalog);
    assert_eq!(errors.len(), 2, "{errors:?}");
    let too_big = errors[meta("big").as_str()];
    assert!(too_big.contains("over the limit of 131072 (catalog.maxObjectBytes); not downloaded"), "{too_big}");
    let bombed = errors[pvb("bomb").as_str()];
    assert!(bombed.contains("catalog.maxDecompressionRatio"), "{bombed}");
    // The bomb costs only its PVBs: the backup is there, without them.
    assert_eq!(catalog.skipped, BTreeSet::from(["big".to_string()]));
    let bombed_entry = &catalog.backups["bomb"];
    assert!(bombed_entry.pod_volume_backups.is_empty() && bombed_entry.pod_volume_backups_error.is_some());
    for spec in &good {
        assert_loaded(&catalog, spec);
    }
    // Two GETs for each good backup and the bomb's two objects; none for the oversized one.
    assert_eq!(counts.tally().get, 2 * good.len() as u64 + 2);
}
