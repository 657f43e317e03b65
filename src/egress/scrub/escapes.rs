//! Character escapes a script can undo: backslash escapes (JSON's, JavaScript's `\x` and
//! `\u{..}`), percent-encoding, quoted-printable (`=XX`, soft line breaks), HTML character
//! references (every HTML5 name, numbers with any leading zeros).

use super::normalize::normalize;

/// The bytes that start an escape: a backslash, `%`, `=` (quoted-printable, soft line breaks
/// too), `&`.
pub const MARKS: &[u8] = b"\\%=&";

/// A decoding of a text.
type Decoding = fn(&[u8]) -> Vec<u8>;

/// The character-escape decodings of a text, with its line breaks (`lines`) and joined
/// (`joined`, [`normalize`]d), that change it, each made only when asked for.
///
/// Every escape is undone in one pass ([`unescape_all`]): a mixture of kinds is undone at
/// once, and an escape of an escape is undone by the next decoding. That would corrupt a
/// secret that looks escaped itself (`%41` in it), so for such a secret (`apart`) each kind
/// is undone on its own. The text is decoded with its line breaks (a decoded `=` before one
/// is a quoted-printable soft break), joined too where an escape is cut by white space
/// (`%4` and `1` on the next line), and without its soft line breaks (`=`, maybe blanks, a
/// line break) where it has some: a script may read a `=` at the end of a line as a soft
/// break or as the line's own.
pub fn views<'a>(
    lines: &'a [u8],
    joined: &'a [u8],
    apart: bool,
) -> impl Iterator<Item = Vec<u8>> + 'a {
    let kinds: &'static [Decoding] = if apart {
        &[
            backslash_unescape,
            percent_decode,
            quoted_printable_decode,
            html_decode,
        ]
    } else {
        &[unescape_all]
    };
    let escaped = lines.iter().any(|b| MARKS.contains(b));
    let cut = escaped && lines != joined && cut_by_white_space(lines);
    let texts = [Some(lines), cut.then_some(joined)];
    let unbroken = move || {
        let unbroken = drop_soft_breaks(lines);
        (unbroken.len() != lines.len()).then(|| unescape_all(&unbroken))
    };
    texts
        .into_iter()
        .flatten()
        .filter(move |_| escaped)
        .flat_map(move |text| kinds.iter().map(move |decode| decode(text)))
        .chain(std::iter::once_with(move || escaped.then(unbroken).flatten()).flatten())
        .filter(move |view| *normalize(view) != *joined)
}

/// Whether white space stands within an escape's length after one of [`MARKS`] (other
/// than a soft line break's).
fn cut_by_white_space(lines: &[u8]) -> bool {
    lines.iter().enumerate().any(|(i, b)| {
        let within = match b {
            b'%' | b'=' => 3,
            b'\\' => 6,
            b'&' => 12,
            _ => return false,
        };
        let after = &lines[i + 1..lines.len().min(i + within)];
        soft_break_at(lines, i) == 0 && after.iter().any(u8::is_ascii_whitespace)
    })
}

/// The stretches of `text` within `reach` bytes of one of `marks` (the bytes that start an
/// escape), merged: all a decoding changes, with room on either side for the rest of a
/// rendering it completes. What lies farther from any escape a decoding leaves as it is,
/// and was looked into already, as deep, in the text itself.
pub fn around(text: &[u8], marks: &[u8], reach: usize) -> Vec<std::ops::Range<usize>> {
    let mut table = [false; 256];
    for mark in marks {
        table[*mark as usize] = true;
    }
    let mut stretches: Vec<std::ops::Range<usize>> = Vec::new();
    let mut i = 0;
    while let Some(found) = text[i..].iter().position(|b| table[*b as usize]) {
        let at = i + found;
        let stretch = at.saturating_sub(reach)..(at + 1 + reach).min(text.len());
        match stretches.last_mut() {
            Some(last) if stretch.start <= last.end => last.end = stretch.end,
            _ => stretches.push(stretch),
        }
        i = at + 1;
    }
    stretches
}

