//! Reconnect delays: exponential with jitter, so agents that lost central at the same moment do
//! not all knock again at the same moment.

use std::time::Duration;

/// Exponential backoff with "equal jitter": the n-th delay is drawn uniformly from
/// `[c/2, c]` where `c = min(max, base * 2^n)`.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max: max.max(base),
            attempt: 0,
        }
    }

    /// The delay before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceiling();
        self.attempt = self.attempt.saturating_add(1);
        jittered(ceiling, fastrand::f64())
    }

    /// After a connection that worked: start again from `base`.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// Upper bound of the next delay.
    pub fn ceiling(&self) -> Duration {
        let factor = 2u32.saturating_pow(self.attempt.min(31));
        self.base.saturating_mul(factor).min(self.max)
    }
}

/// A delay in `[ceiling/2, ceiling]`; `unit` is a draw from `[0, 1)`.
pub fn jittered(ceiling: Duration, unit: f64) -> Duration {
    let half = ceiling / 2;
    half + (ceiling - half).mul_f64(unit.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_to_the_cap_and_stay_within_the_jitter_bounds() {
        let base = Duration::from_millis(500);
        let max = Duration::from_secs(30);
        let mut backoff = Backoff::new(base, max);
        let mut previous_ceiling = Duration::ZERO;
        for attempt in 0..40 {
            let ceiling = backoff.ceiling();
            assert!(ceiling >= previous_ceiling, "attempt {attempt}");
            assert!(ceiling <= max);
            let delay = backoff.next_delay();
            assert!(
                delay >= ceiling / 2 && delay <= ceiling,
                "attempt {attempt}: {delay:?} outside [{:?}, {ceiling:?}]",
                ceiling / 2
            );
            previous_ceiling = ceiling;
        }
        assert_eq!(backoff.ceiling(), max);
        backoff.reset();
        assert_eq!(backoff.ceiling(), base);
    }

    #[test]
    fn jitter_covers_the_whole_range() {
        let c = Duration::from_secs(8);
        assert_eq!(jittered(c, 0.0), Duration::from_secs(4));
        assert_eq!(jittered(c, 1.0), c);
        assert_eq!(jittered(c, 0.5), Duration::from_secs(6));
        assert_eq!(jittered(c, 7.0), c, "out-of-range draws are clamped");
        let draws: Vec<Duration> = (0..200).map(|_| jittered(c, fastrand::f64())).collect();
        assert!(draws.iter().all(|d| *d >= c / 2 && *d <= c));
        assert!(
            draws.iter().any(|d| *d != draws[0]),
            "delays are actually jittered"
        );
    }

    #[test]
    fn a_max_below_base_is_raised_to_base() {
        let mut backoff = Backoff::new(Duration::from_secs(2), Duration::from_secs(1));
        assert_eq!(backoff.ceiling(), Duration::from_secs(2));
        backoff.next_delay();
        assert_eq!(backoff.ceiling(), Duration::from_secs(2));
    }
}
