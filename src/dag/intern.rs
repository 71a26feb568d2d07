//! A fast, non-cryptographic hasher (FxHash, as rustc uses) and a string interner: the graph hashes millions of
//! short keys (uids, names) per build, where std's SipHash would dominate the build time. The keys come from one
//! backup the user asked about, so hash flooding is not a concern here.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash: one multiply and rotate per word.
#[derive(Debug, Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    /// The multiply leaves the low bits depending only on the input's low bits, and hashbrown picks buckets by
    /// the low bits: rotate the well-mixed high bits down (as rustc-hash 2 does), or similar keys (`app-1`,
    /// `app-2`, …) collide and a 1M-object build goes quadratic.
    #[inline]
    fn finish(&self) -> u64 {
        self.hash.rotate_left(26)
    }
}

pub type FxBuildHasher = BuildHasherDefault<FxHasher>;
pub type FxHashMap<K, V> = HashMap<K, V, FxBuildHasher>;

/// Strings → dense `u32` ids, so repeated values (kinds, namespaces) are stored and compared once.
#[derive(Debug, Default, Clone)]
pub struct Interner {
    ids: FxHashMap<Box<str>, u32>,
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
}
