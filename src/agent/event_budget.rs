//! How many Warning Events the agent writes (a token bucket): a coordinator that changes its set's version on
//! every pass, or sends thousands of refused items, must not flood the API server's Events — each is recorded
//! once per version and item already, and at most this many per second over a burst. What is dropped is logged.

use std::time::Instant;

/// Warning Events in a burst.
pub const BURST: f64 = 200.0;
/// Warning Events per second after a burst.
pub const PER_SECOND: f64 = 5.0;

#[derive(Debug, Clone)]
pub struct EventBudget {
    tokens: f64,
    last: Option<Instant>,
    burst: f64,
    per_second: f64,
    /// Events dropped since the last [`EventBudget::take_dropped`].
    dropped: u64,
}

impl Default for EventBudget {
    fn default() -> Self {
        Self::new(BURST, PER_SECOND)
    }
}

impl EventBudget {
    pub fn new(burst: f64, per_second: f64) -> Self {
        Self { tokens: burst, last: None, burst, per_second, dropped: 0 }
    }

    /// Whether one more Event may be written at `now`.
    pub fn allow(&mut self, now: Instant) -> bool {
        if let Some(last) = self.last {
            let refill = now.saturating_duration_since(last).as_secs_f64() * self.per_second;
            self.tokens = (self.tokens + refill).min(self.burst);
        }
        self.last = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return true;
        }
        self.dropped += 1;
        false
    }

    /// How many were dropped since the last call.
    pub fn take_dropped(&mut self) -> u64 {
        std::mem::take(&mut self.dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_then_a_steady_rate() {
        let mut budget = EventBudget::new(3.0, 2.0);
        let t0 = Instant::now();
        assert_eq!((0..5).filter(|_| budget.allow(t0)).count(), 3, "the burst");
        assert_eq!(budget.take_dropped(), 2);
        assert!(budget.allow(t0 + Duration::from_millis(500)), "one refilled in half a second at 2/s");
        assert!(!budget.allow(t0 + Duration::from_millis(500)));
        let later = t0 + Duration::from_secs(60);
        assert_eq!((0..5).filter(|_| budget.allow(later)).count(), 3, "never more than the burst");
    }
}
