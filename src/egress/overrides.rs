//! Method overrides: keys and headers that web frameworks read as the HTTP method (Rails,
//! Laravel and Symfony read a `_method` field; Express's method-override reads the query,
//! the body and `X-HTTP-Method-Override`; ASP.NET reads `X-HTTP-Method-Override` from the
//! form and the query too). A request that carries one would act as another operation than
//! the one sdkbox classified, logged and maybe had approved, so it is refused, with a clear
//! error, wherever the provider could find one.
//!
//! The check reads a request the way the provider's framework could, not by a list of
//! spellings: every query and form key fully percent-decoded (`+` as a space), in any case,
//! PHP's name mangling (` ` and `.` become `_`) and bracket syntax (`_method[]`, `[_method]`)
//! undone; every JSON object key at any depth with its escapes decoded, duplicates included,
//! valid JSON or not; every multipart field name (quoted, unquoted, `name*=` RFC 2231,
//! folded headers). And a body the check cannot read as the provider would is refused too:
//! a compressed one (`Content-Encoding`), or one in another character set than UTF-8 or
//! Latin-1 (a `charset` parameter, a UTF-16 or UTF-32 byte order mark).

/// Keys frameworks read as the method, as [`normalized`] spells them.
const OVERRIDE_KEYS: &[&str] = &[
    "_method",
    "x_http_method_override",
    "x_http_method",
    "x_method_override",
];

/// Headers frameworks read as the method or as another path, as [`header_name`] spells them.
const OVERRIDE_HEADERS: &[&str] = &[
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
    "x-original-method",
    "x-original-url",
    "x-rewrite-url",
];

/// Where an override was found, and how it was spelt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// `the query`, `the body`, `a header`, ...
    pub place: &'static str,
    /// The key or header as the script wrote it (cut).
    pub key: String,
}

/// The first method override (or unreadable body) in a request, if it has one.
pub fn find(
    query: Option<&str>,
    headers: &[(String, String)],
    body: Option<&[u8]>,
) -> Option<Found> {
    let found = |place, key: &str| Found {
        place,
        key: crate::egress::cut(key, 100),
    };
    for (name, value) in headers {
        if OVERRIDE_HEADERS.contains(&header_name(name).as_str()) {
            return Some(found("a header", name));
        }
        let name = header_name(name);
        if name == "content-encoding" && !value.trim().eq_ignore_ascii_case("identity") {
            return Some(found("a compressed body (Content-Encoding)", value));
        }
        if name == "content-type"
            && let Some(charset) = foreign_charset(value)
        {
            return Some(found("the body's character set", &charset));
        }
    }
    if let Some(key) = query.and_then(|q| pairs(q).find(|key| overrides(key))) {
        return Some(found("the query", &key));
    }
    let body = body?;
    if body.starts_with(&[0xFE, 0xFF])
        || body.starts_with(&[0xFF, 0xFE])
        || body.starts_with(&[0, 0, 0xFE, 0xFF])
    {
        return Some(found(
            "the body's character set",
            "a UTF-16 or UTF-32 byte order mark",
        ));
    }
    let text = String::from_utf8_lossy(body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body));
    if let Some(key) = pairs(&text).find(|key| overrides(key)) {
        return Some(found("the body (as a form)", &key));
    }
    if let Some(key) = json_keys(&text).into_iter().find(|key| overrides(key)) {
        return Some(found("the body (as JSON)", &key));
    }
    if let Some(key) = multipart_names(&text)
        .into_iter()
        .find(|key| overrides(key))
    {
        return Some(found("the body (as multipart form data)", &key));
    }
    None
}

/// A header name as frameworks compare them: lower case, `_` as `-` (PHP and CGI servers
/// turn both into `_`).
pub fn header_name(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace('_', "-")
}

/// A `charset` parameter that is neither UTF-8 nor Latin-1 (nor ASCII).
fn foreign_charset(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("charset") {
            return None;
        }
        let value = value.trim().trim_matches('"').to_ascii_lowercase();
        let known = [
            "utf-8",
            "utf8",
            "us-ascii",
            "ascii",
            "iso-8859-1",
            "latin1",
            "iso8859-1",
        ];
        (!known.contains(&value.as_str())).then_some(value)
    })
}

/// The keys of `key=value` pairs, split on `&` and `;`.
fn pairs(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(['&', ';'])
        .map(|pair| pair.split('=').next().unwrap_or_default().to_owned())
}

/// Whether a key, read every way a framework could, names the method.
fn overrides(key: &str) -> bool {
    let key = normalized(key);
    let variants = [
        key.clone(),
        key.replace([' ', '.'], "_"),
        key.replace('-', "_"),
        key.replace([' ', '.', '-'], "_"),
    ];
    variants.iter().any(|variant| {
        variant
            .split(['[', ']'])
            .map(|segment| segment.trim_matches(|c: char| c.is_whitespace() || c.is_control()))
            .any(|segment| OVERRIDE_KEYS.contains(&segment))
    })
}

