//! Which embedding model search uses, as the configuration says, and getting it ready.

use std::path::PathBuf;
use std::sync::Arc;

use super::model::{Embedder, MODEL_FILES, ModelError};
use super::weights;
use crate::search::DocsIndex;

/// Where the model comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelChoice {
    /// None: search is lexical (`--no-model`).
    Off,
    /// This directory (`--model-dir`, `[search] model_dir`).
    Dir(PathBuf),
    /// The pinned model, from sdkbox's cache, downloaded there on first use.
    Default,
}

/// The hub's address: `$HF_ENDPOINT` (as the hub's own tools read it), else the hub.
fn endpoint() -> String {
    std::env::var("HF_ENDPOINT")
        .ok()
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| "https://huggingface.co".to_owned())
}

/// Where operation embeddings are cached.
pub fn embeddings_cache() -> Option<PathBuf> {
    crate::user_cache::dir("embeddings")
}

impl ModelChoice {
    /// The choice the settings make: off wins, then a directory, then the default.
    pub fn from_settings(no_model: bool, dir: Option<PathBuf>) -> Self {
        match (no_model, dir) {
            (true, _) => Self::Off,
            (false, Some(dir)) => Self::Dir(dir),
            (false, None) => Self::Default,
        }
    }

    /// What can be checked at start: a directory the operator named holds the model's files.
    pub fn check(&self) -> Result<(), ModelError> {
        let Self::Dir(dir) = self else {
            return Ok(());
        };
        match MODEL_FILES.iter().find(|f| !dir.join(f).is_file()) {
            None => Ok(()),
            Some(missing) => Err(ModelError::Read {
                path: dir.join(missing),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!(
                        "the model directory needs {} (a sentence-transformers export); or pass --no-model",
                        MODEL_FILES.join(", ")
                    ),
                ),
            }),
        }
    }

    /// The loaded model, downloading the default one first when it is not cached or is not
    /// the pinned one; `None` when off. Blocks: call it on a thread of its own, outside any
    /// async runtime.
    pub fn prepare(&self) -> Option<Result<Arc<Embedder>, ModelError>> {
        match self {
            Self::Off => None,
            Self::Dir(dir) => Some(Embedder::load(dir).map(Arc::new)),
            Self::Default => Some(default_model().map(Arc::new)),
        }
    }

    /// Gets the model ready for `docs` in the background (see
    /// [`DocsIndex::embed_in_background`]); nothing when off.
    pub fn start(self, docs: &DocsIndex) {
        let load: Box<dyn FnOnce() -> Result<Embedder, ModelError> + Send> = match self {
            Self::Off => return,
            Self::Dir(dir) => Box::new(move || Embedder::load(&dir)),
            Self::Default => Box::new(default_model),
        };
        docs.embed_in_background(move || load().map(Arc::new), embeddings_cache());
    }
}

/// The pinned model from the cache: downloaded when a file is missing, and again for any
/// file whose digest is not the pinned one (each file is hashed once, as it loads).
fn default_model() -> Result<Embedder, ModelError> {
    let dir = weights::cached_dir().ok_or_else(|| {
        ModelError::Download(
            "no cache directory to download into: set SDKBOX_CACHE_DIR or HOME, or pass --model-dir".into(),
        )
    })?;
    weights::remove_leftovers(&dir);
    let download = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ModelError::Download(e.to_string()))
            .and_then(|runtime| runtime.block_on(weights::download(&dir, &endpoint())))
    };
    if !weights::is_complete(&dir) {
        download()?;
    }
    match weights::load_pinned(&dir) {
        Err(ModelError::Unpinned(files)) => {
            tracing::warn!(
                ?files,
                "cached model files are not the pinned ones; downloading them again"
            );
            for file in &files {
                let _ = std::fs::remove_file(dir.join(file));
            }
            download()?;
            weights::load_pinned(&dir)
        }
        loaded => loaded,
    }
}
