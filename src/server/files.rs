//! The files a script returns, as MCP contents: an image as image content, any other file as
//! an embedded resource (text or base64), both within the answer's bound; a file that does
//! not fit as a resource link, which the client reads once with `resources/read` within
//! [`LINK_TTL`], and only the principal whose call made it (a read frees its place). Linked
//! files live in the state store, so any replica answers the read; one is at most
//! [`MAX_LINKED`] bytes, so that its read is a message every client takes.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rmcp::ErrorData;
use rmcp::model::{CacheScope, ContentBlock, ReadResourceResult, Resource, ResourceContents};
use serde::{Deserialize, Serialize};

use crate::fair::Principal;
use crate::sandbox::{Outcome, ReturnedFile};
use crate::state::StateStore;

/// How long a linked file can be read.
pub const LINK_TTL: Duration = Duration::from_secs(15 * 60);

/// Linked files one principal may hold at once.
const LINKS_PER_PRINCIPAL: usize = 8;

/// Linked files all principals may hold at once (each up to [`MAX_LINKED`] bytes).
const LINKS_IN_ALL: usize = 64;

/// Bytes of a linked file, at most: its read is about 8 MB of base64 in JSON (the official
/// TypeScript client ended a session on an 11 MB message).
const MAX_LINKED: usize = 6 * 1024 * 1024;

/// The scheme and authority of a linked file's URI: `sdkbox://files/<id>/<name>`.
const PREFIX: &str = "sdkbox://files/";

/// A linked file as the state store keeps it.
#[derive(Serialize, Deserialize)]
struct Linked {
    owner: String,
    name: String,
    media_type: String,
    base64: String,
}

/// The contents that carry `outcome`'s files, at most `inline` bytes of them inline (as
/// base64, the way they are sent); the rest linked for `principal`.
pub async fn contents(
    outcome: &Outcome,
    inline: usize,
    principal: &Principal,
    state: &StateStore,
) -> Vec<ContentBlock> {
    let mut left = inline;
    let mut out = Vec::new();
    for file in outcome.files.iter().filter(|f| f.withheld.is_none()) {
        let base64 = STANDARD.encode(&file.bytes);
        if base64.len() <= left {
            left -= base64.len();
            out.push(inline_content(file, base64));
            continue;
        }
        if file.bytes.len() > MAX_LINKED {
            out.push(ContentBlock::text(format!(
                "[the file {} ({}, {} bytes) was not sent: files are sent up to {} MiB; \
                 return a smaller one, or several]",
                file.name,
                file.media_type,
                file.size,
                MAX_LINKED >> 20
            )));
            continue;
        }
        match link(file, base64, principal, state).await {
            Ok(uri) => {
                let mut resource = Resource::new(uri, file.name.clone()).with_description(format!(
                    "a file the script returned; read it once with resources/read within {} \
                     minutes",
                    LINK_TTL.as_secs() / 60
                ));
                resource.mime_type = Some(file.media_type.clone());
                resource.size = Some(file.size as u64);
                out.push(ContentBlock::resource_link(resource));
            }
            Err(why) => out.push(ContentBlock::text(format!(
                "[the file {} ({}, {} bytes) was not sent: {why}]",
                file.name, file.media_type, file.size
            ))),
        }
    }
    out
}

/// A file sent whole: an image as an image, audio as audio, text as an embedded text
/// resource, other bytes as an embedded blob resource.
fn inline_content(file: &ReturnedFile, base64: String) -> ContentBlock {
    let uri = format!("{PREFIX}inline/{}", encode_name(&file.name));
    if file.media_type.starts_with("image/") {
        return ContentBlock::image(base64, file.media_type.clone());
    }
    if file.media_type.starts_with("audio/") {
        return ContentBlock::audio(base64, file.media_type.clone());
    }
    let text = crate::spec::is_text_media_type(&file.media_type)
        .then(|| std::str::from_utf8(&file.bytes).ok())
        .flatten();
    ContentBlock::resource(match text {
        Some(text) => ResourceContents::TextResourceContents {
            uri,
            mime_type: Some(file.media_type.clone()),
            text: text.to_owned(),
            meta: None,
        },
        None => ResourceContents::BlobResourceContents {
            uri,
            mime_type: Some(file.media_type.clone()),
            blob: base64,
            meta: None,
        },
    })
}

