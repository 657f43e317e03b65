//! A hostile provider on 127.0.0.1: it echoes the credential it is sent back in every
//! encoding a real server might use (and some only an attacker would), in header names, in
//! redirect targets and error pages, slowly, and answers with absurd `Retry-After` values.
//! It also keeps writes waiting, to check that calls in flight are logged.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use url::Url;

/// The encodings `/v1/leak/{form}` answers in.
pub const FORMS: &[&str] = &[
    "plain",
    "json-php",
    "json-go",
    "json-unicode",
    "json-mixed",
    "percent-form",
    "percent-all",
    "percent-lower",
    "base64",
    "base64-shifted-1",
    "base64-shifted-2",
    "base64-url",
    "base64-basic",
    "hex",
    "hex-upper",
    "html-named",
    "html-decimal",
    "html-hex",
    "reversed",
    "slow",
    // What the second review recovered the whole key from.
    "wrapped",
    "quoted-printable",
    "quoted-printable-soft",
    "base32",
    "base32-hex-lower",
    "html5-named",
    "utf32-le",
    "utf32-be",
    "minus-last",
    "minus-two-first",
    "zero-width",
    "base32-of-wrapped",
    "pieces-json-list",
    "pieces-stream",
    "hexdump",
    "buffer-json",
    "octal",
    "percent-u",
    "variation-selectors",
];

/// What the provider has seen.
#[derive(Default)]
pub struct Seen {
    /// Writes received on `/v1/slow-write`.
    pub slow_writes: AtomicUsize,
    /// Calls to `/v1/retry-absurd`.
    pub retries: AtomicUsize,
}

/// A running hostile provider.
pub struct HostileProvider {
    /// Its base URL, `http://127.0.0.1:PORT/v1`.
    pub base: Url,
    /// What it has seen.
    pub seen: Arc<Seen>,
}

/// A minimal spec for it, with one operation that takes a path parameter.
pub const SPEC: &str = "openapi: 3.0.0\ninfo: {title: Hostile, version: '1'}\n\
servers: [{url: 'http://127.0.0.1/v1'}]\npaths:\n  /orders/{order_id}/cancel:\n    post:\n      \
operationId: orders/cancel\n      parameters:\n        - {name: order_id, in: path, required: true, \
schema: {type: string}}\n      responses: {'200': {description: ok}}\n  /leak/{form}:\n    get:\n      \
operationId: leak/get\n      parameters:\n        - {name: form, in: path, required: true, \
schema: {type: string}}\n      responses: {'200': {description: ok}}\n";

impl HostileProvider {
    /// Starts it on a free loopback port.
    pub async fn start() -> Self {
        let seen = Arc::new(Seen::default());
        let app = Router::new()
            .route("/v1/leak/{form}", get(leak))
            .route("/v1/leak-binary/{form}", get(leak_binary))
            .route("/v1/leak-header-name", get(leak_header_name))
            .route("/v1/leak-redirect", get(leak_redirect))
            .route("/v1/leak-error", get(leak_error))
            .route("/v1/costly/{kib}", get(costly))
            .route("/v1/retry-absurd", get(retry_absurd))
            .route("/v1/slow-write", post(slow_write))
            .route("/v1/cancel", post(|| async { "the whole API was reached" }))
            .route("/v1/redirect-write", post(redirect_write))
            .with_state(seen.clone());
        Self {
            base: crate::support::serve_on_loopback(app).await,
            seen,
        }
    }
}

/// The credential the request carried (the bearer token).
fn token(headers: &HeaderMap) -> String {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("no-credential-sent")
        .to_owned()
}

fn percent(token: &str, keep: impl Fn(u8) -> bool, lower: bool) -> String {
    token
        .bytes()
        .map(|b| match (keep(b), lower) {
            (true, _) => (b as char).to_string(),
            (false, false) => format!("%{b:02X}"),
            (false, true) => format!("%{b:02x}"),
        })
        .collect()
}

