//! Applying a plan to an inventory, as an agent would: used to check that planning is idempotent.

use crate::model::{Inventory, Object};

use super::{Action, ClusterPlan};

/// Adds every `create` item's object to `inventory`, giving Backups a UID the way the API server would
/// (`uid-<namespace>-<name>`, deterministic for tests). Returns how many objects were created.
pub fn apply(plan: &ClusterPlan, inventory: &mut Inventory) -> usize {
    let mut created = 0;
    for item in plan.items.iter().filter(|i| i.action == Action::Create) {
        let Some(object) = &item.object else { continue };
        let mut object = serde_json::Value::clone(object);
        object["metadata"]["uid"] = format!("uid-{}-{}", item.namespace, item.name).into();
        let added = match item.kind.as_str() {
            "Backup" => Object::from_value(object).map(|o| inventory.backups.push(o)).is_ok(),
            "PodVolumeBackup" => Object::from_value(object).map(|o| inventory.pod_volume_backups.push(o)).is_ok(),
            "NonAdminBackup" => Object::from_value(object).map(|o| inventory.non_admin_backups.push(o)).is_ok(),
            _ => false,
        };
        created += usize::from(added);
    }
    created
}
