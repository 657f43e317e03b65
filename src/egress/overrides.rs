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
//! a compressed one (`Content-Encoding`), one in another character set than UTF-8 or
//! Latin-1 (a `charset` parameter, a UTF-16 or UTF-32 byte order mark), or a multipart body
//! parsers could split differently (`parts.rs`).

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
    // Two content types: frameworks read either (the first, the last, or both joined), and
    // the human would read the body as only one of them.
    let types = headers
        .iter()
        .filter(|(name, _)| header_name(name) == "content-type")
        .count();
    if types > 1 {
        return Some(found(
            "the body's content type, given more than once",
            "Content-Type",
        ));
    }
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
    // A body declared as bytes (a file) is no text a framework decodes, whatever it starts
    // with; its keys are still looked for below.
    if text_like(headers)
        && (body.starts_with(&[0xFE, 0xFF])
            || body.starts_with(&[0xFF, 0xFE])
            || body.starts_with(&[0, 0, 0xFE, 0xFF]))
    {
        return Some(found(
            "the body's character set",
            "a UTF-16 or UTF-32 byte order mark",
        ));
    }
    // UTF-16 or UTF-32 without a byte order mark, as JSON parsers detect it: a zero byte
    // among the first four (text in UTF-8 has none).
    if body.len() >= 2 && body.iter().take(4).any(|b| *b == 0) && text_like(headers) {
        return Some(found(
            "the body's character set",
            "UTF-16 or UTF-32 (zero bytes)",
        ));
    }
    let text = String::from_utf8_lossy(body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body));
    let declared = headers
        .iter()
        .filter(|(name, _)| header_name(name) == "content-type");
    for (_, content_type) in declared {
        if let Some(why) = super::parts::ambiguity(content_type, &text) {
            return Some(found("a multipart body parsers split differently", &why));
        }
    }
    if let Some(key) = pairs(&text).find(|key| overrides(key)) {
        return Some(found("the body (as a form)", &key));
    }
    if let Some(key) = json_keys(&text).into_iter().find(|key| overrides(key)) {
        return Some(found("the body (as JSON)", &key));
    }
    for name in multipart_names(&text) {
        match name {
            Ok(key) if overrides(&key) => {
                return Some(found("the body (as multipart form data)", &key));
            }
            Ok(_) => {}
            Err(charset) => {
                return Some(found("a multipart field name's character set", &charset));
            }
        }
    }
    None
}

/// A header name as frameworks compare them: lower case, `_` as `-` (PHP and CGI servers
/// turn both into `_`).
pub fn header_name(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace('_', "-")
}

