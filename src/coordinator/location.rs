//! A location as the coordinator holds it: its latest catalog and the health of its last refresh. Pure.

use std::sync::Arc;
use std::time::SystemTime;

use crate::catalog::{Listing, LocationCatalog};

/// A location's latest catalog and health.
#[derive(Debug, Clone)]
pub struct LocationState {
    pub name: String,
    pub source_cluster: String,
    /// Read without checking the server's certificate (`insecureSkipTLSVerify`): shown in the status and as
    /// `ferry_location_insecure_tls`, so it is never on silently.
    pub insecure_tls: bool,
    /// The last catalog read successfully; kept through failed refreshes.
    pub catalog: Option<Arc<LocationCatalog>>,
    /// The error of the last refresh, if it failed.
    pub error: Option<String>,
    pub last_refresh: Option<SystemTime>,
}

impl LocationState {
    /// Read at least once, the last refresh succeeded, and its listing was complete.
    pub fn is_complete(&self) -> bool {
        self.error.is_none() && self.catalog.as_ref().is_some_and(|c| c.listing == Listing::Complete)
    }
}
