//! Reading recorded inventories (`kubectl get -o json` output) for `ferry plan`.

use std::path::Path;

use anyhow::Context;

use ferry::model::Inventory;

/// Reads a `kubectl get … -o json` file, or every `*.json` file of a folder (sorted by name).
pub fn read(path: &Path) -> anyhow::Result<Inventory> {
    let mut inventory = Inventory::default();
    let files = if path.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(path)
            .with_context(|| format!("cannot read inventory folder {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_path_buf()]
    };
    for file in files {
        let text = std::fs::read(&file).with_context(|| format!("cannot read inventory {}", file.display()))?;
        let doc = serde_json::from_slice(&text).with_context(|| format!("inventory {} is not JSON", file.display()))?;
        inventory.add_document(doc).with_context(|| format!("inventory {}", file.display()))?;
    }
    Ok(inventory)
}
