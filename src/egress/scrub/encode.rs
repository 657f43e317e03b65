//! What the scrubber cuts out: every encoding of the secret, and of every fragment of it long
//! enough to give the rest away, that a provider might echo.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use data_encoding::{BASE32_NOPAD, BASE32HEX_NOPAD};

/// Characters of the secret a text may leave out and still count as carrying it: the rest
/// can be guessed (the secret minus its last character is 62 guesses away from it), so a
/// fragment that long is cut out or withheld like the whole. Never more than a quarter of
/// the secret, so a short one is not found in ordinary text.
const MAX_LEFT_OUT: usize = 4;

/// Characters of a longer secret that count on their own, wherever they stand in its secret
/// part: a provider that echoes the secret cut into pieces (a hex dump's lines, strings in a
/// list, a stream's deltas) gives each piece away, so pieces this long (or a quarter of the
/// secret part, if longer) are cut out too and a script has to make do with shorter ones.
/// Ten characters of a key are 50 to 60 bits of it, never found in ordinary text.
const WINDOW: usize = 10;

/// Characters of the longest window the matcher looks for: a fragment that counts is found
/// by one window inside it, so a long secret needs a few windows, not all of them.
const MAX_NEEDLE: usize = 24;

/// The fragments of `secret` that count: the characters of the secret they are taken from,
/// and how many of them a fragment needs. They are taken from its secret part: after a
/// public prefix (`sk_live_`, `github_pat_`, `sk-ant-api03-`: words of letters with at
/// most two digits, each followed by `_` or `-`, in the first half), and of a JSON Web Token
/// its signature alone (its header and claims are shared with every token alike). A piece of
/// a prefix, or of a longer structured part (Stripe's keys carry the account's id), is in
/// ordinary replies; a quarter of the secret part is in none.
pub fn counting(secret: &str) -> (std::ops::Range<usize>, usize) {
    let chars: Vec<char> = secret.chars().collect();
    let len = chars.len();
    let all_but_a_few = len - MAX_LEFT_OUT.min(len / 4);
    let counts_in = |chars: usize| all_but_a_few.min(WINDOW.max(chars / 4));
    let part = secret_part(&chars);
    if part.len() < counts_in(part.len()) {
        return (0..len, counts_in(len));
    }
    let counts = counts_in(part.len());
    (part, counts)
}

/// The windows the matcher looks for, one inside every fragment that counts.
pub fn windows(secret: &str) -> Vec<String> {
    let chars: Vec<char> = secret.chars().collect();
    let (part, counts) = counting(secret);
    // Fragments are looked for two characters shorter (never more than an eighth of the
    // secret): an escape just outside a rendering may take a character or two of it along
    // (`\\` then `f...` read as `\\f`, a form feed once decoded), and the rest still counts.
    let found = counts - 2.min(chars.len() / 8);
    let width = found.min(MAX_NEEDLE);
    let stride = found - width + 1;
    let last = part.end - width;
    let mut starts: Vec<usize> = (part.start..=last).step_by(stride).collect();
    if starts.last() != Some(&last) {
        starts.push(last);
    }
    starts
        .into_iter()
        .map(|start| chars[start..start + width].iter().collect())
        .collect()
}

/// The characters of `chars` whose fragments are secret: the signature of a JSON Web Token,
/// else all after a public prefix (see [`counting`]).
fn secret_part(chars: &[char]) -> std::ops::Range<usize> {
    let text: String = chars.iter().collect();
    let segments: Vec<&str> = text.split('.').collect();
    let base64url = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    if let [header, claims, signature] = segments[..]
        && header.starts_with("eyJ")
        && [header, claims, signature].into_iter().all(base64url)
    {
        let start = header.len() + claims.len() + 2;
        return start..chars.len();
    }
    let mut prefix = 0;
    let mut word_start = 0;
    for (i, c) in chars.iter().enumerate().take(chars.len() / 2) {
        if *c == '_' || *c == '-' {
            let word = &chars[word_start..i];
            let digits = word.iter().filter(|c| c.is_ascii_digit()).count();
            let public = word.first().is_some_and(char::is_ascii_alphabetic)
                && word.iter().all(char::is_ascii_alphanumeric)
                && digits <= 2;
            if !public {
                break;
            }
            prefix = i + 1;
            word_start = i + 1;
        } else if !c.is_ascii_alphanumeric() {
            break;
        }
    }
    prefix..chars.len()
}

