//! Hashing and interning for the graph build: a fast, non-cryptographic hasher (a folded multiply per word, as
//! foldhash and wyhash do), one-shot 64-bit keys for the build's sorted indexes, and a string interner for the few
//! repeated values (kinds, resources). The keys come from one backup the user asked about, so hash flooding is
//! not a concern; a key match is always confirmed by comparing the strings, so a collision costs time, never an
//! edge.
//!
//! Why not FxHash (which this replaced): its `(h.rotl(5) ^ word) * K` step lets XOR differences of structured
//! strings cancel — 6,756 of 1M uids like `pod-12-34` shared a full 64-bit hash.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

const K: u64 = 0x9e37_79b9_7f4a_7c15;
const SEED: u64 = 0x2d35_8dcc_aa6c_78a5;

/// The 128-bit product of `x` and `y`, high half XOR low half: every input bit reaches every output bit.
#[inline]
fn fold(x: u64, y: u64) -> u64 {
    let p = u128::from(x) * u128::from(y);
    (p as u64) ^ ((p >> 64) as u64)
}

/// A folded-multiply hasher for `HashMap`s of short keys.
#[derive(Debug, Clone, Copy)]
pub struct FoldHasher {
    hash: u64,
}

impl Default for FoldHasher {
    fn default() -> Self {
        Self { hash: SEED }
    }
}

impl FoldHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = fold(self.hash ^ word, K);
    }

    /// Bytes in 8-byte little-endian words, the last one zero-padded; callers add the length (or a separator)
    /// so that padding cannot make two strings equal.
    #[inline]
    fn add_bytes(&mut self, bytes: &[u8]) {
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
}

impl Hasher for FoldHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.add_bytes(bytes);
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

    #[inline]
    fn finish(&self) -> u64 {
        // One more round so the last word is mixed as well as the others.
        fold(self.hash, K ^ SEED)
    }
}

/// The 64-bit key of a sequence of strings (an identity: group, kind, namespace, name; or a uid). Each part is
/// followed by its length, so `("ab", "c")` and `("a", "bc")` differ.
#[inline]
pub fn key(parts: &[&str]) -> u64 {
    let mut h = FoldHasher::default();
    for part in parts {
        h.add_bytes(part.as_bytes());
        h.add(part.len() as u64 | 1 << 63);
    }
    h.finish()
}

pub type FoldBuildHasher = BuildHasherDefault<FoldHasher>;
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
