//! The scrubber judged by a thief written apart from it: whatever a provider echoes, no
//! decoding a script would try (two deep) gets a fragment of the secret that counts back.

use super::*;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE};
use data_encoding::{BASE32, BASE32_NOPAD, BASE32HEX, BASE32HEX_NOPAD};

/// The secret of these tests, with the characters encodings treat specially (21
/// characters: any ten after its public prefix `sk_test_` count).
const SECRET: &str = "sk_test_A/b+c=d<e&f'g";

/// Characters a thief drops to join a wrapped rendering.
const INVISIBLE: &[char] = &[
    '\0',
    '\u{a0}',
    '\u{ad}',
    '\u{200b}',
    '\u{200c}',
    '\u{200d}',
    '\u{2060}',
    '\u{feff}',
    '\u{fe0f}',
    '\u{34f}',
    '\u{3164}',
    '\u{e0041}',
];

/// The fragments of the secret that count: a text carrying any of them leaks.
fn windows() -> Vec<String> {
    let chars: Vec<char> = SECRET.chars().collect();
    let (part, len) = encode::counting(SECRET);
    (part.start..=part.end - len)
        .map(|start| chars[start..start + len].iter().collect())
        .collect()
}

/// What a script would try on a text, one step: join lines, undo escapes, reverse, decode
/// the text's base64, base32 and hex characters at every alignment.
fn undo(text: &[u8]) -> Vec<Vec<u8>> {
    let s = String::from_utf8_lossy(text);
    let joined: String = s
        .replace("=\r\n", "")
        .replace("=\n", "")
        .chars()
        .filter(|c| !c.is_whitespace() && !INVISIBLE.contains(c))
        .collect();
    let mut out = vec![
        joined.clone().into_bytes(),
        unescape_backslashes(&s).into_bytes(),
        unescape_marked(text, b'%'),
        unescape_marked(joined.as_bytes(), b'='),
        htmlize::unescape(&*s).into_owned().into_bytes(),
        s.chars().rev().collect::<String>().into_bytes(),
        numbers(&s),
    ];
    let picked = |keep: fn(char) -> bool, map: fn(char) -> char| -> String {
        joined.chars().filter(|c| keep(*c)).map(map).collect()
    };
    let base64 = picked(
        |c| c.is_ascii_alphanumeric() || "+/-_".contains(c),
        |c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        },
    );
    let base32 = picked(
        |c| c.is_ascii_alphabetic() || ('2'..='7').contains(&c),
        |c| c.to_ascii_uppercase(),
    );
    let base32hex = picked(
        |c| c.is_ascii_digit() || ('a'..='v').contains(&c.to_ascii_lowercase()),
        |c| c.to_ascii_uppercase(),
    );
    let hex = picked(|c| c.is_ascii_hexdigit(), |c| c);
    for offset in 0..8 {
        // The last group completed with zero bits, so that its whole bytes are read too.
        let aligned = |text: &str, group: usize, zero: char| {
            let mut tail = text.get(offset..).unwrap_or_default().to_owned();
            while !tail.len().is_multiple_of(group) {
                tail.push(zero);
            }
            tail
        };
        if offset < 4 {
            out.extend(STANDARD_NO_PAD.decode(aligned(&base64, 4, 'A').as_bytes()));
        }
        out.extend(BASE32_NOPAD.decode(aligned(&base32, 8, 'A').as_bytes()));
        out.extend(BASE32HEX_NOPAD.decode(aligned(&base32hex, 8, '0').as_bytes()));
        if offset < 2 {
            let digits = aligned(&hex, 2, '0');
            out.push(
                (0..digits.len() / 2)
                    .filter_map(|i| u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).ok())
                    .collect(),
            );
        }
    }
    out
}

/// The bytes a list of numbers writes (`[115, 107]`, `0x73,0x6b`): every decimal number
/// up to 255 and every `0x` pair, in order, whatever stands between them.
fn numbers(s: &str) -> Vec<u8> {
    s.split(|c: char| !c.is_ascii_alphanumeric())
        .filter_map(|token| match token.strip_prefix("0x") {
            Some(hex) => u8::from_str_radix(hex, 16).ok(),
            None => token.parse::<u8>().ok(),
        })
        .collect()
}

