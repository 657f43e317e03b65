//! Compressed bytes, inflated for the secret's search: a provider that gzips a file with the
//! key in it hands the key over as surely as one that sends it plain. gzip and zlib streams
//! and the deflated entries of a zip archive are inflated, bounded by the execution's
//! checking budget (each inflated byte is charged) and by [`MAX_INFLATED`] per view.

use std::io::Read;

use super::budget::Meter;

/// Bytes one view may inflate to, at most; a view larger than that is cut there (and the
/// bytes before the cut are searched). One view is held at a time.
const MAX_INFLATED: u64 = 16 * 1024 * 1024;

/// Zip archive entries looked into, at most.
const MAX_ENTRIES: usize = 1_000;

/// Whether `shows` holds for an inflated view of `bytes`: the whole as gzip or zlib when it
/// starts as one, or a deflated entry of a zip archive; true too once the budget is spent.
pub fn any_view(bytes: &[u8], meter: Meter<'_>, shows: &dyn Fn(&[u8]) -> bool) -> bool {
    let inflated = |reader: &mut dyn Read| {
        let mut inflated = Vec::new();
        let _ = reader.take(MAX_INFLATED).read_to_end(&mut inflated);
        !inflated.is_empty() && (!meter.take(inflated.len()) || shows(&inflated))
    };
    (bytes.starts_with(&[0x1f, 0x8b]) && inflated(&mut flate2::read::MultiGzDecoder::new(bytes)))
        || (is_zlib(bytes) && inflated(&mut flate2::read::ZlibDecoder::new(bytes)))
        || zip_entries(bytes)
            .into_iter()
            .take(MAX_ENTRIES)
            .any(|entry| inflated(&mut flate2::read::DeflateDecoder::new(entry)))
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
    }
}