/// `text` in lines of `width` characters joined by `join`.
fn wrap(text: &str, width: usize, join: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let lines: Vec<String> = chars.chunks(width).map(|l| l.iter().collect()).collect();
    lines.join(join)
}

/// The token in `form`, inside a body of that form's usual type.
pub fn encode(form: &str, token: &str) -> (&'static str, String) {
    let json = serde_json::to_string(token).unwrap();
    let inner = &json[1..json.len() - 1];
    let html = |entity: &dyn Fn(char) -> Option<String>| -> String {
        token
            .chars()
            .map(|c| entity(c).unwrap_or_else(|| c.to_string()))
            .collect()
    };
    let echoed = |value: String| format!("{{\"object\":\"echo\",\"received\":\"{value}\"}}");
    match form {
        "plain" => ("text/plain", format!("you sent {token}")),
        "json-php" => ("application/json", echoed(inner.replace('/', "\\/"))),
        "json-go" => (
            "application/json",
            echoed(
                inner
                    .replace('<', "\\u003c")
                    .replace('>', "\\u003e")
                    .replace('&', "\\u0026"),
            ),
        ),
        "json-unicode" => (
            "application/json",
            echoed(
                token
                    .encode_utf16()
                    .map(|u| format!("\\u{u:04X}"))
                    .collect(),
            ),
        ),
        "json-mixed" => (
            "text/plain",
            format!(
                "token={}",
                inner.replace('_', "\\u005f").replace('/', "\\/")
            ),
        ),
        "percent-form" => (
            "text/plain",
            url::form_urlencoded::byte_serialize(token.as_bytes()).collect(),
        ),
        "percent-all" => ("text/plain", percent(token, |_| false, false)),
        "percent-lower" => (
            "text/plain",
            percent(token, |b| b.is_ascii_alphanumeric(), true),
        ),
        "base64" => ("text/plain", STANDARD.encode(token)),
        "base64-shifted-1" => ("text/plain", STANDARD.encode(format!("x{token}y"))),
        "base64-shifted-2" => ("text/plain", STANDARD.encode(format!("xy{token}"))),
        "base64-url" => ("text/plain", URL_SAFE.encode(format!("{token}?"))),
        "base64-basic" => (
            "text/plain",
            format!("Basic {}", STANDARD.encode(format!("{token}:"))),
        ),
        "hex" => (
            "text/plain",
            token.bytes().map(|b| format!("{b:02x}")).collect(),
        ),
        "hex-upper" => (
            "text/plain",
            token.bytes().map(|b| format!("{b:02X}")).collect(),
        ),
        "html-named" => (
            "text/html",
            format!(
                "<p>{}</p>",
                token
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;")
            ),
        ),
        "html-decimal" => ("text/html", html(&|c| Some(format!("&#{};", c as u32)))),
        "html-hex" => ("text/html", html(&|c| Some(format!("&#x{:X};", c as u32)))),
        "reversed" => ("text/plain", token.chars().rev().collect()),
        "wrapped" => (
            "text/plain",
            format!("key:\r\n  {}", wrap(token, 5, "\r\n  ")),
        ),
        "quoted-printable" => (
            "text/plain",
            wrap(
                &percent(token, |_| false, false).replace('%', "="),
                9,
                "=\r\n",
            ),
        ),
        "quoted-printable-soft" => ("text/plain", wrap(&token.replace('=', "=3D"), 7, "=\r\n")),
        "base32" => ("text/plain", data_encoding::BASE32.encode(token.as_bytes())),
        "base32-hex-lower" => (
            "text/plain",
            data_encoding::BASE32HEX
                .encode(format!("x{token}").as_bytes())
                .to_lowercase(),
        ),
        "html5-named" => (
            "text/html",
            html(&|c| {
                Some(match c {
                    '_' => "&lowbar;".to_owned(),
                    '/' => "&sol;".to_owned(),
                    '+' => "&plus;".to_owned(),
                    '=' => "&equals;".to_owned(),
                    '<' => "&lt;".to_owned(),
                    '>' => "&gt;".to_owned(),
                    '&' => "&amp;".to_owned(),
                    c => format!("&#{:07};", c as u32),
                })
            }),
        ),
        "utf32-le" => (
            "text/plain",
            token.chars().flat_map(|c| [c, '\0', '\0', '\0']).collect(),
        ),
        "utf32-be" => (
            "text/plain",
            token.chars().flat_map(|c| ['\0', '\0', '\0', c]).collect(),
        ),
        "minus-last" => ("text/plain", token[..token.len() - 1].to_owned()),
        "minus-two-first" => ("text/plain", token[2..].to_owned()),
        "zero-width" => (
            "text/plain",
            token.chars().flat_map(|c| [c, '\u{200b}']).collect(),
        ),
        "base32-of-wrapped" => (
            "text/plain",
            data_encoding::BASE32.encode(wrap(token, 4, "\n").as_bytes()),
        ),
        "pieces-json-list" => (
            "application/json",
            serde_json::to_string(&pieces(token, 10)).unwrap(),
        ),
        "pieces-stream" => (
            "text/event-stream",
            pieces(token, 10)
                .iter()
                .map(|p| format!("data: {}\n\n", serde_json::json!({"delta": p})))
                .collect(),
        ),
        "hexdump" => (
            "text/plain",
            hexdump(format!("Bearer {token}\r\n").as_bytes()),
        ),
        "buffer-json" => (
            "application/json",
            serde_json::json!({"type": "Buffer", "data": token.as_bytes()}).to_string(),
        ),
        "octal" => (
            "text/plain",
            token.bytes().map(|b| format!("\\{b:03o}")).collect(),
        ),
        "percent-u" => (
            "text/plain",
            token
                .chars()
                .map(|c| format!("%u{:04X}", c as u32))
                .collect(),
        ),
        "variation-selectors" => (
            "text/plain",
            token
                .chars()
                .flat_map(|c| [c, '\u{fe0f}', '\u{e0020}'])
                .collect(),
        ),
        _ => ("text/plain", "unknown form".to_owned()),
    }
}

