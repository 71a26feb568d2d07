//! Compact JSON kept zstd-compressed in memory, against a dictionary of Velero's own field names.
//!
//! A catalog holds the raw `velero-backup.json` and PVB file of every backup (1.2 KB and 3 KB as compact text).
//! Each is too small for a compressor to learn much from it alone; primed with a dictionary of the field names
//! and fixed values every Velero object repeats (`velero_dictionary.json`), zstd keeps about a quarter of the
//! text, half of what deflate keeps. Text that does not look like the dictionary still compresses, only less.
//! A compressor's state is large to set up, so each thread keeps one, with the dictionary loaded.

use std::cell::RefCell;

/// Raw-content dictionary: not trained on any bucket, written from Velero's types (Backup, PodVolumeBackup).
const DICTIONARY: &[u8] = include_bytes!("velero_dictionary.json");
/// zstd's default level: the dictionary does most of the work, higher levels cost time for a few bytes.
const LEVEL: i32 = 3;

/// The default is empty text.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct CompressedJson {
    /// Shared: clones of an object (one per plan pass) do not copy it.
    compressed: std::sync::Arc<[u8]>,
    text_len: u32,
}

/// `text_len` of text kept as is, when the compressor ever fails.
const UNCOMPRESSED: u32 = u32::MAX;

thread_local! {
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> =
        RefCell::new(zstd::bulk::Compressor::with_dictionary(LEVEL, DICTIONARY).ok());
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        RefCell::new(zstd::bulk::Decompressor::with_dictionary(DICTIONARY).ok());
}

impl CompressedJson {
    pub fn new(text: &[u8]) -> Self {
        if text.is_empty() {
            return Self::default();
        }
        let compressed = COMPRESSOR.with(|cell| cell.borrow_mut().as_mut().and_then(|c| c.compress(text).ok()));
        match compressed {
            Some(compressed) if text.len() < UNCOMPRESSED as usize => {
                Self { compressed: compressed.into(), text_len: text.len() as u32 }
            }
            _ => Self { compressed: text.into(), text_len: UNCOMPRESSED },
        }
    }

    pub fn text(&self) -> Vec<u8> {
        if self.text_len == UNCOMPRESSED || self.text_len == 0 {
            return self.compressed.to_vec();
        }
        DECOMPRESSOR
            .with(|cell| {
                cell.borrow_mut().as_mut().and_then(|d| d.decompress(&self.compressed, self.text_len as usize).ok())
            })
            // We compressed it ourselves, with the same dictionary: it decompresses.
            .unwrap_or_default()
    }

    /// Heap bytes held.
    pub fn len(&self) -> usize {
        self.compressed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.text_len == 0
    }
}

/// `text` without whitespace outside strings (valid JSON in, the same JSON out).
pub fn compact(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for &b in text.as_bytes() {
        if in_string {
            out.push(b);
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
            in_string = b == b'"';
            out.push(b);
        }
    }
    out
}

impl std::fmt::Debug for CompressedJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", String::from_utf8_lossy(&self.text()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_shrinks() {
        let text = serde_json::json!({"metadata": {"name": "b", "labels": {"a": "b".repeat(500)}}}).to_string();
        let c = CompressedJson::new(text.as_bytes());
        assert_eq!(c.text(), text.as_bytes());
        assert!(c.len() < text.len() / 4);
        assert_eq!(CompressedJson::new(b"").text(), b"");
        for _ in 0..3 {
            assert_eq!(CompressedJson::new(b"{\"x\":1}").text(), b"{\"x\":1}");
        }
    }
}
