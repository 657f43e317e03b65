//! Keeping the provider secret out of everything a script or a client sees.
//!
//! A provider may echo the credential back: plainly, JSON-escaped (`\/` as PHP writes it,
//! `\u003c` as Go does, any character as `\uXXXX`), percent-encoded, in base64 at any
//! alignment and in either alphabet, in hex, as HTML entities, reversed. Whatever reaches
//! the isolate the script can decode and transform past any later check, so every string
//! that enters it, and everything in an execution's outcome, passes [`Scrubber::scrub`]:
//!
//! 1. every known encoding of the secret is replaced with `[redacted]`, in one pass of one
//!    multi-pattern matcher (ASCII case ignored, so hex and percent escapes of either case
//!    match);
//! 2. text that is JSON with escapes in it is parsed, every string and key is scrubbed after
//!    decoding, and it is written back;
//! 3. what is left is decoded once more every way above (JSON escapes, percent, HTML
//!    entities, base64 and hex runs, and those decodings of each other); if the secret is
//!    still in there, in a mixture no needle matched, the whole text is withheld.
//!
//! What no scrubber can catch is a provider that transforms the key in a way of its own
//! (encrypts it, splits it across responses, encodes it twice in ways not listed): a
//! provider that hostile is out of reach; ARCHITECTURE.md says so.

use std::borrow::Cow;
use std::sync::Arc;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// What replaces the secret.
pub const REDACTED: &str = "[redacted]";

/// What replaces a text that carries the secret in a form that could not be cut out.
pub const WITHHELD: &str = "[withheld by sdkbox: this text carried the provider credential \
                            in an encoded form]";

/// Secrets shorter than this are not scrubbed: they cannot be told apart from ordinary text.
const MIN_SECRET: usize = 4;

/// JSON decodings of a text looked through before it is parsed for scrubbing (JSON in a
/// string of JSON in a string...); a text nested deeper is parsed whatever it shows.
const MAX_JSON_DECODINGS: usize = 8;

/// Replaces every known form of one secret. Cheap to clone; without a secret it changes
/// nothing.
#[derive(Clone, Default)]
pub struct Scrubber {
    inner: Option<Arc<Needles>>,
}

struct Needles {
    secret: Vec<u8>,
    matcher: Option<AhoCorasick>,
}

impl Scrubber {
    /// A scrubber for `secret`.
    pub fn for_secret(secret: &str) -> Self {
        if secret.len() < MIN_SECRET {
            return Self::default();
        }
        let mut needles = encodings(secret);
        needles.retain(|n| n.len() >= MIN_SECRET);
        needles.sort();
        needles.dedup();
        let matcher = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostLongest)
            .build(&needles)
            .inspect_err(|error| {
                // A few short needles cannot fail to build in practice; without the matcher,
                // the check of step 3 still withholds any text that carries the secret.
                tracing::error!(%error, "cannot build the secret scrubber's matcher");
            })
            .ok();
        Self {
            inner: Some(Arc::new(Needles {
                secret: secret.as_bytes().to_vec(),
                matcher,
            })),
        }
    }

    /// `text` with every form of the secret replaced, or withheld whole.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(needles) = &self.inner else {
            return Cow::Borrowed(text);
        };
        let mut out = needles.replace(text);
        // Step 2 parses the whole text: it runs only when the text shows the secret in some
        // form, as it is or JSON-decoded. A text clean every way is done, without parsing
        // megabytes of JSON.
        if !needles.shows(&out) {
            return out;
        }
        if out.contains('\\')
            && let Some(clean) = self.scrub_json_text(&out)
        {
            out = Cow::Owned(clean);
        }
        // Still showing it (a mixture, or escapes in text that is not JSON): withheld.
        if needles.shows(&out) {
            return Cow::Owned(WITHHELD.to_owned());
        }
        out
    }

    /// Scrubs every string and key inside a JSON value, in place.
    pub fn scrub_json(&self, value: &mut Value) {
        if self.inner.is_some() {
            self.scrub_value(value);
        }
    }

    /// `value` with every string in it scrubbed, whatever its type: the one way a response
    /// enters the isolate and an outcome leaves egress, so that no field can be forgotten.
    /// A value that does not survive the round trip is replaced by `fallback`.
    pub fn scrub_all<T: Serialize + DeserializeOwned>(&self, value: T, fallback: T) -> T {
        if self.inner.is_none() {
            return value;
        }
        let Ok(mut json) = serde_json::to_value(&value) else {
            return fallback;
        };
        self.scrub_value(&mut json);
        serde_json::from_value(json).unwrap_or(fallback)
    }

    /// Scrubs in place; true when anything changed.
    fn scrub_value(&self, value: &mut Value) -> bool {
        match value {
            Value::String(s) => match self.scrub(s) {
                Cow::Owned(clean) => {
                    *s = clean;
                    true
                }
                Cow::Borrowed(_) => false,
            },
            Value::Array(items) => {
                let mut changed = false;
                for item in items {
                    changed |= self.scrub_value(item);
                }
                changed
            }
            Value::Object(map) => {
                let entries = std::mem::take(map);
                let mut changed = false;
                for (key, mut v) in entries {
                    changed |= self.scrub_value(&mut v);
                    let clean = self.scrub(&key);
                    changed |= matches!(clean, Cow::Owned(_));
                    map.insert(clean.into_owned(), v);
                }
                changed
            }
            _ => false,
        }
    }

    /// JSON text with escapes, scrubbed after decoding and written back; `None` when it is
    /// not JSON or nothing changed.
    fn scrub_json_text(&self, text: &str) -> Option<String> {
        let start = text.trim_start().as_bytes().first()?;
        if !matches!(start, b'{' | b'[' | b'"') {
            return None;
        }
        let mut value: Value = serde_json::from_str(text).ok()?;
        self.scrub_value(&mut value)
            .then(|| serde_json::to_string(&value).ok())
            .flatten()
    }
}