fn unescape_backslashes(s: &str) -> String {
    let mut out = String::new();
    let mut units: Vec<u16> = Vec::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let flush = |units: &mut Vec<u16>, out: &mut String| {
        out.push_str(&String::from_utf16_lossy(units));
        units.clear();
    };
    while i < chars.len() {
        let hex = |from: usize, n: usize| -> Option<u32> {
            let digits: String = chars.get(from..from + n)?.iter().collect();
            u32::from_str_radix(&digits, 16).ok()
        };
        if chars[i] == '\\'
            && chars.get(i + 1) == Some(&'u')
            && let Some(unit) = hex(i + 2, 4)
        {
            units.push(unit as u16);
            i += 6;
            continue;
        }
        flush(&mut units, &mut out);
        match (chars[i], chars.get(i + 1)) {
            ('\\', Some('x')) if hex(i + 2, 2).is_some() => {
                out.push(char::from_u32(hex(i + 2, 2).unwrap_or(0)).unwrap_or('?'));
                i += 4;
            }
            ('\\', Some(c)) => {
                out.push(match c {
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    c => *c,
                });
                i += 2;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    flush(&mut units, &mut out);
    out
}

fn unescape_marked(text: &[u8], mark: u8) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let pair = text
            .get(i + 1..i + 3)
            .and_then(|p| std::str::from_utf8(p).ok());
        match pair.and_then(|p| u8::from_str_radix(p, 16).ok()) {
            Some(b) if text[i] == mark => {
                out.push(b);
                i += 3;
            }
            _ => {
                out.push(text[i]);
                i += 1;
            }
        }
    }
    out
}

/// The fragment that counts a thief gets out of `text` (or its reversal), trying every
/// decoding two deep.
fn stolen(text: &str) -> Option<String> {
    let windows: Vec<String> = windows()
        .into_iter()
        .flat_map(|w| [w.chars().rev().collect(), w])
        .collect();
    let found = |bytes: &[u8]| {
        windows
            .iter()
            .find(|w| memchr::memmem::find(bytes, w.as_bytes()).is_some())
            .cloned()
    };
    let mut level = vec![text.as_bytes().to_vec()];
    for depth in 0..=2 {
        if let Some(hit) = level.iter().find_map(|bytes| found(bytes)) {
            return Some(hit);
        }
        if depth < 2 {
            level = level.iter().flat_map(|bytes| undo(bytes)).collect();
            level.sort();
            level.dedup();
        }
    }
    None
}

/// Every string and key in `value`.
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().flat_map(strings).collect(),
        Value::Object(map) => map
            .iter()
            .flat_map(|(k, v)| std::iter::once(k.clone()).chain(strings(v)))
            .collect(),
        _ => Vec::new(),
    }
}

