//! Ranking by meaning: every operation embedded once by a local sentence encoder
//! ([`Embedder`]), the query embedded at search time, and the operations nearest to it by
//! cosine, for the fusion with the lexical ranking (`super::fuse`). The embeddings are cached
//! on disk ([`store`]) by model and text, so only a first start with a spec pays for them.

mod choice;
mod model;
mod store;
pub mod weights;

use std::path::Path;
use std::sync::Arc;

pub use choice::{ModelChoice, embeddings_cache};
pub use model::{Embedder, MAX_TOKENS, MODEL_FILES, ModelError};

use crate::spec::{Api, Operation};

/// The version of [`operation_text`]: cached vectors of another version are not used.
pub const TEXT_VERSION: u32 = 1;
/// A query is cut to this many characters before it is embedded.
const MAX_QUERY_CHARS: usize = 2_000;
/// Operations embedded per forward pass.
const BATCH: usize = 16;

/// What an operation is embedded as: its SDK name, method, path, summary and description,
/// which measured best among the texts tried offline (issue 12).
pub fn operation_text(operation: &Operation) -> String {
    let name = format!("{}.{}", operation.group, operation.name).replace('_', " ");
    format!(
        "{name} {} {} {} {}",
        operation.method, operation.path, operation.summary, operation.description
    )
}

/// The operations' vectors and the model that made them.
pub struct Semantic {
    embedder: Arc<Embedder>,
    vectors: Vec<f32>,
}

impl std::fmt::Debug for Semantic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semantic")
            .field("embedder", &self.embedder)
            .field("operations", &self.len())
            .finish()
    }
}