/// Characters of a fragment looked for inside a block encoding nested in another encoding
/// (hex in base64): all but a few of the secret, so that ordinary words, which are runs of
/// base64 too, are not decoded for it.
pub fn nested_chars(len: usize) -> usize {
    len - MAX_LEFT_OUT.min(len / 4) - 2.min(len / 8)
}

/// Every encoding of `text` that a provider might echo (reversing it is up to the caller).
pub fn encodings(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let json = serde_json::to_string(text).unwrap_or_default();
    let json = json
        .strip_prefix('"')
        .and_then(|j| j.strip_suffix('"'))
        .unwrap_or(&json)
        .to_owned();
    let go = json
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    let mut needles = vec![
        text.to_owned(),
        json.replace('/', "\\/"),
        go.replace('/', "\\/"),
        go,
        json,
        text.encode_utf16()
            .map(|unit| format!("\\u{unit:04x}"))
            .collect(),
        url::form_urlencoded::byte_serialize(bytes).collect(),
        escaped(bytes, '%', |b| {
            b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b)
        }),
        escaped(bytes, '%', |_| false),
        // Quoted-printable: as an encoder writes it, and every byte escaped.
        escaped(bytes, '=', |b| b != b'=' && (b' '..=b'~').contains(&b)),
        escaped(bytes, '=', |_| false),
        html(text, |c| match c {
            '&' => Some("&amp;".into()),
            '<' => Some("&lt;".into()),
            '>' => Some("&gt;".into()),
            '"' => Some("&quot;".into()),
            '\'' => Some("&#39;".into()),
            _ => None,
        }),
        html(text, |c| Some(format!("&#{};", c as u32))),
        html(text, |c| Some(format!("&#x{:x};", c as u32))),
        // UTF-16 and UTF-32, either byte order, as a text of bytes reads them.
        text.chars().flat_map(|c| [c, '\0']).collect(),
        text.chars().flat_map(|c| ['\0', c]).collect(),
        text.chars().flat_map(|c| [c, '\0', '\0', '\0']).collect(),
        text.chars().flat_map(|c| ['\0', '\0', '\0', c]).collect(),
    ];
    needles.extend(blocks(text));
    needles
}

/// The block encodings of `text` (base64 in either alphabet, base32 in either, hex with or
/// without separators, decimal byte lists), each
/// as the characters that are the same wherever `text` stands in the encoded data: the
/// encodings of the fragments that count, whose decodings are only looked at once.
pub fn blocks(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let hex = crate::hex::hex(bytes);
    let pairs: Vec<&str> = (0..bytes.len()).map(|i| &hex[2 * i..2 * i + 2]).collect();
    // Decimal byte lists too (a Node `Buffer` as JSON, serde's `Vec<u8>`), which the
    // matcher sees without their white space.
    let decimal: Vec<String> = bytes.iter().map(u8::to_string).collect();
    let mut needles = vec![
        hex.clone(),
        pairs.join(":"),
        pairs.join("-"),
        pairs.join(" "),
        pairs.join(","),
        pairs
            .iter()
            .map(|p| format!("0x{p}"))
            .collect::<Vec<_>>()
            .join(","),
        decimal.join(","),
        decimal.concat(),
    ];
    for offset in 0..3 {
        needles.push(core(|b| STANDARD_NO_PAD.encode(b), bytes, offset, 3, 4));
        needles.push(core(|b| URL_SAFE_NO_PAD.encode(b), bytes, offset, 3, 4));
    }
    for offset in 0..5 {
        needles.push(core(|b| BASE32_NOPAD.encode(b), bytes, offset, 5, 8));
        needles.push(core(|b| BASE32HEX_NOPAD.encode(b), bytes, offset, 5, 8));
    }
    needles
}