/// How a provider might render a text: each a step a script can undo.
#[derive(Clone, Debug)]
enum Render {
    /// Lines of `width` characters, joined by one of the usual breaks.
    Wrapped(usize, &'static str),
    /// An invisible character after every `every` characters.
    Invisible(usize, char),
    /// The characters `mask` picks as `\uXXXX` (or `\xNN`), the rest as they are.
    Backslash(u64),
    /// The bytes `mask` picks as `%XX`.
    Percent(u64),
    /// The characters `mask` picks as HTML references: names where HTML5 has one, else
    /// numbers with leading zeros.
    Html(u64),
    /// The bytes `mask` picks as `=XX`, with a soft line break every `every` characters.
    QuotedPrintable(u64, usize),
    /// Base64 after `junk` bytes, in either alphabet, wrapped at 76.
    Base64(usize, bool),
    /// Base32 after `junk` bytes: the extended hex alphabet or not, lower case or not.
    Base32(usize, bool, bool),
    /// Hex, with `:` between bytes or not.
    Hex(bool),
    /// UTF-16 or UTF-32, little-endian or not, as a text of bytes.
    Wide(bool, bool),
    /// Back to front.
    Reversed,
}

impl Render {
    fn apply(&self, text: &str) -> String {
        let picked = |mask: u64, i: usize| mask >> (i % 64) & 1 == 1;
        match self {
            Render::Wrapped(width, join) => text
                .chars()
                .collect::<Vec<_>>()
                .chunks(*width)
                .map(|line| line.iter().collect::<String>())
                .collect::<Vec<_>>()
                .join(join),
            Render::Invisible(every, c) => text
                .chars()
                .enumerate()
                .flat_map(|(i, x)| std::iter::once(x).chain(((i + 1) % every == 0).then_some(*c)))
                .collect(),
            Render::Backslash(mask) => text
                .chars()
                .enumerate()
                .map(|(i, c)| match (picked(*mask, i), i % 3) {
                    (true, 0) if c.is_ascii() => format!("\\x{:02x}", c as u32),
                    (true, _) => c
                        .encode_utf16(&mut [0; 2])
                        .iter()
                        .map(|u| format!("\\u{u:04X}"))
                        .collect(),
                    (false, _) if c == '\\' => "\\\\".to_owned(),
                    _ => c.to_string(),
                })
                .collect(),
            Render::Percent(mask) => text
                .bytes()
                .enumerate()
                .map(|(i, b)| match picked(*mask, i) || b == b'%' {
                    true => format!("%{b:02x}"),
                    false => (b as char).to_string(),
                })
                .collect(),
            Render::Html(mask) => text
                .chars()
                .enumerate()
                .map(|(i, c)| {
                    let named = match c {
                        '_' => Some("&lowbar;"),
                        '/' => Some("&sol;"),
                        '+' => Some("&plus;"),
                        '=' => Some("&equals;"),
                        '<' => Some("&lt;"),
                        '&' => Some("&amp;"),
                        '\'' => Some("&apos;"),
                        '.' => Some("&period;"),
                        '-' => Some("&hyphen;"),
                        _ => None,
                    };
                    match (picked(*mask, i) || c == '&', named) {
                        (true, Some(name)) => name.to_owned(),
                        (true, None) => format!("&#{:07};", c as u32),
                        (false, _) => c.to_string(),
                    }
                })
                .collect(),
            Render::QuotedPrintable(mask, every) => {
                let mut out = String::new();
                for (i, b) in text.bytes().enumerate() {
                    if i > 0 && i % every == 0 {
                        out.push_str("=\r\n");
                    }
                    if picked(*mask, i) || b == b'=' || !b.is_ascii() {
                        out.push_str(&format!("={b:02X}"));
                    } else {
                        out.push(b as char);
                    }
                }
                out
            }
            Render::Base64(junk, url) => {
                let mut data = b"\x01\x02\x03"[..*junk].to_vec();
                data.extend_from_slice(text.as_bytes());
                let encoded = if *url {
                    URL_SAFE.encode(&data)
                } else {
                    STANDARD.encode(&data)
                };
                let lines: Vec<String> = encoded
                    .as_bytes()
                    .chunks(76)
                    .map(|c| String::from_utf8_lossy(c).into_owned())
                    .collect();
                lines.join("\r\n")
            }
            Render::Base32(junk, hex, lower) => {
                let mut data = b"\x05\x04\x03\x02".to_vec()[..*junk].to_vec();
                data.extend_from_slice(text.as_bytes());
                let encoded = if *hex {
                    BASE32HEX.encode(&data)
                } else {
                    BASE32.encode(&data)
                };
                if *lower {
                    encoded.to_lowercase()
                } else {
                    encoded
                }
            }
            Render::Hex(colons) => {
                let pairs: Vec<String> = text.bytes().map(|b| format!("{b:02x}")).collect();
                pairs.join(if *colons { ":" } else { "" })
            }
            Render::Wide(utf32, little) => text
                .chars()
                .flat_map(|c| match (utf32, little) {
                    (false, true) => vec![c, '\0'],
                    (false, false) => vec!['\0', c],
                    (true, true) => vec![c, '\0', '\0', '\0'],
                    (true, false) => vec!['\0', '\0', '\0', c],
                })
                .collect(),
            Render::Reversed => text.chars().rev().collect(),
        }
    }
}

fn render() -> impl proptest::strategy::Strategy<Value = Render> {
    use proptest::prelude::*;
    prop_oneof![
        (
            3usize..40,
            proptest::sample::select(vec!["\n", "\r\n", "\r\n  ", " ", "\t"])
        )
            .prop_map(|(w, j)| Render::Wrapped(w, j)),
        (1usize..6, proptest::sample::select(INVISIBLE.to_vec()))
            .prop_map(|(e, c)| Render::Invisible(e, c)),
        any::<u64>().prop_map(Render::Backslash),
        any::<u64>().prop_map(Render::Percent),
        any::<u64>().prop_map(Render::Html),
        (any::<u64>(), 3usize..76).prop_map(|(m, e)| Render::QuotedPrintable(m, e)),
        (0usize..3, any::<bool>()).prop_map(|(j, u)| Render::Base64(j, u)),
        (0usize..5, any::<bool>(), any::<bool>()).prop_map(|(j, h, l)| Render::Base32(j, h, l)),
        any::<bool>().prop_map(Render::Hex),
        (any::<bool>(), any::<bool>()).prop_map(|(u, l)| Render::Wide(u, l)),
    ]
}

/// The renderings a provider was seen to echo, and those the reviews made.
fn echoed() -> Vec<String> {
    let all = u64::MAX;
    let mut forms: Vec<String> = [
        vec![],
        vec![Render::Backslash(0b1010_0101)],
        vec![Render::Backslash(all)],
        vec![Render::Percent(all)],
        vec![Render::Percent(0b1001)],
        vec![Render::Html(all)],
        vec![Render::Html(0b0110)],
        vec![Render::Hex(false)],
        vec![Render::Hex(true)],
        vec![Render::Wide(false, true)],
        vec![Render::Wide(true, true)],
        vec![Render::Wide(true, false)],
        vec![Render::Reversed],
        vec![Render::Wrapped(5, "\n")],
        vec![Render::Wrapped(7, "\r\n  ")],
        vec![Render::Invisible(1, '\u{200b}')],
        vec![Render::Invisible(3, '\u{ad}')],
        vec![Render::Invisible(2, '\u{fe0f}')],
        vec![Render::Invisible(1, '\u{e0041}')],
        vec![Render::QuotedPrintable(all, 9)],
        vec![Render::QuotedPrintable(0, 6)],
        vec![Render::Base32(0, false, false)],
        vec![Render::Base32(3, false, true)],
        vec![Render::Base32(1, true, false)],
        vec![Render::Base64(1, false)],
        vec![Render::Base64(2, true)],
        vec![Render::Backslash(all), Render::Base64(0, false)],
        vec![Render::Percent(all), Render::Base64(0, false)],
        vec![Render::Html(all), Render::Percent(0b11)],
        vec![Render::Wrapped(4, "\n"), Render::Base32(0, false, false)],
        vec![Render::Reversed, Render::Base64(1, true)],
        vec![Render::Wide(true, true), Render::Base64(0, false)],
    ]
    .iter()
    .map(|steps| {
        steps
            .iter()
            .fold(SECRET.to_owned(), |t, step| step.apply(&t))
    })
    .collect();
    // Cut into pieces of ten or eleven characters (each of them counts) with anything
    // between them: a list of strings, a stream's deltas, a concatenation, a line
    // continuation.
    let pieces = |width: usize| -> Vec<String> {
        let chars: Vec<char> = SECRET.chars().collect();
        chars
            .chunks(width)
            .map(|piece| piece.iter().collect())
            .collect()
    };
    for width in [10, 11] {
        for between in [",", "\",\"", "|", "\" +\n  \"", "-\n", "\\\n", "\n\ndata: "] {
            forms.push(pieces(width).join(between));
        }
    }
    // A hex dump of the request, whose text column shows it sixteen bytes a line.
    let request = format!("GET /v1 HTTP/1.1\r\nAuthorization: Bearer {SECRET}\r\n");
    forms.push(
        request
            .as_bytes()
            .chunks(16)
            .enumerate()
            .map(|(line, bytes)| {
                let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
                let text: String = bytes
                    .iter()
                    .map(|&b| if b.is_ascii_graphic() { b as char } else { '.' })
                    .collect();
                format!("{:08x}  {:<48} |{text}|", line * 16, hex.join(" "))
            })
            .collect::<Vec<_>>()
            .join("\n"),
    );
    // Byte lists: decimal (a Node Buffer as JSON), `0x` hex.
    let decimal: Vec<String> = SECRET.bytes().map(|b| b.to_string()).collect();
    forms.push(format!("[{}]", decimal.join(", ")));
    forms.push(format!(
        "{{\"type\":\"Buffer\",\"data\":[{}]}}",
        decimal.join(",")
    ));
    let hex: Vec<String> = SECRET.bytes().map(|b| format!("0x{b:02x}")).collect();
    forms.push(hex.join(", "));
    // All but the last character, the first, two at each end.
    let chars: Vec<char> = SECRET.chars().collect();
    let n = chars.len();
    for (from, to) in [(0, n - 1), (1, n), (2, n - 2)] {
        forms.push(chars[from..to].iter().collect());
    }
    // Basic authentication: `user:secret` in base64 at every alignment.
    for prefix in ["", "u", "us", "user:"] {
        let data = format!("{prefix}{SECRET}:");
        forms.push(STANDARD.encode(&data));
        forms.push(URL_SAFE.encode(&data));
    }
    forms
}

#[test]
fn the_matcher_is_built_quickly_and_small() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = |len: usize| -> String {
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                char::from(
                    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                        [(seed % 62) as usize],
                )
            })
            .collect()
    };
    // A JSON Web Token of 1,500 characters and a random key as long: the matcher stays
    // small (it once grew with the cube of the length: 1 GB of needles at 1,500).
    let jwt = format!("eyJhbGciOiJSUzI1NiJ9.{}.{}", random(1_100), random(342));
    let long = random(1_500);
    for secret in [SECRET, &"x".repeat(64), &"sk_live_".repeat(8), &jwt, &long] {
        let started = std::time::Instant::now();
        let built = Secret::new(secret, None, MIN_SECRET);
        let bytes = built.matcher_bytes();
        eprintln!(
            "{} chars: {bytes:?} bytes in {:?}",
            secret.len(),
            started.elapsed()
        );
        assert!(bytes.is_some_and(|b| b < 64 << 20), "{bytes:?}");
    }
}

