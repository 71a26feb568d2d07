//! The process's allocator: mimalloc, installed as the global allocator by the `ferry` binary (and by the
//! benchmarks standing in for it) and configured here before the runtime's threads exist.
//!
//! Measured side by side with glibc's malloc (docs/performance.md, federation at 1,000 agents): a connected
//! coordinator's RSS 1,119 → 992 MB and its CPU per catalog change 1.31 → 1.00 s. glibc kept the pages freed
//! among long-lived allocations (snapshots parsed into the typed views kept) in RSS, even after `malloc_trim`.

/// The allocator to install: `#[global_allocator] static ALLOCATOR: ferry::allocator::Allocator = ...`.
pub type Allocator = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its position in `enum mi_option_e`, mimalloc.h of the v3 sources that
/// libmimalloc-sys 0.1.49 builds): how long freed pages stay committed before they go back to the OS.
const MI_OPTION_PURGE_DELAY: libc::c_int = 15;

/// mimalloc's `mi_option_allow_thp` (same enum): whether it advises its arenas as transparent huge pages.
const MI_OPTION_ALLOW_THP: libc::c_int = 43;

unsafe extern "C" {
    fn mi_option_set(option: libc::c_int, value: libc::c_long);
    fn mi_option_get(option: libc::c_int) -> libc::c_long;
}

/// Freed pages go back to the OS at once (mimalloc's default waits a second, and only on later allocation
/// in the same thread, so an idle coordinator kept a burst's garbage), unless the user set
/// `MIMALLOC_PURGE_DELAY` (mimalloc reads that itself).
///
/// No transparent huge pages, unless the user set `MIMALLOC_ALLOW_THP`: mimalloc advises its arenas as huge
/// pages, and a 2 MiB page with a few live objects stays resident whole (federation at 1,000 agents: ~100 MB of
/// `AnonHugePages`, connected RSS ~990 → ~930 MB). The option alone comes too late for the arena mimalloc
/// reserved before `main`, so the process also asks the kernel for no huge pages at all (`PR_SET_THP_DISABLE`).
pub fn configure() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mi_option_set only stores an option value; it is called before other threads allocate.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // SAFETY: as above.
        unsafe { mi_option_set(MI_OPTION_ALLOW_THP, 0) };
        let (disable, unused): (libc::c_ulong, libc::c_ulong) = (1, 0);
        // SAFETY: prctl(PR_SET_THP_DISABLE) only sets a flag of this process; it has no memory preconditions.
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, disable, unused, unused, unused) };
    }
}

/// The purge delay in force, in milliseconds (for the test that the option index is the right one).
pub fn purge_delay_ms() -> libc::c_long {
    // SAFETY: mi_option_get only reads an option value.
    unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) }
}

/// Whether mimalloc may advise huge pages (for the test that the option index is the right one).
pub fn allow_thp() -> libc::c_long {
    // SAFETY: mi_option_get only reads an option value.
    unsafe { mi_option_get(MI_OPTION_ALLOW_THP) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_option_is_the_one_configure_sets() {
        // mimalloc v3's default for purge_delay is 1000 ms: if the index named another option this would fail.
        assert_eq!(purge_delay_ms(), 1000, "mimalloc's default purge delay read through the index");
        assert_eq!(allow_thp(), 1, "mimalloc's default allow_thp read through the index");
        configure();
        assert_eq!(purge_delay_ms(), 0);
        assert_eq!(allow_thp(), 0);
    }
}
