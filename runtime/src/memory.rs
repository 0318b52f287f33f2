//! Giving the heap a burst freed back to the system.
//!
//! glibc's allocator returns freed memory only from the top of each arena: after a burst (an
//! agent creating a thousand pods, a list of every topic) the freed pages below the live ones
//! stay resident for as long as the process runs, and count against its memory limit. The
//! operator's binaries idle most of the time, so they ask glibc to release those pages now and
//! then (`malloc_trim(0)`, which walks every arena and `madvise`s free pages away). The agent's
//! figures with and without it are in docs/benchmarks.md.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How often freed pages are released: often enough that an idle process sheds a burst within
/// seconds, rarely enough that the walk (well under a millisecond on these heaps) costs nothing.
pub const RELEASE_INTERVAL: Duration = Duration::from_secs(10);

/// Asks the allocator to return freed pages to the system; true when it released some.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[expect(unsafe_code, reason = "the one foreign call: glibc's malloc_trim")]
pub fn release_freed() -> bool {
    // SAFETY: malloc_trim takes no pointer and locks each arena while it walks it, so it may
    // run on any thread while others allocate.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Other allocators (musl's, macOS's) return freed memory themselves, or have no such call.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_freed() -> bool {
    false
}

/// Releases freed pages every [`RELEASE_INTERVAL`] until `shutdown`, on a blocking thread so
/// the walk never holds up a runtime worker.
pub async fn release_periodically(shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(RELEASE_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Ok(released) = tokio::task::spawn_blocking(release_freed).await {
            tracing::trace!(released, "freed heap pages released");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_pages_of_a_burst_go_back_to_the_system() {
        // Many small blocks, one in 64 kept: glibc cannot give the freed ones back by shrinking
        // the top of its heap, only by trimming.
        let mut blocks: Vec<Vec<u8>> = (0..20_000).map(|_| vec![1u8; 2048]).collect();
        let kept: Vec<Vec<u8>> = blocks.drain(..).step_by(64).collect();
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert!(release_freed(), "nothing released after freeing ~40 MB");
        }
        drop(kept);
    }
}
