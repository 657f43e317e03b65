//! The embedding model: a BERT-family sentence encoder (all-MiniLM-L6-v2 by default) run on
//! the CPU by candle, with its own tokenizer: text in, one unit vector out, the mean of the
//! token vectors as sentence-transformers computes it. Pure Rust, no Python, no network.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use sha2::{Digest, Sha256};
use thiserror::Error;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// Texts are cut to this many tokens: an operation's summary and the start of its description
/// fit, and the rest adds time, not meaning.
pub const MAX_TOKENS: usize = 128;

/// The files a model directory holds (a sentence-transformers export).
pub const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Why a model could not be loaded or run.
#[derive(Debug, Error)]
pub enum ModelError {
    /// A file is missing or unreadable.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `config.json` is not a BERT configuration.
    #[error("{path} is not a BERT model configuration: {message}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// The tokenizer file is invalid, or tokenizing failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// These files are not the pinned ones (cut, corrupted, replaced).
    #[error("{0:?} are not the pinned model files")]
    Unpinned(Vec<&'static str>),
    /// The model could not be downloaded.
    #[error("cannot download the model: {0}")]
    Download(String),
    /// The weights do not fit the configuration, or a forward pass failed.
    #[error("model: {0}")]
    Tensor(#[from] candle_core::Error),
}

/// A loaded sentence encoder.
pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
    dimensions: usize,
    digest: String,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("dimensions", &self.dimensions)
            .field("digest", &self.digest)
            .finish_non_exhaustive()
    }
}

/// Lower-case hex SHA-256 of `bytes`.
fn sha256_hex(bytes: &[u8]) -> String {
    crate::hex::hex(&Sha256::digest(bytes))
}

fn read(path: &Path) -> Result<Vec<u8>, ModelError> {
    std::fs::read(path).map_err(|source| ModelError::Read {
        path: path.to_owned(),
        source,
    })
}

impl Embedder {
    /// Loads the model in `dir` ([`MODEL_FILES`]). The weights are read into memory with
    /// candle's safe buffered loader (no memory map).
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        Self::load_pinned(dir, None)
    }

    /// Loads the model in `dir` if each file's SHA-256 is `pins`' (in [`MODEL_FILES`]
    /// order), checked before anything is parsed; [`ModelError::Unpinned`] names the others.
    /// Each file is read and hashed once: the digests also key the cached embeddings.
    pub fn load_pinned(dir: &Path, pins: Option<&[&str; 3]>) -> Result<Self, ModelError> {
        let config_path = dir.join("config.json");
        let config_text = read(&config_path)?;
        let tokenizer_text = read(&dir.join("tokenizer.json"))?;
        let weights = read(&dir.join("model.safetensors"))?;
        let file_digests = [&config_text, &tokenizer_text, &weights].map(|bytes| sha256_hex(bytes));
        if let Some(pins) = pins {
            let unpinned: Vec<&'static str> = MODEL_FILES
                .iter()
                .zip(pins)
                .zip(&file_digests)
                .filter(|((_, pin), got)| got != *pin)
                .map(|((file, _), _)| *file)
                .collect();
            if !unpinned.is_empty() {
                return Err(ModelError::Unpinned(unpinned));
            }
        }
        let digest = sha256_hex(file_digests.concat().as_bytes());
        let config: Config =
            serde_json::from_slice(&config_text).map_err(|e| ModelError::Config {
                path: config_path.clone(),
                message: e.to_string(),
            })?;
        let heads = config.num_attention_heads;
        if config.hidden_size == 0
            || heads == 0
            || !config.hidden_size.is_multiple_of(heads)
            || config.max_position_embeddings < 3
        {
            return Err(ModelError::Config {
                path: config_path,
                message: format!(
                    "hidden_size {} must be a positive multiple of num_attention_heads {heads}, and max_position_embeddings {} at least 3",
                    config.hidden_size, config.max_position_embeddings
                ),
            });
        }
        let mut tokenizer = Tokenizer::from_bytes(&tokenizer_text)
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                // A model with fewer positions than that cannot take more.
                max_length: MAX_TOKENS.min(config.max_position_embeddings),
                ..TruncationParams::default()
            }))
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)?;
        let model = BertModel::load(vb, &config)?;
        Ok(Self {
            model,
            tokenizer,
            dimensions: config.hidden_size,
            digest,
        })
    }

    /// The length of every vector.
    pub fn dimensions(&self) -> usize {
        self.dimensions
    }

    /// A digest of the model's three files: what cached embeddings are keyed by.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Embeds `texts` in one batch, each cut to [`MAX_TOKENS`]: one unit vector each.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        let rows = encodings.len();
        let width = encodings.first().map_or(0, |e| e.get_ids().len());
        let flat = |part: fn(&tokenizers::Encoding) -> &[u32]| -> Vec<u32> {
            encodings.iter().flat_map(|e| part(e).to_vec()).collect()
        };
        let device = &self.model.device;
        let ids = Tensor::from_vec(flat(|e| e.get_ids()), (rows, width), device)?;
        let types = ids.zeros_like()?;
        let mask = Tensor::from_vec(flat(|e| e.get_attention_mask()), (rows, width), device)?;
        let tokens = self.model.forward(&ids, &types, Some(&mask))?;
        // The mean over real tokens (padding masked out), then unit length.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = tokens.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        Ok(mean.broadcast_div(&norms)?.to_vec2::<f32>()?)
    }
}
