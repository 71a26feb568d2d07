//! Memory and CPU figures of a process from `/proc` (Linux), the machine's load, and percentiles, for the
//! benchmarks' tables. Shared by the benches through `#[path]`.
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

/// Fields of `/proc/PID/stat` after the command name (which is in parentheses and may contain spaces); empty
/// where /proc is unavailable.
pub fn stat_fields(pid: u32) -> Vec<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    rest.split_whitespace().map(String::from).collect()
}

/// The process running `exe` among `root` and its descendants (`root` itself when it runs `exe`): the program a
/// wrapper (`heaptrack`, `perf`) started, whose figures are the ones to read.
pub fn running(root: u32, exe: &std::path::Path) -> Option<u32> {
    let runs_exe = |pid: u32| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe);
    let mut family = vec![root];
    let mut at = 0;
    while let Some(&pid) = family.get(at) {
        if runs_exe(pid) {
            return Some(pid);
        }
        family.extend(children(pid));
        at += 1;
    }
    None
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        // Field 4 of stat, the parent's id, is the second after the command name.
        .filter(|&child| stat_fields(child).get(1).and_then(|p| p.parse::<u32>().ok()) == Some(pid))
        .collect()
}

/// User + system CPU seconds of a process (`/proc/<pid>/stat` fields 14 and 15); 0 where /proc is unavailable.
pub fn cpu_seconds(pid: u32) -> f64 {
    ticks_to_seconds(&stat_fields(pid), 11..13)
}

/// [`cpu_seconds`] plus those of its reaped children (fields 16 and 17).
pub fn cpu_seconds_with_children(pid: u32) -> f64 {
    ticks_to_seconds(&stat_fields(pid), 11..15)
}

fn ticks_to_seconds(fields: &[String], range: std::ops::Range<usize>) -> f64 {
    let ticks: f64 = fields.get(range).map_or(0.0, |f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum());
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks / hz
}

/// The 1-, 5- and 15-minute load averages, joined by `separator`.
pub fn load_average(separator: &str) -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(separator)
}

/// The `p` quantile (0..=1) of `sorted`, nearest rank; zero for none.
pub fn percentile(sorted: &[std::time::Duration], p: f64) -> std::time::Duration {
    if sorted.is_empty() {
        return std::time::Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}
