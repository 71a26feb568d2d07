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

/// User + system CPU seconds of a process (`/proc/<pid>/stat` fields 14 and 15); 0 where /proc is unavailable.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which is in parentheses and may contain spaces).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11..13).map_or(0.0, |f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum());
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks / hz
}
