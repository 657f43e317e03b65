//! A spec fetched by URL is kept on disk, so that a server starts without network (a desktop
//! client launching sdkbox offline, or rate-limited by the spec's host): the copy is
//! revalidated with `ETag`/`Last-Modified` at each start, and used, with a warning, when the
//! fetch fails.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// How long a start waits for the spec's host before it falls back to the cached copy.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// What is kept beside a cached spec.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Meta {
    url: String,
    etag: Option<String>,
    last_modified: Option<String>,
}

/// Where cached specs live: `specs` under sdkbox's cache root ([`crate::user_cache::dir`]).
pub fn default_dir() -> Option<PathBuf> {
    crate::user_cache::dir("specs")
}

/// The spec at `url`: fetched (revalidating the copy in `dir`, if there is one), or the copy
/// when the fetch fails. `accept` checks a fetched text before it replaces the copy, so a
/// broken response never overwrites a good spec.
pub async fn fetch(
    url: &str,
    dir: Option<&Path>,
    accept: impl Fn(&str) -> Result<(), String>,
) -> Result<String, String> {
    let paths = dir.map(|dir| {
        let name = crate::hex::hex(&Sha256::digest(url.as_bytes())[..16]);
        (
            dir.join(format!("{name}.spec")),
            dir.join(format!("{name}.json")),
        )
    });
    let cached = paths.as_ref().and_then(|(spec, meta)| {
        let text = std::fs::read_to_string(spec).ok()?;
        let meta: Meta = std::fs::read(meta)
            .ok()
            .and_then(|m| serde_json::from_slice(&m).ok())
            .unwrap_or_default();
        Some((text, meta))
    });
    let fallback = |reason: String| match &cached {
        Some((text, _)) => {
            tracing::warn!(
                %url,
                %reason,
                "the spec could not be fetched; using the copy cached earlier"
            );
            Ok(text.clone())
        }
        None => Err(reason),
    };
    let client = reqwest::Client::builder()
        .timeout(FETCH_TIMEOUT)
        .build()
        .map_err(|e| e.to_string())?;
    let mut request = client.get(url);
    if let Some((_, meta)) = &cached {
        if let Some(etag) = &meta.etag {
            request = request.header(reqwest::header::IF_NONE_MATCH, etag);
        }
        if let Some(modified) = &meta.last_modified {
            request = request.header(reqwest::header::IF_MODIFIED_SINCE, modified);
        }
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => return fallback(crate::capped::fetch_error(&error)),
    };
    if response.status() == reqwest::StatusCode::NOT_MODIFIED
        && let Some((text, _)) = &cached
    {
        return Ok(text.clone());
    }
    if !response.status().is_success() {
        return fallback(format!("HTTP {}", response.status()));
    }
    let header = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
            .map(str::to_owned)
    };
    let meta = Meta {
        url: url.to_owned(),
        etag: header(reqwest::header::ETAG),
        last_modified: header(reqwest::header::LAST_MODIFIED),
    };
    let text = match capped_text(response).await {
        Ok(text) => text,
        Err(error) => return fallback(error),
    };
    if let Err(reason) = accept(&text) {
        return fallback(reason);
    }
    if let Some((spec, meta_path)) = &paths
        && let Err(error) = store(spec, meta_path, &text, &meta)
    {
        tracing::warn!(%url, %error, "the spec could not be cached");
    }
    Ok(text)
}

/// Writes the copy and its validators, each through a temporary file and a rename, so a
/// crash never leaves half a spec.
fn store(spec: &Path, meta_path: &Path, text: &str, meta: &Meta) -> std::io::Result<()> {
    let dir = spec.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let write = |path: &Path, bytes: &[u8]| -> std::io::Result<()> {
        let temporary = path.with_extension("partial");
        std::fs::write(&temporary, bytes)?;
        std::fs::rename(&temporary, path)
    };
    write(spec, text.as_bytes())?;
    write(
        meta_path,
        &serde_json::to_vec(meta).map_err(std::io::Error::other)?,
    )
}

/// The body of a spec's response, read up to [`super::MAX_SPEC_BYTES`] and refused past it.
async fn capped_text(response: reqwest::Response) -> Result<String, String> {
    let limit = super::MAX_SPEC_BYTES;
    let body = crate::capped::capped_body(response, limit)
        .await
        .map_err(|e| match e {
            crate::capped::CappedError::TooLarge(_) => {
                format!("the spec is larger than {limit} bytes")
            }
            crate::capped::CappedError::Failed(why) => why,
        })?;
    String::from_utf8(body).map_err(|_| "the spec is not UTF-8 text".to_owned())
}
