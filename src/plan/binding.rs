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

/// Whether the config grants `cluster` the location (an agent's BSL alone never does).
pub fn is_granted(cluster: &ClusterState, location: &Location) -> bool {
    cluster.granted_locations.contains(&location.name)
}

/// docs/design.md §3 rule 6, for a cluster that has a BSL on the location: it reads the location only if the config
/// grants it, and — when another cluster writes there — only through a `ReadOnly` BSL. A read-write BSL (the
/// default when `accessMode` is unset) lets the reader's Velero delete the writer's data: its GC of expired
/// backups, `velero backup delete`, or a tenant's NAB `deleteBackup: true` (velero #5509, #375).
pub fn may_read(
    cluster: &ClusterState,
    location: &Location,
    bsl: &Object<BackupStorageLocation>,
) -> Result<(), Refusal> {
    if !is_granted(cluster, location) {
        return Err(Refusal(format!(
            "BSL {:?} on cluster {} points at location {:?}, which the config does not grant that cluster; nothing \
             is read from it (add {:?} to clusters[].locations of {} to grant it)",
            bsl.name(),
            cluster.name,
            location.name,
            location.name,
            cluster.name
        )));
    }
    let foreign = location.source_cluster != cluster.name;
    if foreign && bsl.view.is_read_write() && !cluster.allow_read_write_locations {
        let mode = if bsl.view.spec.access_mode.is_empty() { "unset (ReadWrite)" } else { &bsl.view.spec.access_mode };
        return Err(Refusal(format!(
            "BSL {:?} reads location {:?}, written by cluster {}, with accessMode {mode}: Velero on {} could delete \
             {}'s backups from the bucket (garbage collection of expired backups, `velero backup delete`, a \
             NonAdminBackup with deleteBackup); set spec.accessMode: ReadOnly on that BSL (or, accepting the risk, \
             allowReadWriteLocations: true for {} in the config)",
            bsl.name(),
            location.name,
            location.source_cluster,
            cluster.name,
            location.source_cluster,
            cluster.name
        )));
    }
    Ok(())
}

/// Whether `bsl` points at `location` (bucket, prefix and a compatible provider).
pub fn reads(bsl: &Object<BackupStorageLocation>, location: &Location) -> bool {
    bsl.view.bucket() == location.bucket
        && bsl.view.prefix() == location.prefix.trim_matches('/')
        && location.kind.serves_provider(&bsl.view.spec.provider)
}
