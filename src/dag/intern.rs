//! Hashing and interning for the graph build: [foldhash] (a folded multiply per word) for the build's hash maps
//! and its one-shot 64-bit keys (the sorted join indexes), and a string interner for the few repeated values
//! (kinds, resources). Fixed seeds, so a build is the same in every process. The keys come from one backup the
//! user asked about, so hash flooding is not a concern; a key match is always confirmed by comparing the strings,
//! so a collision costs time, never an edge.
//!
//! Why not FxHash (which this replaced): its `(h.rotl(5) ^ word) * K` step lets XOR differences of structured
//! strings cancel — 6,756 of 1M uids like `pod-12-34` shared a full 64-bit hash.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// The seed of [`key`]: any fixed value.
const SEED: u64 = 0x2d35_8dcc_aa6c_78a5;

/// The 64-bit key of a sequence of strings (an identity: group, kind, namespace, name; or a uid). Each part is
/// followed by its length, so `("ab", "c")` and `("a", "bc")` differ. foldhash's quality variant: the whole
/// 64 bits are compared (not a few bucket bits), and its extra final round is cheap next to the sort.
#[inline]
pub fn key(parts: &[&str]) -> u64 {
    let mut h = foldhash::quality::FixedState::with_seed(SEED).build_hasher();
    for part in parts {
        h.write(part.as_bytes());
        h.write_u64(part.len() as u64 | 1 << 63);
    }
    h.finish()
}

/// foldhash's fast variant with a fixed seed, for `HashMap`s of short keys.
pub type FoldBuildHasher = foldhash::fast::FixedState;
pub type FastHashMap<K, V> = HashMap<K, V, FoldBuildHasher>;

/// Strings → dense `u32` ids, so repeated values (kinds, namespaces) are stored and compared once.
#[derive(Debug, Default, Clone)]
pub struct Interner {
    ids: FastHashMap<Box<str>, u32>,
    strings: Vec<Box<str>>,
}

impl Interner {
    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        self.strings.push(s.into());
        self.ids.insert(s.into(), id);
        id
    }

    pub fn get(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied()
    }

    pub fn resolve(&self, id: u32) -> &str {
        self.strings.get(id as usize).map(|s| &**s).unwrap_or_default()
    }

    pub fn len(&self) -> usize {
        self.strings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interns_once() {
        let mut i = Interner::default();
        let a = i.intern("pods");
        assert_eq!(i.intern("pods"), a);
        assert_ne!(i.intern("secrets"), a);
        assert_eq!(i.resolve(a), "pods");
        assert_eq!(i.get("nope"), None);
        assert_eq!(i.len(), 2);
    }

    /// The uids that made FxHash collide (see the module comment): all distinct here.
    #[test]
    fn keys_of_similar_strings_are_distinct() {
        let mut keys: Vec<u64> = (0..200)
            .flat_map(|k| (0..1000).map(move |w| key(&[&format!("pod-{k}-{w}")])))
            .chain([key(&["ab", "c"]), key(&["a", "bc"]), key(&["abc"]), key(&["abc", ""])])
            .collect();
        let n = keys.len();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), n);
    }
}
