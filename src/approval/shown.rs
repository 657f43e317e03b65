//! What a human is shown of a request: exactly the bytes that go out, laid out to be read.
//!
//! Nothing is re-serialised: a JSON body keeps its duplicate keys, its numbers as written and
//! its escapes (it only gains indentation between tokens); any other text is shown as it is,
//! and a file (bytes that are not UTF-8, a body of a media type that is no text, a multipart
//! part with a file name) as its size, SHA-256 and first bytes, never as raw bytes.
//! What could hide something is made visible: control and invisible characters (bidi
//! overrides, zero-width spaces) appear as `\u{…}`, runs of blank lines and of spaces as a
//! count, and the body's size is stated. A question larger than [`MAX_QUESTION`] characters
//! in all (URL, headers and body together) is not put to a human at all: nobody approves
//! what they cannot read whole.

use serde::{Deserialize, Serialize};

/// Characters of a whole question (URL, headers and body as shown) a human is asked to read;
/// a request that shows larger is refused, never cut.
pub const MAX_QUESTION: usize = 16_000;

/// Lines of a whole question (URL, headers and body as shown) a human is asked to read;
/// longer questions are refused, never cut.
pub const MAX_QUESTION_LINES: usize = 200;

/// Spaces in a row shown as they are; longer runs are shown as a count.
const MAX_SPACES: usize = 64;

/// Levels of JSON nesting that get their own indentation; deeper levels share the last.
const MAX_INDENT: usize = 30;

/// A request as a human sees it: what it calls and what it sends, no secret (the script never
/// had it, and what is shown is scrubbed again), readable, every byte accounted for.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Shown {
    /// The spec operation (`refunds.create`), when the request matched one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// HTTP method.
    pub method: String,
    /// The URL, query included, as sent.
    pub url: String,
    /// The headers the script or the SDK set (`name: value`), as sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
    /// The body, laid out and made visible (see the module's doc).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The body's size in bytes, as sent.
    #[serde(skip)]
    pub body_bytes: usize,
    /// Lines of the body as sent (the layout of JSON adds its own, which are not counted).
    #[serde(skip)]
    pub body_lines: usize,
}

impl Shown {
    /// Shows a request whole.
    pub fn new(
        operation: Option<String>,
        method: &str,
        url: &str,
        headers: &[String],
        body: Option<&[u8]>,
    ) -> Self {
        let body = body.filter(|b| !b.is_empty());
        let content_type = headers
            .iter()
            .filter_map(|h| h.split_once(':'))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-type"))
            .map(|(_, value)| value.trim().to_owned())
            .unwrap_or_default();
        let files = body.and_then(|b| files_summarised(b, &content_type));
        Self {
            operation,
            method: visible(method),
            url: visible(url),
            headers: headers.iter().map(|h| visible(h)).collect(),
            body_bytes: body.map_or(0, <[u8]>::len),
            // A file is read as its summary; other bodies as their own lines.
            body_lines: match (&files, body) {
                (Some(shown), _) => shown.lines().count(),
                (None, Some(b)) => 1 + b.iter().filter(|c| **c == b'\n').count(),
                (None, None) => 0,
            },
            body: files.or_else(|| body.map(render_body)),
        }
    }

    /// Characters of the whole question: URL, headers and body as shown.
    pub fn size(&self) -> usize {
        let chars = |text: &str| text.chars().count();
        chars(&self.url)
            + self.headers.iter().map(|h| chars(h)).sum::<usize>()
            + self.body.as_deref().map_or(0, chars)
    }

    /// Lines of the whole question as sent: URL, headers and the body's own lines.
    pub fn lines(&self) -> usize {
        1 + self.headers.len() + self.body_lines
    }

    /// Whether a human can be asked about it: its whole question fits [`MAX_QUESTION`]
    /// characters and [`MAX_QUESTION_LINES`] lines.
    pub fn whole(&self) -> bool {
        self.size() <= MAX_QUESTION && self.lines() <= MAX_QUESTION_LINES
    }

    /// The same request with each part cut to `max` characters, for a plan that lists it
    /// (never for a question).
    pub fn preview(self, max: usize) -> Self {
        let cut = |text: &str| crate::egress::cut(text, max);
        Self {
            url: cut(&self.url),
            headers: self.headers.iter().map(|h| cut(h)).collect(),
            body: self.body.as_deref().map(cut),
            ..self
        }
    }

