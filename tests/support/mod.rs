//! Helpers shared by integration tests: a real MinIO server ([`minio`]), Velero-shaped object bodies
//! ([`velero`]), bulk uploads ([`put_all`]) and a fault-injecting, call-recording pager ([`faults`]).
//!
//! Each test binary includes this module (`mod support;`) and uses part of it.
#![allow(dead_code)]

pub mod azurite;
pub mod ferry_plan;
pub mod local_server;
pub mod minio;

use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};

use ferry::bucket::Store;

/// Uploads `objects` (key, body), 32 at a time. Panics with the key on the first failure.
pub async fn put_all(store: &Store, objects: Vec<(String, Vec<u8>)>) {
    let results: Vec<(String, object_store::Result<object_store::PutResult>)> = futures::stream::iter(objects)
        .map(|(key, body)| {
            let objects = store.objects.clone();
            async move {
                let result = objects.put(&Path::from(key.as_str()), PutPayload::from(body)).await;
                (key, result)
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    for (key, result) in results {
        if let Err(e) = result {
            panic!("put {key}: {e}");
        }
    }
}

/// Deletes `keys`. Panics with the key on failure.
pub async fn delete_all(store: &Store, keys: &[String]) {
    for key in keys {
        if let Err(e) = store.objects.delete(&Path::from(key.as_str())).await {
            panic!("delete {key}: {e}");
        }
    }
}

/// Bodies shaped like the ones Velero v1.18 writes (docs/upstream.md §V1.2, §V3, §V4). Built here rather than
/// with `ferry::fixture`, so that these tests check ferry against an independent writer.
pub mod velero {
    use std::io::Write;

    use flate2::Compression;
    use flate2::write::GzEncoder;
    use serde_json::{Value, json};
    use sha2::{Digest, Sha256};

    /// A stable UID-shaped string for `seed`.
    pub fn uid(seed: &str) -> String {
        let h: String = Sha256::digest(seed.as_bytes()).iter().take(16).map(|b| format!("{b:02x}")).collect();
        format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
    }

    /// A `velero-backup.json` object for backup `name` in `phase` (e.g. `Completed`).
    pub fn backup(name: &str, namespaces: &[&str], phase: &str) -> Value {
        let mut status = json!({
            "version": 1,
            "formatVersion": "1.1.0",
            "expiration": "2026-12-30T02:00:00Z",
            "phase": phase,
            "startTimestamp": "2026-11-30T02:00:00Z",
            "progress": {"totalItems": 42, "itemsBackedUp": 42},
            "warnings": 1,
        });
        if matches!(phase, "Completed" | "PartiallyFailed" | "Failed") {
            status["completionTimestamp"] = json!("2026-11-30T02:03:17Z");
        }
        json!({
            "kind": "Backup",
            "apiVersion": "velero.io/v1",
            "metadata": {
                "name": name,
                "namespace": "velero",
                "uid": uid(name),
                "resourceVersion": "48213",
                "generation": 7,
                "creationTimestamp": "2026-11-30T02:00:00Z",
                "labels": {
                    "velero.io/storage-location": "default",
                    "velero.io/schedule-name": "nightly",
                },
                "annotations": {
                    "velero.io/resource-timeout": "10m0s",
                    "velero.io/source-cluster-k8s-gitversion": "v1.35.4",
                    "velero.io/source-cluster-k8s-major-version": "1",
                    "velero.io/source-cluster-k8s-minor-version": "35",
                },
            },
            "spec": {
                "metadata": {},
                "includedNamespaces": namespaces,
                "excludedNamespaces": null,
                "ttl": "720h0m0s",
                "storageLocation": "default",
                "defaultVolumesToFsBackup": true,
                "csiSnapshotTimeout": "10m0s",
                "itemOperationTimeout": "4h0m0s",
                "snapshotMoveData": false,
                "hooks": {},
            },
            "status": status,
        })
    }

    /// `velero-backup.json` bytes: pretty JSON as Velero's serializer writes it.
    pub fn backup_json(name: &str, namespaces: &[&str], phase: &str) -> Vec<u8> {
        json_bytes(&backup(name, namespaces, phase))
    }

    pub fn json_bytes(value: &Value) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(value).expect("serialize JSON");
        bytes.push(b'\n');
        bytes
    }

    /// The name of PVB `index` of `backup` (Velero uses `generateName: <backup>-`).
    pub fn pvb_name(backup: &str, index: usize) -> String {
        format!("{backup}-{}", &uid(&format!("{backup}/{index}"))[..5])
    }

    /// `count` PodVolumeBackups of `backup`, as Velero stores them: from an informer cache, so without
    /// `apiVersion`/`kind`.
    pub fn pvbs(backup: &str, namespace: &str, count: usize) -> Vec<Value> {
        (0..count)
            .map(|i| {
                let name = pvb_name(backup, i);
                let pod = format!("db-{i}");
                let pod_uid = uid(&format!("{namespace}/{pod}"));
                let pvc_uid = uid(&format!("{namespace}/data-{pod}"));
                json!({
                    "metadata": {
                        "name": name,
                        "generateName": format!("{backup}-"),
                        "namespace": "velero",
                        "uid": uid(&name),
                        "resourceVersion": "48190",
                        "creationTimestamp": "2026-11-30T02:01:00Z",
                        "labels": {
                            "velero.io/backup-name": ferry::model::names::velero_label_value(backup),
                            "velero.io/backup-uid": uid(backup),
                            "velero.io/pvc-uid": pvc_uid,
                        },
                        "annotations": {"velero.io/pvc-name": format!("data-{pod}")},
                        "ownerReferences": [{
                            "apiVersion": "velero.io/v1",
                            "kind": "Backup",
                            "name": backup,
                            "uid": uid(backup),
                            "controller": true,
                        }],
                    },
                    "spec": {
                        "node": "worker-1",
                        "pod": {"kind": "Pod", "namespace": namespace, "name": pod, "uid": pod_uid},
                        "volume": "data",
                        "backupStorageLocation": "default",
                        "repoIdentifier": "",
                        "uploaderType": "kopia",
                        "tags": {
                            "backup": backup,
                            "backup-uid": uid(backup),
                            "ns": namespace,
                            "pod": pod,
                            "pod-uid": pod_uid,
                            "pvc-uid": pvc_uid,
                            "volume": "data",
                        },
                    },
                    "status": {
                        "phase": "Completed",
                        "path": format!("/host_pods/{pod_uid}/volumes/kubernetes.io~csi/pvc-{pvc_uid}/mount"),
                        "snapshotID": &uid(&format!("snap/{name}"))[..8],
                        "startTimestamp": "2026-11-30T02:01:00Z",
                        "completionTimestamp": "2026-11-30T02:01:09Z",
                        "progress": {"totalBytes": 1048576, "bytesDone": 1048576},
                    },
                })
            })
            .collect()
    }

    /// `<name>-podvolumebackups.json.gz`: a gzip JSON array, `null` when there are none (as Velero encodes an
    /// empty slice).
    pub fn pvb_file(items: &[Value]) -> Vec<u8> {
        if items.is_empty() { gzip_json(&Value::Null) } else { gzip_json(&Value::Array(items.to_vec())) }
    }

    /// `<name>-resource-list.json.gz` listing `pods` in `namespace`.
    pub fn resource_list_file(namespace: &str, pods: &[&str]) -> Vec<u8> {
        let pods: Vec<String> = pods.iter().map(|p| format!("{namespace}/{p}")).collect();
        gzip_json(&json!({"v1/Namespace": [namespace], "v1/Pod": pods}))
    }

    /// Compact JSON plus a newline in a gzip stream, as Go's `json.NewEncoder(gzip).Encode` writes it.
    pub fn gzip_json(value: &Value) -> Vec<u8> {
        let mut text = serde_json::to_vec(value).expect("serialize JSON");
        text.push(b'\n');
        gzip(&text)
    }

    pub fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(bytes).expect("gzip");
        encoder.finish().expect("gzip")
    }
}

/// A pager wrapper that records every `list_paginated` call and fails the ones a rule picks.
pub mod faults {
    use std::sync::{Arc, Mutex};

    use async_trait::async_trait;
    use object_store::list::{PaginatedListOptions, PaginatedListResult, PaginatedListStore};

    use ferry::bucket::Store;

    /// One `list_paginated` call.
    #[derive(Debug, Clone)]
    pub struct Call {
        /// 1-based among calls of the same kind (with a delimiter, or without).
        pub nth: usize,
        pub delimiter: bool,
        pub prefix: Option<String>,
        pub offset: Option<String>,
        /// Whether the call continued a listing (had a page token).
        pub continued: bool,
        pub failed: bool,
        /// Objects and common prefixes the page returned.
        pub objects: usize,
        pub prefixes: usize,
        /// The page's last object key, if any.
        pub last_object: Option<String>,
    }

    #[derive(Debug, Default)]
    pub struct CallLog {
        calls: Mutex<Vec<Call>>,
    }

    impl CallLog {
        pub fn calls(&self) -> Vec<Call> {
            self.calls.lock().unwrap().clone()
        }

        pub fn delimited(&self) -> Vec<Call> {
            self.calls().into_iter().filter(|c| c.delimiter).collect()
        }

        pub fn undelimited(&self) -> Vec<Call> {
            self.calls().into_iter().filter(|c| !c.delimiter).collect()
        }
    }

    type Rule = Box<dyn Fn(&Call) -> bool + Send + Sync>;

    struct FaultyPager {
        inner: Arc<dyn PaginatedListStore>,
        fail: Rule,
        log: Arc<CallLog>,
    }

    /// Wraps `store.pager` (which must be set) so that calls for which `fail` returns true fail with a
    /// `Generic` error instead of reaching the store. Every call is recorded in the returned log.
    pub fn wrap_pager(store: Store, fail: impl Fn(&Call) -> bool + Send + Sync + 'static) -> (Store, Arc<CallLog>) {
        let inner = store.pager.clone().expect("the store lists page by page (S3)");
        let log = Arc::new(CallLog::default());
        let pager = FaultyPager { inner, fail: Box::new(fail), log: log.clone() };
        (Store { pager: Some(Arc::new(pager)), ..store }, log)
    }

    /// Records calls without failing any.
    pub fn record_pager(store: Store) -> (Store, Arc<CallLog>) {
        wrap_pager(store, |_| false)
    }

    #[derive(Debug, thiserror::Error)]
    #[error("injected failure of list call {0:?}")]
    struct Injected(String);

    #[async_trait]
    impl PaginatedListStore for FaultyPager {
        async fn list_paginated(
            &self,
            prefix: Option<&str>,
            opts: PaginatedListOptions,
        ) -> object_store::Result<PaginatedListResult> {
            let index = {
                let mut calls = self.log.calls.lock().unwrap();
                let delimiter = opts.delimiter.is_some();
                let mut call = Call {
                    nth: calls.iter().filter(|c| c.delimiter == delimiter).count() + 1,
                    delimiter,
                    prefix: prefix.map(str::to_string),
                    offset: opts.offset.clone(),
                    continued: opts.page_token.is_some(),
                    failed: false,
                    objects: 0,
                    prefixes: 0,
                    last_object: None,
                };
                call.failed = (self.fail)(&call);
                calls.push(call);
                calls.len() - 1
            };
            let call = self.log.calls.lock().unwrap()[index].clone();
            if call.failed {
                return Err(object_store::Error::Generic {
                    store: "FaultyPager",
                    source: Box::new(Injected(format!("{call:?}"))),
                });
            }
            let result = self.inner.list_paginated(prefix, opts).await?;
            let mut calls = self.log.calls.lock().unwrap();
            calls[index].objects = result.result.objects.len();
            calls[index].prefixes = result.result.common_prefixes.len();
            calls[index].last_object = result.result.objects.last().map(|m| m.location.to_string());
            Ok(result)
        }
    }
}