/// The characters of a block encoding (`group` bytes to `chars` characters) that depend on
/// `secret` alone when it starts `offset` bytes into the encoded data: the same whatever
/// comes before and after it.
fn core(
    encode: impl Fn(&[u8]) -> String,
    secret: &[u8],
    offset: usize,
    group: usize,
    chars: usize,
) -> String {
    let mut data = vec![0u8; offset];
    data.extend_from_slice(secret);
    let encoded = encode(&data);
    let bits = 8 * group / chars;
    let first = (8 * offset).div_ceil(bits);
    let last = 8 * (offset + secret.len()) / bits;
    encoded.get(first..last).unwrap_or_default().to_owned()
}

/// `bytes` with those `keep` refuses written as `<mark>XX`.
fn escaped(bytes: &[u8], mark: char, keep: impl Fn(u8) -> bool) -> String {
    bytes
        .iter()
        .map(|&b| {
            if keep(b) {
                (b as char).to_string()
            } else {
                format!("{mark}{b:02X}")
            }
        })
        .collect()
}

fn html(text: &str, entity: impl Fn(char) -> Option<String>) -> String {
    text.chars()
        .map(|c| entity(c).unwrap_or_else(|| c.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_are_ten_characters_of_the_secret_part_or_all_but_a_quarter() {
        let counts = |secret: &str| counting(secret).1;
        assert_eq!(counts("sk_live_4eC39HqLyjWDarjtT1zdp7dc"), 10);
        assert_eq!(counts("abcdefghijkl"), 9);
        assert_eq!(counts("abcd"), 3);
        assert_eq!(nested_chars(32), 26);
        // Every window of a short secret, two characters shorter than count.
        assert_eq!((counts("abcdefgh"), windows("abcdefgh").len()), (6, 4));
        // Public prefixes are left out; windows start after them.
        for (secret, prefix) in [
            ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_"),
            (
                "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
                "sk-ant-api03-",
            ),
            (
                "github_pat_11ABCDEFGHIJKLMNOPQRSTUV_abcdefghijklmnopqrstuvwxyz0123",
                "github_pat_",
            ),
            ("550e8400-e29b-41d4-a716-446655440000", ""),
            ("sktestcanary7f3q9zw", ""),
        ] {
            let (part, counts) = counting(secret);
            assert_eq!(part.start, prefix.chars().count(), "{secret}");
            let found = windows(secret);
            // Two characters shorter than what counts (an escape may take them along).
            let shorter = counts - 2.min(secret.chars().count() / 8);
            assert_eq!(found[0].len(), shorter.min(MAX_NEEDLE), "{secret}");
            assert!(secret[part.start..].starts_with(&found[0]), "{secret}");
        }
        // A JSON Web Token: its signature alone.
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlX29mX3RoZV90b2tlbl9oZXJl";
        assert_eq!(counting(jwt).0.start, jwt.rfind('.').unwrap() + 1);
        assert!(
            windows(jwt)
                .iter()
                .all(|w| jwt.ends_with(w) || !jwt[..jwt.rfind('.').unwrap()].contains(w.as_str()))
        );
        // A long secret: a quarter of its secret part counts, found by a few windows, one
        // inside every fragment that counts.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let long: String = (0..400)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                char::from(b'a' + (seed % 26) as u8)
            })
            .collect();
        assert_eq!(counting(&long).1, 100);
        let found = windows(&long);
        assert!(found.len() <= 7, "{}", found.len());
        // Two characters shorter than what counts: an escape before it may take them.
        for start in 0..=302 {
            let piece = &long[start..start + 98];
            assert!(found.iter().any(|w| piece.contains(w.as_str())), "{start}");
        }
    }

    #[test]
    fn block_cores_are_inside_every_encoding_of_the_secret() {
        let secret = b"sk_test_0123456789";
        for prefix in 0..12 {
            let mut data = vec![b'x'; prefix];
            data.extend_from_slice(secret);
            let needles = encodings(std::str::from_utf8(secret).unwrap());
            for encoded in [
                STANDARD_NO_PAD.encode(&data),
                URL_SAFE_NO_PAD.encode(&data),
                BASE32_NOPAD.encode(&data),
                BASE32HEX_NOPAD.encode(&data),
            ] {
                assert!(
                    needles.iter().any(|n| n.len() >= 20 && encoded.contains(n)),
                    "{prefix} bytes before: {encoded}"
                );
            }
        }
    }
}
