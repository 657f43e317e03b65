//! The demo's files: uploads kept in memory (multipart, like Stripe's file upload) and read
//! back byte for byte, and a product's picture as a PNG made on the fly, so that bytes in
//! and out of the sandbox have a provider to meet.

use std::collections::HashMap;
use std::io::Write;

use axum::extract::{Multipart, Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{Shared, error, lock, reply};

/// The largest upload the demo keeps.
const MAX_FILE: usize = 8 * 1024 * 1024;

/// What a file upload may be for, as the spec lists them.
const PURPOSES: &[&str] = &["receipt", "product_image", "other"];

/// An uploaded file: what the API says of it, and its bytes.
pub struct Stored {
    /// The file object the API answers with.
    pub object: Value,
    /// Its media type.
    pub media_type: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Files by id.
#[derive(Default)]
pub struct Files {
    by_id: HashMap<String, Stored>,
}

/// `POST /v1/files`: a multipart form with a `file` part and an optional `purpose`.
pub async fn upload(State(s): State<Shared>, mut form: Multipart) -> Response {
    let mut file = None;
    let mut purpose = "other".to_owned();
    loop {
        let field = match form.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(e) => return invalid(format!("the multipart body cannot be read: {e}"), None),
        };
        let name = field.name().unwrap_or_default().to_owned();
        let filename = field.file_name().map(str::to_owned);
        let media_type = field
            .content_type()
            .unwrap_or("application/octet-stream")
            .to_owned();
        let bytes = match field.bytes().await {
            Ok(bytes) => bytes,
            Err(e) => return invalid(format!("the part `{name}` cannot be read: {e}"), None),
        };
        match name.as_str() {
            "file" => file = Some((filename, media_type, bytes.to_vec())),
            "purpose" => purpose = String::from_utf8_lossy(&bytes).into_owned(),
            other => {
                return invalid(
                    format!("unknown field `{other}`: the form takes `file` and `purpose`"),
                    None,
                );
            }
        }
    }
    let Some((filename, media_type, bytes)) = file else {
        return invalid(
            "the form has no `file` part: send the file under the name `file`".into(),
            Some("file"),
        );
    };
    if !PURPOSES.contains(&purpose.as_str()) {
        return invalid(
            format!("`purpose` must be one of {}", PURPOSES.join(", ")),
            Some("purpose"),
        );
    }
    if bytes.len() > MAX_FILE {
        return invalid(
            format!("the file is larger than {MAX_FILE} bytes"),
            Some("file"),
        );
    }
    let mut store = lock(&s);
    let id = format!("file_{:03}", store.files.by_id.len() + 1);
    let created = store.tick();
    let object = json!({
        "id": id,
        "object": "file",
        "filename": filename.unwrap_or_else(|| "upload".to_owned()),
        "purpose": purpose,
        "size": bytes.len(),
        "type": media_type,
        "sha256": crate::hex::hex(&sha256(&bytes)),
        "created": created,
    });
    store.files.by_id.insert(
        id,
        Stored {
            object: object.clone(),
            media_type,
            bytes,
        },
    );
    reply(Ok(object))
}

/// `GET /v1/files/{id}`: what the API knows of a file.
pub async fn metadata(State(s): State<Shared>, Path(id): Path<String>) -> Response {
    match lock(&s).files.by_id.get(&id) {
        Some(file) => reply(Ok(file.object.clone())),
        None => missing("file", &id),
    }
}

/// `GET /v1/files/{id}/content`: the file's bytes, as uploaded.
pub async fn content(State(s): State<Shared>, Path(id): Path<String>) -> Response {
    match lock(&s).files.by_id.get(&id) {
        Some(file) => (
            [(header::CONTENT_TYPE, file.media_type.clone())],
            file.bytes.clone(),
        )
            .into_response(),
        None => missing("file", &id),
    }
}

/// `GET /v1/products/{id}/image`: the product's picture, a small PNG of its own colour.
pub async fn product_image(State(s): State<Shared>, Path(id): Path<String>) -> Response {
    if lock(&s).get("product", &id).is_err() {
        return missing("product", &id);
    }
    let seed = sha256(id.as_bytes());
    (
        [(header::CONTENT_TYPE, "image/png")],
        png(16, [seed[0], seed[1], seed[2]]),
    )
        .into_response()
}

fn missing(kind: &str, id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        format!("No such {kind}: '{id}'"),
        None,
    )
}

fn invalid(message: String, param: Option<&str>) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        message,
        param,
    )
}

fn sha256(bytes: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).to_vec()
}

/// A `size`×`size` PNG of one colour, with a darker diagonal: a real image any viewer opens.
fn png(size: u32, rgb: [u8; 3]) -> Vec<u8> {
    let mut raw = Vec::new();
    for y in 0..size {
        raw.push(0); // no filter
        for x in 0..size {
            let shade = if x == y { 2 } else { 1 };
            raw.extend(rgb.iter().map(|c| c / shade));
        }
    }
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    let compressed = zlib
        .write_all(&raw)
        .and_then(|()| zlib.finish())
        .unwrap_or_default();
    let mut header = Vec::new();
    header.extend_from_slice(&size.to_be_bytes());
    header.extend_from_slice(&size.to_be_bytes());
    header.extend_from_slice(&[8, 2, 0, 0, 0]); // 8-bit RGB
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    for (kind, data) in [
        (&b"IHDR"[..], &header[..]),
        (b"IDAT", &compressed),
        (b"IEND", &[]),
    ] {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut crc = flate2::Crc::new();
        crc.update(kind);
        crc.update(data);
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        out.extend_from_slice(&crc.sum().to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_picture_is_a_png() {
        let image = png(4, [200, 100, 50]);
        assert!(image.starts_with(b"\x89PNG\r\n\x1a\n"));
        assert_eq!(&image[12..16], b"IHDR");
        assert!(image.ends_with(&[0xae, 0x42, 0x60, 0x82]), "IEND's CRC");
    }
}
