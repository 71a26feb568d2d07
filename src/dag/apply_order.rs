//! A small generic ordering API for the agent: items with named dependencies (e.g. a Backup, then its
//! PodVolumeBackups, then its NonAdminBackup) → layers to apply in order; a cycle is an error naming its path.
//! Dependencies on items not in the set are ignored (they are someone else's: already applied or external).

use std::collections::BTreeMap;
use std::fmt::Display;

use super::report::CyclePath;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyOrderError {
    #[error("dependency cycle: {0}")]
    Cycle(CyclePath),
}

/// Orders `items` (key, keys it depends on) into layers; within a layer, items keep their input order. Items
/// repeated keep their first entry.
pub fn apply_order<K: Ord + Clone + Display>(items: &[(K, Vec<K>)]) -> Result<Vec<Vec<K>>, ApplyOrderError> {
    let mut index: BTreeMap<&K, usize> = BTreeMap::new();
    for (i, (k, _)) in items.iter().enumerate() {
        index.entry(k).or_insert(i);
    }
    let n = items.len();
    let mut waiting = vec![0usize; n];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (&k, &i) in &index {
        let _ = k;
        let mut deps: Vec<usize> = items[i].1.iter().filter_map(|d| index.get(d).copied()).collect();
        deps.sort_unstable();
        deps.dedup();
        waiting[i] = deps.len();
        for d in deps {
            dependents[d].push(i);
        }
    }
    let live: Vec<usize> = index.values().copied().collect();
    let mut current: Vec<usize> = live.iter().copied().filter(|&i| waiting[i] == 0).collect();
    current.sort_unstable();
    let mut layers = Vec::new();
    let mut placed = 0;
    while !current.is_empty() {
        placed += current.len();
        let mut next = Vec::new();
        for &i in &current {
            for &c in &dependents[i] {
                waiting[c] -= 1;
                if waiting[c] == 0 {
                    next.push(c);
                }
            }
        }
        next.sort_unstable();
        layers.push(current.iter().map(|&i| items[i].0.clone()).collect());
        current = next;
    }
    if placed < live.len() {
        // Walk unfinished dependencies from an unfinished item until one repeats.
        let start = live.iter().copied().find(|&i| waiting[i] > 0).unwrap_or(0);
        let mut walk = vec![start];
        loop {
            let v = walk[walk.len() - 1];
            let next = items[v].1.iter().filter_map(|d| index.get(d).copied()).find(|&d| waiting[d] > 0);
            let Some(next) = next else { break };
            if let Some(pos) = walk.iter().position(|&w| w == next) {
                let mut path: Vec<String> = walk[pos..].iter().map(|&i| items[i].0.to_string()).collect();
                path.push(items[next].0.to_string());
                return Err(ApplyOrderError::Cycle(CyclePath(path)));
            }
            walk.push(next);
        }
        return Err(ApplyOrderError::Cycle(CyclePath(walk.iter().map(|&i| items[i].0.to_string()).collect())));
    }
    Ok(layers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_then_pvbs_then_nab() {
        let items = vec![
            ("nab/team-a/nightly".to_string(), vec!["backup/b1".to_string()]),
            ("pvb/b1-x".to_string(), vec!["backup/b1".to_string()]),
            ("pvb/b1-y".to_string(), vec!["backup/b1".to_string(), "backup/elsewhere".to_string()]),
            ("backup/b1".to_string(), vec![]),
        ];
        let layers = apply_order(&items).unwrap();
        assert_eq!(layers, vec![vec!["backup/b1"], vec!["nab/team-a/nightly", "pvb/b1-x", "pvb/b1-y"]]);
        let strict = vec![
            ("nab".to_string(), vec!["pvb".to_string()]),
            ("pvb".to_string(), vec!["backup".to_string()]),
            ("backup".to_string(), vec![]),
        ];
        assert_eq!(apply_order(&strict).unwrap(), vec![vec!["backup"], vec!["pvb"], vec!["nab"]]);
    }

    #[test]
    fn cycles_are_named() {
        let items = vec![("a", vec!["b"]), ("b", vec!["c"]), ("c", vec!["a"]), ("d", vec![])];
        let err = apply_order(&items).unwrap_err().to_string();
        assert_eq!(err, "dependency cycle: a → b → c → a");
        let selfish = vec![("a", vec!["a"])];
        assert_eq!(apply_order(&selfish).unwrap_err().to_string(), "dependency cycle: a → a");
    }
}
