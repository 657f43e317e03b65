//! Joining a wrapped rendering back together: what a script drops before it decodes.

use std::borrow::Cow;

/// `text` without white space, NULs and invisible characters: what is left when a script
/// joins a wrapped rendering back together.
pub fn normalize(text: &[u8]) -> Cow<'_, [u8]> {
    strip(text, false)
}

/// `text` without what [`normalize`] drops, line breaks and white space kept with
/// `keep_white`. One table lookup a byte, and no branch for white space, which is most of
/// what is dropped.
pub fn strip(text: &[u8], keep_white: bool) -> Cow<'_, [u8]> {
    let single = if keep_white { &NUL } else { &WHITE_OR_NUL };
    let may_drop = |b: u8| single[b as usize] || b >= 0xc2;
    let Some(first) = text.iter().position(|b| may_drop(*b)) else {
        return Cow::Borrowed(text);
    };
    let mut out = vec![0u8; text.len()];
    out[..first].copy_from_slice(&text[..first]);
    let mut len = first;
    let mut i = first;
    while i < text.len() {
        let b = text[i];
        if b >= 0xc2 {
            let dropped = dropped_at(text, i);
            if dropped > 0 {
                i += dropped;
                continue;
            }
        }
        out[len] = b;
        len += usize::from(!single[b as usize]);
        i += 1;
    }
    if len == text.len() {
        return Cow::Borrowed(text);
    }
    out.truncate(len);
    Cow::Owned(out)
}

/// ASCII white space and NUL: what [`normalize`] drops one byte at a time.
static WHITE_OR_NUL: [bool; 256] = byte_table(b" \t\n\r\x0b\x0c\0");

/// NUL alone, for [`strip`] keeping white space.
static NUL: [bool; 256] = byte_table(b"\0");

const fn byte_table(bytes: &[u8]) -> [bool; 256] {
    let mut table = [false; 256];
    let mut i = 0;
    while i < bytes.len() {
        table[bytes[i] as usize] = true;
        i += 1;
    }
    table
}

/// How many bytes of an invisible character start at `i` (its first byte is 0xC2 or
/// above); 0 when what stands there is kept.
fn dropped_at(text: &[u8], i: usize) -> usize {
    let rest = &text[i..];
    match rest {
        // U+00A0 no-break space, U+00AD soft hyphen.
        [0xc2, 0xa0 | 0xad, ..] => 2,
        // U+180E Mongolian vowel separator.
        [0xe1, 0xa0, 0x8e, ..] => 3,
        // U+2000..U+200F spaces, zero-width characters and marks; U+2028..U+202F line and
        // paragraph separators, embeddings, narrow no-break space.
        [0xe2, 0x80, 0x80..=0x8f | 0xa8..=0xaf, ..] => 3,
        // U+205F..U+206F medium space, word joiner, invisible operators, isolates.
        [0xe2, 0x81, 0x9f..=0xaf, ..] => 3,
        // U+3000 ideographic space.
        [0xe3, 0x80, 0x80, ..] => 3,
        // U+FEFF zero-width no-break space (a byte order mark).
        [0xef, 0xbb, 0xbf, ..] => 3,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_joins_wrapped_renderings() {
        let cases: [(&[u8], &[u8]); 6] = [
            (b"sk_te\r\nst_ab\n  cd", b"sk_test_abcd"),
            (b"sk_te=\r\nst=  \nab=3Dx", b"sk_te=st=ab=3Dx"),
            (b"s\0\0\0k\0\0\0", b"sk"),
            (
                "s\u{200b}k\u{ad}_\u{feff}t\u{a0}e\u{2060}s".as_bytes(),
                b"sk_tes",
            ),
            ("caf\u{e9} \u{2028}x".as_bytes(), "caf\u{e9}x".as_bytes()),
            (b"a=b", b"a=b"),
        ];
        for (text, joined) in cases {
            assert_eq!(
                &*normalize(text),
                joined,
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
        assert!(matches!(normalize(b"plain_text"), Cow::Borrowed(_)));
    }

    proptest::proptest! {
        /// Normalizing text is idempotent and only ever removes bytes.
        #[test]
        fn normalize_only_removes(text in "([ \t\r\n\u{0}\u{a0}\u{ad}\u{200b}\u{2060}\u{feff}=]|\\PC){0,200}") {
            let text = text.into_bytes();
            let once = normalize(&text).into_owned();
            proptest::prop_assert_eq!(&*normalize(&once), &once[..]);
            let mut rest = text.iter();
            proptest::prop_assert!(once.iter().all(|b| rest.any(|t| t == b)));
        }
    }
}