impl Needles {
    /// Whether `text`, after step 1, still shows the secret to step 3, or once JSON-decoded
    /// (again while escapes remain: JSON inside JSON strings) to the matcher or to step 3.
    /// Every string step 2 would decode and scrub is part of one of those decodings, so a
    /// text that shows nothing gives step 2 nothing to do. Deeper than
    /// [`MAX_JSON_DECODINGS`] counts as showing.
    fn shows(&self, text: &str) -> bool {
        if self.carried(text.as_bytes(), 2) {
            return true;
        }
        let mut view = Cow::Borrowed(text.as_bytes());
        for _ in 0..MAX_JSON_DECODINGS {
            if !view.contains(&b'\\') {
                return false;
            }
            let decoded = json_unescape(&view);
            if *decoded == *view {
                return false;
            }
            let matched = self.matcher.as_ref().is_some_and(|m| m.is_match(&decoded));
            if matched || self.carried(&decoded, 2) {
                return true;
            }
            view = Cow::Owned(decoded);
        }
        true
    }

    fn replace<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(matcher) = self.matcher.as_ref().filter(|m| m.is_match(text)) else {
            return Cow::Borrowed(text);
        };
        let mut out = String::with_capacity(text.len());
        matcher.replace_all_with(text, &mut out, |_, _, out| {
            out.push_str(REDACTED);
            true
        });
        Cow::Owned(out)
    }

    /// Whether `text`, decoded in any of the known ways (up to `depth` decodings deep),
    /// still contains the secret.
    fn carried(&self, text: &[u8], depth: u32) -> bool {
        if text.len() < self.secret.len() {
            return false;
        }
        if contains(text, &self.secret) || self.in_runs(text, depth) {
            return true;
        }
        if depth == 0 {
            return false;
        }
        let views = [
            text.contains(&b'\\').then(|| json_unescape(text)),
            text.contains(&b'%').then(|| percent_decode(text)),
            text.contains(&b'&').then(|| html_decode(text)),
        ];
        views
            .into_iter()
            .flatten()
            .any(|view| view != text && self.carried(&view, depth - 1))
    }

    /// Whether a base64 or hex run in `text` decodes to bytes that carry the secret (decoded
    /// again, up to `depth` more times). Runs go on across white space (MIME wraps base64 at
    /// 76 columns) and, for hex, across `:` and `-` (`73:6b:…`).
    fn in_runs(&self, text: &[u8], depth: u32) -> bool {
        let found = |bytes: &[u8]| {
            contains(bytes, &self.secret) || (depth > 0 && self.carried(bytes, depth - 1))
        };
        let shortest = self.secret.len() * 4 / 3;
        let found_base64 = runs(text, &BASE64_RUN, shortest).any(|run| {
            let run: Vec<u8> = run
                .iter()
                .copied()
                .filter(|b| *b != b'=' && !b.is_ascii_whitespace())
                .collect();
            (0..4).any(|offset| {
                run.get(offset..).is_some_and(|tail| {
                    let usable = &tail[..tail.len() - tail.len() % 4];
                    [
                        STANDARD_NO_PAD.decode(usable),
                        URL_SAFE_NO_PAD.decode(usable),
                    ]
                    .into_iter()
                    .flatten()
                    .any(|bytes| found(&bytes))
                })
            })
        });
        found_base64
            || runs(text, &HEX_RUN, self.secret.len() * 2).any(|run| {
                let digits: Vec<u8> = run.iter().copied().filter(u8::is_ascii_hexdigit).collect();
                (0..2).any(|offset| {
                    digits
                        .get(offset..)
                        .is_some_and(|tail| found(&hex_decode(tail)))
                })
            })
    }
}

