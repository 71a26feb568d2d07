//! How long a backup (or another thing retirement depends on) has been missing, counted in complete listings.
//! Retirement needs proof of absence: a key is *confirmed absent* only after `confirmations` consecutive
//! complete, successful listings without it **and** a grace period since the first of them. A listing that is
//! incomplete or failed is never recorded here (the caller passes only complete ones), and an empty listing
//! that follows a non-empty one counts only once a second one confirms it (a bucket emptied by a wrong
//! credential or a misconfigured prefix looks exactly like that).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

/// When absence becomes proof enough (config `retirement`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbsencePolicy {
    /// Consecutive complete listings without the key.
    pub confirmations: u32,
    /// Time since the first of them.
    pub grace: Duration,
}

impl Default for AbsencePolicy {
    fn default() -> Self {
        Self { confirmations: 3, grace: Duration::from_secs(3600) }
    }
}

/// One key's absence so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Absence {
    pub first_absent: SystemTime,
    pub listings: u32,
}

/// The absences of one location, kept by the coordinator across refreshes (and lost on restart: counting starts
/// again, which only delays retirement).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AbsenceLedger {
    absent: BTreeMap<String, Absence>,
    /// The last recorded listing held something.
    last_non_empty: bool,
    /// An empty listing after a non-empty one, not yet confirmed by a second.
    empty_unconfirmed: bool,
}

impl AbsenceLedger {
    /// Records one complete, successful listing at `now`: `watched` are the keys something depends on (e.g. the
    /// backup names ferry's objects refer to), `present` says which of them the listing holds, and `empty` whether
    /// the listing held nothing at all. Keys no longer watched are forgotten.
    pub fn record(&mut self, watched: &BTreeSet<String>, present: impl Fn(&str) -> bool, empty: bool, now: SystemTime) {
        if empty && self.last_non_empty && !self.empty_unconfirmed {
            self.empty_unconfirmed = true;
            return;
        }
        self.empty_unconfirmed = false;
        self.last_non_empty = !empty;
        self.absent.retain(|key, _| watched.contains(key) && !present(key));
        for key in watched.iter().filter(|k| !present(k)) {
            let entry = self.absent.entry(key.clone()).or_insert(Absence { first_absent: now, listings: 0 });
            entry.listings += 1;
        }
    }

    pub fn absence(&self, key: &str) -> Option<Absence> {
        self.absent.get(key).copied()
    }

    /// `Ok` when `key`'s absence is proven under `policy` at `now`; otherwise how far it is (for status).
    pub fn confirmed(&self, key: &str, policy: &AbsencePolicy, now: SystemTime) -> Result<Absence, String> {
        let Some(absence) = self.absence(key) else { return Err("present in the last complete listing".into()) };
        let waited = now.duration_since(absence.first_absent).unwrap_or_default();
        if absence.listings < policy.confirmations {
            return Err(format!(
                "absent from {} of {} complete listings needed",
                absence.listings, policy.confirmations
            ));
        }
        if waited < policy.grace {
            return Err(format!(
                "absent for {} of the {} grace period",
                humantime::format_duration(Duration::from_secs(waited.as_secs())),
                humantime::format_duration(policy.grace)
            ));
        }
        Ok(absence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(s)
    }

    fn watched(keys: &[&str]) -> BTreeSet<String> {
        keys.iter().map(|k| k.to_string()).collect()
    }

    const POLICY: AbsencePolicy = AbsencePolicy { confirmations: 3, grace: Duration::from_secs(100) };

    #[test]
    fn absence_is_proven_after_n_listings_and_the_grace_period() {
        let mut ledger = AbsenceLedger::default();
        let w = watched(&["gone", "kept"]);
        ledger.record(&w, |_| true, false, at(0));
        assert!(ledger.confirmed("gone", &POLICY, at(0)).is_err());
        for (i, t) in [10, 20, 30].into_iter().enumerate() {
            ledger.record(&w, |k| k == "kept", false, at(t));
            assert_eq!(ledger.absence("gone").map(|a| a.listings), Some(i as u32 + 1));
        }
        // Three listings, but only 20 s since the first absence.
        let why = ledger.confirmed("gone", &POLICY, at(30)).unwrap_err();
        assert!(why.contains("grace"), "{why}");
        assert!(ledger.confirmed("gone", &POLICY, at(110)).is_ok());
        assert!(ledger.confirmed("kept", &POLICY, at(110)).is_err());
        // Long after, but too few listings: time alone proves nothing.
        let mut slow = AbsenceLedger::default();
        slow.record(&w, |k| k == "kept", false, at(0));
        assert!(slow.confirmed("gone", &POLICY, at(100_000)).unwrap_err().contains("1 of 3"));
    }

    #[test]
    fn reappearing_resets_and_unwatched_keys_are_forgotten() {
        let mut ledger = AbsenceLedger::default();
        let w = watched(&["b"]);
        ledger.record(&w, |_| false, false, at(0));
        ledger.record(&w, |_| false, false, at(10));
        ledger.record(&w, |_| true, false, at(20));
        assert_eq!(ledger.absence("b"), None);
        ledger.record(&w, |_| false, false, at(30));
        assert_eq!(ledger.absence("b"), Some(Absence { first_absent: at(30), listings: 1 }));
        ledger.record(&watched(&[]), |_| false, false, at(40));
        assert_eq!(ledger.absence("b"), None);
    }

    #[test]
    fn an_empty_listing_after_a_full_one_needs_a_second_to_count() {
        let mut ledger = AbsenceLedger::default();
        let w = watched(&["a", "b"]);
        ledger.record(&w, |_| true, false, at(0));
        ledger.record(&w, |_| false, true, at(10));
        assert_eq!(ledger.absence("a"), None, "the first empty listing is not evidence");
        ledger.record(&w, |_| false, true, at(20));
        assert_eq!(ledger.absence("a").map(|a| a.listings), Some(1), "the second confirms it");
        ledger.record(&w, |_| false, true, at(30));
        assert_eq!(ledger.absence("a").map(|a| a.listings), Some(2));
        // A non-empty one in between starts the rule over.
        ledger.record(&w, |k| k == "a", false, at(40));
        ledger.record(&w, |_| false, true, at(50));
        assert_eq!(ledger.absence("b").map(|a| a.listings), Some(3), "b stays counted from before");
        assert_eq!(ledger.absence("a"), None, "a was present at 40 and the empty listing at 50 is unconfirmed");
    }
}
