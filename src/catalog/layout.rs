//! Velero's object-storage layout: the one place that knows bucket keys (`pkg/persistence/object_store_layout.go`).
//! The catalog, the fixture writer and the tests all build and parse keys here.

/// The keys of one BSL root (`<prefix>/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The prefix with a trailing `/`, or empty.
    root: String,
}

/// The per-backup files ferry reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackupFile {
    /// `velero-backup.json`: plain JSON, its presence defines "the backup exists".
    Metadata,
    /// `<name>-podvolumebackups.json.gz`: gzip JSON array of PodVolumeBackups, or `null`.
    PodVolumeBackups,
    /// `<name>-resource-list.json.gz`: gzip JSON map `group/version/Kind` → `["ns/name", …]`.
    ResourceList,
    /// `<name>.tar.gz`: the resource tarball.
    Tarball,
    /// Anything else Velero writes (logs, results, volume snapshots, …).
    Other,
}

impl Layout {
    /// `prefix` as a BSL's `objectStorage.prefix`; surrounding `/` are trimmed, as Velero does.
    pub fn new(prefix: &str) -> Self {
        let trimmed = prefix.trim_matches('/');
        let root = if trimmed.is_empty() { String::new() } else { format!("{trimmed}/") };
        Self { root }
    }

    /// `<prefix>/backups/`, the directory Velero lists with delimiter `/` to find backups.
    pub fn backups_dir(&self) -> String {
        format!("{}backups/", self.root)
    }

    pub fn backup_dir(&self, backup: &str) -> String {
        format!("{}backups/{backup}/", self.root)
    }

    pub fn key(&self, backup: &str, file: BackupFile) -> String {
        let dir = self.backup_dir(backup);
        match file {
            BackupFile::Metadata => format!("{dir}velero-backup.json"),
            BackupFile::PodVolumeBackups => format!("{dir}{backup}-podvolumebackups.json.gz"),
            BackupFile::ResourceList => format!("{dir}{backup}-resource-list.json.gz"),
            BackupFile::Tarball => format!("{dir}{backup}.tar.gz"),
            BackupFile::Other => dir,
        }
    }

    /// Other files Velero writes for a backup, by suffix (`<name><suffix>`); used by the fixture writer.
    pub fn sibling_key(&self, backup: &str, suffix: &str) -> String {
        format!("{}{backup}{suffix}", self.backup_dir(backup))
    }

    /// Which backup and file a key under `backups/` belongs to. Keys nested deeper than one level are not
    /// Velero's and yield `None`.
    pub fn classify<'k>(&self, key: &'k str) -> Option<(&'k str, BackupFile)> {
        let rest = key.strip_prefix(&self.root)?.strip_prefix("backups/")?;
        let (backup, file) = rest.split_once('/')?;
        if backup.is_empty() || file.is_empty() || file.contains('/') {
            return None;
        }
        let kind = if file == "velero-backup.json" {
            BackupFile::Metadata
        } else {
            match file.strip_prefix(backup) {
                Some("-podvolumebackups.json.gz") => BackupFile::PodVolumeBackups,
                Some("-resource-list.json.gz") => BackupFile::ResourceList,
                Some(".tar.gz") => BackupFile::Tarball,
                _ => BackupFile::Other,
            }
        };
        Some((backup, kind))
    }

    /// The backup name of a common prefix returned by a delimiter listing of [`Self::backups_dir`].
    /// The backup folder a key is in (`<root>backups/<name>/…`, at any depth): what a delimiter listing of
    /// `backups/` names for it.
    pub fn folder_of_key<'k>(&self, key: &'k str) -> Option<&'k str> {
        let rest = key.strip_prefix(&self.root)?.strip_prefix("backups/")?;
        let (name, _) = rest.split_once('/')?;
        (!name.is_empty()).then_some(name)
    }

    pub fn backup_of_dir<'k>(&self, dir: &'k str) -> Option<&'k str> {
        let rest = dir.strip_prefix(&self.root)?.strip_prefix("backups/")?;
        let name = rest.strip_suffix('/').unwrap_or(rest);
        (!name.is_empty() && !name.contains('/')).then_some(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_velero() {
        let l = Layout::new("/velero/");
        assert_eq!(l.key("b1", BackupFile::Metadata), "velero/backups/b1/velero-backup.json");
        assert_eq!(l.key("b1", BackupFile::PodVolumeBackups), "velero/backups/b1/b1-podvolumebackups.json.gz");
        assert_eq!(l.key("b1", BackupFile::ResourceList), "velero/backups/b1/b1-resource-list.json.gz");
        assert_eq!(l.key("b1", BackupFile::Tarball), "velero/backups/b1/b1.tar.gz");
        assert_eq!(Layout::new("").backups_dir(), "backups/");
    }

    #[test]
    fn classify_inverts_key() {
        let l = Layout::new("p/q");
        for file in [BackupFile::Metadata, BackupFile::PodVolumeBackups, BackupFile::ResourceList, BackupFile::Tarball]
        {
            let key = l.key("daily-1", file);
            assert_eq!(l.classify(&key), Some(("daily-1", file)));
        }
        assert_eq!(l.classify("p/q/backups/b/b-logs.gz"), Some(("b", BackupFile::Other)));
        assert_eq!(l.classify("p/q/backups/b/x/y"), None);
        assert_eq!(l.classify("p/q/restores/b/x"), None);
        assert_eq!(l.backup_of_dir("p/q/backups/b/"), Some("b"));
    }
}
