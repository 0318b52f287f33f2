//! The topic operator's work queue: it owns which KafkaTopic keys wait to be reconciled, which are
//! being reconciled (in flight) and which need another pass once released, so several batches run
//! at once without one key ever being processed twice at the same time.
//!
//! Watch events and the timed full reconciliation [`push`](TopicQueue::push) keys; the batcher
//! takes them with [`next_batch`](TopicQueue::next_batch), reconciles them against Kafka with
//! multi-topic Admin requests and then [`release`](TopicQueue::release)s them. A key pushed while
//! it is in flight is not queued beside itself: it is marked and queued again on release, so the
//! change that caused the push is seen by a later pass. Failed keys come back with
//! [`push_after`](TopicQueue::push_after).

use std::collections::{HashMap, HashSet, VecDeque};
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use kstretch_core::topics::ResourceRef;
use tokio::sync::Notify;
use tokio::time::Instant;

/// What the queue holds: a KafkaTopic by namespace and name.
pub type Key = ResourceRef;

/// What became of a pushed key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// Added at the back of the queue.
    Queued,
    /// Already waiting: it keeps its place.
    AlreadyQueued,
    /// In flight: it will be queued again when released.
    Deferred,
    /// The queue is closed: the key was dropped.
    Closed,
}

/// The queue of keys to reconcile; clones share it.
#[derive(Debug, Clone)]
pub struct TopicQueue {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    capacity: usize,
    /// Keys were queued, or the queue closed.
    items: Notify,
    /// Keys left the queue, or the queue closed.
    space: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// Waiting keys in FIFO order, each with when it became available (its linger starts then).
    queue: VecDeque<(Key, Instant)>,
    /// The keys of `queue`, for dedup.
    waiting: HashSet<Key>,
    /// Handed out by `next_batch` and not yet released; never also in `waiting`.
    in_flight: HashSet<Key>,
    /// In flight and pushed again meanwhile: queued again on release.
    deferred: HashSet<Key>,
    /// Keys with a pending `push_after`, with the token of the only timer that may still queue
    /// them (older timers find another token, or none, and do nothing).
    retries: HashMap<Key, u64>,
    next_retry: u64,
    closed: bool,
    max_waiting: usize,
}

impl State {
    /// `None` when the key would be queued but the queue already holds `capacity` keys.
    fn push(&mut self, key: &Key, capacity: Option<usize>) -> Option<Pushed> {
        if self.closed {
            return Some(Pushed::Closed);
        }
        if self.waiting.contains(key) {
            return Some(Pushed::AlreadyQueued);
        }
        if self.in_flight.contains(key) {
            // Queuing it now would let a second batch take it while the first still runs.
            self.deferred.insert(key.clone());
            return Some(Pushed::Deferred);
        }
        if capacity.is_some_and(|capacity| self.queue.len() >= capacity) {
            return None;
        }
        self.enqueue(key.clone());
        Some(Pushed::Queued)
    }

    fn enqueue(&mut self, key: Key) {
        // Waiting now, so a pending retry would only reconcile it once more.
        self.retries.remove(&key);
        self.waiting.insert(key.clone());
        self.queue.push_back((key, Instant::now()));
        self.max_waiting = self.max_waiting.max(self.queue.len());
    }

    fn take(&mut self, max: usize) -> Vec<Key> {
        let n = max.min(self.queue.len());
        let mut batch = Vec::with_capacity(n);
        for (key, _) in self.queue.drain(..n) {
            self.waiting.remove(&key);
            self.in_flight.insert(key.clone());
            batch.push(key);
        }
        batch
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Each update under the lock is small and cannot leave the sets half-changed in a way
        // that matters more than stopping the operator, so a panic elsewhere is not propagated.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push_now(&self, key: &Key) -> Pushed {
        let pushed = self.lock().push(key, None).unwrap_or(Pushed::Closed);
        if pushed == Pushed::Queued {
            self.items.notify_waiters();
        }
        pushed
    }