#[test]
fn the_thief_finds_every_rendering_when_nothing_is_scrubbed() {
    // The judge must be able to fail: unscrubbed, every form gives the secret away.
    for form in echoed() {
        for text in [form.clone(), format!("token: {form} (echo)")] {
            assert!(stolen(&text).is_some(), "the thief misses {text:?}");
        }
    }
}

#[test]
fn every_echoed_form_is_removed_or_withheld() {
    let scrubber = Scrubber::for_secret(SECRET);
    for form in echoed() {
        for text in [
            form.clone(),
            format!("token: {form} (echo)"),
            format!("{{\"key\":\"{form}\",\"n\":1}}"),
            format!("<p>{form}</p>"),
        ] {
            let clean = scrubber.scrub(&text);
            assert!(stolen(&clean).is_none(), "leaked: {text:?}\n-> {clean:?}");
        }
    }
}

#[test]
fn json_is_scrubbed_after_decoding_and_stays_json() {
    let scrubber = Scrubber::for_secret(SECRET);
    let escaped = SECRET.replace('/', "\\/").replace('<', "\\u003c");
    let body = format!("{{\"a\":\"x {escaped} y\",\"{escaped}\":[1,2]}}");
    let clean = scrubber.scrub(&body);
    let value: Value = serde_json::from_str(&clean).unwrap_or_default();
    assert_eq!(
        value,
        serde_json::json!({"a": "x [redacted] y", "[redacted]": [1, 2]})
    );
}