    /// The request in a few words: `refunds.create (POST https://…/refunds)`.
    pub fn what(&self) -> String {
        let url = crate::egress::cut(&self.url, 200);
        match &self.operation {
            Some(op) => format!("{op} ({} {url})", self.method),
            None => format!("{} {url}", self.method),
        }
    }

    /// The line that introduces the body: its size, and how it is shown.
    pub fn body_heading(&self) -> String {
        format!(
            "Body: {} bytes, exactly as sent (invisible characters shown as \\u{{…}}, runs of \
             blank lines and spaces as a count)",
            self.body_bytes
        )
    }
}

/// Bytes of a file shown at the start of its summary.
const PREVIEW: usize = 48;

/// A body that is or holds files, as a human reads it, or `None` for a body read as text:
/// bytes that are not UTF-8 are their summary; a multipart body shows each part's headers
/// and its text, a file part (one with a `filename` parameter) that is not UTF-8 as its
/// summary. Text is always shown as text, whatever type it is declared (a provider may read
/// JSON sent as `application/octet-stream`): a text file too large to read whole is not
/// asked about. Never raw bytes.
fn files_summarised(bytes: &[u8], content_type: &str) -> Option<String> {
    let lower = content_type.to_ascii_lowercase();
    if lower.starts_with("multipart/") {
        // The boundary as written: it is compared byte for byte.
        let boundary = content_type
            .split(';')
            .filter_map(|p| {
                let (name, value) = p.trim().split_once('=')?;
                name.eq_ignore_ascii_case("boundary").then_some(value)
            })
            .next()?
            .trim_matches('"');
        return multipart_summarised(bytes, boundary);
    }
    let declared_text = content_type.is_empty()
        || [
            "json",
            "text/",
            "xml",
            "form",
            "javascript",
            "yaml",
            "csv",
            "html",
        ]
        .iter()
        .any(|t| content_type.contains(t));
    if declared_text || looks_like_text(bytes) {
        return None;
    }
    Some(summary(bytes))
}

/// A multipart body part by part (see [`files_summarised`]); `None` when it is not laid out
/// exactly as its boundary says (a preamble, no closing delimiter, anything after it), and
/// is shown as it is.
fn multipart_summarised(bytes: &[u8], boundary: &str) -> Option<String> {
    let delimiter = format!("--{boundary}");
    let finder = memchr::memmem::Finder::new(delimiter.as_bytes());
    let starts: Vec<usize> = finder.find_iter(bytes).collect();
    let last = *starts.last()?;
    let closing = &bytes[last + delimiter.len()..];
    if starts.first() != Some(&0) || !(closing == b"--\r\n" || closing == b"--") {
        return None;
    }
    let mut out = String::new();
    for pair in starts.windows(2) {
        let part = &bytes[pair[0] + delimiter.len()..pair[1]];
        let part = part.strip_prefix(b"\r\n")?.strip_suffix(b"\r\n")?;
        let split = memchr::memmem::find(part, b"\r\n\r\n")?;
        let (head, content) = (&part[..split], &part[split + 4..]);
        let head = std::str::from_utf8(head).ok()?;
        out.push_str(&format!(
            "{delimiter}\n{}\n\n",
            visible(&head.replace("\r\n", "\n"))
        ));
        if names_a_file(head) && !looks_like_text(content) {
            out.push_str(&summary(content));
        } else {
            out.push_str(&render_body(content));
        }
        out.push('\n');
    }
    out.push_str(&format!("{delimiter}--"));
    Some(out)
}

/// Whether bytes read as text to a person: valid UTF-8, or nearly all of them printable
/// (one bad byte does not make JSON a file). A real file (an image, an archive, a PDF's
/// compressed streams) is far from it.
fn looks_like_text(bytes: &[u8]) -> bool {
    if std::str::from_utf8(bytes).is_ok() {
        return true;
    }
    let printable = String::from_utf8_lossy(bytes)
        .chars()
        .filter(|c| *c != '\u{FFFD}' && (!c.is_control() || matches!(c, '\n' | '\r' | '\t')))
        .map(char::len_utf8)
        .sum::<usize>();
    printable * 10 >= bytes.len() * 9
}

