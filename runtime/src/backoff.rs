//! Per-resource retry delays for reconcilers: 1 s doubling up to a cap, with jitter so that
//! resources that failed together do not come back together; forgotten on success.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

/// Consecutive failures per key and the delay before the next attempt.
#[derive(Debug)]
pub struct Backoff<K> {
    cap: Duration,
    attempts: Mutex<HashMap<K, u32>>,
}

impl<K: Eq + Hash> Backoff<K> {
    /// Delays of 1 s, 2 s, 4 s, ... never above `cap`.
    pub fn new(cap: Duration) -> Self {
        Self {
            cap,
            attempts: Mutex::default(),
        }
    }

    /// Records one more failure of `key` and returns how long to wait before retrying it.
    pub fn failed(&self, key: K) -> Duration {
        let mut attempts = self.attempts.lock().unwrap_or_else(|e| e.into_inner());
        let n = attempts.entry(key).or_default();
        *n = n.saturating_add(1);
        let base = Duration::from_secs(1u64 << (*n - 1).min(10)).min(self.cap);
        base + Duration::from_millis(fastrand::u64(0..500))
    }

    /// Forgets `key`'s failures: its next failure starts again at 1 s.
    pub fn succeeded(&self, key: &K) {
        self.attempts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_restart_after_success() {
        let b = Backoff::new(Duration::from_secs(5));
        let secs: Vec<u64> = (0..5).map(|_| b.failed("k").as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 5, 5]);
        assert_eq!(b.failed("other").as_secs(), 1, "per key");
        b.succeeded(&"k");
        assert_eq!(b.failed("k").as_secs(), 1);
    }
}
