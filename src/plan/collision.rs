//! Writer provenance: which clusters hold a read-write BSL on a location, and whether that contradicts the
//! config's `sourceCluster`. Two Velero instances writing into one bucket prefix overwrite and garbage-collect
//! each other's backups (ACM's BackupCollision, velero #627), so nothing read from there can be trusted. Pure.

use std::collections::BTreeMap;

pub use crate::catalog::Collision;
use crate::catalog::Location;

use super::ClusterState;
use super::binding::reads;

/// Cluster name → the names of its read-write BSLs on one location.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Writers(pub BTreeMap<String, Vec<String>>);

impl Writers {
    pub fn clusters(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Every cluster with a read-write BSL (accessMode `ReadWrite` or unset) in its Velero namespace on `location`.
/// Rule 6 refusing such a BSL does not make its cluster any less a writer: its Velero writes and deletes there
/// all the same. A cluster with `allowReadWriteLocations` is a reader by config (it accepted that risk), so its
/// read-write BSLs on other clusters' locations are not counted.
pub fn writers<'c>(location: &Location, clusters: impl IntoIterator<Item = &'c ClusterState>) -> Writers {
    let mut writers = BTreeMap::new();
    for cluster in clusters {
        if cluster.allow_read_write_locations && cluster.name != location.source_cluster {
            continue;
        }
        let mut bsls: Vec<String> = cluster
            .inventory
            .storage_locations
            .iter()
            .filter(|b| b.namespace() == cluster.velero_namespace && b.view.is_read_write() && reads(b, location))
            .map(|b| b.name().to_string())
            .collect();
        if !bsls.is_empty() {
            bsls.sort();
            writers.insert(cluster.name.clone(), bsls);
        }
    }
    Writers(writers)
}

/// A collision when more than one cluster writes to the location, or one other than its `sourceCluster`. No
/// writer seen (the source's agent has not reported yet) is none.
pub fn collision(location: &Location, writers: &Writers) -> Option<Collision> {
    let names: Vec<String> = writers.clusters().map(str::to_string).collect();
    let listed = || {
        writers
            .0
            .iter()
            .map(|(cluster, bsls)| format!("{cluster} (BSL {})", bsls.join(", ")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let what = match names.as_slice() {
        [] => return None,
        [only] if *only == location.source_cluster => return None,
        [_] => format!("is written by {}, not by its sourceCluster {}", listed(), location.source_cluster),
        _ => format!("is written by {} clusters: {}", names.len(), listed()),
    };
    let reason = format!(
        "collision: location {:?} (bucket {:?} prefix {:?}) {what}; their Velero instances overwrite and delete \
         each other's backups, so nothing new is materialized from it and nothing is retired until only {} \
         writes there: set spec.accessMode: ReadOnly on every other cluster's BSL, or give each writer its own \
         prefix",
        location.name, location.bucket, location.prefix, location.source_cluster
    );
    Some(Collision { writers: names, reason })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::tests::{inventory, location};
    use super::*;

    fn bsl(name: &str, bucket: &str, prefix: &str, mode: Option<&str>) -> Value {
        let mut spec = json!({"provider": "aws", "objectStorage": {"bucket": bucket, "prefix": prefix}});
        if let Some(mode) = mode {
            spec["accessMode"] = json!(mode);
        }
        json!({"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
            "metadata": {"name": name, "namespace": "velero"}, "spec": spec})
    }

    fn cluster(name: &str, bsls: Vec<Value>) -> ClusterState {
        ClusterState {
            name: name.into(),
            velero_namespace: "velero".into(),
            inventory: inventory(bsls),
            ..Default::default()
        }
    }

    fn on_location(mode: Option<&str>) -> Value {
        bsl("default", "velero-backups", "velero", mode)
    }

    #[test]
    fn writers_and_collisions() {
        let loc = location(); // bucket velero-backups, prefix velero, sourceCluster cluster-a
        let rw = Some("ReadWrite");
        let ro = Some("ReadOnly");
        let cases: Vec<(&str, Vec<ClusterState>, Vec<&str>, bool)> = vec![
            (
                "one writer, the source: fine",
                vec![cluster("cluster-a", vec![on_location(rw)])],
                vec!["cluster-a"],
                false,
            ),
            (
                "the writer is not the source",
                vec![cluster("cluster-b", vec![on_location(rw)])],
                vec!["cluster-b"],
                true,
            ),
            (
                "two writers",
                vec![cluster("cluster-a", vec![on_location(rw)]), cluster("cluster-b", vec![on_location(rw)])],
                vec!["cluster-a", "cluster-b"],
                true,
            ),
            (
                "a ReadOnly reader is no writer",
                vec![cluster("cluster-a", vec![on_location(rw)]), cluster("cluster-b", vec![on_location(ro)])],
                vec!["cluster-a"],
                false,
            ),
            (
                "accessMode unset is ReadWrite",
                vec![cluster("cluster-a", vec![on_location(None)]), cluster("cluster-b", vec![on_location(None)])],
                vec!["cluster-a", "cluster-b"],
                true,
            ),
            (
                "a BSL on another prefix or bucket is not on the location",
                vec![
                    cluster("cluster-a", vec![on_location(rw)]),
                    cluster("cluster-b", vec![bsl("own", "velero-backups", "velero-b", rw)]),
                    cluster("cluster-c", vec![bsl("own", "other-bucket", "velero", None)]),
                ],
                vec!["cluster-a"],
                false,
            ),
            ("no writer seen (source not connected): no collision", vec![cluster("cluster-b", vec![])], vec![], false),
        ];
        for (case, clusters, expected, collides) in cases {
            let found = writers(&loc, &clusters);
            assert_eq!(found.clusters().collect::<Vec<_>>(), expected, "{case}");
            let verdict = collision(&loc, &found);
            assert_eq!(verdict.is_some(), collides, "{case}: {verdict:?}");
            if let Some(c) = verdict {
                assert_eq!(c.writers, expected, "{case}");
                assert!(c.reason.starts_with("collision: location \"shared\""), "{case}: {}", c.reason);
                assert!(expected.iter().all(|w| c.reason.contains(w)), "{case}: names its writers: {}", c.reason);
            }
        }
    }

    #[test]
    fn a_bsl_outside_the_velero_namespace_or_of_an_opted_out_reader_is_no_writer() {
        let loc = location();
        let mut elsewhere = on_location(None);
        elsewhere["metadata"]["namespace"] = json!("tenant");
        let mut opted_out = cluster("cluster-b", vec![on_location(None)]);
        opted_out.allow_read_write_locations = true;
        let clusters =
            [cluster("cluster-a", vec![on_location(None)]), cluster("cluster-c", vec![elsewhere]), opted_out];
        assert_eq!(writers(&loc, &clusters).clusters().collect::<Vec<_>>(), ["cluster-a"]);
        assert_eq!(collision(&loc, &writers(&loc, &clusters)), None);
    }

    #[test]
    fn a_location_in_collision_materializes_nothing_new_and_leaves_what_exists() {
        use super::super::tests::{admin_backup, catalog, entry, identity, now};
        use super::super::{Action, PlanOptions, plan_cluster, simulate};
        let options = PlanOptions { now: now(), ..Default::default() };
        let mut reader = cluster("cluster-b", vec![on_location(Some("ReadOnly"))]);
        reader.granted_locations = ["shared".to_string()].into();
        reader.live = true;
        let first = catalog(vec![entry(admin_backup("daily-1", "Completed"), 1)]);
        for _ in 0..3 {
            let plan = plan_cluster(&first, &reader, &identity(), &options);
            simulate::apply(&plan, &mut reader.inventory);
        }
        assert_eq!((reader.inventory.backups.len(), reader.inventory.pod_volume_backups.len()), (1, 1));
        // Two more backups arrive while cluster-c writes there too.
        let mut collided = catalog(vec![
            entry(admin_backup("daily-1", "Completed"), 1),
            entry(admin_backup("daily-2", "Completed"), 1),
            entry(admin_backup("daily-3", "Completed"), 0),
        ]);
        let clusters = [cluster("cluster-a", vec![on_location(None)]), cluster("cluster-c", vec![on_location(None)])];
        collided[0].collision = collision(&location(), &writers(&location(), &clusters));
        let items = plan_cluster(&collided, &reader, &identity(), &options).items;
        assert_eq!(items.len(), 1, "one item for the whole location: {items:#?}");
        let item = &items[0];
        assert_eq!(
            (item.action, item.kind.as_str(), item.name.as_str()),
            (Action::Refuse, "BackupStorageLocation", "default")
        );
        let reason = item.reason.as_deref().unwrap_or_default();
        assert!(
            reason.contains("cluster-a") && reason.contains("cluster-c") && reason.contains("3 backups"),
            "{reason}"
        );
        // Nothing ferry made from it is retired, nor anything else touched: the existing objects stay.
        let before = reader.inventory.clone();
        simulate::apply(&plan_cluster(&collided, &reader, &identity(), &options), &mut reader.inventory);
        assert_eq!(reader.inventory, before);
        // Resolved: planning resumes where it stopped.
        collided[0].collision = None;
        let resumed = plan_cluster(&collided, &reader, &identity(), &options);
        assert!(resumed.count(Action::Create) >= 2, "{:#?}", resumed.items);
    }

    #[test]
    fn the_reason_names_each_writers_bsls() {
        let loc = location();
        let clusters = [
            cluster("cluster-a", vec![on_location(None)]),
            cluster("cluster-b", vec![bsl("shared-rw", "velero-backups", "/velero/", Some("ReadWrite"))]),
        ];
        let c = collision(&loc, &writers(&loc, &clusters)).expect("collision");
        assert!(c.reason.contains("cluster-a (BSL default), cluster-b (BSL shared-rw)"), "{}", c.reason);
        assert!(c.reason.contains("ReadOnly") && c.reason.contains("own prefix"), "{}", c.reason);
    }
}