/// Every encoding of `secret` that a provider might echo.
fn encodings(secret: &str) -> Vec<String> {
    let bytes = secret.as_bytes();
    let json = serde_json::to_string(secret).unwrap_or_default();
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
        secret.to_owned(),
        secret.chars().rev().collect(),
        json.replace('/', "\\/"),
        go.replace('/', "\\/"),
        go,
        json,
        secret
            .encode_utf16()
            .map(|unit| format!("\\u{unit:04x}"))
            .collect(),
        url::form_urlencoded::byte_serialize(bytes).collect(),
        percent(bytes, |b| {
            b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b)
        }),
        percent(bytes, |_| false),
        crate::hex::hex(bytes),
        html(secret, |c| match c {
            '&' => Some("&amp;".into()),
            '<' => Some("&lt;".into()),
            '>' => Some("&gt;".into()),
            '"' => Some("&quot;".into()),
            '\'' => Some("&#39;".into()),
            _ => None,
        }),
        html(secret, |c| Some(format!("&#{};", c as u32))),
        html(secret, |c| Some(format!("&#x{:x};", c as u32))),
        // UTF-16, either byte order, as a text of bytes reads it.
        secret.chars().flat_map(|c| [c, '\0']).collect(),
        secret.chars().flat_map(|c| ['\0', c]).collect(),
    ];
    for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
        for offset in 0..3 {
            needles.push(base64_core(engine, bytes, offset));
        }
    }
    needles
}

/// The base64 characters that depend on `secret` alone when it starts `offset` bytes into
/// the encoded data: the same whatever comes before and after it.
fn base64_core(engine: &impl Engine, secret: &[u8], offset: usize) -> String {
    let mut data = vec![0u8; offset];
    data.extend_from_slice(secret);
    let encoded = engine.encode(&data);
    let first = (8 * offset).div_ceil(6);
    let last = 8 * (offset + secret.len()) / 6;
    encoded.get(first..last).unwrap_or_default().to_owned()
}

