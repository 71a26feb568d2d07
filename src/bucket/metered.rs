//! Request counting around a store: GETs, HEADs, LIST pages and PUTs. Used by the benchmark (a warm refresh
//! must cost 0 GETs) and available for metrics.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::list::{PaginatedListOptions, PaginatedListResult, PaginatedListStore};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, Result,
};

use super::store::Store;

#[derive(Debug, Default)]
pub struct RequestCounts {
    pub get: AtomicU64,
    pub head: AtomicU64,
    /// Listing requests: one per page for paged stores, one per call otherwise.
    pub list: AtomicU64,
    /// Of those, listings by delimiter (folder names).
    pub list_delimited: AtomicU64,
    pub put: AtomicU64,
}

/// A point-in-time copy of [`RequestCounts`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestTally {
    pub get: u64,
    pub head: u64,
    pub list: u64,
    pub list_delimited: u64,
    pub put: u64,
}

impl RequestCounts {
    pub fn tally(&self) -> RequestTally {
        RequestTally {
            get: self.get.load(Ordering::Relaxed),
            head: self.head.load(Ordering::Relaxed),
            list: self.list.load(Ordering::Relaxed),
            list_delimited: self.list_delimited.load(Ordering::Relaxed),
            put: self.put.load(Ordering::Relaxed),
        }
    }
}

impl std::ops::Sub for RequestTally {
    type Output = RequestTally;
    fn sub(self, rhs: Self) -> Self {
        RequestTally {
            get: self.get - rhs.get,
            head: self.head - rhs.head,
            list: self.list - rhs.list,
            list_delimited: self.list_delimited - rhs.list_delimited,
            put: self.put - rhs.put,
        }
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

async fn delay(latency: Duration) {
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
}

/// Wraps `store` so that every request it makes is counted in the returned counters.
pub fn meter(store: Store) -> (Store, Arc<RequestCounts>) {
    meter_with_latency(store, Duration::ZERO)
}

/// Like [`meter`], and every request first waits `latency`: a loopback store made to answer like a remote one
/// (benchmarks compare loaders under the round-trip times of a real cloud bucket).
pub fn meter_with_latency(store: Store, latency: Duration) -> (Store, Arc<RequestCounts>) {
    let counts = Arc::new(RequestCounts::default());
    let objects = Arc::new(MeteredObjects { inner: store.objects, counts: counts.clone(), latency });
    let pager = store
        .pager
        .map(|inner| Arc::new(MeteredPager { inner, counts: counts.clone(), latency }) as Arc<dyn PaginatedListStore>);
    (Store { objects, pager, ..store }, counts)
}

#[derive(Debug)]
struct MeteredObjects {
    inner: Arc<dyn ObjectStore>,
    counts: Arc<RequestCounts>,
    latency: Duration,
}

impl fmt::Display for MeteredObjects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Metered({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for MeteredObjects {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        bump(&self.counts.put);
        delay(self.latency).await;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        bump(&self.counts.put);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        bump(if options.head { &self.counts.head } else { &self.counts.get });
        delay(self.latency).await;
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        bump(&self.counts.get);
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        bump(&self.counts.list);
        self.inner.list(prefix)
    }

    fn list_with_offset(&self, prefix: Option<&Path>, offset: &Path) -> BoxStream<'static, Result<ObjectMeta>> {
        bump(&self.counts.list);
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        bump(&self.counts.list);
        bump(&self.counts.list_delimited);
        delay(self.latency).await;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

struct MeteredPager {
    inner: Arc<dyn PaginatedListStore>,
    counts: Arc<RequestCounts>,
    latency: Duration,
}

#[async_trait]
impl PaginatedListStore for MeteredPager {
    async fn list_paginated(&self, prefix: Option<&str>, opts: PaginatedListOptions) -> Result<PaginatedListResult> {
        bump(&self.counts.list);
        if opts.delimiter.is_some() {
            bump(&self.counts.list_delimited);
        }
        delay(self.latency).await;
        self.inner.list_paginated(prefix, opts).await
    }
}
