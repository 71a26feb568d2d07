//! Process-wide allocator tuning, applied by the `ferry` binary at start (and by benchmarks standing in for it).
//!
//! glibc gives each thread that allocates concurrently an arena of its own, up to 8 per core. The catalog loader
//! keeps 100k+ small entries allocated on tokio's worker threads while fetch buffers come and go on the same
//! threads; spread over many arenas the freed buffers leave holes that none of them can return, which cost
//! ~10% of peak RSS at 100k backups (docs/performance.md). Two arenas keep contention low on our thread counts.

/// Arenas glibc may use: enough for the few threads that allocate at once, few enough to keep holes shared.
const MALLOC_ARENAS: i32 = 2;

/// Hands the heap's free pages back to the operating system (glibc's `malloc_trim`). glibc on its own returns
/// memory only from the top of the heap, so pages freed among long-lived allocations (snapshots parsed into the
/// typed views kept) can stay in RSS. Its effect on a connected coordinator is not established yet
/// (docs/performance.md, federation). A no-op on other C libraries.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages to the kernel; it is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Limits glibc's malloc arenas, unless the user set `MALLOC_ARENA_MAX` (glibc reads that itself). A no-op on
/// other C libraries.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets a malloc parameter; it is called before other threads allocate.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS);
        }
    }
}
