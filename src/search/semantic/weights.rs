//! Where the embedding model comes from: a directory the operator names (`--model-dir`, for
//! machines without network), else sdkbox's cache, filled on first use from the model hub:
//! a pinned model whose three files must match pinned SHA-256 digests, so what runs is exactly
//! what was measured, whatever the hub serves.

use std::io::Write;
use std::path::{Path, PathBuf};

use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use super::model::{Embedder, MODEL_FILES, ModelError};

/// The model sdkbox downloads: a sentence-transformers export of all-MiniLM-L6-v2.
pub const MODEL_ID: &str = "sentence-transformers/all-MiniLM-L6-v2";
/// The revision downloaded (the digests below pin the content).
pub const REVISION: &str = "main";
/// The size in bytes of each of [`MODEL_FILES`]: a download that grows past it is cut off.
const SIZES: [u64; 3] = [612, 466_247, 90_868_376];
/// The SHA-256 of each of [`MODEL_FILES`], as measured.
const DIGESTS: [&str; 3] = [
    "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
];

/// The directory the downloaded model lives in, under sdkbox's cache.
pub fn cached_dir() -> Option<PathBuf> {
    crate::user_cache::dir("models").map(|d| d.join("all-MiniLM-L6-v2"))
}

/// Whether `dir` holds every model file.
pub fn is_complete(dir: &Path) -> bool {
    MODEL_FILES.iter().all(|f| dir.join(f).is_file())
}

/// Loads the model in `dir` if it is the pinned one (see [`Embedder::load_pinned`]).
pub fn load_pinned(dir: &Path) -> Result<Embedder, ModelError> {
    Embedder::load_pinned(dir, Some(&DIGESTS))
}

/// Removes what an interrupted download left in `dir` (its temporary files).
pub fn remove_leftovers(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(".tmp") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Downloads the pinned model into `dir` from `endpoint` (the hub, or `$HF_ENDPOINT` as its
/// own tools read it), checking each file's digest before it is moved into place; prints a
/// progress line on stderr at every tenth of the weights.
pub async fn download(dir: &Path, endpoint: &str) -> Result<(), ModelError> {
    let failed = |message: String| ModelError::Download(message);
    std::fs::create_dir_all(dir).map_err(|source| ModelError::Read {
        path: dir.to_owned(),
        source,
    })?;
    let client = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .read_timeout(std::time::Duration::from_secs(30))
        .user_agent(concat!("sdkbox/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| failed(e.to_string()))?;
    for ((file, expected), size) in MODEL_FILES.iter().zip(DIGESTS).zip(SIZES) {
        if dir.join(file).is_file() {
            continue;
        }
        let url = format!(
            "{}/{MODEL_ID}/resolve/{REVISION}/{file}",
            endpoint.trim_end_matches('/')
        );
        let response = client
            .get(&url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| failed(format!("{url}: {}", crate::capped::fetch_error(&e))))?;
        let total = response.content_length();
        let mut temporary =
            tempfile::NamedTempFile::new_in(dir).map_err(|e| failed(e.to_string()))?;
        let mut digest = Sha256::new();
        let (mut received, mut shown) = (0u64, 0u64);
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| failed(format!("{url}: {e}")))?;
            digest.update(&chunk);
            temporary
                .write_all(&chunk)
                .map_err(|e| failed(e.to_string()))?;
            received += chunk.len() as u64;
            if received > size {
                return Err(failed(format!(
                    "{url} sent more than the pinned file's {size} bytes: not used"
                )));
            }
            if let Some(total) = total.filter(|t| *t > 1_000_000 && *t <= size) {
                let tenth = received * 10 / total;
                if tenth > shown {
                    shown = tenth;
                    eprintln!(
                        "sdkbox: downloading {MODEL_ID} for search_docs ({} MB): {}%",
                        total / 1_000_000,
                        tenth * 10
                    );
                }
            }
        }
        let got = crate::hex::hex(&digest.finalize());
        if got != expected {
            return Err(failed(format!(
                "{url} has SHA-256 {got}, not the pinned {expected}: not used"
            )));
        }
        temporary
            .persist(dir.join(file))
            .map_err(|e| failed(e.to_string()))?;
    }
    Ok(())
}
