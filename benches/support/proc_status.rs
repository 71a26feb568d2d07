//! Memory figures of a process from `/proc/<pid>/status` (Linux), for the benchmarks' tables. Shared by the
//! benches through `#[path]`.
#![allow(dead_code)]

/// A `kB` field (`VmRSS:`, `VmHWM:` for the peak) of this process; 0 where /proc is unavailable.
pub fn own_kb(field: &str) -> u64 {
    kb("/proc/self/status", field)
}

/// The same field of another process.
pub fn process_kb(pid: u32, field: &str) -> u64 {
    kb(&format!("/proc/{pid}/status"), field)
}

fn kb(path: &str, field: &str) -> u64 {
    let status = std::fs::read_to_string(path).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