#[test]
fn public_prefixes_and_shared_token_parts_are_not_the_secret() {
    let cases = [
        (
            "sk-ant-api03-Xq7RkP2mZ9vL4tW8yB1nC6dF3gH5jK0sA2eU7iO9pQ4rT1",
            "keys look like sk-ant-api03-... and start with sk-ant-api",
        ),
        (
            "github_pat_11ABCDE0Y0abcdefghijklmn_OpQrStUvWxYz0123456789abcdefghijklmnopqrstuvwxyzABCDEFG",
            "fine-grained tokens start with github_pat_11",
        ),
        (
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJzdXBhYmFzZSIsInJvbGUiOiJzZXJ2aWNlX3JvbGUifQ.Zm9vYmFyYmF6cXV4cXV1eHF1dXhmb29iYXJiYXo",
            "{\"token\":\"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJzdXBhYmFzZSIsInJvbGUiOiJhbm9uIn0.b3RoZXJzaWduYXR1cmVvdGhlcnNpZ25hdHVyZQ\"}",
        ),
        (
            "sk_live_51HxYzABCDEFGHIJK0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefgh",
            "{\"account\":\"acct_1HxYzABCDEFGHIJK\"}",
        ),
    ];
    for (secret, reply) in cases {
        let scrubber = Scrubber::for_secret(secret);
        assert_eq!(scrubber.scrub(reply), reply, "{secret}");
        // The secret itself still goes.
        let echoed = format!("you sent {secret}");
        assert!(!scrubber.scrub(&echoed).contains(secret));
    }
}