/// A key fully percent-decoded (`+` as a space), at most a few times over, in lower case.
fn normalized(key: &str) -> String {
    let mut key = key.to_owned();
    for _ in 0..4 {
        let decoded: String = url::form_urlencoded::parse(format!("{key}=").as_bytes())
            .next()
            .map(|(k, _)| k.into_owned())
            .unwrap_or_default();
        if decoded == key {
            break;
        }
        key = decoded;
    }
    key.to_lowercase()
}

/// Every string followed by `:` (an object key, at any depth), its escapes decoded, in JSON
/// or anything like it.
fn json_keys(text: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut key = String::new();
        let mut closed = false;
        while let Some((_, c)) = chars.next() {
            match c {
                '"' => {
                    closed = true;
                    break;
                }
                '\\' => match chars.next().map(|(_, c)| c) {
                    Some('u') => {
                        let hex: String = (0..4)
                            .filter_map(|_| chars.next().map(|(_, c)| c))
                            .collect();
                        let unit = u32::from_str_radix(&hex, 16).unwrap_or(0xFFFD);
                        key.push(char::from_u32(unit).unwrap_or('\u{FFFD}'));
                    }
                    Some('n') => key.push('\n'),
                    Some('t') => key.push('\t'),
                    Some('r') => key.push('\r'),
                    Some('b') => key.push('\u{8}'),
                    Some('f') => key.push('\u{C}'),
                    Some(other) => key.push(other),
                    None => {}
                },
                c => key.push(c),
            }
        }
        if !closed {
            break;
        }
        while chars.peek().is_some_and(|(_, c)| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_some_and(|(_, c)| *c == ':') {
            keys.push(key);
        }
    }
    keys
}

