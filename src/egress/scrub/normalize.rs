//! Joining a wrapped rendering back together: what a script drops before it decodes.

use std::borrow::Cow;

use super::blocks::byte_class;

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
static WHITE_OR_NUL: [bool; 256] = byte_class(&[], b" \t\n\r\x0b\x0c\0");

/// NUL alone, for [`strip`] keeping white space.
static NUL: [bool; 256] = byte_class(&[], b"\0");

/// How many bytes of an invisible character start at `i` (its first byte is 0xC2 or
/// above); 0 when what stands there is kept.
fn dropped_at(text: &[u8], i: usize) -> usize {
    let rest = &text[i..text.len().min(i + 4)];
    let valid = match std::str::from_utf8(rest) {
        Ok(valid) => valid,
        Err(error) => std::str::from_utf8(&rest[..error.valid_up_to()]).unwrap_or_default(),
    };
    match valid.chars().next() {
        Some(c) if invisible(c) => c.len_utf8(),
        _ => 0,
    }
}

/// Unicode's white space beyond ASCII and its default-ignorable code points (zero-width
/// characters, joiners, marks of direction, variation selectors, fillers, tags): what a
/// text shows as nothing, so a script drops it.
fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{a0}'
            | '\u{ad}'
            | '\u{34f}'
            | '\u{61c}'
            | '\u{115f}'..='\u{1160}'
            | '\u{1680}'
            | '\u{17b4}'..='\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{2000}'..='\u{200f}'
            | '\u{2028}'..='\u{202f}'
            | '\u{205f}'..='\u{206f}'
            | '\u{3000}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff0}'..='\u{fff8}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}'
    )
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
                "s\u{200b}k\u{ad}_\u{feff}t\u{a0}e\u{2060}s\u{fe0f}t\u{34f}_\u{3164}a\u{e0041}b\u{1d173}"
                    .as_bytes(),
                b"sk_test_ab",
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
