//! The loader's progress reports (`Loader::with_progress`): how many backups a refresh fetches and reuses, and
//! each fetch as it completes; a warm refresh fetches nothing.

use std::sync::{Arc, Mutex};

use ferry::bucket::{self, LoadProgress, Loader, StoreConfig};
use ferry::catalog::Location;
use ferry::fixture::{self, FixtureSpec};

#[derive(Debug, Default)]
struct Recorder {
    listed: Mutex<Vec<(usize, usize)>>,
    fetched: Mutex<Vec<(usize, usize)>>,
}

impl LoadProgress for Recorder {
    fn listed(&self, location: &str, to_fetch: usize, reused: usize) {
        assert_eq!(location, "mem");
        self.listed.lock().unwrap().push((to_fetch, reused));
    }

    fn fetched(&self, _location: &str, done: usize, to_fetch: usize) {
        self.fetched.lock().unwrap().push((done, to_fetch));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_load_reports_every_fetch_and_a_warm_one_none() {
    const BACKUPS: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig { url: format!("file://{}", dir.path().display()), ..Default::default() };
    let store = bucket::open(&config).unwrap();
    let spec = FixtureSpec { backups: BACKUPS, tarballs: false, resource_lists: false, ..FixtureSpec::default() };
    fixture::write(&store, &spec, 8).await.unwrap();
    let location = Location {
        name: "mem".into(),
        kind: store.kind,
        bucket: store.bucket.clone(),
        prefix: spec.prefix.clone(),
        source_cluster: "cluster-a".into(),
    };
    let recorder = Arc::new(Recorder::default());
    let loader = Loader::new(store, location, 8).with_progress(recorder.clone());
    let cold = loader.refresh(None).await.unwrap();
    assert_eq!(cold.backups.len(), BACKUPS);
    assert_eq!(*recorder.listed.lock().unwrap(), vec![(BACKUPS, 0)]);
    let fetched = recorder.fetched.lock().unwrap().clone();
    assert_eq!(
        fetched,
        (1..=BACKUPS).map(|done| (done, BACKUPS)).collect::<Vec<_>>(),
        "one report per fetch, in order"
    );

    recorder.fetched.lock().unwrap().clear();
    loader.refresh(Some(&cold)).await.unwrap();
    assert_eq!(recorder.listed.lock().unwrap().last(), Some(&(0, BACKUPS)), "all reused");
    assert!(recorder.fetched.lock().unwrap().is_empty());
}