/// The field names of multipart parts: every `name` or `name*` parameter of a
/// `Content-Disposition` line, folded lines joined.
fn multipart_names(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for line in text.split('\n') {
        let line = line.trim_end_matches('\r');
        match lines.last_mut() {
            Some(last) if line.starts_with([' ', '\t']) => last.push_str(line),
            _ => lines.push(line.to_owned()),
        }
    }
    let mut names = Vec::new();
    for line in &lines {
        let Some((header, value)) = line.split_once(':') else {
            continue;
        };
        if !header.trim().eq_ignore_ascii_case("content-disposition") {
            continue;
        }
        for param in value.split(';').skip(1) {
            let Some((name, value)) = param.split_once('=') else {
                continue;
            };
            let name = name.trim().to_ascii_lowercase();
            let value = value.trim();
            if name == "name" {
                names.push(value.trim_matches('"').replace('\\', ""));
            } else if name == "name*" {
                // RFC 2231: charset'language'percent-encoded
                let encoded = value.rsplit('\'').next().unwrap_or(value);
                names.push(encoded.trim_matches('"').to_owned());
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_body(body: &str) -> Option<Found> {
        find(None, &[], Some(body.as_bytes()))
    }

    #[test]
    fn every_spelling_of_a_method_key_is_found() {
        for body in [
            "_method=DELETE",
            "name=x&%5Fmethod=DELETE",
            "_m%65thod=DELETE",
            "%255Fmethod=DELETE",
            "_METHOD=DELETE",
            ".method=DELETE",
            " method=DELETE",
            "_method[]=DELETE",
            "[_method]=DELETE",
            "_method%5B0%5D=DELETE",
            "a=1;_method=DELETE",
            "X-HTTP-Method-Override=DELETE",
            r#"{"_method": "DELETE"}"#,
            r#"{"_m\u0065thod": "DELETE"}"#,
            r#"{"\u005fmethod": "DELETE"}"#,
            r#"{"a": 1, "_method": "PATCH", "_method": "DELETE"}"#,
            r#"{"data": {"_Method": "DELETE"}}"#,
            r#"{"_method": "DELETE", "x": "\ud800"}"#,
            "--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--",
            "--b\r\ncontent-disposition: form-data; NAME=_method\r\n\r\nDELETE\r\n--b--",
            "--b\r\nContent-Disposition: form-data;\r\n name=\"_method\"\r\n\r\nDELETE\r\n--b--",
            "--b\r\nContent-Disposition: form-data; name*=utf-8''%5Fmethod\r\n\r\nDELETE\r\n--b--",
        ] {
            assert!(in_body(body).is_some(), "{body}");
        }
        assert_eq!(
            in_body("\u{FEFF}_method=DELETE").unwrap().place,
            "the body (as a form)"
        );
    }

    #[test]
    fn ordinary_bodies_pass() {
        for body in [
            r#"{"note": "uses _method internally", "method": "card"}"#,
            "name=x_method&payment_method=card&method=POST",
            r#"{"payment_method": "pm_1", "metadata": {"order": "7"}}"#,
            "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"_method.txt\"\r\n\r\nx\r\n--b--",
        ] {
            assert_eq!(in_body(body), None, "{body}");
        }
    }

    #[test]
    fn queries_headers_and_unreadable_bodies_are_found() {
        assert!(find(Some("a=1&_Method=DELETE"), &[], None).is_some());
        assert!(find(Some("%5f%6d%65%74%68%6f%64=DELETE"), &[], None).is_some());
        assert_eq!(find(Some("payment_method=x"), &[], None), None);
        for name in ["X-HTTP-Method-Override", "x_http_method", "X-Original-URL"] {
            let headers = [(name.to_owned(), "DELETE".to_owned())];
            assert_eq!(
                find(None, &headers, None).unwrap().place,
                "a header",
                "{name}"
            );
        }
        let gzip = [("Content-Encoding".to_owned(), "gzip".to_owned())];
        assert!(find(None, &gzip, Some(b"\x1f\x8b")).is_some());
        let utf7 = [(
            "content-type".to_owned(),
            "application/json; charset=UTF-7".to_owned(),
        )];
        assert!(find(None, &utf7, Some(br#"{"+AF8-method":"DELETE"}"#)).is_some());
        let utf8 = [(
            "content-type".to_owned(),
            "application/json; charset=utf-8".to_owned(),
        )];
        assert_eq!(find(None, &utf8, Some(b"{}")), None);
        assert!(find(None, &[], Some(b"\xff\xfe{\0}\0")).is_some());
    }

    /// A spelling of one override key: each character in either case, and (`encode`) each
    /// one percent-encoded or JSON-escaped, by the per-character choices given.
    fn spelt(key: &str, upper: &[bool], escape: &[u8], json: bool) -> String {
        key.chars()
            .enumerate()
            .map(|(i, c)| {
                let c = match upper.get(i) {
                    Some(true) => c.to_ascii_uppercase(),
                    _ => c.to_ascii_lowercase(),
                };
                match (escape.get(i).copied().unwrap_or(0) % 4, json) {
                    (1, false) => format!("%{:02X}", c as u32),
                    (2, false) => format!("%{:02x}", c as u32),
                    (3, false) => format!("%25{:02X}", c as u32),
                    (1 | 3, true) => format!("\\u{:04X}", c as u32),
                    (2, true) => format!("\\u{:04x}", c as u32),
                    _ => c.to_string(),
                }
            })
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(2_000))]

        /// Any body or query encoding of a method-override key is found: forms in any case and
        /// percent-encoding (twice over too), brackets, among other pairs; JSON keys with any
        /// escapes at any depth; multipart names quoted or not, in folded headers.
        #[test]
        fn any_encoding_of_an_override_key_is_found(
            key in proptest::sample::select(vec!["_method", "x-http-method-override", "x_http_method", "x-method-override"]),
            upper in proptest::collection::vec(proptest::bool::ANY, 24),
            escape in proptest::collection::vec(0u8..4, 24),
            suffix in proptest::sample::select(vec!["", "[]", "[0]", "%5B%5D"]),
            before in "[a-z]{0,6}=[a-z0-9]{0,6}",
            separator in proptest::sample::select(vec!["&", ";"]),
            depth in 0usize..4,
            shape in 0u8..5,
        ) {
            let form_key = format!("{}{suffix}", spelt(key, &upper, &escape, false));
            let json_key = spelt(key, &upper, &escape, true);
            let plain = spelt(key, &upper, &[], false);
            let body = match shape {
                0 => format!("{before}{separator}{form_key}=DELETE"),
                1 => {
                    let inner = format!("{{\"{json_key}\": \"DELETE\"}}");
                    (0..depth).fold(inner, |inner, n| format!("{{\"k{n}\": {inner}, \"a\": [1]}}"))
                }
                2 => format!("--b\r\nContent-Disposition: form-data; name=\"{plain}\"\r\n\r\nDELETE\r\n--b--"),
                3 => format!("--b\r\ncontent-disposition: form-data;\r\n\tNAME={plain}\r\n\r\nDELETE\r\n--b--"),
                _ => String::new(),
            };
            let found = if shape == 4 {
                find(Some(&format!("{before}{separator}{form_key}=DELETE")), &[], None)
            } else {
                find(None, &[], Some(body.as_bytes()))
            };
            proptest::prop_assert!(found.is_some(), "{}", body);
        }
    }
}