#[test]
fn ordinary_text_is_untouched() {
    let scrubber = Scrubber::for_secret(SECRET);
    let prose = "The quick brown fox jumps over the lazy dog. ".repeat(40);
    let wrapped_base64 = STANDARD
        .encode("hello world, this is an ordinary attachment ".repeat(20))
        .as_bytes()
        .chunks(76)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join("\r\n");
    for text in [
        "{\"id\":\"cus_123\",\"email\":\"a@example.com\",\"data\":\"aGVsbG8gd29ybGQ=\"}",
        "&amp; &lt; %20 \\n 0123456789abcdef0123456789abcdef0123456789abcdef",
        "https://example.com/a?b=1&c=%2F&d=sk_test_&e=A%2Fb",
        "Subject: =?utf-8?Q?caf=C3=A9?=\r\nsoft=\r\nbreak a=3Db",
        "MFRGGZDFMZTWQ2LKNNWG23TPOBYXE43UOV3HO6DZPI====== sk_test_ sk_test_A",
        &prose,
        &wrapped_base64,
    ] {
        assert!(matches!(scrubber.scrub(text), Cow::Borrowed(_)), "{text}");
    }
    assert!(matches!(
        Scrubber::default().scrub(SECRET),
        Cow::Borrowed(_)
    ));
    assert!(matches!(
        Scrubber::for_secret("abc").scrub("abc"),
        Cow::Borrowed(_)
    ));
}

/// Puts `needle` into the value somewhere: into a string leaf, or a key, or alone.
fn plant(value: &mut Value, needle: &str, choice: usize) -> bool {
    match value {
        Value::String(s) => {
            let at = s
                .char_indices()
                .nth(choice % (s.chars().count() + 1))
                .map_or(s.len(), |(i, _)| i);
            s.insert_str(at, needle);
            true
        }
        Value::Array(items) if !items.is_empty() => {
            let n = items.len();
            plant(&mut items[choice % n], needle, choice / n)
        }
        Value::Object(map) if !map.is_empty() => {
            if choice.is_multiple_of(3) {
                map.insert(format!("k{needle}"), Value::Null);
                return true;
            }
            let n = map.len();
            let key = map.keys().nth(choice % n).cloned().unwrap_or_default();
            map.get_mut(&key)
                .is_some_and(|v| plant(v, needle, choice / n))
        }
        _ => false,
    }
}

/// Forms only the needles know (UTF-16, reversed, another case), hidden by JSON escapes
/// (`\\u0000` between UTF-16 units, PHP's `\\/`), also nested in a JSON string or in prose:
/// none survives, judged by the needles on the fully decoded output.
#[test]
fn forms_only_the_needles_know_are_found_behind_json_escapes() {
    let scrubber = Scrubber::for_secret(SECRET);
    let secret = scrubber.secret.as_ref().unwrap();
    let literal = |s: &str| serde_json::to_string(s).unwrap().replace('/', "\\/");
    let utf16: String = SECRET.chars().flat_map(|c| [c, '\0']).collect();
    let reversed: String = SECRET.chars().rev().collect();
    for hidden in [utf16, reversed, SECRET.to_ascii_uppercase()] {
        let json = format!("{{\"k\":{},\"n\":1}}", literal(&hidden));
        let nested = format!("{{\"outer\":{}}}", literal(&json));
        // Escapes in text that is not JSON, which step 2 cannot parse: a script can still
        // decode them.
        let prose = format!("the key is {} today", literal(&hidden));
        for text in [json, nested, prose] {
            let clean = scrubber.scrub(&text).into_owned();
            let mut decoded = clean.clone().into_bytes();
            while decoded.contains(&b'\\') {
                decoded = escapes::backslash_unescape(&decoded);
            }
            assert!(!secret.matches(&decoded), "{text} came out as {clean}");
        }
    }
}

#[test]
fn any_serialisable_value_is_scrubbed_whole() {
    let scrubber = Scrubber::for_secret(SECRET);
    let value = vec![(SECRET.to_owned(), format!("v {SECRET}"))];
    let clean = scrubber.scrub_all(value, Vec::new());
    assert_eq!(clean, vec![(REDACTED.to_owned(), format!("v {REDACTED}"))]);
}

/// A reply crafted to be costly: long runs that decode at every alignment into more runs,
/// with escapes of every kind between.
fn costly(bytes: usize) -> String {
    let unit = format!(
        "{}%41&#65;=41\\u0041 ",
        STANDARD.encode(STANDARD.encode("A".repeat(60)))
    );
    unit.repeat(bytes / unit.len() + 1)
}