/// Every character escape undone in one pass: backslash, percent and quoted-printable
/// escapes, then HTML references (whose decoder would take `&#0000` of `&#0000%31;` as a
/// reference of its own).
pub fn unescape_all(text: &[u8]) -> Vec<u8> {
    let marked = unescape_marked(text, true, true, true);
    htmlize::unescape_bytes_in(marked, htmlize::Context::General).into_owned()
}

/// Decodes backslash escapes wherever they stand: JSON's (`\uXXXX` with surrogate pairs,
/// `\/`, `\"`, `\\`, `\n`, ...), JavaScript's `\xNN` and `\u{...}`, and octal ones.
pub fn backslash_unescape(text: &[u8]) -> Vec<u8> {
    unescape_marked(text, true, false, false)
}

/// `text` with every run of backslashes written as one: a JSON encoding doubles each
/// backslash and adds one, so any depth of them reads as one escape.
pub fn collapse_backslashes(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for (i, b) in text.iter().enumerate() {
        if *b != b'\\' || i == 0 || text[i - 1] != b'\\' {
            out.push(*b);
        }
    }
    out
}

/// Decodes `%XX` escapes (either case) and `%uXXXX`.
pub fn percent_decode(text: &[u8]) -> Vec<u8> {
    unescape_marked(text, false, true, false)
}

/// Decodes quoted-printable `=XX` escapes (either case).
pub fn quoted_printable_decode(text: &[u8]) -> Vec<u8> {
    unescape_marked(text, false, false, true)
}

/// Decodes HTML character references the way a browser does in text: every HTML5 name
/// (with or without the `;` where HTML allows it), numbers with any leading zeros.
pub fn html_decode(text: &[u8]) -> Vec<u8> {
    htmlize::unescape_bytes_in(text, htmlize::Context::General).into_owned()
}

/// Decodes, in one pass, the backslash escapes, the `%XX` and the `=XX` asked for; the text
/// between escapes is copied whole.
fn unescape_marked(text: &[u8], backslash: bool, percent: bool, equals: bool) -> Vec<u8> {
    let mark = |on: bool, byte: u8| if on { byte } else { b'\\' };
    let marks = (
        mark(backslash, b'\\'),
        mark(percent, b'%'),
        mark(equals, b'='),
    );
    let mut out = Vec::with_capacity(text.len());
    let mut pending_high: Option<u32> = None;
    let mut i = 0;
    while let Some(found) = memchr::memchr3(marks.0, marks.1, marks.2, &text[i..]) {
        if found > 0 {
            out.extend_from_slice(&text[i..i + found]);
            pending_high = None;
        }
        i += found;
        let b = text[i];
        // `%uXXXX`, JavaScript's old `escape()`.
        let wide = (b == b'%' && text.get(i + 1) == Some(&b'u'))
            .then(|| hex_number(text.get(i + 2..i + 6)?))
            .flatten();
        if let Some(code) = wide {
            let c = char::from_u32(code).unwrap_or('\u{FFFD}');
            out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
            i += 6;
            continue;
        }
        if b != b'\\' || !backslash {
            match hex_pair(text, i + 1) {
                Some(byte) => {
                    out.push(byte);
                    i += 3;
                }
                None => {
                    out.push(b);
                    i += 1;
                }
            }
            continue;
        }
        let (used, escape) = backslash_at(&text[i + 1..]);
        i += 1 + used;
        let code = match escape {
            Escape::Code(code) => code,
            Escape::Bytes(bytes) => {
                out.extend_from_slice(bytes);
                continue;
            }
        };
        if (0xD800..0xDC00).contains(&code) {
            pending_high = Some(code);
            continue;
        }
        let code = match pending_high.take() {
            Some(high) if (0xDC00..0xE000).contains(&code) => {
                0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00)
            }
            _ => code,
        };
        let c = char::from_u32(code).unwrap_or('\u{FFFD}');
        out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
    }
    out.extend_from_slice(&text[i..]);
    out
}