/// Whether a part's headers give it a file name: a `filename` (or `filename*`) parameter of
/// its `Content-Disposition`, not the word anywhere.
fn names_a_file(head: &str) -> bool {
    head.lines()
        .filter_map(|line| line.split_once(':'))
        .filter(|(name, _)| name.trim().eq_ignore_ascii_case("content-disposition"))
        .any(|(_, value)| {
            // Parameters split at `;` outside quotes (a backslash escapes inside them):
            // `name="a;filename=x"` and `x="\"; filename=y"` name no file.
            let (mut quoted, mut escaped) = (false, false);
            let mut params = vec![String::new()];
            for c in value.chars() {
                match c {
                    _ if escaped => escaped = false,
                    '\\' if quoted => escaped = true,
                    '"' => quoted = !quoted,
                    ';' if !quoted => params.push(String::new()),
                    _ => {}
                }
                if let Some(last) = params.last_mut() {
                    last.push(c);
                }
            }
            params.iter().skip(1).any(|param| {
                let param = param.trim_start_matches(';');
                let name = param.split('=').next().unwrap_or_default().trim();
                name.eq_ignore_ascii_case("filename") || name.eq_ignore_ascii_case("filename*")
            })
        })
}

/// Bytes as a human is asked about them: their size, their SHA-256 and how they start.
fn summary(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = crate::hex::hex(&sha2::Sha256::digest(bytes));
    let head = &bytes[..bytes.len().min(PREVIEW)];
    let preview = match std::str::from_utf8(head) {
        Ok(text) => format!("\"{}\"", text.escape_debug()),
        Err(_) => format!("hex {}", crate::hex::hex(head)),
    };
    let more = if bytes.len() > PREVIEW { "…" } else { "" };
    format!(
        "[file: {} bytes, SHA-256 {digest}, starting {preview}{more}]",
        bytes.len()
    )
}

/// A body as a human reads it: JSON laid out token by token, anything else as it is; then
/// made visible.
fn render_body(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let json = serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok();
    let laid_out = if json {
        lay_out_json(&text)
    } else {
        text.into_owned()
    };
    let mut shown = visible(&laid_out);
    if std::str::from_utf8(bytes).is_err() {
        shown.push_str("\n[the body is not valid UTF-8: invalid bytes are shown as \u{FFFD}]");
    }
    shown
}

/// Valid JSON with a line break after each `{`, `[` and `,`, before each `}` and `]`, and a
/// space after each `:`; every token (strings with their escapes, numbers as written, keys
/// however often they repeat) is copied as it is.
fn lay_out_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    let mut depth: usize = 0;
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth.min(MAX_INDENT)));
    };
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push('"');
                let mut escaped = false;
                for c in chars.by_ref() {
                    out.push(c);
                    match (escaped, c) {
                        (true, _) => escaped = false,
                        (false, '\\') => escaped = true,
                        (false, '"') => break,
                        _ => {}
                    }
                }
            }
            '{' | '[' => {
                out.push(c);
                while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                    chars.next();
                }
                if matches!(chars.peek(), Some('}' | ']')) {
                    continue;
                }
                depth += 1;
                newline(&mut out, depth);
            }
            '}' | ']' => {
                if !(out.ends_with('{') || out.ends_with('[')) {
                    depth = depth.saturating_sub(1);
                    newline(&mut out, depth);
                }
                out.push(c);
            }
            ',' => {
                out.push(',');
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_ascii_whitespace() => {}
            c => out.push(c),
        }
    }
    out
}

/// Whether a character could hide something from a reader: controls, the invisible and
/// direction-changing characters of Unicode, and every blank but the plain space (no-break
/// and wide spaces, the braille blank, the Hangul fillers), which would make a line look
/// empty without being one.
fn invisible(c: char) -> bool {
    (c != ' ' && c != '\n' && c.is_whitespace())
        || matches!(c as u32,
            0x00..=0x08 | 0x0B..=0x1F | 0x7F..=0x9F
            | 0xAD | 0x34F | 0x61C | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x180B..=0x180F
            | 0x200B..=0x200F | 0x2028..=0x202E | 0x2060..=0x206F | 0x2800 | 0x3164
            | 0x0600..=0x0605 | 0x06DD | 0x070F | 0x0890 | 0x0891 | 0x08E2
            | 0xE000..=0xF8FF | 0xFE00..=0xFE0F | 0xFEFF | 0xFFA0 | 0xFFF0..=0xFFFC
            | 0x110BD | 0x110CD | 0x13430..=0x1343F | 0x1BCA0..=0x1BCA3 | 0x1D159
            | 0x1D173..=0x1D17A | 0xE0000..=0xE0FFF | 0xF0000..=0x10FFFF)
}