fn percent(bytes: &[u8], keep: impl Fn(u8) -> bool) -> String {
    bytes
        .iter()
        .map(|&b| {
            if keep(b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn html(secret: &str, entity: impl Fn(char) -> Option<String>) -> String {
    secret
        .chars()
        .map(|c| entity(c).unwrap_or_else(|| c.to_string()))
        .collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && memchr::memmem::find(haystack, needle).is_some()
}

/// Bytes that a base64 run goes on across: either alphabet, padding, and white space (MIME
/// wraps base64 at 76 columns).
static BASE64_RUN: [bool; 256] = byte_class(b"+/-_= \t\n\r\x0c", true, true);

/// Bytes that a hex run goes on across: digits, and the separators of `73:6b:...`.
static HEX_RUN: [bool; 256] = byte_class(b":- ", false, true);

/// A lookup table of bytes: `extra`, hex digits, and with `letters` every ASCII letter and
/// digit.
const fn byte_class(extra: &[u8], letters: bool, hex: bool) -> [bool; 256] {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        table[b] = (letters && byte.is_ascii_alphanumeric()) || (hex && byte.is_ascii_hexdigit());
        b += 1;
    }
    let mut i = 0;
    while i < extra.len() {
        table[extra[i] as usize] = true;
        i += 1;
    }
    table
}

/// The maximal runs of bytes in `class`, at least `shortest` long. Such a run covers one of
/// every `shortest`-th byte, so only those are looked at until one is in the class: a text
/// of short runs (words, ids) is crossed `shortest` bytes at a time.
fn runs<'a>(
    text: &'a [u8],
    class: &'a [bool; 256],
    shortest: usize,
) -> impl Iterator<Item = &'a [u8]> + 'a {
    let shortest = shortest.max(MIN_SECRET);
    let within = move |i: usize| class[text[i] as usize];
    let mut probe = shortest - 1;
    std::iter::from_fn(move || {
        while probe < text.len() {
            if !within(probe) {
                probe += shortest;
                continue;
            }
            let mut start = probe;
            while start > 0 && within(start - 1) {
                start -= 1;
            }
            let mut end = probe + 1;
            while end < text.len() && within(end) {
                end += 1;
            }
            // The next run starts after `end`, which is not in the class.
            probe = end + shortest;
            if end - start >= shortest {
                return Some(&text[start..end]);
            }
        }
        None
    })
}

fn hex_value(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

fn hex_decode(text: &[u8]) -> Vec<u8> {
    text.chunks_exact(2)
        .filter_map(|pair| Some(hex_value(pair[0])? << 4 | hex_value(pair[1])?))
        .collect()
}

fn percent_decode(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let decoded = (text[i] == b'%')
            .then(|| Some(hex_value(*text.get(i + 1)?)? << 4 | hex_value(*text.get(i + 2)?)?))
            .flatten();
        match decoded {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(text[i]);
                i += 1;
            }
        }
    }
    out
}

/// Decodes JSON string escapes wherever they stand (`\uXXXX` with surrogate pairs, `\/`,
/// `\"`, `\\`, `\n`, ...).
fn json_unescape(text: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(text);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut pending_high: Option<u32> = None;
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let Ok(unit) = u32::from_str_radix(&hex, 16) else {
                    out.push_str("\\u");
                    out.push_str(&hex);
                    continue;
                };
                if (0xD800..0xDC00).contains(&unit) {
                    pending_high = Some(unit);
                    continue;
                }
                let code = match pending_high.take() {
                    Some(high) if (0xDC00..0xE000).contains(&unit) => {
                        0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00)
                    }
                    _ => unit,
                };
                out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
            }
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out.into_bytes()
}

