//! Retry delays, one policy for every retry of kstretch (reconcilers per resource, the agent's
//! reconnects): exponential from a base up to a cap, with "equal jitter" (each delay drawn from
//! the upper half of its step) so that what failed together does not come back together.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

/// The longest delay before retry `attempt` (1 for the first): `base · 2^(attempt-1)`, at most
/// `cap` (a cap below `base` is `base`).
pub fn ceiling(attempt: u32, base: Duration, cap: Duration) -> Duration {
    let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(31));
    base.saturating_mul(factor).min(cap.max(base))
}

/// A delay in `[ceiling/2, ceiling]`; `unit` is a draw from `[0, 1)` (clamped).
pub fn jittered(ceiling: Duration, unit: f64) -> Duration {
    let half = ceiling / 2;
    half + (ceiling - half).mul_f64(unit.clamp(0.0, 1.0))
}

/// The delay before retry `attempt`, jittered.
pub fn delay(attempt: u32, base: Duration, cap: Duration) -> Duration {
    jittered(ceiling(attempt, base, cap), fastrand::f64())
}

/// One sequence of retries, such as a connection opened again and again; starts over after
/// a success.
#[derive(Debug, Clone)]
pub struct Retries {
    base: Duration,
    cap: Duration,
    attempt: u32,
}

impl Retries {
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self {
            base,
            cap,
            attempt: 0,
        }
    }

    /// The delay before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        self.attempt = self.attempt.saturating_add(1);
        delay(self.attempt, self.base, self.cap)
    }

    /// After an attempt that worked: the next delay is short again.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// The longest the next delay can be.
    pub fn ceiling(&self) -> Duration {
        ceiling(self.attempt.saturating_add(1), self.base, self.cap)
    }
}

/// Consecutive failures per key (a reconciler's resources), forgotten on success.
#[derive(Debug)]
pub struct Backoff<K> {
    base: Duration,
    cap: Duration,
    attempts: Mutex<HashMap<K, u32>>,
}

impl<K: Eq + Hash> Backoff<K> {
    /// Delays of up to 1 s, 2 s, 4 s, ... never above `cap`.
    pub fn new(cap: Duration) -> Self {
        Self::with_base(Duration::from_secs(1), cap)
    }

    pub fn with_base(base: Duration, cap: Duration) -> Self {
        Self {
            base,
            cap,
            attempts: Mutex::default(),
        }
    }

    /// Records one more failure of `key` and returns how long to wait before retrying it.
    pub fn failed(&self, key: K) -> Duration {
        let mut attempts = self.attempts.lock().unwrap_or_else(|e| e.into_inner());
        let n = attempts.entry(key).or_default();
        *n = n.saturating_add(1);
        delay(*n, self.base, self.cap)
    }

    /// Forgets `key`'s failures: its next failure starts again from the base.
    pub fn succeeded(&self, key: &K) {
        self.attempts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// Takes one result of a controller's run stream: a success forgets the key's failures
    /// (the error policy counted them); an error is only logged, as the policy reported it.
    pub fn observe<A, E: std::fmt::Display>(&self, result: &Result<(K, A), E>) {
        match result {
            Ok((key, _)) => self.succeeded(key),
            Err(e) => tracing::debug!(error = %e, "reconcile result"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn ceilings_double_from_the_base_to_the_cap() {
        let c: Vec<u64> = (1..=6)
            .map(|n| ceiling(n, secs(1), secs(20)).as_secs())
            .collect();
        assert_eq!(c, [1, 2, 4, 8, 16, 20]);
        assert_eq!(ceiling(0, secs(1), secs(20)), secs(1));
        assert_eq!(ceiling(u32::MAX, secs(1), secs(20)), secs(20));
        assert_eq!(
            ceiling(3, secs(2), secs(1)),
            secs(2),
            "a cap below the base"
        );
    }

    #[test]
    fn jitter_covers_the_upper_half_of_the_step() {
        let c = secs(8);
        assert_eq!(jittered(c, 0.0), secs(4));
        assert_eq!(jittered(c, 0.5), secs(6));
        assert_eq!(jittered(c, 7.0), c, "out-of-range draws are clamped");
        let draws: Vec<Duration> = (0..200).map(|_| delay(4, secs(1), secs(60))).collect();
        assert!(draws.iter().all(|d| *d >= c / 2 && *d <= c));
        assert!(draws.iter().any(|d| *d != draws[0]), "actually jittered");
    }

    #[test]
    fn a_sequence_grows_to_the_cap_and_starts_over_after_a_reset() {
        let mut r = Retries::new(Duration::from_millis(500), secs(30));
        let mut previous = Duration::ZERO;
        for _ in 0..40 {
            let ceiling = r.ceiling();
            assert!(ceiling >= previous && ceiling <= secs(30));
            let d = r.next_delay();
            assert!(
                d >= ceiling / 2 && d <= ceiling,
                "{d:?} outside {ceiling:?}"
            );
            previous = ceiling;
        }
        assert_eq!(r.ceiling(), secs(30));
        r.reset();
        assert_eq!(r.ceiling(), Duration::from_millis(500));
    }

    #[test]
    fn failures_are_counted_per_key_and_forgotten_on_success() {
        let b = Backoff::new(secs(5));
        let delays: Vec<Duration> = (0..5).map(|_| b.failed("k")).collect();
        for (d, c) in delays.iter().zip([1, 2, 4, 5, 5]) {
            assert!(*d >= secs(c) / 2 && *d <= secs(c), "{d:?} for {c} s");
        }
        assert!(b.failed("other") <= secs(1), "per key");
        b.succeeded(&"k");
        assert!(b.failed("k") <= secs(1));
    }
}