impl Semantic {
    /// Embeds every operation of `api`, or reads them from `cache` (a directory) when a
    /// start before did it with the same model and texts; `progress` hears (done, total)
    /// while they are computed.
    pub fn build(
        embedder: Arc<Embedder>,
        api: &Api,
        cache: Option<&Path>,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<Self, ModelError> {
        let texts: Vec<String> = api.operations.iter().map(operation_text).collect();
        let dimensions = embedder.dimensions();
        let file = cache.map(|dir| store::path(dir, embedder.digest(), TEXT_VERSION, &texts));
        if let Some(vectors) = file
            .as_deref()
            .and_then(|f| store::load(f, texts.len(), dimensions))
        {
            return Ok(Self { embedder, vectors });
        }
        let mut vectors = Vec::with_capacity(texts.len() * dimensions);
        for (done, batch) in texts.chunks(BATCH).enumerate() {
            let batch: Vec<&str> = batch.iter().map(String::as_str).collect();
            for vector in embedder.embed(&batch)? {
                vectors.extend(vector);
            }
            progress((done * BATCH + batch.len()).min(texts.len()), texts.len());
        }
        if let Some(file) = &file
            && let Err(error) = store::save(file, texts.len(), dimensions, &vectors)
        {
            tracing::warn!(path = %file.display(), %error, "cannot cache the operation embeddings; the next start computes them again");
        }
        Ok(Self { embedder, vectors })
    }

    /// Operations embedded.
    pub fn len(&self) -> usize {
        self.vectors.len() / self.embedder.dimensions().max(1)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    /// The `limit` operations nearest to `query` among those `allowed`, by index in
    /// `api.operations`, nearest first, with their cosine similarity.
    pub fn nearest(
        &self,
        query: &str,
        limit: usize,
        allowed: impl Fn(usize) -> bool,
    ) -> Result<Vec<(usize, f32)>, ModelError> {
        // The tokenizer reads all of a text before it cuts it to MAX_TOKENS; a query longer
        // than this carries no more meaning, only work.
        let query = match query.char_indices().nth(MAX_QUERY_CHARS) {
            Some((end, _)) => &query[..end],
            None => query,
        };
        let Some(query) = self.embedder.embed(&[query])?.pop() else {
            return Ok(Vec::new());
        };
        let mut scored: Vec<(usize, f32)> = self
            .vectors
            .chunks_exact(query.len())
            .enumerate()
            .filter(|(i, _)| allowed(*i))
            .map(|(i, v)| (i, v.iter().zip(&query).map(|(a, b)| a * b).sum()))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored.truncate(limit);
        Ok(scored)
    }
}

/// A tiny BERT with random weights and a word-level vocabulary, written by the tests that
/// need a model: nothing to download, and a model whose only meaning is "same text, same
/// vector", which is what the tests check.
#[cfg(test)]
pub(crate) mod tiny {
    #![allow(clippy::unwrap_used, reason = "test support fails loudly")]

    use std::path::Path;

    use candle_core::{DType, Device};
    use candle_nn::{VarBuilder, VarMap};
    use candle_transformers::models::bert::{BertModel, Config};
    use tokenizers::Tokenizer;
    use tokenizers::models::wordpiece::WordPiece;
    use tokenizers::normalizers::BertNormalizer;
    use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
    use tokenizers::processors::bert::BertProcessing;

    /// The words the tiny model knows (anything else is `[UNK]`).
    pub const WORDS: [&str; 16] = [
        "list",
        "create",
        "refund",
        "order",
        "orders",
        "customer",
        "customers",
        "get",
        "post",
        "delete",
        "money",
        "back",
        "a",
        "an",
        "the",
        "of",
    ];

    /// Writes the model's three files into `dir`.
    pub fn write(dir: &Path) {
        let tokens: Vec<&str> = ["[PAD]", "[CLS]", "[SEP]", "[UNK]"]
            .into_iter()
            .chain(WORDS)
            .collect();
        let vocab = dir.join("vocab.txt");
        std::fs::write(&vocab, tokens.join("\n")).unwrap();
        let model = WordPiece::from_file(vocab.to_str().unwrap())
            .unk_token("[UNK]".into())
            .build()
            .unwrap();
        let mut tokenizer = Tokenizer::new(model);
        tokenizer
            .with_normalizer(Some(BertNormalizer::default()))
            .with_pre_tokenizer(Some(BertPreTokenizer))
            .with_post_processor(Some(BertProcessing::new(
                ("[SEP]".into(), 2),
                ("[CLS]".into(), 1),
            )));
        tokenizer.save(dir.join("tokenizer.json"), false).unwrap();
        let config = serde_json::json!({
            "vocab_size": tokens.len(), "hidden_size": 8, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 16, "hidden_act": "gelu",
            "hidden_dropout_prob": 0.0, "max_position_embeddings": 64, "type_vocab_size": 2,
            "initializer_range": 0.5, "layer_norm_eps": 1e-12, "pad_token_id": 0
        });
        std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
        let config: Config = serde_json::from_value(config).unwrap();
        let weights = VarMap::new();
        BertModel::load(
            VarBuilder::from_varmap(&weights, DType::F32, &Device::Cpu),
            &config,
        )
        .unwrap();
        weights.save(dir.join("model.safetensors")).unwrap();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly by design")]
    use super::*;

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn vectors_are_unit_length_and_padding_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        tiny::write(dir.path());
        let embedder = Embedder::load(dir.path()).unwrap();
        assert_eq!(embedder.dimensions(), 8);
        let alone = embedder.embed(&["refund an order"]).unwrap();
        let batched = embedder
            .embed(&["refund an order", "list the customers of an order back"])
            .unwrap();
        for vector in alone.iter().chain(&batched) {
            let norm = cosine(vector, vector).sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "not unit length: {norm}");
        }
        // The shorter text is padded in the batch; the mask must keep the padding out.
        for (a, b) in alone[0].iter().zip(&batched[0]) {
            assert!(
                (a - b).abs() < 1e-4,
                "padding changed the vector: {alone:?} {batched:?}"
            );
        }
        assert!(
            cosine(&batched[0], &batched[1]) < 0.9999,
            "different texts, same vector"
        );
    }

    #[test]
    fn a_model_directory_missing_a_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        tiny::write(dir.path());
        std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
        let error = ModelChoice::Dir(dir.path().to_owned()).check().unwrap_err();
        assert!(error.to_string().contains("tokenizer.json"), "{error}");
        assert!(error.to_string().contains("--no-model"), "{error}");
    }

    #[test]
    fn the_operation_with_the_query_as_text_is_nearest_and_cached_vectors_are_reused() {
        let dir = tempfile::tempdir().unwrap();
        tiny::write(dir.path());
        let embedder = Arc::new(Embedder::load(dir.path()).unwrap());
        let api = crate::spec::parse("demo.yaml", crate::demo::SPEC)
            .unwrap()
            .api;
        let cache = tempfile::tempdir().unwrap();
        let mut calls = 0;
        let built = Semantic::build(embedder.clone(), &api, Some(cache.path()), |_, _| {
            calls += 1
        })
        .unwrap();
        assert_eq!(built.len(), api.operations.len());
        assert!(calls > 0);
        let target = api.operations.len() / 2;
        let query = operation_text(&api.operations[target]);
        let nearest = built.nearest(&query, 3, |_| true).unwrap();
        assert_eq!(nearest[0].0, target, "{nearest:?}");
        assert!(nearest[0].1 > 0.999);
        let filtered = built.nearest(&query, 3, |i| i != target).unwrap();
        assert!(filtered.iter().all(|(i, _)| *i != target));

        let mut calls = 0;
        let again = Semantic::build(embedder, &api, Some(cache.path()), |_, _| calls += 1).unwrap();
        assert_eq!(calls, 0, "the cached vectors were computed again");
        assert_eq!(again.vectors, built.vectors);
    }
}