/// Whether the body is declared as text a framework parses (or not declared at all), rather
/// than as bytes (`application/octet-stream`, images).
fn text_like(headers: &[(String, String)]) -> bool {
    let declared = headers
        .iter()
        .find(|(name, _)| header_name(name) == "content-type")
        .map(|(_, value)| value.to_ascii_lowercase());
    declared.is_none_or(|t| {
        ["json", "text/", "form", "xml", "javascript"]
            .iter()
            .any(|kind| t.contains(kind))
    })
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

/// A key fully percent-decoded (`+` as a space; `%uXXXX` too, as ASP.NET's System.Web
/// decodes keys), at most a few times over, in lower case.
fn normalized(key: &str) -> String {
    let mut key = key.to_owned();
    for _ in 0..4 {
        let decoded: String =
            url::form_urlencoded::parse(format!("{}=", percent_u(&key)).as_bytes())
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

/// `key` with each `%uXXXX` (any case) as the character it names, the rest as it is.
fn percent_u(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut rest = key;
    let next = |text: &str| {
        text.match_indices('%')
            .map(|(at, _)| at)
            .find(|at| matches!(text.as_bytes().get(at + 1), Some(b'u' | b'U')))
    };
    while let Some(at) = next(rest) {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let decoded = from
            .get(2..6)
            .filter(|hex| hex.chars().all(|c| c.is_ascii_hexdigit()))
            .and_then(|hex| u32::from_str_radix(hex, 16).ok())
            .and_then(char::from_u32);
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &from[6..];
            }
            None => {
                out.push_str(&from[..2]);
                rest = &from[2..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Every object key, at any depth, with its escapes decoded, in JSON or anything like it:
/// a string in double or single quotes, or a bare name (JSON5, JavaScript), followed by `:`
/// (comments between them skipped).
fn json_keys(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut keys = Vec::new();
    let mut i = 0;
    // Linear: every character is passed once by this loop, and a comment or string once
    // more at most, by the look past the key before it.
    while i < chars.len() {
        let (key, next) = match (chars[i], chars.get(i + 1)) {
            ('/', Some('*' | '/')) => {
                i = skip_blanks(&chars, i);
                continue;
            }
            ('"' | '\'', _) => quoted(&chars, i),
            (c, _) if c.is_alphabetic() || c == '_' || c == '$' || c == '\\' => bare(&chars, i),
            _ => {
                i += 1;
                continue;
            }
        };
        let after = skip_blanks(&chars, next);
        if chars.get(after) == Some(&':') {
            keys.push(key);
        }
        i = next.max(i + 1);
    }
    keys
}

/// The bare name (JSON5, JavaScript) that starts at `start`, its `\\u` escapes decoded, and
/// where it ends.
fn bare(chars: &[char], start: usize) -> (String, usize) {
    let mut name = String::new();
    let mut i = start;
    while let Some(&c) = chars.get(i) {
        if c == '\\' && chars.get(i + 1) == Some(&'u') {
            let hex: String = chars.iter().skip(i + 2).take(4).collect();
            let unit = u32::from_str_radix(&hex, 16).unwrap_or(0xFFFD);
            name.push(char::from_u32(unit).unwrap_or('\u{FFFD}'));
            i += 2 + hex.chars().count();
        } else if c.is_alphanumeric() || "_$-.".contains(c) {
            name.push(c);
            i += 1;
        } else {
            break;
        }
    }
    (name, i.max(start + 1))
}

/// The string that starts with the quote at `start`, escapes decoded, and where it ends.
fn quoted(chars: &[char], start: usize) -> (String, usize) {
    let quote = chars[start];
    let mut key = String::new();
    let mut i = start + 1;
    while let Some(&c) = chars.get(i) {
        i += 1;
        match c {
            c if c == quote => break,
            '\\' => {
                let Some(&escaped) = chars.get(i) else {
                    break;
                };
                i += 1;
                match escaped {
                    'u' | 'x' => {
                        let width = if escaped == 'u' { 4 } else { 2 };
                        let hex: String = chars.iter().skip(i).take(width).collect();
                        i += hex.chars().count();
                        let unit = u32::from_str_radix(&hex, 16).unwrap_or(0xFFFD);
                        key.push(char::from_u32(unit).unwrap_or('\u{FFFD}'));
                    }
                    'n' => key.push('\n'),
                    't' => key.push('\t'),
                    'r' => key.push('\r'),
                    other => key.push(other),
                }
            }
            c => key.push(c),
        }
    }
    (key, i)
}

/// The first position from `i` that is not whitespace or inside a `//` or `/* */` comment.
fn skip_blanks(chars: &[char], mut i: usize) -> usize {
    loop {
        match (chars.get(i), chars.get(i + 1)) {
            (Some(c), _) if c.is_whitespace() => i += 1,
            (Some('/'), Some('*')) => {
                i += 2;
                while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                    i += 1;
                }
                i += 2;
            }
            (Some('/'), Some('/')) => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            _ => return i,
        }
    }
}

/// The field names of multipart parts, read as loosely as the loosest parser reads them.
/// Rack finds a part's name with an unanchored, case-insensitive search for
/// `Content-Disposition:` anywhere in the part's head (so under `X-Content-Disposition:`,
/// after leading blanks), then `name=` after a `;` or blanks, across line breaks; it takes
/// `Content-ID:` (blanks and line breaks after the colon skipped) as the name of a part
/// without one. So: after each occurrence of `content-disposition` anywhere in the body,
/// every `name`, `name*` and `name*N` parameter up to the next such word or the end of the
/// head (a blank line); after each `content-id`, its value. A `name*` in a character set
/// that is not UTF-8, ASCII or Latin-1 is returned as `Err(charset)`: it cannot be read as
/// the provider would. Each word's stretch ends where the next begins: linear time.
fn multipart_names(text: &str) -> Vec<Result<String, String>> {
    const DISPOSITION: &str = "content-disposition";
    const ID: &str = "content-id";
    let lower = text.to_ascii_lowercase();
    let mut marks: Vec<(usize, &str)> = lower
        .match_indices(DISPOSITION)
        .chain(lower.match_indices(ID))
        .collect();
    marks.sort_unstable();
    // Where each head ends: a line with nothing on it.
    let blanks: Vec<usize> = lower
        .match_indices('\n')
        .map(|(at, _)| at)
        .filter(|at| {
            let rest = &lower.as_bytes()[at + 1..];
            rest.first() == Some(&b'\n') || rest.starts_with(b"\r\n")
        })
        .collect();
    // A word's stretch ends at the next word of its own kind (a `content-id` inside a
    // disposition's parameters does not cut them short), or at the end of its head.
    let mut next_of_kind = vec![text.len(); marks.len()];
    let mut seen: [Option<usize>; 2] = [None, None];
    for (n, (at, mark)) in marks.iter().enumerate().rev() {
        let kind = usize::from(*mark == ID);
        next_of_kind[n] = seen[kind].unwrap_or(text.len());
        seen[kind] = Some(*at);
    }
    let mut names = Vec::new();
    let mut blank = 0;
    for (n, (at, mark)) in marks.iter().enumerate() {
        let from = at + mark.len();
        while blanks.get(blank).is_some_and(|b| *b < from) {
            blank += 1;
        }
        let head_end = blanks.get(blank).map_or(text.len(), |b| *b);
        let end = next_of_kind[n].min(head_end).max(from);
        let Some(segment) = text.get(from..end) else {
            continue;
        };
        if *mark == ID {
            if let Some(value) = segment.trim_start().strip_prefix(':') {
                let value = value.trim_start();
                let value = value.split([';', '\r', '\n']).next().unwrap_or_default();
                let value = value.trim().trim_matches(['<', '>', '"']);
                names.push(Ok(value.to_owned()));
                names.push(Ok(token(value).to_owned()));
            }
        } else {
            disposition_params(&tight_equals(segment), &mut names);
        }
    }
    names
}

/// Every `name`, `name*` and `name*N` parameter in `value` (split on `;`, blanks and line
/// breaks, as Rack's reading does), RFC 2231 continuations joined in order and decoded in
/// their character set.
fn disposition_params(value: &str, names: &mut Vec<Result<String, String>>) {
    let mut pieces: Vec<(u32, String)> = Vec::new();
    let mut charset = None;
    for param in value.split([';', ' ', '\t', '\r', '\n']) {
        let Some((name, value)) = param.split_once('=') else {
            continue;
        };
        let name = name.trim().to_ascii_lowercase();
        let value = value.trim().trim_matches('"');
        if name == "name" {
            names.push(Ok(encoded_words(&value.replace('\\', ""))));
            // Rack reads an unquoted value up to its first special character.
            names.push(Ok(token(value).to_owned()));
        } else if name == "name*" {
            names.push(rfc2231(value));
        } else if let Some(n) = name
            .strip_prefix("name*")
            .map(|rest| rest.trim_end_matches('*'))
            .and_then(|n| n.parse::<u32>().ok())
        {
            // A piece may say the character set of them all: `utf-8''...`.
            if value.matches('\'').count() >= 2 {
                charset = value.split('\'').next().map(str::to_owned);
            }
            let piece = value.rsplit('\'').next().unwrap_or(value);
            pieces.push((n, piece.to_owned()));
        }
    }
    if !pieces.is_empty() {
        pieces.sort_by_key(|(n, _)| *n);
        let joined: String = pieces.into_iter().map(|(_, piece)| piece).collect();
        let charset = charset.unwrap_or_default();
        names.push(rfc2231(&format!("{charset}''{joined}")));
    }
}

/// The token `value` starts with, as Rack reads an unquoted parameter value: up to its first
/// blank or special character (`()<>,;:\"/[]?=`).
fn token(value: &str) -> &str {
    let end = value
        .find(|c: char| c.is_whitespace() || "()<>,;:\\\"/[]?=".contains(c))
        .unwrap_or(value.len());
    &value[..end]
}

/// `text` without the blanks around each `=` (`name = "_method"`, which python-multipart and
/// Bottle read as a name).
fn tight_equals(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '=' {
            while out.ends_with([' ', '\t', '\r', '\n']) {
                out.pop();
            }
            out.push('=');
            while chars
                .next_if(|c| matches!(c, ' ' | '\t' | '\r' | '\n'))
                .is_some()
            {}
        } else {
            out.push(c);
        }
    }
    out
}

/// An RFC 2231 value (`charset'language'percent-encoded`), decoded in its character set;
/// `Err(charset)` for one that is not UTF-8, ASCII or Latin-1 (Django decodes the name in
/// whatever set it says: `utf-16le''%5F%00m%00...` is `_method` there).
fn rfc2231(value: &str) -> Result<String, String> {
    let mut parts = value.splitn(3, '\'');
    let (charset, encoded) = match (parts.next(), parts.next(), parts.next()) {
        (Some(charset), Some(_), Some(encoded)) => (charset.to_ascii_lowercase(), encoded),
        _ => (String::new(), value),
    };
    let bytes: Vec<u8> = url::form_urlencoded::parse(format!("{encoded}=").as_bytes())
        .next()
        .map(|(k, _)| k.into_owned().into_bytes())
        .unwrap_or_default();
    match charset.as_str() {
        "" | "utf-8" | "utf8" | "us-ascii" | "ascii" => {
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        }
        "iso-8859-1" | "latin1" | "latin-1" => Ok(bytes.iter().map(|b| char::from(*b)).collect()),
        other => Err(other.to_owned()),
    }
}

/// A value with its RFC 2047 encoded words (`=?utf-8?B?X21ldGhvZA==?=`, `?Q?`) decoded.
fn encoded_words(value: &str) -> String {
    use base64::Engine;
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("=?") {
        out.push_str(&rest[..start]);
        let word = &rest[start + 2..];
        let parts: Vec<&str> = word.splitn(3, '?').collect();
        let (Some(encoding), Some(tail)) = (parts.get(1), parts.get(2)) else {
            out.push_str(&rest[start..]);
            return out;
        };
        let Some(end) = tail.find("?=") else {
            out.push_str(&rest[start..]);
            return out;
        };
        let text = &tail[..end];
        let decoded = match encoding.to_ascii_lowercase().as_str() {
            "b" => base64::engine::general_purpose::STANDARD
                .decode(text)
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or_default(),
            _ => normalized(&text.replace('_', " ").replace('=', "%")),
        };
        out.push_str(&decoded);
        rest = &tail[end + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_body(body: &str) -> Option<Found> {
        find(None, &[], Some(body.as_bytes()))
    }

    /// Two content types are refused: frameworks read the first, the last or both, and a
    /// human is shown the body as one of them.
    #[test]
    fn a_second_content_type_is_refused() {
        let headers = [
            (
                "content-type".to_owned(),
                "multipart/form-data; boundary=a".to_owned(),
            ),
            (
                "Content-Type".to_owned(),
                "multipart/form-data; boundary=Z".to_owned(),
            ),
        ];
        let found = find(None, &headers, Some(b"--Z\r\n")).unwrap();
        assert!(found.place.contains("more than once"), "{found:?}");
        let one = [("content-type".to_owned(), "application/json".to_owned())];
        assert_eq!(find(None, &one, Some(b"{}")), None);
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
            "--b\r\nContent-Disposition: form-data; name*0=\"_me\"; name*1=\"thod\"\r\n\r\nDELETE\r\n--b--",
            "--b\r\nContent-Disposition: form-data; name=\"=?utf-8?B?X21ldGhvZA==?=\"\r\n\r\nDELETE\r\n--b--",
            "--b\r\nContent-Disposition: form-data; name=\"=?utf-8?Q?=5Fmethod?=\"\r\n\r\nDELETE\r\n--b--",
            "{_method: 'DELETE'}",
            "{'_method': 'DELETE'}",
            r#"{"_method" /* c */ : "DELETE"}"#,
            "{'\\x5fmethod': 'DELETE'}",
            "{\\u005fmethod: 'DELETE'}",
            // Read as Rack (unanchored, any case), ASP.NET (`%u`) and folding parsers do.
            "X-HTTP-Method-Overrid%u0065=DELETE",
            "%u005Fmethod=DELETE",
            "_m%U0065thod=DELETE",
            "--b\r\nX-Content-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--",
            "--b\r\n Content-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--",
            "--b\r\nContent-Type: text/plain\r\n Content-Disposition: form-data; name=_method\r\n\r\nDELETE\r\n--b--",
            "--b\r\nContent-ID: <_method>\r\n\r\nDELETE\r\n--b--",
            "--b\r\ncontent-id:_method\r\n\r\nDELETE\r\n--b--",
            "--b\r\nContent-Disposition: form-data name=_method\r\n\r\nDELETE\r\n--b--",
            "--b\r\nContent-Disposition:form-data;name=_method\r\n\r\nDELETE\r\n--b--",
            // Across line breaks, as Rack's patterns read them.
            "--b\r\nContent-Disposition: form-data\r\n; name=_method\r\n\r\nDELETE\r\n--b--",
            "--b\r\nContent-Disposition: form-data;\r\nname=_method\r\n\r\nDELETE\r\n--b--",
            "--b\r\nContent-Disposition: form-data\r\nX-Foo; name=_method\r\n\r\nDELETE\r\n--b--",
            "--b\r\nContent-ID:\r\n_method\r\n\r\nDELETE\r\n--b--",
            "--b\r\nContent-Disposition: form-data; name*=utf-16le''%5F%00m%00e%00t%00h%00o%00d%00\r\n\r\nDELETE\r\n--b--",
            "--b\r\nContent-Disposition: form-data; name*0*=iso-8859-1''%5Fme; name*1=thod\r\n\r\nDELETE\r\n--b--",
        ] {
            assert!(in_body(body).is_some(), "{body}");
        }
        assert_eq!(
            in_body("\u{FEFF}_method=DELETE").unwrap().place,
            "the body (as a form)"
        );
    }

    /// A hang guard, not a timing: a scan that rescanned the rest of the body at each key
    /// would take hours on these.
    #[test]
    fn reading_a_body_takes_linear_time() {
        // Unterminated comments and strings: each key candidate must not rescan the rest;
        // nor each multipart header word the rest of its line.
        for unit in [
            "a/*",
            "a//",
            "\"a\" ",
            "'a",
            "a ",
            "{\"a\":",
            "content-disposition",
            "Content-ID:",
            "%u",
        ] {
            let body = unit.repeat(200_000);
            let started = std::time::Instant::now();
            let _ = find(None, &[], Some(body.as_bytes()));
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "{unit}"
            );
        }
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
        assert!(find(None, &[], Some(b"\0{\0\"\0_")).is_some());
        let bytes = [(
            "content-type".to_owned(),
            "application/octet-stream".to_owned(),
        )];
        assert_eq!(find(None, &bytes, Some(b"\0\0\x01binary")), None);
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