fn encode_name(name: &str) -> String {
    url::form_urlencoded::byte_serialize(name.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// Keeps `file` in the state store for [`LINK_TTL`] and gives its URI; refused past the
/// bounds on links.
async fn link(
    file: &ReturnedFile,
    base64: String,
    principal: &Principal,
    state: &StateStore,
) -> Result<String, String> {
    let mut id = [0u8; 16];
    getrandom::fill(&mut id).map_err(|e| e.to_string())?;
    let id = crate::hex::hex(&id);
    let refused = |e: crate::state::StateError| format!("the file store failed: {e}");
    let mine = format!("files:{}", principal.as_str());
    if !state
        .admit(&mine, &id, LINK_TTL, LINKS_PER_PRINCIPAL)
        .await
        .map_err(refused)?
    {
        return Err(format!(
            "you hold {LINKS_PER_PRINCIPAL} linked files not read yet; read them (or wait {} \
             minutes), or return smaller files",
            LINK_TTL.as_secs() / 60
        ));
    }
    if !state
        .admit("files:all", &id, LINK_TTL, LINKS_IN_ALL)
        .await
        .map_err(refused)?
    {
        let _ = state.dismiss(&mine, &id).await;
        return Err("the server holds as many linked files as it may; try again later".into());
    }
    let record = Linked {
        owner: principal.as_str().to_owned(),
        name: file.name.clone(),
        media_type: file.media_type.clone(),
        base64,
    };
    let text = serde_json::to_string(&record).map_err(|e| e.to_string())?;
    state
        .put(&format!("file:{id}"), &text, LINK_TTL)
        .await
        .map_err(refused)?;
    Ok(format!("{PREFIX}{id}/{}", encode_name(&file.name)))
}

/// `resources/read` of a linked file: its bytes, once, for the principal that made it, while
/// it lasts; the read frees its place among the links.
pub async fn read(
    uri: &str,
    principal: &Principal,
    state: &StateStore,
) -> Result<ReadResourceResult, ErrorData> {
    let missing = || {
        ErrorData::resource_not_found(
            format!(
                "no file at {uri}: a linked file is read once, within {} minutes, by the \
                 caller whose execute returned it; run the script again for a fresh link",
                LINK_TTL.as_secs() / 60
            ),
            None,
        )
    };
    let id = uri
        .strip_prefix(PREFIX)
        .and_then(|rest| rest.split('/').next())
        .filter(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(missing)?;
    let failed = |e: crate::state::StateError| {
        ErrorData::internal_error(format!("the file store failed: {e}"), None)
    };
    let key = format!("file:{id}");
    let record = state.get(&key).await.map_err(failed)?.ok_or_else(missing)?;
    let linked: Linked = serde_json::from_str(&record).map_err(|_| missing())?;
    if linked.owner != principal.as_str() {
        return Err(missing());
    }
    // Read once: taken whole (of two reads at once, one gets it), its places freed.
    let Some(record) = state.take(&key).await.map_err(failed)? else {
        return Err(missing());
    };
    let linked: Linked = serde_json::from_str(&record).map_err(|_| missing())?;
    let _ = state
        .dismiss(&format!("files:{}", principal.as_str()), id)
        .await;
    let _ = state.dismiss("files:all", id).await;
    let mut result = ReadResourceResult::new(vec![ResourceContents::BlobResourceContents {
        uri: uri.to_owned(),
        mime_type: Some(linked.media_type),
        blob: linked.base64,
        meta: None,
    }]);
    // One caller's file: no intermediary may keep it for another.
    result.cache_scope = Some(CacheScope::Private);
    result.ttl_ms = Some(0);
    Ok(result)
}
