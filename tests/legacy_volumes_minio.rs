//! Legacy volume backups against a real MinIO on 127.0.0.1: a backup from before Velero stored PVB files, written
//! by the fixture writer, is loaded without downloading any tarball and read back on demand through
//! `Loader::legacy_volume_backups`, with the size and decode limits.
//!
//! Run under `flock /tmp/ferry-bed.lock` with the other MinIO tests.

mod support;

use std::io::Read;

use flate2::Compression;
use flate2::write::GzEncoder;

use ferry::bucket::{CatalogLimits, FetchError, Loader, Store, metered};
use ferry::catalog::decode::DecodeLimits;
use ferry::catalog::legacy_volume_backups::LegacyVolumeBackupError;
use ferry::catalog::{BackupFile, Layout, Location, StoreKind};
use ferry::fixture::{self, FixtureSpec, LEGACY_BACKUP};

use support::minio::Minio;
use support::put_all;

fn location(store: &Store, prefix: &str) -> Location {
    Location {
        name: "legacy".to_string(),
        kind: StoreKind::S3,
        bucket: store.bucket.clone(),
        prefix: prefix.to_string(),
        source_cluster: "cluster-a".to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_backup_is_read_back_from_its_tarball_on_demand_only() {
    let minio = Minio::shared();
    minio.create_bucket("legacy-volumes");
    let store = minio.store("legacy-volumes");
    let spec = FixtureSpec { backups: 2, pvbs_per_backup: 3, legacy_volumes: true, ..FixtureSpec::default() };
    let summary = fixture::write(&store, &spec, 8).await.expect("fixture written");
    assert_eq!(summary.backups, 3);
    let regular: Vec<String> = fixture::backup_names(&spec).into_iter().filter(|n| n != LEGACY_BACKUP).collect();
    assert_eq!(regular.len(), 2);

    let (metered, counts) = metered::meter(store.clone());
    let loader = Loader::new(metered, location(&store, &spec.prefix), 4);
    let catalog = loader.refresh(None).await.expect("readable");
    assert_eq!(catalog.errors, []);
    assert_eq!(catalog.backups.len(), 3);
    let legacy = &catalog.backups[LEGACY_BACKUP];
    assert!(legacy.pod_volume_backups_version.is_none() && legacy.pod_volume_backups.is_empty());
    assert!(legacy.pod_volume_backups_error.is_none());
    // Loading reads metadata and PVB files only: no tarball, also not the legacy backup's.
    assert_eq!(counts.tally().get, 2 * 2 + 1);

    let before = counts.tally();
    assert!(!loader.has_file(LEGACY_BACKUP, BackupFile::PodVolumeBackups).await.unwrap());
    assert!(loader.has_file(&regular[0], BackupFile::PodVolumeBackups).await.unwrap());
    let found = loader.legacy_volume_backups(LEGACY_BACKUP).await.expect("tarball readable");
    assert_eq!(found.errors, []);
    let expected = fixture::legacy_volume_backups(&spec);
    assert_eq!(expected.len(), 3);
    assert_eq!(found.volume_backups, expected);
    let spent = counts.tally() - before;
    assert_eq!((spent.get, spent.head), (1, 2), "one GET of the tarball, one HEAD per has_file");

    // A regular backup's Pods carry no snapshot annotations.
    let none = loader.legacy_volume_backups(&regular[0]).await.expect("tarball readable");
    assert!(none.volume_backups.is_empty() && none.errors.is_empty(), "{none:?}");
    // A backup without a tarball is a read error naming the store's NotFound, never an empty list.
    match loader.legacy_volume_backups("no-such-backup").await {
        Err(FetchError::Read(object_store::Error::NotFound { .. })) => {}
        other => panic!("expected NotFound, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_tarballs_are_not_downloaded_and_gzip_bombs_are_refused() {
    let minio = Minio::shared();
    minio.create_bucket("legacy-limits");
    let store = minio.store("legacy-limits");
    let spec = FixtureSpec { backups: 0, pvbs_per_backup: 2, legacy_volumes: true, ..FixtureSpec::default() };
    fixture::write(&store, &spec, 8).await.expect("fixture written");
    // A tarball of some 64 KB that inflates to 64 MiB: one item of zeros.
    let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    let mut header = tar::Header::new_gnu();
    let size = 64 * 1024 * 1024;
    header.set_size(size);
    header.set_mode(0o755);
    header.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut header, "resources/pods/namespaces/a/p.json", std::io::repeat(0).take(size)).unwrap();
    let bomb = tar.into_inner().unwrap().finish().unwrap();
    let layout = Layout::new(&spec.prefix);
    put_all(&store, vec![(layout.key("bomb", BackupFile::Tarball), bomb)]).await;

    let (metered, counts) = metered::meter(store.clone());
    let tight = CatalogLimits { max_object_bytes: 1024, ..CatalogLimits::default() };
    let loader = Loader::new(metered, location(&store, &spec.prefix), 4).with_limits(tight);
    match loader.legacy_volume_backups(LEGACY_BACKUP).await {
        Err(FetchError::TooLarge(error)) => {
            assert!(error.ends_with("over the limit of 1024 (catalog.maxObjectBytes); not downloaded"), "{error}")
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    let loader = Loader::new(store.clone(), location(&store, &spec.prefix), 4);
    match loader.legacy_volume_backups("bomb").await {
        Err(FetchError::LegacyVolumeBackups(LegacyVolumeBackupError::TooLarge { cap, compressed })) => {
            assert_eq!(cap, DecodeLimits::default().cap_for(compressed));
            assert!(cap < size, "refused by its ratio: {cap}");
        }
        other => panic!("expected the bomb refused, got {other:?}"),
    }
    // The same legacy backup reads with the default limits.
    let found = loader.legacy_volume_backups(LEGACY_BACKUP).await.expect("readable");
    assert_eq!(found.volume_backups, fixture::legacy_volume_backups(&spec));
    assert_eq!(counts.tally().get, 1, "the oversized tarball: one GET answered by its size, body not read");
}
