//! Process memory: keep what a catalog load frees from staying resident.
//!
//! glibc's malloc adapts its thresholds to the program (mallopt(3), `M_MMAP_THRESHOLD`): each
//! freed block that was large enough to be mmapped raises the mmap threshold to its size (up to
//! 32 MiB on 64-bit) and the trim threshold to twice that. A catalog load frees many such blocks
//! (file buffers of several MiB, base64 `olm.bundle.object` strings), after which the memory the
//! parse freed in a thread's arena is never given back: a thread arena is only shrunk when its
//! free top exceeds the trim threshold (64 MiB, the whole arena), and `malloc_trim` does not trim
//! thread arenas' tops. The full community catalog left about 90 MiB resident in the two parse
//! workers' arenas while the live heap was 12 MiB (`benches/resolve_full.rs`).

/// Fixes glibc's mmap and trim thresholds at their defaults (128 KiB), which turns the dynamic
/// adjustment off (mallopt(3): setting `M_TRIM_THRESHOLD` or `M_MMAP_THRESHOLD` disables it), so
/// that large blocks stay mmapped (returned on free) and freed arena memory above 128 KiB is
/// returned as it is freed. Call it first in `main`, before any large allocation. A no-op on
/// other C libraries.
pub fn keep_freed_memory_returned() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; it is called before other threads exist.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * 1024);
    }
}

/// Gives the whole free pages of every malloc arena back to the system (malloc_trim(3): since
/// glibc 2.8 it releases the free pages inside chunks of all arenas, not only the main heap's
/// top). Called after a catalog load has dropped its parse (the FBC blobs and their strings,
/// freed in small chunks that [`keep_freed_memory_returned`] cannot return one by one), so that
/// what stays resident is the catalog's index, not the parse's garbage (docs/benchmarks.md,
/// the run of 2026-12-03: 99.7 → 54.4 MiB with the corpus catalog loaded). Takes milliseconds;
/// call it on the blocking pool. A no-op on other C libraries (the Dockerfile's static musl build).
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free heap pages; it is thread-safe (it locks each arena).
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How often [`return_freed_memory_periodically`] trims: the reconciles' request and response
/// buffers are freed in small chunks too, and without a trim the resident size after a burst of
/// installs stays at its peak. Go's runtime returns such memory with its background scavenger,
/// which is what OLM's processes get.
pub const TRIM_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs [`return_freed_memory`] every [`TRIM_INTERVAL`] on the blocking pool, forever (spawn it).
pub async fn return_freed_memory_periodically() {
    let mut tick = tokio::time::interval(TRIM_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let _ = tokio::task::spawn_blocking(return_freed_memory).await;
    }
}
