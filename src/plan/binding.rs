//! Which BackupStorageLocation on a cluster reads a location: one on the same bucket and prefix (and a
//! compatible provider), or the one config names.

use crate::catalog::Location;
use crate::model::{BackupStorageLocation, Object};
use crate::resolve::Refusal;

use super::ClusterState;

/// `Ok(None)` when the cluster has no BSL on the location (it cannot read it, and gets nothing from it).
pub fn storage_location_for<'c>(
    cluster: &'c ClusterState,
    location: &Location,
) -> Result<Option<&'c Object<BackupStorageLocation>>, Refusal> {
    let in_velero_ns = |b: &&Object<BackupStorageLocation>| b.namespace() == cluster.velero_namespace;
    let bsls = || cluster.inventory.storage_locations.iter().filter(in_velero_ns);
    if let Some(named) = cluster.storage_locations.get(&location.name) {
        let Some(bsl) = bsls().find(|b| b.name() == named) else {
            return Err(Refusal(format!(
                "config names BSL {named:?} for location {:?}, but cluster {} has no such BSL in {}",
                location.name, cluster.name, cluster.velero_namespace
            )));
        };
        if !reads(bsl, location) {
            return Err(Refusal(format!(
                "BSL {named:?} points at bucket {:?} prefix {:?}, not location {:?} (bucket {:?} prefix {:?})",
                bsl.view.bucket(),
                bsl.view.prefix(),
                location.name,
                location.bucket,
                location.prefix
            )));
        }
        return Ok(Some(bsl));
    }
    // Several BSLs on one bucket+prefix: Velero syncs the default one first; then the first by name.
    let mut matching: Vec<_> = bsls().filter(|b| reads(b, location)).collect();
    matching.sort_by_key(|b| (!b.view.spec.default, b.name().to_string()));
    Ok(matching.into_iter().next())
}

fn reads(bsl: &Object<BackupStorageLocation>, location: &Location) -> bool {
    bsl.view.bucket() == location.bucket
        && bsl.view.prefix() == location.prefix.trim_matches('/')
        && location.kind.serves_provider(&bsl.view.spec.provider)
}