#[test]
fn checking_stops_at_the_budget_and_when_the_execution_ends() {
    let scrubber = Scrubber::for_secret(SECRET);
    let text = costly(200_000);
    // Unbounded, a crafted text is checked to the end (and is clean).
    assert!(matches!(scrubber.scrub(&text), Cow::Borrowed(_)));
    let ended = CancellationToken::new();
    let bounded = scrubber.bounded(text.len(), ended.clone());
    assert_eq!(bounded.scrub(&text), UNCHECKED);
    assert_eq!(bounded.spent(), Some(text.len()));
    // Spent stays spent, for the smallest text too.
    assert_eq!(bounded.scrub("hello there, world"), UNCHECKED);
    // A budget that is enough changes nothing, until the execution ends.
    let enough = scrubber.bounded(usize::MAX / 2, ended.clone());
    assert_eq!(
        enough.scrub(&format!("a {SECRET}")),
        format!("a {REDACTED}")
    );
    assert_eq!(enough.spent(), None);
    ended.cancel();
    assert_eq!(enough.scrub("a b c d e f g"), UNCHECKED);
    assert!(enough.spent().is_some());
    // Without a secret there is nothing to check, and nothing is withheld.
    let none = Scrubber::default().bounded(0, CancellationToken::new());
    assert_eq!(none.scrub("anything"), "anything");
    assert_eq!(none.spent(), None);
}

