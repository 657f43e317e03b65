//! Compressed bytes, inflated for the secret's search: a provider that gzips a file with the
//! key in it hands the key over as surely as one that sends it plain. gzip and zlib streams
//! and the deflated entries of a zip archive are inflated, bounded by the execution's
//! checking budget (each byte read and inflated is charged) and by [`MAX_WORK`] per body.

use std::io::Read;

use super::budget::Meter;

/// Bytes all views of one body may inflate to, and compressed bytes they may read, in all:
/// past either, the body is not checked (and is withheld, as anything unchecked). A body of
/// many archive entries that share one stream, or of empty deflate blocks, costs no more.
const MAX_WORK: usize = 32 * 1024 * 1024;

/// Zip archive entries looked into, at most.
const MAX_ENTRIES: usize = 64;

/// Bytes inflated at a time, charged before the next.
const CHUNK: usize = 64 * 1024;

/// A reader that counts what it hands out.
struct Counted<'a> {
    bytes: &'a [u8],
    read: &'a std::cell::Cell<usize>,
}

impl Read for Counted<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = self.bytes.read(out)?;
        self.read.set(self.read.get() + n);
        Ok(n)
    }
}

/// Whether `shows` holds for an inflated view of `bytes` (the whole as gzip or zlib when it
/// starts as one, or a deflated entry of a zip archive), or the views cost more than may be
/// spent on them (the budget, or [`MAX_WORK`]): what is not checked is not let through.
pub fn any_view(bytes: &[u8], meter: Meter<'_>, shows: &dyn Fn(&[u8]) -> bool) -> bool {
    let mut work = 0usize;
    let mut view = |kind: u8, from: &[u8]| -> bool {
        // 0: gzip, 1: zlib, 2: raw deflate.
        let read = std::cell::Cell::new(0usize);
        let input = Counted {
            bytes: from,
            read: &read,
        };
        let mut decoder: Box<dyn Read + '_> = match kind {
            0 => Box::new(flate2::read::MultiGzDecoder::new(input)),
            1 => Box::new(flate2::read::ZlibDecoder::new(input)),
            _ => Box::new(flate2::read::DeflateDecoder::new(input)),
        };
        let mut inflated = Vec::new();
        let mut chunk = vec![0u8; CHUNK];
        loop {
            let before = read.get();
            let n = decoder.read(&mut chunk).unwrap_or(0);
            let cost = n + (read.get() - before);
            work += cost;
            if work > MAX_WORK || !meter.take(cost) {
                return true;
            }
            if n == 0 {
                break;
            }
            inflated.extend_from_slice(&chunk[..n]);
        }
        !inflated.is_empty() && shows(&inflated)
    };
    (bytes.starts_with(&[0x1f, 0x8b]) && view(0, bytes))
        || (is_zlib(bytes) && view(1, bytes))
        || zip_entries(bytes)
            .into_iter()
            .take(MAX_ENTRIES)
            .any(|entry| view(2, entry))
}

/// Whether `bytes` start with a zlib header (deflate, a window, a valid check).
fn is_zlib(bytes: &[u8]) -> bool {
    match bytes {
        [cmf, flg, ..] => cmf & 0x0f == 8 && (u16::from(*cmf) << 8 | u16::from(*flg)) % 31 == 0,
        _ => false,
    }
}

/// The deflated data of each local file entry of a zip archive (`PK\3\4`, method 8),
/// wherever one starts in `bytes`.
fn zip_entries(bytes: &[u8]) -> Vec<&[u8]> {
    let u16_at = |at: usize| {
        bytes
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    memchr::memmem::find_iter(bytes, b"PK\x03\x04")
        .filter_map(|at| {
            let method = u16_at(at + 8)?;
            let name = usize::from(u16_at(at + 26)?);
            let extra = usize::from(u16_at(at + 28)?);
            let start = at + 30 + name + extra;
            (method == 8).then(|| bytes.get(start..)).flatten()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn gzip_zlib_and_zip_entries_are_inflated() {
        let secret = b"token=sk_live_Zq8P3xVt7LmN2bW9cR4yHk6J";
        let found = |bytes: &[u8]| any_view(bytes, Meter(None), &|view| view == secret);
        assert!(found(&gzip(secret)));
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        zlib.write_all(secret).unwrap();
        assert!(found(&zlib.finish().unwrap()));
        let mut deflate =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        deflate.write_all(secret).unwrap();
        let mut zip = b"PK\x03\x04\x14\x00\x00\x00\x08\x00".to_vec();
        zip.extend_from_slice(&[0; 16]);
        zip.extend_from_slice(&[5, 0, 0, 0]);
        zip.extend_from_slice(b"a.txt");
        zip.extend_from_slice(&deflate.finish().unwrap());
        assert!(found(&zip));
        assert!(!found(b"\x89PNG plain bytes"));
        assert!(!found(&gzip(b"something else")));
        // A bomb costs at most the work allowed, and is then not let through: 1,000 zip
        // headers pointing at one stream that inflates to 40 MiB.
        let mut bomb_stream =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        bomb_stream.write_all(&vec![0u8; 40 << 20]).unwrap();
        let stream = bomb_stream.finish().unwrap();
        let mut bomb = Vec::new();
        for i in 0..1000u16 {
            bomb.extend_from_slice(b"PK\x03\x04\x14\x00\x00\x00\x08\x00");
            bomb.extend_from_slice(&[0; 16]);
            bomb.extend_from_slice(&[0, 0]);
            // The extra field runs to the stream after the last header.
            bomb.extend_from_slice(&((999 - i) * 30).to_le_bytes());
        }
        bomb.extend_from_slice(&stream);
        let started = std::time::Instant::now();
        assert!(found(&bomb), "past the work allowed, not let through");
        println!(
            "a 40 MiB bomb behind 1,000 headers: {:?}",
            started.elapsed()
        );
    }
}