/// `token` cut into pieces of `width` characters.
fn pieces(token: &str, width: usize) -> Vec<String> {
    let chars: Vec<char> = token.chars().collect();
    chars.chunks(width).map(|c| c.iter().collect()).collect()
}

/// `bytes` as `hexdump -C` shows them: offset, sixteen bytes in hex, the same as text.
fn hexdump(bytes: &[u8]) -> String {
    bytes
        .chunks(16)
        .enumerate()
        .map(|(line, chunk)| {
            let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
            let text: String = chunk
                .iter()
                .map(|&b| if b.is_ascii_graphic() { b as char } else { '.' })
                .collect();
            format!("{:08x}  {:<48} |{text}|\n", line * 16, hex.join(" "))
        })
        .collect()
}

async fn leak(Path(form): Path<String>, headers: HeaderMap) -> Response {
    let token = token(&headers);
    if form == "slow" {
        // The token one character at a time, each in its own chunk, a little apart.
        let chunks: Vec<String> = token.chars().map(String::from).collect();
        let stream = futures_util::stream::unfold(chunks.into_iter(), |mut chars| async move {
            let next = chars.next()?;
            tokio::time::sleep(Duration::from_millis(5)).await;
            Some((Ok::<_, std::io::Error>(next), chars))
        });
        return Response::new(Body::from_stream(stream));
    }
    let (content_type, body) = encode(&form, &token);
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// The encodings `/v1/leak-binary/{form}` hides the credential in, among bytes that are not
/// UTF-8 (a file's): `clean` hides nothing.
pub const BINARY_FORMS: &[&str] = &[
    "plain", "utf16", "base64", "reversed", "hex", "gzip", "zip", "clean",
];

/// The credential inside bytes that are not text, as a PNG or a PDF might carry it.
async fn leak_binary(Path(form): Path<String>, headers: HeaderMap) -> Response {
    let token = token(&headers);
    let hidden: Vec<u8> = match form.as_str() {
        "plain" => token.into_bytes(),
        "utf16" => token.encode_utf16().flat_map(u16::to_le_bytes).collect(),
        "base64" => STANDARD.encode(&token).into_bytes(),
        "reversed" => token.bytes().rev().collect(),
        "hex" => token
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
            .into_bytes(),
        "gzip" | "zip" => {
            use std::io::Write;
            let text = format!("token={token}");
            if form == "gzip" {
                let mut gzip =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                gzip.write_all(text.as_bytes()).unwrap();
                // A gzip stream is the whole body (bytes before it would make it no stream).
                return (
                    [(header::CONTENT_TYPE, "application/gzip")],
                    gzip.finish().unwrap(),
                )
                    .into_response();
            }
            let mut deflate =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
            deflate.write_all(text.as_bytes()).unwrap();
            // One zip entry, deflated: `PK\3\4`, method 8, the name `t.txt`.
            let mut zip = b"PK\x03\x04\x14\x00\x00\x00\x08\x00".to_vec();
            zip.extend_from_slice(&[0; 16]);
            zip.extend_from_slice(&[5, 0, 0, 0]);
            zip.extend_from_slice(b"t.txt");
            zip.extend_from_slice(&deflate.finish().unwrap());
            zip
        }
        _ => b"nothing to see".to_vec(),
    };
    let mut body = vec![0x89, b'P', b'N', b'G', 0x00, 0xff, 0xfe, 0x80];
    body.extend_from_slice(&hidden);
    body.extend((0..=255u8).rev());
    ([(header::CONTENT_TYPE, "application/octet-stream")], body).into_response()
}

/// `kib` KiB crafted to cost the scrubber the most it can per byte: base64 of base64 of
/// text, with escapes of every kind between the runs.
async fn costly(Path(kib): Path<usize>) -> Response {
    let unit = format!(
        "{}%41&#65;=41\\u0041 ",
        STANDARD.encode(STANDARD.encode("A".repeat(60)))
    );
    let body = unit.repeat(kib * 1024 / unit.len() + 1);
    ([(header::CONTENT_TYPE, "text/plain")], body).into_response()
}

async fn leak_header_name(headers: HeaderMap) -> Response {
    let token = token(&headers);
    let mut out = HeaderMap::new();
    if let Ok(name) = HeaderName::from_bytes(token.to_ascii_lowercase().as_bytes()) {
        out.insert(name, HeaderValue::from_static("1"));
    }
    (out, "look at the headers").into_response()
}

async fn leak_redirect(headers: HeaderMap) -> Response {
    let token = token(&headers);
    let mut out = HeaderMap::new();
    out.insert(
        header::LOCATION,
        HeaderValue::from_str(&format!("http://{token}.invalid/")).unwrap(),
    );
    (StatusCode::FOUND, out).into_response()
}

async fn leak_error(headers: HeaderMap) -> Response {
    let token = token(&headers).replace('&', "&amp;").replace('<', "&lt;");
    let page = format!("<html><body><h1>500</h1><pre>auth failed for {token}</pre></body></html>");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        [(header::CONTENT_TYPE, "text/html")],
        page,
    )
        .into_response()
}

async fn retry_absurd(State(seen): State<Arc<Seen>>) -> Response {
    seen.retries.fetch_add(1, Ordering::SeqCst);
    let mut out = HeaderMap::new();
    out.insert(header::RETRY_AFTER, HeaderValue::from_static("1e308"));
    (StatusCode::SERVICE_UNAVAILABLE, out, "busy").into_response()
}

/// A write answered with a redirect that keeps the method and body (307).
async fn redirect_write() -> Response {
    let mut out = HeaderMap::new();
    out.insert(header::LOCATION, HeaderValue::from_static("/v1/cancel"));
    (StatusCode::TEMPORARY_REDIRECT, out).into_response()
}

async fn slow_write(State(seen): State<Arc<Seen>>) -> Response {
    seen.slow_writes.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3)).await;
    "written".into_response()
}
