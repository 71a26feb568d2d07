//! Jittered exponential backoff for reconnecting agents: the delay doubles from `min` up to `max`, and each
//! wait is drawn uniformly from [delay/2, delay] so that a fleet of agents cut off at once (a coordinator
//! restart) does not reconnect in lockstep. Pure apart from the jitter source, which is passed in.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    pub min: Duration,
    pub max: Duration,
    current: Duration,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Self {
        let min = min.max(Duration::from_millis(1));
        Self { min, max: max.max(min), current: min }
    }

    /// The next wait, given a random number in [0, 1); the following delay doubles up to `max`.
    pub fn next_delay(&mut self, unit_random: f64) -> Duration {
        let ceiling = self.current;
        self.current = (self.current * 2).min(self.max);
        let jitter = unit_random.clamp(0.0, 1.0);
        ceiling.mul_f64(0.5 + 0.5 * jitter)
    }

    /// After a healthy session, start from `min` again.
    pub fn reset(&mut self) {
        self.current = self.min;
    }
}

impl Default for Backoff {
    /// 200 ms doubling to 30 s.
    fn default() -> Self {
        Self::new(Duration::from_millis(200), Duration::from_secs(30))
    }
}

/// A random number in [0, 1) without a dependency: the standard library's randomly keyed hasher over a
/// counter. Good enough to spread reconnects, not for anything secret.
pub fn unit_random() -> f64 {
    use std::hash::{BuildHasher, RandomState};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let bits = RandomState::new().hash_one(n);
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_maximum_with_jitter_in_the_upper_half() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(1000));
        let ceilings: Vec<_> = (0..6).map(|_| b.next_delay(0.999_999)).map(|d| d.as_millis()).collect();
        assert_eq!(ceilings, [99, 199, 399, 799, 999, 999]);
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(1000));
        assert_eq!(b.next_delay(0.0), Duration::from_millis(50));
        b.reset();
        assert_eq!(b.next_delay(0.0), Duration::from_millis(50));
    }

    #[test]
    fn random_numbers_are_in_range_and_vary() {
        let xs: Vec<f64> = (0..100).map(|_| unit_random()).collect();
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
        assert!(xs.windows(2).any(|w| w[0] != w[1]));
    }
}