/// What a backslash escape stands for.
enum Escape<'a> {
    /// A character by its code (a UTF-16 unit of a pair included).
    Code(u32),
    /// Bytes as they are.
    Bytes(&'a [u8]),
}

/// The escape after a backslash (`rest` starts after it) and the bytes it takes.
fn backslash_at(rest: &[u8]) -> (usize, Escape<'_>) {
    let braced = rest.strip_prefix(b"u{").and_then(|digits| {
        let end = digits.iter().take(7).position(|b| *b == b'}')?;
        let code = hex_number(&digits[..end])?;
        Some((end + 3, Escape::Code(code)))
    });
    if let Some(escape) = braced {
        return escape;
    }
    let fixed = |digits: usize| {
        let code = hex_number(rest.get(1..1 + digits)?)?;
        Some((1 + digits, Escape::Code(code)))
    };
    let octal = || {
        let digits = rest.iter().take(3).take_while(|b| matches!(b, b'0'..=b'7'));
        let (used, code) = digits.fold((0, 0), |(n, code), b| {
            (n + 1, code * 8 + u32::from(b - b'0'))
        });
        Some((used, Escape::Code(code)))
    };
    let numbered = match rest.first() {
        Some(b'u') => fixed(4),
        Some(b'x') => fixed(2),
        // C's, Python's and sloppy JavaScript's octal escapes (`\0` alone too).
        Some(b'0'..=b'7') => octal(),
        _ => None,
    };
    if let Some(escape) = numbered {
        return escape;
    }
    match rest.first() {
        Some(b'n') => (1, Escape::Bytes(b"\n")),
        Some(b't') => (1, Escape::Bytes(b"\t")),
        Some(b'r') => (1, Escape::Bytes(b"\r")),
        Some(b'b') => (1, Escape::Bytes(b"\x08")),
        Some(b'f') => (1, Escape::Bytes(b"\x0c")),
        Some(b'v') => (1, Escape::Bytes(b"\x0b")),
        Some(b'"' | b'\'' | b'\\' | b'/') => (1, Escape::Bytes(&rest[..1])),
        // Anything else stays as it is, backslash included: an escape of another kind may
        // follow (`\&#117;0041` is `\u0041` once its HTML reference is undone), and an
        // incomplete `\u` or `\x` may be completed by one.
        _ => (0, Escape::Bytes(b"\\")),
    }
}

