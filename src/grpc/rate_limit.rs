//! A token bucket for one agent stream: it may send `rate` messages per second on average, and a burst of as
//! many at once. The coordinator does not drop or refuse a message over the rate; it waits before reading the
//! next one, so HTTP/2 flow control slows the sender down and every other stream keeps its share. Pure: the
//! caller passes the time.

use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    pub fn new(rate_per_second: u32, now: Instant) -> Self {
        let rate = f64::from(rate_per_second.max(1));
        Self { rate, burst: rate, tokens: rate, last: now }
    }

    /// Takes one token: how long the caller must wait before acting on the message (zero when within the rate).
    pub fn take(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst) - 1.0;
        if self.tokens >= 0.0 { Duration::ZERO } else { Duration::from_secs_f64(-self.tokens / self.rate) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_the_rate_holds() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(10, t0);
        for _ in 0..10 {
            assert_eq!(bucket.take(t0), Duration::ZERO, "the burst");
        }
        assert_eq!(bucket.take(t0), Duration::from_millis(100), "the 11th waits one interval");
        assert_eq!(bucket.take(t0), Duration::from_millis(200));
        // After the waits have passed, the bucket is even again.
        let later = t0 + Duration::from_millis(200);
        assert_eq!(bucket.take(later), Duration::from_millis(100));
        // A quiet second refills it (to the burst, not beyond).
        let quiet = later + Duration::from_secs(10);
        for _ in 0..10 {
            assert_eq!(bucket.take(quiet), Duration::ZERO);
        }
        assert!(bucket.take(quiet) > Duration::ZERO);
    }
}