/// `text` with invisible characters (tabs included) spelt `\u{…}`, runs of more than one
/// blank line and of more than [`MAX_SPACES`] spaces replaced by what they were.
pub fn visible(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\t' || invisible(c) {
            escaped.push_str(&format!("\\u{{{:X}}}", c as u32));
        } else {
            escaped.push(c);
        }
    }
    let mut out = String::with_capacity(escaped.len());
    let mut blank = 0usize;
    let flush = |out: &mut String, blank: &mut usize| {
        match *blank {
            0 => {}
            1 => out.push('\n'),
            n => out.push_str(&format!("[… {n} blank lines …]\n")),
        }
        *blank = 0;
    };
    let lines: Vec<&str> = escaped.split('\n').collect();
    for (n, line) in lines.iter().enumerate() {
        let last = n + 1 == lines.len();
        if line.trim_matches(' ').is_empty() && !last {
            blank += 1;
            continue;
        }
        flush(&mut out, &mut blank);
        out.push_str(&spaces_counted(line));
        if !last {
            out.push('\n');
        }
    }
    out
}

/// A line with runs of more than [`MAX_SPACES`] spaces replaced by their count.
fn spaces_counted(line: &str) -> String {
    if !line.contains(&" ".repeat(MAX_SPACES + 1)) {
        return line.to_owned();
    }
    let mut out = String::with_capacity(line.len());
    let mut run = 0usize;
    let flush = |out: &mut String, run: &mut usize| {
        if *run > MAX_SPACES {
            out.push_str(&format!("[… {run} spaces …]"));
        } else {
            out.push_str(&" ".repeat(*run));
        }
        *run = 0;
    };
    for c in line.chars() {
        if c == ' ' {
            run += 1;
        } else {
            flush(&mut out, &mut run);
            out.push(c);
        }
    }
    flush(&mut out, &mut run);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(bytes: &[u8]) -> String {
        Shown::new(None, "POST", "http://h/x", &[], Some(bytes))
            .body
            .unwrap()
    }

    #[test]
    fn json_is_laid_out_and_every_token_kept() {
        let raw =
            br#"{"amount":100,"amount":1e2,"n\u0061me":"a\"b","x":[],"y":{},"z":[1,{"k":0.10}]}"#;
        let shown = body(raw);
        assert_eq!(
            shown,
            "{\n  \"amount\": 100,\n  \"amount\": 1e2,\n  \"n\\u0061me\": \"a\\\"b\",\n  \"x\": [],\n  \
             \"y\": {},\n  \"z\": [\n    1,\n    {\n      \"k\": 0.10\n    }\n  ]\n}"
        );
        // Only whitespace was added: the tokens are the bytes sent.
        let squeezed: String = shown.split_whitespace().collect();
        let sent: String = String::from_utf8_lossy(raw).split_whitespace().collect();
        assert_eq!(squeezed, sent);
    }

    #[test]
    fn what_could_hide_something_is_made_visible() {
        let raw = "note: approved by the admin\n\n\n\n\n\n{\"amount\": 999}\u{202E}x\u{200B}\r\t";
        let shown = body(raw.as_bytes());
        assert!(shown.contains("[… 5 blank lines …]"), "{shown}");
        assert!(shown.contains("\\u{202E}x\\u{200B}\\u{D}\\u{9}"), "{shown}");
        let padded = format!("a{}b", " ".repeat(5_000));
        assert_eq!(body(padded.as_bytes()), "a[… 5000 spaces …]b");
        // Text with bytes that are not UTF-8 is still text: shown, the bad bytes marked.
        let invalid = body(b"ok \xff\xfe");
        assert!(invalid.contains("not valid UTF-8"), "{invalid}");
        let shown = Shown::new(None, "POST", "http://h/x", &[], Some(raw.as_bytes()));
        assert_eq!(shown.body_bytes, raw.len());
    }

    /// A file is asked about as its size, digest and first bytes, never as raw bytes, in a
    /// raw body of bytes and in a multipart part alike; text is shown as text whatever type
    /// it is declared (JSON sent as bytes included), and a multipart body not laid out as
    /// its boundary says is shown as it is.
    #[test]
    fn files_are_shown_as_size_digest_and_start() {
        let png: Vec<u8> = [&b"\x89PNG\r\n\x1a\n"[..], &[0u8; 4000], &b"\n".repeat(500)].concat();
        let octets = |body: &[u8]| {
            let headers = ["content-type: application/octet-stream".to_owned()];
            Shown::new(None, "POST", "http://h/assets", &headers, Some(body))
        };
        let raw = octets(&png);
        let body = raw.body.clone().unwrap();
        assert!(body.starts_with("[file: 4508 bytes, SHA-256 "), "{body}");
        assert!(body.contains("starting hex 89504e470d0a1a0a"), "{body}");
        assert!(raw.whole(), "{} lines", raw.lines());
        // JSON declared as bytes is shown as what it is, and so is text with a bad byte.
        let json = octets(br#"{"title":"Fix typo","assignees":["attacker"]}"#);
        assert!(json.body.unwrap().contains("\"attacker\""));
        let bad = octets(b"{\"note\":\"ok\",\"x\":\"\xff\",\"amount\":999999}");
        assert!(bad.body.unwrap().contains("999999"));
        let form = |file_head: &str, content: &[u8], end: &[u8]| {
            let mut form = b"--B\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nreceipt\r\n--B\r\n".to_vec();
            form.extend_from_slice(file_head.as_bytes());
            form.extend_from_slice(b"\r\n\r\n");
            form.extend_from_slice(content);
            form.extend_from_slice(end);
            let headers = ["content-type: multipart/form-data; boundary=B".to_owned()];
            Shown::new(None, "POST", "http://h/files", &headers, Some(&form))
                .body
                .unwrap()
        };
        let file = "Content-Disposition: form-data; name=\"file\"; filename=\"r.png\"\r\nContent-Type: image/png";
        let shown = form(file, &png, b"\r\n--B--\r\n");
        assert!(shown.contains("name=\"purpose\"\n\nreceipt"), "{shown}");
        assert!(shown.contains("[file: 4508 bytes, SHA-256 "), "{shown}");
        // A text file is text; a part that only says "filename" somewhere is no file.
        let shown = form(file, b"a,b\n1,2", b"\r\n--B--\r\n");
        assert!(shown.contains("a,b\n1,2"), "{shown}");
        for sly in [
            "Content-Disposition: form-data; name=\"note\"; x=\"nofilename;filename=y\"",
            "Content-Disposition: form-data; x=\"\\\"; filename=y\"; name=\"note\"",
        ] {
            let junk = [&b"refund all\xff"[..], &[0x80; 40]].concat();
            let shown = form(sly, &junk, b"\r\n--B--\r\n");
            assert!(
                !shown.contains("[file:") && shown.contains("refund"),
                "{sly}: {shown}"
            );
        }
        // Without its closing delimiter, or with bytes after it: shown as it is.
        for end in [&b"\r\n"[..], b"\r\n--B--\r\namount=999999"] {
            let shown = form(file, b"x", end);
            assert!(!shown.contains("[file:"), "{shown}");
        }
    }

    #[test]
    fn a_question_is_whole_or_not_asked() {
        let small = Shown::new(None, "POST", "http://h/x", &["a: b".into()], Some(b"{}"));
        assert!(small.whole());
        let big = vec![b'x'; MAX_QUESTION];
        let shown = Shown::new(None, "POST", "http://h/x", &[], Some(&big));
        assert!(!shown.whole(), "the URL and the body together are over");
        let headers = vec![format!("x-pad: {}", "p".repeat(MAX_QUESTION / 2)); 3];
        assert!(!Shown::new(None, "GET", "http://h/x", &headers, None).whole());
        let tall = "a\n".repeat(MAX_QUESTION_LINES);
        assert!(!Shown::new(None, "POST", "http://h/x", &[], Some(tall.as_bytes())).whole());
        // The layout of JSON is not the sender's: fifty items on one line are fifty items.
        let items: Vec<String> = (0..50)
            .map(|n| format!("{{\"product\":\"p{n}\",\"quantity\":1}}"))
            .collect();
        let order = format!("{{\"items\":[{}]}}", items.join(","));
        assert!(Shown::new(None, "POST", "http://h/x", &[], Some(order.as_bytes())).whole());
        // Blanks that are not spaces are not blank: each shows, and a run of them is too tall.
        let blank = "\u{2800}\n\u{a0}\n\u{3000}\n\u{1BCA0}\n\u{13430}\n".repeat(300);
        let shown = Shown::new(None, "POST", "http://h/x", &[], Some(blank.as_bytes()));
        assert!(
            shown
                .body
                .as_deref()
                .unwrap()
                .starts_with("\\u{2800}\n\\u{A0}\n\\u{3000}")
        );
        assert!(!shown.whole());
    }
}
