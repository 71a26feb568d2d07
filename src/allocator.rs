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

unsafe extern "C" {
    fn mi_option_set(option: libc::c_int, value: libc::c_long);
    fn mi_option_get(option: libc::c_int) -> libc::c_long;
}

/// Freed pages go back to the OS at once (mimalloc's default waits a second, and only on later allocation
/// in the same thread, so an idle coordinator kept a burst's garbage), unless the user set
/// `MIMALLOC_PURGE_DELAY` (mimalloc reads that itself).
pub fn configure() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mi_option_set only stores an option value; it is called before other threads allocate.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
}

/// The purge delay in force, in milliseconds (for the test that the option index is the right one).
pub fn purge_delay_ms() -> libc::c_long {
    // SAFETY: mi_option_get only reads an option value.
    unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_option_is_the_one_configure_sets() {
        // mimalloc v3's default for purge_delay is 1000 ms: if the index named another option this would fail.
        assert_eq!(purge_delay_ms(), 1000, "mimalloc's default purge delay read through the index");
        configure();
        assert_eq!(purge_delay_ms(), 0);
    }
}
