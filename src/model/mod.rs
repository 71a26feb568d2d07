//! Domain types: typed views of the Velero and OADP objects ferry reads and writes, and their well-known keys.

pub mod backup;
pub mod compressed_json;
#[cfg(test)]
mod fuzz;
pub mod inventory;
pub mod inventory_updates;
pub mod json_meta;
pub mod labels;
pub mod meta;
pub mod names;
pub mod non_admin_backup;
pub mod object;
pub mod ownership;
pub mod pod_volume_backup;
pub mod provenance;
pub mod served_apis;
pub mod storage_location;
pub mod string_map;

pub use backup::{Backup, BackupPhase};
pub use inventory::{Inventory, InventoryObject};
pub use meta::ObjectMeta;
pub use non_admin_backup::NonAdminBackup;
pub use object::{Kind, Object};
pub use pod_volume_backup::PodVolumeBackup;
pub use provenance::Provenance;
pub use served_apis::ServedApis;
pub use storage_location::BackupStorageLocation;
pub use string_map::StringMap;