/// Decodes HTML character references: numeric ones and the five named ones.
fn html_decode(text: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(text);
    let mut out = String::with_capacity(text.len());
    let mut rest: &str = &text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        // Bytes, not characters: `;` is ASCII, so its place is a character boundary.
        let end = rest.as_bytes()[..rest.len().min(12)]
            .iter()
            .position(|b| *b == b';');
        let decoded = end.and_then(|end| {
            let name = &rest[1..end];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => {
                    let number = name.strip_prefix('#')?;
                    let code = match number.strip_prefix(['x', 'X']) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                        None => number.parse().ok()?,
                    };
                    char::from_u32(code)
                }
            };
            Some((c?, end))
        });
        match decoded {
            Some((c, end)) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};

    const SECRET: &str = "sk_test_A/b+c=d<e&f'g";

    fn leaks(scrubber: &Scrubber, text: &str) -> bool {
        let clean = scrubber.scrub(text);
        let needles = scrubber
            .inner
            .as_ref()
            .map(|n| n.carried(clean.as_bytes(), 2));
        needles.unwrap_or(false) || clean.contains(SECRET)
    }

    /// Every encoding a provider was seen to echo, embedded in ordinary text.
    fn echoed() -> Vec<String> {
        let json = serde_json::to_string(SECRET).unwrap_or_default();
        let mut forms = vec![
            SECRET.to_owned(),
            json.replace('/', "\\/"),
            json.replace('<', "\\u003c").replace('&', "\\u0026"),
            SECRET
                .encode_utf16()
                .map(|u| format!("\\u{u:04X}"))
                .collect(),
            url::form_urlencoded::byte_serialize(SECRET.as_bytes()).collect(),
            percent(SECRET.as_bytes(), |_| false).to_lowercase(),
            SECRET.bytes().map(|b| format!("{b:02X}")).collect(),
            html(SECRET, |c| Some(format!("&#{};", c as u32))),
            html(SECRET, |c| (c == '<').then(|| "&lt;".to_owned()))
                .replace('&', "&amp;")
                .replace("&amp;lt;", "&lt;"),
            // A mixture no single needle covers: some characters escaped, some not.
            SECRET.replace('_', "\\u005f").replace('=', "%3D"),
            // What the review found getting past the first version: MIME base64 wrapped in
            // lines, encodings of encodings, UTF-16, hex with separators.
            STANDARD
                .encode(format!("{SECRET}{}", "x".repeat(80)))
                .as_bytes()
                .chunks(16)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect::<Vec<_>>()
                .join("\r\n"),
            STANDARD.encode(
                serde_json::to_string(SECRET)
                    .unwrap_or_default()
                    .replace('/', "\\/"),
            ),
            STANDARD.encode(percent(SECRET.as_bytes(), |_| false)),
            SECRET
                .encode_utf16()
                .flat_map(u16::to_le_bytes)
                .map(char::from)
                .collect(),
            SECRET
                .bytes()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":"),
        ];
        for prefix in ["", "u", "us", "user:"] {
            let data = format!("{prefix}{SECRET}:");
            forms.push(STANDARD.encode(&data));
            forms.push(URL_SAFE.encode(&data));
        }
        forms
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
                assert!(
                    !leaks(&scrubber, &text),
                    "leaked: {text}\n-> {}",
                    scrubber.scrub(&text)
                );
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
    fn ordinary_text_is_untouched() {
        let scrubber = Scrubber::for_secret(SECRET);
        for text in [
            "{\"id\":\"cus_123\",\"email\":\"a@example.com\",\"data\":\"aGVsbG8gd29ybGQ=\"}",
            "&amp; &lt; %20 \\n 0123456789abcdef0123456789abcdef0123456789abcdef",
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
    /// (`\\u0000` between UTF-16 units, PHP's `\\/`), also nested in a JSON string or in
    /// prose: none survives, judged by the needles on the fully decoded output, not by step 3
    /// alone.
    #[test]
    fn forms_only_the_needles_know_are_found_behind_json_escapes() {
        let scrubber = Scrubber::for_secret(SECRET);
        let needles = scrubber.inner.as_ref().unwrap();
        let matcher = needles.matcher.as_ref().unwrap();
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
                    decoded = json_unescape(&decoded);
                }
                assert!(!matcher.is_match(&decoded), "{text} came out as {clean}");
            }
        }
    }

    proptest::proptest! {
        /// Runs found by striding are exactly the maximal runs a byte-by-byte split finds.
        #[test]
        fn runs_are_every_maximal_run_long_enough(
            text in proptest::collection::vec(proptest::sample::select(b"ab0f:- _=+/\n\"{}".to_vec()), 0..400),
            shortest in 1usize..50,
        ) {
            for class in [&BASE64_RUN, &HEX_RUN] {
                let naive: Vec<&[u8]> = text
                    .split(|b| !class[*b as usize])
                    .filter(|run| run.len() >= shortest.max(MIN_SECRET))
                    .collect();
                let strided: Vec<&[u8]> = runs(&text, class, shortest).collect();
                proptest::prop_assert_eq!(strided, naive);
            }
        }

        /// Whatever a provider sends, scrubbing returns (it runs in the supervisor, where a
        /// panic would cost more than one call).
        #[test]
        fn any_text_is_scrubbed_without_a_panic(text in "([\\\\%&#;xXuU0-9a-fA-F=+/]|\\PC){0,300}") {
            let scrubber = Scrubber::for_secret(SECRET);
            let clean = scrubber.scrub(&text);
            proptest::prop_assert!(!clean.contains(SECRET));
        }

        #[test]
        fn any_value_carrying_an_encoded_secret_comes_out_clean(
            mut value in crate::testing::json_value(6),
            form in 0usize..64,
            choice in 0usize..1000,
        ) {
            let scrubber = Scrubber::for_secret(SECRET);
            let forms = echoed();
            let needle = &forms[form % forms.len()];
            if !plant(&mut value, needle, choice) {
                value = Value::Array(vec![value, Value::String(needle.clone())]);
            }
            scrubber.scrub_json(&mut value);
            let text = serde_json::to_string(&value).unwrap_or_default();
            let decoded: Value = serde_json::from_str(&text).unwrap_or_default();
            proptest::prop_assert_eq!(&decoded, &value);
            let inner = scrubber.inner.as_ref().map(|n| n.carried(text.as_bytes(), 2));
            proptest::prop_assert!(!text.contains(SECRET) && inner == Some(false), "{}", text);
        }
    }

    #[test]
    fn any_serialisable_value_is_scrubbed_whole() {
        let scrubber = Scrubber::for_secret(SECRET);
        let value = vec![(SECRET.to_owned(), format!("v {SECRET}"))];
        let clean = scrubber.scrub_all(value, Vec::new());
        assert_eq!(clean, vec![(REDACTED.to_owned(), format!("v {REDACTED}"))]);
    }
}
