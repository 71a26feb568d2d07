//! A location: one bucket + prefix in Velero's layout, written by one source cluster.

/// Which kind of store holds a location; used to match a cluster's BSL `provider`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    S3,
    Gcs,
    Azure,
    /// `file://` and `memory://`: test and demo stores, matched by bucket and prefix only.
    Local,
}

impl StoreKind {
    /// Whether a BSL with Velero `provider` can read a store of this kind. Unknown providers (custom
    /// plugins) are given the benefit of the doubt; bucket and prefix must still match.
    pub fn serves_provider(self, provider: &str) -> bool {
        let p = provider.rsplit('/').next().unwrap_or(provider).to_ascii_lowercase();
        let known_other = |mine: &[&str]| {
            let all = ["aws", "gcp", "azure"];
            all.contains(&p.as_str()) && !mine.contains(&p.as_str())
        };
        match self {
            StoreKind::S3 => !known_other(&["aws"]),
            StoreKind::Gcs => !known_other(&["gcp"]),
            StoreKind::Azure => !known_other(&["azure"]),
            StoreKind::Local => true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// How plans and status refer to it.
    pub name: String,
    pub kind: StoreKind,
    /// The bucket as the clusters' BSLs name it (`spec.objectStorage.bucket`).
    pub bucket: String,
    /// The BSL's `spec.objectStorage.prefix`, without surrounding `/`.
    pub prefix: String,
    /// The cluster whose Velero writes here.
    pub source_cluster: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers() {
        assert!(StoreKind::S3.serves_provider("aws"));
        assert!(StoreKind::S3.serves_provider("velero.io/aws"));
        assert!(!StoreKind::S3.serves_provider("gcp"));
        assert!(StoreKind::S3.serves_provider("example.com/ceph"));
        assert!(StoreKind::Azure.serves_provider("velero.io/azure"));
        assert!(!StoreKind::Gcs.serves_provider("azure"));
    }
}
