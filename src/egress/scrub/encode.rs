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

/// Characters of a longer secret that count on their own, wherever they stand in it: a
/// provider that echoes the secret cut into pieces (a hex dump's lines, strings in a list, a
/// stream's deltas) gives each piece away, so pieces this long are cut out too and a script
/// has to make do with pieces shorter than this. Ten characters of a key are 50 to 60 bits
/// of it, never found in ordinary text (a known prefix such as `sk_live_` leaves two).
const WINDOW: usize = 10;

/// How many characters a fragment of a secret of `len` characters needs to count.
pub fn fragment_chars(len: usize) -> usize {
    (len - MAX_LEFT_OUT.min(len / 4)).min(WINDOW)
}

/// Characters of a fragment the scrubber looks for: for a short secret two fewer than count
/// (never more than an eighth), so that an escape just outside a rendering that takes a
/// character or two of it along (`\\` then `f...` read as `\\f`) does not hide a fragment
/// that counts; a longer secret's fragments that count are shorter than it, and an escape
/// that takes a character of one leaves another.
pub fn found_chars(len: usize) -> usize {
    let counts = fragment_chars(len);
    counts - if counts < WINDOW { 2.min(len / 8) } else { 0 }
}

/// Characters of a fragment looked for inside a block encoding nested in another encoding
/// (hex in base64): all but a few of the secret, so that ordinary words, which are runs of
/// base64 too, are not decoded for it.
pub fn nested_chars(len: usize) -> usize {
    len - MAX_LEFT_OUT.min(len / 4) - 2.min(len / 8)
}

/// Every fragment of `secret` the scrubber looks for (itself included, longest first; the
/// last are those of [`found_chars`], one of which is in every other).
pub fn fragments(secret: &str) -> Vec<String> {
    let chars: Vec<char> = secret.chars().collect();
    let shortest = found_chars(chars.len());
    (shortest..=chars.len())
        .rev()
        .flat_map(|len| (0..=chars.len() - len).map(move |start| (start, len)))
        .map(|(start, len)| chars[start..start + len].iter().collect())
        .collect()
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
    fn fragments_are_ten_characters_or_all_but_a_quarter() {
        assert_eq!(fragment_chars(32), 10);
        assert_eq!(fragment_chars(12), 9);
        assert_eq!(fragment_chars(4), 3);
        assert_eq!(
            (found_chars(32), found_chars(12), found_chars(4)),
            (10, 8, 3)
        );
        assert_eq!(nested_chars(32), 26);
        let all = fragments("abcdefgh");
        assert_eq!(all[0], "abcdefgh");
        assert_eq!(all.len(), 1 + 2 + 3 + 4);
        assert!(all.contains(&"cdefg".to_owned()) && all.contains(&"abcde".to_owned()));
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
