//! The coordinator's timing and limits, resolved from the config file and flags.

use std::time::Duration;

use crate::config::CoordinatorConfig;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Agents send a heartbeat this often.
    pub heartbeat_interval: Duration,
    /// A cluster is stale after this many intervals without a message from its agent.
    pub stale_after_missed: u32,
    /// How often each location is listed.
    pub catalog_refresh_interval: Duration,
    /// How long changes are collected before desired sets are recomputed.
    pub debounce: Duration,
    /// Every cluster is replanned at least this often.
    pub resync_interval: Duration,
    /// Largest gRPC message accepted or sent.
    pub max_message_bytes: usize,
    /// How long shutdown waits for streams to close before giving up on them.
    pub shutdown_grace: Duration,
    /// Longest a TLS handshake may take.
    pub tls_handshake_timeout: Duration,
    /// Most connections open at once.
    pub max_connections: usize,
    /// A connection is closed after this age (its agent reconnects with its current certificate).
    pub max_connection_age: Duration,
    /// Most inventory objects held for one cluster.
    pub max_inventory_items: usize,
    /// Messages per second one agent stream is served at, at most (beyond a burst of as many): a flooding
    /// agent is slowed down by HTTP/2 flow control, and every other stream keeps its share.
    pub max_messages_per_second: u32,
    /// One object built per pass for all clusters that get it (`coordinator.shareTemplates`).
    pub share_templates: bool,
}

impl Settings {
    pub fn from_config(config: &CoordinatorConfig) -> Self {
        Self {
            heartbeat_interval: config.heartbeat_interval,
            stale_after_missed: config.stale_after_missed_heartbeats,
            catalog_refresh_interval: config.catalog_refresh_interval,
            debounce: config.debounce,
            resync_interval: config.resync_interval,
            max_message_bytes: config.max_message_bytes,
            shutdown_grace: Duration::from_secs(3),
            tls_handshake_timeout: config.tls_handshake_timeout,
            max_connections: config.max_connections,
            max_connection_age: config.max_connection_age,
            max_inventory_items: config.max_inventory_items,
            max_messages_per_second: config.max_messages_per_second,
            share_templates: config.share_templates,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self::from_config(&CoordinatorConfig::default())
    }
}
