//! The memory budget of bucket reads: the bytes that all concurrent fetches of a process (every location's
//! loader shares one budget) may hold at once while downloading, inflating and compacting objects.
//!
//! The per-object caps ([`crate::catalog::decode::DecodeLimits`]) stop one gzip bomb; they do not stop 32 at
//! once (32 × 256 MiB is far past the helm chart's 1 GiB limit). Each read reserves its worst case here before
//! it downloads and holds it until its result is compact. A read whose worst case exceeds the whole budget
//! reserves the whole budget: it waits for the others and then runs alone, so it is neither refused nor
//! deadlocked (tokio's semaphore is fair, so it is not starved either). No read holds a reservation while it
//! waits for another one.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Budget unless configured otherwise (`catalog.maxBytesInFlight`): a quarter of the chart's 1 GiB limit,
/// leaving the rest to the catalogs (~2 KB a backup), the plans and the agents' streams.
pub const DEFAULT_MAX_BYTES_IN_FLIGHT: u64 = 256 * 1024 * 1024;

/// Permits are KiB: a semaphore counts in `u32` per acquisition, and a byte-exact budget is not needed.
const UNIT: u64 = 1024;

/// A shared budget; clones share it.
#[derive(Debug, Clone)]
pub struct ReadBudget {
    permits: Arc<Semaphore>,
    total_units: u32,
}

/// Bytes reserved; given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    _permit: Option<OwnedSemaphorePermit>,
    /// The bytes asked for (before clamping to the budget).
    pub bytes: u64,
}

impl ReadBudget {
    pub fn new(total_bytes: u64) -> Self {
        let units = total_bytes.div_ceil(UNIT).clamp(1, u64::from(u32::MAX >> 1)) as u32;
        Self { permits: Arc::new(Semaphore::new(units as usize)), total_units: units }
    }

    /// The whole budget in bytes.
    pub fn total_bytes(&self) -> u64 {
        u64::from(self.total_units) * UNIT
    }

    /// Bytes free now (for tests and metrics).
    pub fn available_bytes(&self) -> u64 {
        self.permits.available_permits() as u64 * UNIT
    }

    /// Waits until `bytes` (at most the whole budget) are free and reserves them.
    pub async fn reserve(&self, bytes: u64) -> Reservation {
        let units = bytes.div_ceil(UNIT).clamp(1, u64::from(self.total_units)) as u32;
        // The semaphore is never closed, so acquiring fails never; were it closed, reading unbudgeted beats
        // stopping every refresh.
        let permit = self.permits.clone().acquire_many_owned(units).await.ok();
        Reservation { _permit: permit, bytes }
    }
}

impl Default for ReadBudget {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_BYTES_IN_FLIGHT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn reservations_wait_for_each_other_and_an_oversized_one_runs_alone() {
        let budget = ReadBudget::new(10 * 1024);
        let a = budget.reserve(6 * 1024).await;
        assert_eq!(budget.available_bytes(), 4 * 1024);
        // 6 KiB more does not fit beside `a`.
        let waiting = tokio::time::timeout(Duration::from_millis(50), budget.reserve(6 * 1024)).await;
        assert!(waiting.is_err(), "a reservation past the budget waits");
        drop(a);
        // Larger than the whole budget: it takes all of it, once everything else is given back.
        let huge = budget.reserve(1 << 40).await;
        assert_eq!((budget.available_bytes(), huge.bytes), (0, 1 << 40));
        let small = tokio::time::timeout(Duration::from_millis(50), budget.reserve(1)).await;
        assert!(small.is_err(), "nothing runs beside the oversized read");
        drop(huge);
        assert_eq!(budget.available_bytes(), budget.total_bytes());
    }
}
