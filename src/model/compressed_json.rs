//! Compact JSON kept deflate-compressed in memory.
//!
//! A catalog holds the raw `velero-backup.json` of every backup (1.3 KB each as compact text); compressed it is
//! about a third of that. The (de)compressor state is large to set up, so each thread keeps one and resets it.

use std::cell::RefCell;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

#[derive(Clone, PartialEq, Eq)]
pub struct CompressedJson {
    deflated: Box<[u8]>,
    text_len: u32,
}

thread_local! {
    static CODEC: RefCell<(Compress, Decompress)> =
        RefCell::new((Compress::new(Compression::fast(), false), Decompress::new(false)));
}

impl CompressedJson {
    pub fn new(text: &[u8]) -> Self {
        let deflated = CODEC.with(|codec| {
            let compress = &mut codec.borrow_mut().0;
            compress.reset();
            let mut out = Vec::with_capacity(text.len() / 2 + 64);
            loop {
                let consumed = compress.total_in() as usize;
                let status = compress.compress_vec(&text[consumed..], &mut out, FlushCompress::Finish);
                match status {
                    Ok(Status::StreamEnd) => break,
                    Ok(_) => out.reserve(out.capacity().max(64)),
                    // Compressing into memory does not fail; keep the text uncompressed if it ever does.
                    Err(_) => return None,
                }
            }
            Some(out.into_boxed_slice())
        });
        match deflated {
            Some(deflated) => Self { deflated, text_len: text.len() as u32 },
            None => Self { deflated: text.into(), text_len: u32::MAX },
        }
    }

    pub fn text(&self) -> Vec<u8> {
        if self.text_len == u32::MAX {
            return self.deflated.to_vec();
        }
        CODEC.with(|codec| {
            let decompress = &mut codec.borrow_mut().1;
            decompress.reset(false);
            let mut out = Vec::with_capacity(self.text_len as usize);
            // The output is sized exactly: one call inflates everything.
            let _ = decompress.decompress_vec(&self.deflated, &mut out, FlushDecompress::Finish);
            out
        })
    }

    /// Heap bytes held.
    pub fn len(&self) -> usize {
        self.deflated.len()
    }

    pub fn is_empty(&self) -> bool {
        self.text_len == 0
    }
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