    /// The timer of `push_after` fired: queue the key unless that retry was superseded.
    fn retry(&self, key: &Key, token: u64) {
        let pushed = {
            let mut state = self.lock();
            if state.retries.get(key) != Some(&token) {
                return;
            }
            state.retries.remove(key);
            state.push(key, None)
        };
        if pushed == Some(Pushed::Queued) {
            self.items.notify_waiters();
        }
    }
}

impl TopicQueue {
    /// A queue that holds at most `capacity` waiting keys before [`push`](Self::push) waits; a
    /// capacity of 0 is taken as 1.
    pub fn new(capacity: usize) -> TopicQueue {
        TopicQueue {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                capacity: capacity.max(1),
                items: Notify::new(),
                space: Notify::new(),
            }),
        }
    }

    /// FIFO; a key already waiting keeps its place (dedup); a key in flight is marked and
    /// re-queued (at the back) on release.
    ///
    /// Backpressure: waits while `capacity` keys are waiting (never drops, never errors); a key
    /// already waiting or in flight needs no room and never waits. Returns
    /// [`Pushed::Closed`] after [`close`](Self::close). Cancel-safe: dropped while waiting, it
    /// has queued nothing.
    pub async fn push(&self, key: Key) -> Pushed {
        loop {
            // Registered before the state is checked, so room made in between is not missed.
            let mut space = pin!(self.inner.space.notified());
            space.as_mut().enable();
            let pushed = self.inner.lock().push(&key, Some(self.inner.capacity));
            match pushed {
                Some(pushed) => {
                    if pushed == Pushed::Queued {
                        self.inner.items.notify_waiters();
                    }
                    return pushed;
                }
                None => space.await,
            }
        }
    }

    /// Like [`push`](Self::push) but never waits (for release paths and timers); may exceed
    /// the capacity.
    pub fn push_now(&self, key: Key) -> Pushed {
        self.inner.push_now(&key)
    }

    /// Re-queues `key` after `delay` (retry with backoff). A push before then is not delayed
    /// and cancels the retry (the key is waiting, so it will be reconciled anyway); while a
    /// retry is pending, further retries of the key collapse into it (the first delay wins).
    /// A key that is already waiting needs no retry. Outside a Tokio runtime the key is queued
    /// at once, since there is no timer to wait on.
    pub fn push_after(&self, key: Key, delay: Duration) {
        let token = {
            let mut state = self.inner.lock();
            if state.closed || state.waiting.contains(&key) || state.retries.contains_key(&key) {
                return;
            }
            let token = state.next_retry;
            state.next_retry = state.next_retry.wrapping_add(1);
            state.retries.insert(key.clone(), token);
            token
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.inner.retry(&key, token);
            return;
        };
        // Weak, so a pending retry does not keep a dropped queue alive.
        let inner: Weak<Inner> = Arc::downgrade(&self.inner);
        runtime.spawn(async move {
            tokio::time::sleep(delay).await;
            if let Some(inner) = inner.upgrade() {
                inner.retry(&key, token);
            }
        });
    }

    /// Waits for at least one key, then up to `linger` more for the batch to fill, and returns
    /// up to `max` keys (at least 1) in FIFO order, all now in flight. The linger is counted
    /// from when the oldest waiting key was queued, not from this call, so a key that already
    /// waited that long is handed out at once; it ends early once `max` keys are waiting.
    ///
    /// Returns `None` once closed (after [`close`](Self::close), waiting keys are not handed
    /// out). Cancel-safe: dropped while waiting, it has taken nothing.
    pub async fn next_batch(&self, max: usize, linger: Duration) -> Option<Vec<Key>> {
        let max = max.max(1);
        loop {
            // Registered before the state is checked, so keys queued in between are not missed.
            let mut items = pin!(self.inner.items.notified());
            items.as_mut().enable();
            let deadline = {
                let mut state = self.inner.lock();
                if state.closed {
                    return None;
                }
                match state.queue.front() {
                    None => None,
                    Some((_, since)) => {
                        // `None` (overflow) means no deadline: wait for the batch to fill.
                        let deadline = since.checked_add(linger);
                        let lingered = deadline.is_some_and(|deadline| Instant::now() >= deadline);
                        if state.queue.len() >= max || lingered {
                            let batch = state.take(max);
                            drop(state);
                            self.inner.space.notify_waiters();
                            return Some(batch);
                        }
                        deadline
                    }
                }
            };
            // Woken by a push (the batch may be full now), another consumer, close, or the end
            // of the linger; every case is settled by checking the state again.
            match deadline {
                Some(deadline) => {
                    let _ = tokio::time::timeout_at(deadline, items).await;
                }
                None => items.await,
            }
        }
    }

    /// Ends in-flight processing of `keys`; those pushed meanwhile (deferred) go back at the back
    /// of the queue. Keys not in flight are ignored.
    pub fn release(&self, keys: &[Key]) {
        let mut requeued = false;
        {
            let mut state = self.inner.lock();
            for key in keys {
                if !state.in_flight.remove(key) {
                    continue;
                }
                if state.deferred.remove(key) && !state.closed {
                    // Not waiting: a key is never both waiting and in flight.
                    state.enqueue(key.clone());
                    requeued = true;
                }
            }
        }
        if requeued {
            self.inner.items.notify_waiters();
        }
    }

    /// Keys waiting to be handed out.
    pub fn waiting(&self) -> usize {
        self.inner.lock().queue.len()
    }

    /// Keys handed out and not yet released.
    pub fn in_flight(&self) -> usize {
        self.inner.lock().in_flight.len()
    }

    /// Largest number of waiting keys seen since the last call (for a max-queue-size metric),
    /// then resets to the current length.
    pub fn take_max_waiting(&self) -> usize {
        let mut state = self.inner.lock();
        let max = state.max_waiting.max(state.queue.len());
        state.max_waiting = state.queue.len();
        max
    }

    /// Closes the queue and wakes every waiter: pushes return [`Pushed::Closed`], pending
    /// retries are dropped and [`next_batch`](Self::next_batch) returns `None`.
    pub fn close(&self) {
        {
            let mut state = self.inner.lock();
            state.closed = true;
            state.retries.clear();
        }
        self.inner.items.notify_waiters();
        self.inner.space.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::{HashMap, HashSet};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use futures::FutureExt;
    use tokio::time::{Instant, timeout};

    use super::*;

    // Tokio's `test-util` (paused clock) is not enabled for this crate, so timing is checked
    // either with an hour-long linger that cannot expire during a test, with `now_or_never`, or
    // with lower bounds on elapsed real time, which the queue guarantees (no upper bounds).

    const HOUR: Duration = Duration::from_secs(3600);
    const GENEROUS: Duration = Duration::from_secs(10);

    fn key(name: &str) -> Key {
        Key {
            namespace: "ns".to_string(),
            name: name.to_string(),
        }
    }

    fn keys(names: &[&str]) -> Vec<Key> {
        names.iter().map(|name| key(name)).collect()
    }

    /// Lets spawned tasks on the current-thread runtime run until they block.
    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    /// A batch that is ready without waiting.
    fn ready(queue: &TopicQueue, max: usize) -> Option<Vec<Key>> {
        queue
            .next_batch(max, Duration::ZERO)
            .now_or_never()
            .expect("a batch should be ready")
    }

    fn nothing_ready(queue: &TopicQueue) -> bool {
        queue
            .next_batch(100, Duration::ZERO)
            .now_or_never()
            .is_none()
    }

    #[tokio::test]
    async fn fifo_order() {
        let queue = TopicQueue::new(10);
        for name in ["c", "a", "b"] {
            assert_eq!(queue.push(key(name)).await, Pushed::Queued);
        }
        assert_eq!(queue.waiting(), 3);
        assert_eq!(ready(&queue, 10), Some(keys(&["c", "a", "b"])));
        assert_eq!(queue.waiting(), 0);
        assert_eq!(queue.in_flight(), 3);
    }

    #[tokio::test]
    async fn dedup_keeps_position() {
        let queue = TopicQueue::new(10);
        assert_eq!(queue.push(key("a")).await, Pushed::Queued);
        assert_eq!(queue.push(key("b")).await, Pushed::Queued);
        assert_eq!(queue.push(key("a")).await, Pushed::AlreadyQueued);
        assert_eq!(queue.push_now(key("a")), Pushed::AlreadyQueued);
        assert_eq!(queue.push(key("c")).await, Pushed::Queued);
        assert_eq!(queue.waiting(), 3);
        assert_eq!(ready(&queue, 10), Some(keys(&["a", "b", "c"])));
    }

    #[tokio::test]
    async fn batch_is_at_most_max() {
        let queue = TopicQueue::new(10);
        for name in ["a", "b", "c", "d", "e"] {
            queue.push(key(name)).await;
        }
        assert_eq!(ready(&queue, 2), Some(keys(&["a", "b"])));
        assert_eq!(ready(&queue, 2), Some(keys(&["c", "d"])));
        assert_eq!(ready(&queue, 2), Some(keys(&["e"])));
        assert_eq!(queue.in_flight(), 5);
        // A max of 0 still hands out one key rather than spinning on empty batches.
        queue.push(key("f")).await;
        assert_eq!(ready(&queue, 0), Some(keys(&["f"])));
    }

    #[tokio::test]
    async fn linger_waits_for_the_batch_and_returns_early_when_full() {
        let queue = TopicQueue::new(10);
        let consumer = tokio::spawn({
            let queue = queue.clone();
            async move { queue.next_batch(3, HOUR).await }
        });
        settle().await;
        assert!(!consumer.is_finished(), "no key yet");
        queue.push(key("a")).await;
        settle().await;
        assert!(!consumer.is_finished(), "lingers for the batch to fill");
        queue.push(key("b")).await;
        settle().await;
        assert!(!consumer.is_finished(), "still lingers");
        queue.push(key("c")).await;
        let batch = timeout(GENEROUS, consumer).await.unwrap().unwrap();
        assert_eq!(batch, Some(keys(&["a", "b", "c"])));
    }

    #[tokio::test]
    async fn linger_hands_out_a_partial_batch_when_it_expires() {
        let queue = TopicQueue::new(10);
        let linger = Duration::from_millis(30);
        let start = Instant::now();
        queue.push(key("a")).await;
        let batch = timeout(GENEROUS, queue.next_batch(3, linger))
            .await
            .unwrap();
        assert_eq!(batch, Some(keys(&["a"])));
        assert!(start.elapsed() >= linger);
    }

    #[tokio::test]
    async fn linger_starts_when_the_first_key_arrives() {
        let queue = TopicQueue::new(10);
        let linger = Duration::from_millis(40);
        let consumer = tokio::spawn({
            let queue = queue.clone();
            async move { queue.next_batch(3, linger).await }
        });
        // Longer than the linger: a linger counted from the call would be over by now.
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(!consumer.is_finished());
        let pushed = Instant::now();
        queue.push(key("a")).await;
        let batch = timeout(GENEROUS, consumer).await.unwrap().unwrap();
        assert_eq!(batch, Some(keys(&["a"])));
        assert!(pushed.elapsed() >= linger, "lingered from the push");
    }

    #[tokio::test]
    async fn a_key_that_waited_the_linger_is_handed_out_at_once() {
        let queue = TopicQueue::new(10);
        queue.push(key("a")).await;
        tokio::time::sleep(Duration::from_millis(30)).await;
        let batch = queue
            .next_batch(10, Duration::from_millis(20))
            .now_or_never()
            .expect("no further linger");
        assert_eq!(batch, Some(keys(&["a"])));
    }

    #[tokio::test]
    async fn a_key_in_flight_is_handed_out_once_and_requeued_once_on_release() {
        let queue = TopicQueue::new(10);
        queue.push(key("a")).await;
        queue.push(key("b")).await;
        assert_eq!(ready(&queue, 10), Some(keys(&["a", "b"])));

        for _ in 0..5 {
            assert_eq!(queue.push(key("a")).await, Pushed::Deferred);
            assert_eq!(queue.push_now(key("a")), Pushed::Deferred);
        }
        assert_eq!(queue.waiting(), 0);
        assert!(nothing_ready(&queue), "not handed out while in flight");

        queue.release(&keys(&["a", "b"]));
        assert_eq!(queue.in_flight(), 0);
        assert_eq!(queue.waiting(), 1, "only the deferred key, once");
        assert_eq!(ready(&queue, 10), Some(keys(&["a"])));

        queue.release(&keys(&["a"]));
        assert_eq!(queue.waiting(), 0, "not deferred again");
        assert!(nothing_ready(&queue));
        // Releasing keys not in flight changes nothing.
        queue.release(&keys(&["a", "z"]));
        assert_eq!((queue.waiting(), queue.in_flight()), (0, 0));
    }

    #[tokio::test]
    async fn a_deferred_key_goes_to_the_back_on_release() {
        let queue = TopicQueue::new(10);
        queue.push(key("a")).await;
        assert_eq!(ready(&queue, 10), Some(keys(&["a"])));
        assert_eq!(queue.push(key("a")).await, Pushed::Deferred);
        assert_eq!(queue.push(key("b")).await, Pushed::Queued);
        queue.release(&keys(&["a"]));
        assert_eq!(ready(&queue, 10), Some(keys(&["b", "a"])));
    }

    #[tokio::test]
    async fn push_waits_at_capacity_and_resumes_when_a_batch_is_taken() {
        let queue = TopicQueue::new(2);
        assert_eq!(queue.push(key("a")).await, Pushed::Queued);
        assert_eq!(queue.push(key("b")).await, Pushed::Queued);
        let producer = tokio::spawn({
            let queue = queue.clone();
            async move { queue.push(key("c")).await }
        });
        settle().await;
        assert!(!producer.is_finished(), "waits for room");
        assert_eq!(queue.waiting(), 2);

        // No room needed for keys already waiting or in flight.
        assert_eq!(
            queue.push(key("a")).now_or_never(),
            Some(Pushed::AlreadyQueued)
        );

        assert_eq!(ready(&queue, 1), Some(keys(&["a"])));
        let pushed = timeout(GENEROUS, producer).await.unwrap().unwrap();
        assert_eq!(pushed, Pushed::Queued);
        assert_eq!(queue.push(key("a")).now_or_never(), Some(Pushed::Deferred));
        assert_eq!(
            ready(&queue, 10),
            Some(keys(&["b", "c"])),
            "nothing dropped"
        );
    }

    #[tokio::test]
    async fn push_now_and_release_may_exceed_capacity() {
        let queue = TopicQueue::new(1);
        queue.push(key("a")).await;
        assert_eq!(ready(&queue, 1), Some(keys(&["a"])));
        assert_eq!(queue.push(key("a")).await, Pushed::Deferred);
        assert_eq!(queue.push_now(key("b")), Pushed::Queued);
        assert_eq!(queue.push_now(key("c")), Pushed::Queued);
        queue.release(&keys(&["a"]));
        assert_eq!(queue.waiting(), 3);
        assert!(queue.push(key("d")).now_or_never().is_none(), "push waits");
        assert_eq!(ready(&queue, 10), Some(keys(&["b", "c", "a"])));
    }

    #[tokio::test]
    async fn close_wakes_a_blocked_push_and_waiting_consumers() {
        let queue = TopicQueue::new(1);
        let empty = TopicQueue::new(1);
        queue.push(key("a")).await;
        let producer = tokio::spawn({
            let queue = queue.clone();
            async move { queue.push(key("b")).await }
        });
        // Lingering for a batch that cannot fill.
        let lingering = tokio::spawn({
            let queue = queue.clone();
            async move { queue.next_batch(10, HOUR).await }
        });
        // Waiting for a first key.
        let idle = tokio::spawn({
            let empty = empty.clone();
            async move { empty.next_batch(10, HOUR).await }
        });
        settle().await;
        assert!(!producer.is_finished() && !lingering.is_finished() && !idle.is_finished());

        queue.close();
        empty.close();
        assert_eq!(
            timeout(GENEROUS, producer).await.unwrap().unwrap(),
            Pushed::Closed
        );
        assert_eq!(timeout(GENEROUS, lingering).await.unwrap().unwrap(), None);
        assert_eq!(timeout(GENEROUS, idle).await.unwrap().unwrap(), None);

        // Waiting keys are not handed out after close, and nothing more is taken.
        assert_eq!(queue.waiting(), 1);
        assert_eq!(ready(&queue, 10), None);
        assert_eq!(queue.push(key("c")).await, Pushed::Closed);
        assert_eq!(queue.push_now(key("c")), Pushed::Closed);
    }

    #[tokio::test]
    async fn push_after_delays() {
        let queue = TopicQueue::new(10);
        let delay = Duration::from_millis(40);
        let start = Instant::now();
        queue.push_after(key("a"), delay);
        assert_eq!(queue.waiting(), 0);
        assert!(nothing_ready(&queue));
        let batch = timeout(GENEROUS, queue.next_batch(10, Duration::ZERO))
            .await
            .unwrap();
        assert_eq!(batch, Some(keys(&["a"])));
        assert!(start.elapsed() >= delay);
    }

    #[tokio::test]
    async fn push_after_collapses_retries_of_one_key() {
        let queue = TopicQueue::new(10);
        let delay = Duration::from_millis(30);
        queue.push_after(key("a"), delay);
        queue.push_after(key("a"), delay);
        queue.push_after(key("a"), Duration::ZERO);
        queue.push_after(key("b"), delay);
        assert_eq!(queue.inner.lock().retries.len(), 2, "one timer per key");
        assert!(nothing_ready(&queue), "the first delay wins");

        let mut seen = Vec::new();
        while seen.len() < 2 {
            let batch = timeout(GENEROUS, queue.next_batch(10, Duration::ZERO))
                .await
                .unwrap()
                .unwrap();
            queue.release(&batch);
            seen.extend(batch);
        }
        seen.sort();
        assert_eq!(seen, keys(&["a", "b"]));
        // Long enough for any other timer to have fired: none queues the key again.
        tokio::time::sleep(delay * 3).await;
        assert_eq!(queue.waiting(), 0);
        assert!(queue.inner.lock().retries.is_empty());
    }

    #[tokio::test]
    async fn a_push_before_the_retry_is_not_delayed_and_cancels_it() {
        let queue = TopicQueue::new(10);
        queue.push_after(key("a"), HOUR);
        assert_eq!(queue.push(key("a")).await, Pushed::Queued);
        assert_eq!(ready(&queue, 10), Some(keys(&["a"])));
        assert!(queue.inner.lock().retries.is_empty(), "retry cancelled");

        // A retry of a key in flight still fires after its delay, and is deferred if needed.
        queue.push_after(key("a"), Duration::ZERO);
        let fired = timeout(GENEROUS, async {
            loop {
                if queue.inner.lock().deferred.contains(&key("a")) {
                    break;
                }
                tokio::task::yield_now().await;
            }
        })
        .await;
        assert!(fired.is_ok());
        queue.release(&keys(&["a"]));
        assert_eq!(ready(&queue, 10), Some(keys(&["a"])));

        // No retry for a key that is already waiting; none after close.
        queue.release(&keys(&["a"]));
        queue.push_now(key("b"));
        queue.push_after(key("b"), HOUR);
        assert!(queue.inner.lock().retries.is_empty());
        queue.push_after(key("c"), HOUR);
        queue.close();
        assert!(queue.inner.lock().retries.is_empty());
        queue.push_after(key("d"), Duration::ZERO);
        assert!(queue.inner.lock().retries.is_empty());
    }

    #[test]
    fn push_after_outside_a_runtime_queues_at_once() {
        let queue = TopicQueue::new(10);
        queue.push_after(key("a"), HOUR);
        assert_eq!(queue.waiting(), 1);
        assert!(queue.inner.lock().retries.is_empty());
    }

    #[tokio::test]
    async fn take_max_waiting_reports_the_peak_then_resets() {
        let queue = TopicQueue::new(10);
        assert_eq!(queue.take_max_waiting(), 0);
        for name in ["a", "b", "c"] {
            queue.push(key(name)).await;
        }
        assert_eq!(queue.take_max_waiting(), 3);
        assert_eq!(ready(&queue, 2), Some(keys(&["a", "b"])));
        assert_eq!(
            queue.take_max_waiting(),
            3,
            "reset to the length at the last call"
        );
        assert_eq!(queue.take_max_waiting(), 1);
        queue.push(key("d")).await;
        queue.push(key("e")).await;
        assert_eq!(ready(&queue, 10), Some(keys(&["c", "d", "e"])));
        assert_eq!(queue.take_max_waiting(), 3);
        assert_eq!(queue.take_max_waiting(), 0);
    }

    /// What the consumers of the concurrent test saw.
    #[derive(Default)]
    struct Log {
        /// A logical clock ordering pushes and processing starts.
        clock: u64,
        last_push: HashMap<Key, u64>,
        last_start: HashMap<Key, u64>,
        processing: HashSet<Key>,
        overlaps: Vec<Key>,
        processed: usize,
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_consumers_never_share_a_key() {
        let queue = TopicQueue::new(4);
        let pool: Vec<Key> = (0..16).map(|i| key(&format!("t{i}"))).collect();
        let log = Arc::new(Mutex::new(Log::default()));

        let consumers: Vec<_> = (0..4u64)
            .map(|seed| {
                let queue = queue.clone();
                let log = log.clone();
                tokio::spawn(async move {
                    let mut rng = fastrand::Rng::with_seed(seed);
                    while let Some(batch) = queue.next_batch(3, Duration::from_millis(1)).await {
                        assert!(!batch.is_empty() && batch.len() <= 3);
                        {
                            let mut log = log.lock().unwrap();
                            for key in &batch {
                                if !log.processing.insert(key.clone()) {
                                    log.overlaps.push(key.clone());
                                }
                                log.clock += 1;
                                let now = log.clock;
                                log.last_start.insert(key.clone(), now);
                            }
                            log.processed += batch.len();
                        }
                        for _ in 0..rng.usize(0..4) {
                            tokio::task::yield_now().await;
                        }
                        if rng.u8(..) < 16 {
                            // A failed key: retried while it is still in flight.
                            queue.push_after(batch[0].clone(), Duration::from_millis(1));
                        }
                        {
                            let mut log = log.lock().unwrap();
                            for key in &batch {
                                log.processing.remove(key);
                            }
                        }
                        queue.release(&batch);
                    }
                })
            })
            .collect();

        let producers: Vec<_> = (0..2u64)
            .map(|seed| {
                let queue = queue.clone();
                let log = log.clone();
                let pool = pool.clone();
                tokio::spawn(async move {
                    let mut rng = fastrand::Rng::with_seed(100 + seed);
                    for _ in 0..2000 {
                        let key = pool[rng.usize(..pool.len())].clone();
                        {
                            let mut log = log.lock().unwrap();
                            log.clock += 1;
                            let now = log.clock;
                            log.last_push.insert(key.clone(), now);
                        }
                        let pushed = queue.push(key).await;
                        assert_ne!(pushed, Pushed::Closed);
                        if rng.bool() {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();
        for producer in producers {
            timeout(GENEROUS, producer).await.unwrap().unwrap();
        }

        // Drain: nothing waiting, in flight or pending a retry.
        timeout(GENEROUS, async {
            loop {
                {
                    let state = queue.inner.lock();
                    if state.queue.is_empty()
                        && state.in_flight.is_empty()
                        && state.retries.is_empty()
                    {
                        break;
                    }
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await
        .unwrap();
        queue.close();
        for consumer in consumers {
            timeout(GENEROUS, consumer).await.unwrap().unwrap();
        }

        let log = log.lock().unwrap();
        assert!(
            log.overlaps.is_empty(),
            "processed twice at once: {:?}",
            log.overlaps
        );
        assert!(log.processing.is_empty());
        assert!(log.processed >= log.last_push.len());
        for (key, pushed) in &log.last_push {
            let started = log.last_start.get(key).copied().unwrap_or(0);
            assert!(started > *pushed, "{key} not processed after its last push");
        }
        let state = queue.inner.lock();
        assert!(state.deferred.is_empty() && state.waiting.is_empty());
    }
}