#[test]
fn a_clean_reply_costs_a_few_passes_of_its_size() {
    // What `WORK_PER_RECEIVED_BYTE` rests on: ordinary replies cost well under it.
    let scrubber = Scrubber::for_secret(SECRET);
    let noise = |seed: usize| -> Vec<u8> {
        (0..300)
            .map(|i| ((i * 7919 + seed * 104_729) % 251) as u8 ^ (i >> 3) as u8)
            .collect()
    };
    let json = serde_json::to_string(&serde_json::json!({
        "data": (0..300).map(|i| serde_json::json!({
            "id": format!("cus_{i:024}"),
            "url": format!("https://example.com/v1/customers/{i}?expand%5B%5D=a&b=c"),
            "description": "Ordinary text, with \"quotes\" and\nlines & entities &amp; more.",
            "image": STANDARD.encode(noise(i)),
        })).collect::<Vec<_>>(),
    }))
    .unwrap_or_default();
    let html = format!(
        "<html><body>{}</body></html>",
        "<p>Caf&eacute; &amp; bar &#8212; 100% = fine</p>\n".repeat(400)
    );
    for text in [json, html] {
        let allowance = text.len() * WORK_PER_RECEIVED_BYTE;
        let bounded = scrubber.bounded(allowance, CancellationToken::new());
        let clean = bounded.scrub(&text);
        let used = bounded.used().unwrap_or_default();
        assert!(
            matches!(clean, Cow::Borrowed(_)),
            "{}",
            &clean[..clean.len().min(300)]
        );
        assert_eq!(bounded.spent(), None, "{} bytes cost {used}", text.len());
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Whatever a provider sends, scrubbing returns (it runs in the supervisor, where a
    /// panic would cost more than one call).
    #[test]
    fn any_text_is_scrubbed_without_a_panic(text in "([\\\\%&#;=xXuU0-9a-fA-F+/\\s]|\\PC){0,300}") {
        let scrubber = Scrubber::for_secret(SECRET);
        let clean = scrubber.scrub(&text);
        proptest::prop_assert!(!clean.contains(SECRET));
    }

    /// A fragment that counts, rendered one or two ways a script can undo (the secret
    /// itself reversed first, or not), anywhere in any JSON: the thief gets nothing back
    /// from any string or key, and the JSON is still JSON.
    #[test]
    fn any_rendering_in_any_value_comes_out_clean(
        mut value in crate::testing::json_value(6),
        from in 0usize..20,
        cut in 0usize..20,
        reversed in proptest::prelude::any::<bool>(),
        steps in proptest::collection::vec(render(), 1..3),
        choice in 0usize..1000,
    ) {
        // Any fragment that counts, in one rendering or two escapes; all but a few characters
        // in a block encoding with another rendering (a block encoding's contents are decoded
        // further for those only; see `encode::nested_chars`).
        let chars: Vec<char> = SECRET.chars().collect();
        let block = |step: &Render| {
            matches!(step, Render::Base64(..) | Render::Base32(..) | Render::Hex(_))
        };
        let (part, counts) = if steps.len() == 1 || !steps.iter().any(block) {
            encode::counting(SECRET)
        } else {
            (0..chars.len(), encode::nested_chars(chars.len()))
        };
        let from = part.start + from % (part.len() - counts + 1);
        let to = part.end - cut % (part.end - from - counts + 1);
        let fragment: String = chars[from..to].iter().collect();
        let fragment = if reversed { Render::Reversed.apply(&fragment) } else { fragment };
        let needle = steps.iter().fold(fragment, |t, step| step.apply(&t));
        if !plant(&mut value, &needle, choice) {
            value = Value::Array(vec![value, Value::String(needle.clone())]);
        }
        let scrubber = Scrubber::for_secret(SECRET);
        scrubber.scrub_json(&mut value);
        let text = serde_json::to_string(&value).unwrap_or_default();
        let decoded: Value = serde_json::from_str(&text).unwrap_or_default();
        proptest::prop_assert_eq!(&decoded, &value);
        for s in strings(&value) {
            proptest::prop_assert!(stolen(&s).is_none(), "{:?} from {:?}", s, needle);
        }
    }
}

#[test]
fn any_depth_of_json_is_read_and_long_backslash_runs_are_ordinary() {
    let scrubber = Scrubber::for_secret(SECRET);
    // A path with many backslashes is ordinary text, whatever the run's length.
    for run in [127, 129, 1000] {
        let path = format!("C:{}end", "\\".repeat(run));
        assert_eq!(scrubber.scrub(&path), path);
    }
    // The secret, every character escaped, JSON-encoded a dozen times more is still found.
    let mut nested = format!("key {}", Render::Backslash(u64::MAX).apply(SECRET));
    for _ in 0..12 {
        nested = Value::String(nested).to_string();
    }
    let mut decoded = nested.clone();
    while let Ok(Value::String(inner)) = serde_json::from_str::<Value>(&decoded) {
        decoded = inner;
    }
    assert_eq!(unescape_backslashes(&decoded), format!("key {SECRET}"));
    let mut clean = scrubber.scrub(&nested).into_owned();
    while let Ok(Value::String(inner)) = serde_json::from_str::<Value>(&clean) {
        clean = inner;
    }
    assert_eq!(clean, WITHHELD);
}

#[test]
fn a_backslash_before_an_escape_does_not_hide_what_follows() {
    // Found by `any_rendering_in_any_value_comes_out_clean`: a fragment HTML-escaped twice
    // after a backslash. Decoding everything at each level turns `\&#102;` into `\f` and
    // then a form feed, losing the `f`; a script that decodes only the HTML keeps it.
    let scrubber = Scrubber::for_secret(SECRET);
    let needle = "&#0000102;&amp;&#0000097;mp;&#0000101;&amp;&#0000108;&#0000116;;&#0000100;\
                  =&#0000099;&plus;&amp;#00&#0000048;00&#0000057;8&#0000059;&amp;so&#0000108;&#0000059;";
    assert!(stolen(needle).is_some(), "the needle carries a fragment");
    for prefix in ["", "x", "\\", "\\\\", "\"\\\\"] {
        let text = format!("{prefix}{needle}\\\"");
        let out = scrubber.scrub(&text);
        assert_eq!(stolen(&out), None, "{prefix:?}: {out}");
    }
    // Found by review: one escape of any kind, or a block encoding whose first characters
    // a backslash escape takes (`\b` of base64, octal `\26` of hex).
    for text in [
        r"\f&amp;e&lt;d&#61;c&#43;b&#47;",
        r"\f%26e%3Cd%3Dc%2Bb%2F",
        r"\f=26e=3Cd=3Dc=2Bb=2F",
        r"\f&e&lt;d=c+b/",
        r"\f&amp;e<d=c+b/",
        r"\b+c=d<e&#38;f'",
        r"\b%2Bc=d<e&f'",
        r"x\n\f&amp;e&lt;d&#61;c&#43;b&#47;",
        r"\26233130323b26616d703b65266c743b64262336313b63262334333b62262334373b",
        r"\bSYjMTAyOyZhbXA7ZSZsdDtkJiM2MTtjJiM0MztiJiM0Nzs",
        r"\4OHJ2C1I7CJ62RBG7DIICR3K7DI2C8PM64TM69H36GPJMOH64CQ3EEO",
    ] {
        let out = scrubber.scrub(text);
        assert_eq!(stolen(&out), None, "{text:?}: {out}");
    }
    // And one in UTF-16, as it stands after a backslash (`\f` there is a form feed once
    // JSON-decoded, and the `f` is gone from that reading).
    let wide: String = "f&e<d=c+b/".chars().flat_map(|c| [c, '\0']).collect();
    for text in [format!("\\{wide}"), format!("\"\\{wide}\\\"")] {
        let out = scrubber.scrub(&text);
        assert_eq!(stolen(&out), None, "{text:?}: {out}");
    }
}
