//! How much memory a catalog holds per backup, counted by a counting allocator (exact, not RSS). A regression
//! guard for the 100k-backups-under-300-MB target (docs/performance.md): the bytes a loaded catalog keeps alive.

use ferry::bucket::{self, Loader, StoreConfig};
use ferry::catalog::Location;
use ferry::fixture::{self, FixtureSpec};

#[path = "support/counting_allocator.rs"]
mod counting_allocator;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loaded_catalog_keeps_under_2300_bytes_per_backup() {
    const BACKUPS: usize = 2000;
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig { url: format!("file://{}", dir.path().display()), ..Default::default() };
    let store = bucket::open(&config).unwrap();
    let spec = FixtureSpec { backups: BACKUPS, tarballs: false, resource_lists: false, ..FixtureSpec::default() };
    fixture::write(&store, &spec, 16).await.unwrap();
    let location = Location {
        name: "mem".into(),
        kind: store.kind,
        bucket: store.bucket.clone(),
        prefix: spec.prefix.clone(),
        source_cluster: "cluster-a".into(),
    };
    let loader = Loader::new(store, location, 16);
    // Warm up lazily allocated runtime state, then measure a second, independent load.
    drop(loader.refresh(None).await.unwrap());
    let before = counting_allocator::live();
    let catalog = loader.refresh(None).await.unwrap();
    let held = counting_allocator::live() - before;
    assert_eq!(catalog.backups.len(), BACKUPS);
    let per_backup = held as usize / BACKUPS;
    eprintln!("catalog holds {per_backup} bytes per backup ({held} for {BACKUPS})");
    // Measured 1.9 KB (docs/performance.md): raw metadata ~0.3 KB compressed, PVB file ~0.6 KB, views ~1 KB.
    assert!(per_backup < 2300, "catalog holds {per_backup} bytes per backup");
}
