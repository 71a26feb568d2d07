//! The agent's cluster, through kube-rs: the kinds ferry touches as `DynamicObject`s (their CRDs belong to
//! Velero and OADP, so no typed structs are needed), objects created with field manager `ferry`, ferry's own
//! objects re-applied with server-side apply, and events.k8s.io Events recorded about them.

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference as KubeObjectRef;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams, Preconditions};
use kube::core::GroupVersionKind;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::Value;

use super::cluster_api::{ApiError, ClusterApi};
use crate::grpc::proto::ObjectRef;

/// The field manager of everything ferry writes.
pub const FIELD_MANAGER: &str = "ferry";

/// The plural resource name of a kind ferry reads or writes.
pub fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    // Kubernetes' own rule for the kinds ferry meets: a consonant and `y` → `ies` (BackupRepository).
    match lower.strip_suffix('y') {
        Some(stem) if !stem.ends_with(['a', 'e', 'i', 'o', 'u']) => format!("{stem}ies"),
        _ => format!("{lower}s"),
    }
}

pub fn api_resource(group: &str, version: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural(kind))
}

pub struct KubeApi {
    client: Client,
    recorder: Recorder,
}

impl KubeApi {
    pub fn new(client: Client) -> Self {
        let reporter = Reporter { controller: "ferry-agent".into(), instance: std::env::var("POD_NAME").ok() };
        Self { recorder: Recorder::new(client.clone(), reporter), client }
    }

    fn api(&self, r: &ObjectRef) -> Api<DynamicObject> {
        let resource = api_resource(&r.group, &r.version, &r.kind);
        if r.namespace.is_empty() {
            Api::all_with(self.client.clone(), &resource)
        } else {
            Api::namespaced_with(self.client.clone(), &r.namespace, &resource)
        }
    }
}

/// Retries the API server's "slow down" — 429 (API Priority and Fairness, or a client rate limit in front of it)
/// and 503 — with jittered exponential backoff, up to about 6 s in all; any other outcome returns at once.
async fn with_backoff<T, F, Fut>(call: F) -> Result<T, kube::Error>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut delay = Duration::from_millis(100);
    for _ in 0..6 {
        match call().await {
            Err(kube::Error::Api(status)) if status.code == 429 || status.code == 503 => {
                let jitter = delay.mul_f64(0.5 * crate::grpc::backoff::unit_random());
                tracing::debug!(
                    code = status.code,
                    delay_ms = (delay + jitter).as_millis() as u64,
                    "API server asks to slow down"
                );
                tokio::time::sleep(delay + jitter).await;
                delay *= 2;
            }
            other => return other,
        }
    }
    call().await
}

fn api_error(e: kube::Error) -> ApiError {
    match &e {
        kube::Error::Api(status) if status.code == 409 && status.reason == "AlreadyExists" => ApiError::AlreadyExists,
        kube::Error::Api(status) if status.code == 404 => ApiError::NotFound,
        // A failed UID/resourceVersion precondition is a 409 Conflict.
        kube::Error::Api(status) if status.code == 409 => ApiError::PreconditionFailed(status.message.clone()),
        kube::Error::Api(status) => ApiError::Other(format!("{} ({}): {}", status.reason, status.code, status.message)),
        _ => ApiError::Other(e.to_string()),
    }
}

fn to_value(object: DynamicObject) -> Result<Value, ApiError> {
    serde_json::to_value(object).map_err(|e| ApiError::Other(e.to_string()))
}

#[async_trait::async_trait]
impl ClusterApi for KubeApi {
    async fn get(&self, r: &ObjectRef) -> Result<Option<Value>, ApiError> {
        let api = self.api(r);
        match with_backoff(|| api.get_opt(&r.name)).await.map_err(api_error)? {
            Some(object) => Ok(Some(to_value(object)?)),
            None => Ok(None),
        }
    }

    async fn create(&self, r: &ObjectRef, object: &Value) -> Result<Value, ApiError> {
        let object: DynamicObject =
            serde_json::from_value(object.clone()).map_err(|e| ApiError::Other(e.to_string()))?;
        let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        let api = self.api(r);
        to_value(with_backoff(|| api.create(&params, &object)).await.map_err(api_error)?)
    }

    async fn delete(&self, r: &ObjectRef, uid: &str, resource_version: &str) -> Result<(), ApiError> {
        let preconditions =
            Preconditions { uid: Some(uid.to_string()), resource_version: Some(resource_version.to_string()) };
        // Background: the API server's garbage collector removes what the object owns (a Backup's PVBs).
        let params = DeleteParams { preconditions: Some(preconditions), ..DeleteParams::background() };
        let api = self.api(r);
        with_backoff(|| api.delete(&r.name, &params)).await.map_err(api_error)?;
        Ok(())
    }

    async fn event(&self, about: &ObjectRef, uid: Option<&str>, reason: &str, note: &str, warning: bool) {
        let api_version =
            if about.group.is_empty() { about.version.clone() } else { format!("{}/{}", about.group, about.version) };
        let reference = KubeObjectRef {
            api_version: Some(api_version),
            kind: Some(about.kind.clone()),
            name: Some(about.name.clone()),
            // An object that does not exist (a refused backup) is still named; its Event lives in the same
            // namespace (or `default` for cluster-scoped objects, as kubectl does).
            namespace: Some(if about.namespace.is_empty() { "default".into() } else { about.namespace.clone() }),
            uid: uid.map(str::to_string),
            ..Default::default()
        };
        // Event notes are limited to 1 kB.
        let note: String = note.chars().take(1000).collect();
        let event = Event {
            type_: if warning { EventType::Warning } else { EventType::Normal },
            reason: reason.into(),
            note: Some(note),
            action: "Materialize".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(error = %e, %reason, object = %about.name, "could not record an Event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::plural;

    #[test]
    fn plurals_as_the_api_server_names_them() {
        for (kind, resource) in [
            ("Namespace", "namespaces"),
            ("Backup", "backups"),
            ("PodVolumeBackup", "podvolumebackups"),
            ("BackupRepository", "backuprepositories"),
            ("NonAdminBackupStorageLocation", "nonadminbackupstoragelocations"),
            ("Gateway", "gateways"),
        ] {
            assert_eq!(plural(kind), resource);
        }
    }
}