/// The number the hex digits `digits` write, if they are all hex digits.
fn hex_number(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// The byte two hex digits at `at` write.
fn hex_pair(text: &[u8], at: usize) -> Option<u8> {
    let digits = text.get(at..at + 2)?;
    Some(hex_value(digits[0])? << 4 | hex_value(digits[1])?)
}

/// The value of one hex digit.
pub fn hex_value(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// `text` without quoted-printable soft line breaks.
fn drop_soft_breaks(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while let Some(found) = memchr::memchr(b'=', &text[i..]) {
        let at = i + found;
        let soft = soft_break_at(text, at);
        out.extend_from_slice(&text[i..at + usize::from(soft == 0)]);
        i = at + soft.max(1);
    }
    out.extend_from_slice(&text[i..]);
    out
}

/// The length of the quoted-printable soft line break at `at` (`=`, maybe blanks, a line
/// break), 0 when there is none.
fn soft_break_at(text: &[u8], at: usize) -> usize {
    if text.get(at) != Some(&b'=') {
        return 0;
    }
    let blanks = text[at + 1..]
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t'))
        .count();
    let end = at + 1 + blanks;
    match &text[end..] {
        [b'\r', b'\n', ..] => 1 + blanks + 2,
        [b'\n' | b'\r', ..] => 1 + blanks + 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::scrub::normalize::strip;

    fn all_views(raw: &[u8], apart: bool) -> Vec<Vec<u8>> {
        let lines = strip(raw, true);
        let joined = normalize(&lines);
        views(&lines, &joined, apart)
            .map(|v| normalize(&v).into_owned())
            .collect()
    }

    #[test]
    fn one_pass_undoes_every_escape_and_their_mixtures() {
        let cases: [(&[u8], &[u8]); 9] = [
            (
                br"sk\u005ftest\/\x41\u{1F600}",
                "sk_test/A\u{1F600}".as_bytes(),
            ),
            (br"\ud83d\ude00\n", "\u{1F600}".as_bytes()),
            (b"sk%5Ftest%2f", b"sk_test/"),
            (
                b"sk&lowbar;test&sol;&#0000065;&#x00041;&amp",
                b"sk_test/AA&",
            ),
            (b"sk=5Fte%73t\\u005F&lowbar;", b"sk_test__"),
            // An escape of an escape is undone by the next decoding.
            (b"&#x25;41", b"%41"),
            (b"&#0000%31%316;", b"t"),
            (
                br"\u00zz \x4 \u{110000000} \q",
                br"\u00zz\x4\u{110000000}\q",
            ),
            (br"\&#0000117;0041", b"\\u0041"),
        ];
        for (text, decoded) in cases {
            let views = all_views(text, false);
            let want: Vec<Vec<u8>> = if *normalize(text) == *decoded {
                Vec::new()
            } else {
                vec![decoded.to_vec()]
            };
            assert_eq!(views, want, "{:?}", String::from_utf8_lossy(text));
        }
        assert!(all_views(b"100% & = fine", false).is_empty());
    }

    #[test]
    fn octal_and_wide_percent_escapes_are_undone() {
        assert_eq!(unescape_all(br"\163\153_\0x\1234"), b"sk_\0xS4");
        assert_eq!(unescape_all(b"%u0073%u006B%u00zz"), b"sk%u00zz");
        assert_eq!(backslash_unescape(b"\\8"), b"\\8");
    }

    #[test]
    fn decodings_are_looked_into_around_escapes_only() {
        let text = b"0123456789%41bcdefghijklmnop=qrstuvwxyz&amp;";
        assert_eq!(around(text, MARKS, 3), [7..14, 25..32, 36..43]);
        assert_eq!(around(text, MARKS, 20), vec![0..text.len()]);
        assert!(around(b"no escapes", MARKS, 5).is_empty());
    }

    #[test]
    fn a_secret_that_looks_escaped_has_each_kind_undone_apart() {
        // `=41` stays in the percent view, `%41` in the quoted-printable one.
        let views = all_views(b"a=41%41&#65;\\x41", true);
        assert_eq!(
            views,
            [
                b"a=41%41&#65;A".to_vec(),
                b"a=41A&#65;\\x41".to_vec(),
                b"aA%41&#65;\\x41".to_vec(),
                b"a=41%41A\\x41".to_vec(),
            ]
        );
    }

    #[test]
    fn quoted_printable_is_read_with_and_without_soft_breaks() {
        assert_eq!(
            all_views(b"sk=5Fte=\r\nst= \t\n=5f=2F =zz", false),
            [b"sk_te=st=_/=zz".to_vec(), b"sk_test_/=zz".to_vec()]
        );
        // UTF-16 around a soft break.
        assert_eq!(
            all_views(b"a\0=\0\r\0\n\0=\x003\0D\0", false),
            [b"a==".to_vec(), b"a=".to_vec()]
        );
        // An escape wrapped across lines.
        assert_eq!(all_views(b"a=5\nF", false), [b"a_".to_vec()]);
        assert!(all_views(b"a = b", false).is_empty());
        assert!(all_views(b"no escapes", false).is_empty());
    }
}
