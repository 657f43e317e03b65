//! `search_docs`: full-text search over the provider's operations, schemas and guides, built
//! in memory from the same spec as the SDK, so that every hit names a method the sandbox can
//! call.

mod entries;
mod fuse;
mod hit;
mod index;
mod intent;
mod lexicon;
mod rank;
pub mod semantic;
mod tokenize;

pub use entries::{GuideSection, read_guides, split_guide};
pub use fuse::Fusion;

use entries::Entry;
pub use hit::{Detail, Hit};
pub use index::Filters;
use intent::{Intent, Vocabulary};

use std::sync::{Arc, OnceLock};

use serde::Serialize;
use thiserror::Error;

use crate::sdk::did_you_mean;
use crate::spec::Api;

/// Hits returned when the caller does not say.
pub const DEFAULT_LIMIT: usize = 5;
/// The most hits one search returns.
pub const MAX_LIMIT: usize = 20;

/// The longest query accepted, in characters: a search names what it needs in a few words,
/// and every word costs (an unknown one, the fuzzy fallback's automata).
pub const MAX_QUERY_CHARS: usize = 400;

/// The most words a query may have.
pub const MAX_QUERY_WORDS: usize = 32;

/// The longest `group` filter accepted, in bytes: longer than any group name, which the
/// filter is compared with, group by group.
pub const MAX_GROUP_BYTES: usize = 200;

/// The longest `method` filter accepted, in bytes (`OPTIONS` is 7).
pub const MAX_METHOD_BYTES: usize = 16;

/// The longest hint an answer carries, in characters.
const MAX_HINT_CHARS: usize = 1_000;

/// Why a search failed: the query (the model's to fix) or the index (a server fault).
#[derive(Debug, Error)]
pub enum SearchError {
    /// Tantivy failed.
    #[error("search index error: {0}")]
    Index(#[from] tantivy::TantivyError),
    /// A filter is longer than any value it could match.
    #[error(
        "the `{filter}` filter is {size} bytes long; search_docs takes at most {max}. Filter by \
         a group the hits name (\"refunds\", \"dns.records\") or an HTTP method (\"POST\"), or \
         leave the filter out"
    )]
    FilterTooLong {
        /// `group` or `method`.
        filter: &'static str,
        /// How long it is.
        size: usize,
        /// The most accepted.
        max: usize,
    },
    /// The query is longer than a search needs.
    #[error(
        "the query is {size} {unit} long; search_docs takes at most {max}. Search with the few \
         words that name what you need (\"refund an order\", \"list a customer's invoices\"), \
         and search again for another need"
    )]
    QueryTooLong {
        /// How long it is.
        size: usize,
        /// `characters` or `words`.
        unit: &'static str,
        /// The most accepted.
        max: usize,
    },
}

impl SearchError {
    /// Whether the model caused it (a tool error it can fix), rather than the server.
    pub fn is_query(&self) -> bool {
        matches!(self, Self::QueryTooLong { .. } | Self::FilterTooLong { .. })
    }
}

/// Refuses a query longer than [`MAX_QUERY_CHARS`] or [`MAX_QUERY_WORDS`], counting no
/// further than it needs to.
fn check_length(query: &str) -> Result<(), SearchError> {
    if query.chars().nth(MAX_QUERY_CHARS).is_some() {
        return Err(SearchError::QueryTooLong {
            size: query.chars().count(),
            unit: "characters",
            max: MAX_QUERY_CHARS,
        });
    }
    let words = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .count();
    if words > MAX_QUERY_WORDS {
        return Err(SearchError::QueryTooLong {
            size: words,
            unit: "words",
            max: MAX_QUERY_WORDS,
        });
    }
    Ok(())
}

/// Refuses a filter longer than any value it could match, before it is compared with
/// anything.
fn check_filters(filters: &Filters) -> Result<(), SearchError> {
    for (filter, value, max) in [
        ("group", &filters.group, MAX_GROUP_BYTES),
        ("method", &filters.method, MAX_METHOD_BYTES),
    ] {
        if let Some(value) = value.as_deref().filter(|v| v.len() > max) {
            return Err(SearchError::FilterTooLong {
                filter,
                size: value.len(),
                max,
            });
        }
    }
    Ok(())
}

/// What a search returns.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    /// The hits, best first.
    pub hits: Vec<Hit>,
    /// When nothing matched: what to try instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Results {
    /// The hits as text, one block per hit, for clients that read only text.
    pub fn to_text(&self) -> String {
        let mut out: Vec<String> = self.hits.iter().map(|h| h.text.clone()).collect();
        if let Some(hint) = &self.hint {
            out.push(hint.clone());
        }
        out.join("\n\n")
    }
}

/// The docs index of one provider.
pub struct DocsIndex {
    api: Arc<Api>,
    guides: Vec<GuideSection>,
    built: index::Built,
    traits: Vec<rank::Traits>,
    vocabulary: Vocabulary,
    /// The operations' embeddings, once they are ready (built in the background at start;
    /// until then, and without a model, search is lexical only).
    semantic: Arc<OnceLock<semantic::Semantic>>,
    fusion: Fusion,
}

impl DocsIndex {
    /// Indexes `api` and its guide sections.
    pub fn build(api: Arc<Api>, guides: Vec<GuideSection>) -> Result<Self, SearchError> {
        let built = index::build(&api, &guides)?;
        let traits = rank::traits(&api);
        let vocabulary = Vocabulary {
            api_verbs: rank::verbs(&traits),
            synonyms: Vec::new(),
        };
        Ok(Self {
            api,
            guides,
            built,
            traits,
            vocabulary,
            semantic: Arc::new(OnceLock::new()),
            fusion: Fusion::default(),
        })
    }

    /// Ranks by meaning too, with these operation embeddings (built for this index's API).
    pub fn with_semantic(self, semantic: semantic::Semantic) -> Self {
        let _ = self.semantic.set(semantic);
        self
    }

    /// Gets the model with `prepare` (a download, a load) and embeds the operations, on a
    /// thread of its own; search ranks by meaning once they are ready, and lexically
    /// meanwhile, so a server starts at once instead of late. `cache` keeps the embeddings
    /// for the next start; progress goes to stderr, a line every 10%.
    pub fn embed_in_background(
        &self,
        prepare: impl FnOnce() -> Result<Arc<semantic::Embedder>, semantic::ModelError> + Send + 'static,
        cache: Option<std::path::PathBuf>,
    ) {
        let (api, slot) = (self.api.clone(), self.semantic.clone());
        let spawned = std::thread::Builder::new()
            .name("sdkbox-embed".into())
            .spawn(move || {
                let started = std::time::Instant::now();
                let mut shown = 0;
                let built = prepare().and_then(|embedder| {
                    semantic::Semantic::build(embedder, &api, cache.as_deref(), |done, total| {
                        let tenth = done * 10 / total.max(1);
                        if tenth > shown && total >= 100 {
                            shown = tenth;
                            eprintln!(
                                "sdkbox: embedding {total} operations for search_docs (once; then cached): {}%",
                                tenth * 10
                            );
                        }
                    })
                });
                match built {
                    Ok(semantic) => {
                        // In place before it is said to be: a client (or a test) that reads
                        // the line may search at once.
                        let operations = semantic.len();
                        let _ = slot.set(semantic);
                        tracing::info!(
                            operations,
                            ms = started.elapsed().as_millis() as u64,
                            "search_docs ranks by meaning too"
                        );
                    }
                    Err(error) => {
                        tracing::warn!(%error, "no embedding model: search_docs stays lexical");
                    }
                }
            });
        if let Err(error) = spawned {
            tracing::warn!(%error, "cannot start the embedding thread; search_docs stays lexical");
        }
    }

    /// Whether search ranks by meaning (a model is loaded and the embeddings are ready).
    pub fn is_semantic(&self) -> bool {
        self.semantic.get().is_some()
    }

    /// Fuses the rankings with other constants: for measuring mixes (`benches/search.rs`).
    pub fn with_fusion(mut self, fusion: Fusion) -> Self {
        self.fusion = fusion;
        self
    }

    /// Adds the provider's synonyms: (what people say, the API's words), a word or a phrase
    /// each, read before the built-in ones.
    pub fn with_synonyms(mut self, synonyms: Vec<(String, String)>) -> Self {
        self.vocabulary.synonyms = synonyms
            .into_iter()
            .map(|(said, means)| (intent::plain_words(&said).join(" "), means))
            .collect();
        self
    }

    /// Documents in the index.
    pub fn len(&self) -> usize {
        self.built.entries.len()
    }

    /// Whether the index is empty.
    pub fn is_empty(&self) -> bool {
        self.built.entries.is_empty()
    }

    /// Searches; `limit` is clamped to 1..=20.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        detail: Detail,
        filters: &Filters,
    ) -> Result<Results, SearchError> {
        check_length(query)?;
        check_filters(filters)?;
        let limit = limit.clamp(1, MAX_LIMIT);
        let intent = Intent::read(query, &self.vocabulary);
        let semantic = self.semantic.get();
        let candidates = match semantic {
            Some(_) => self.fusion.candidates.max(limit),
            None => limit,
        };
        let mut found =
            self.built
                .search(&intent.terms, candidates, filters, |entry| match entry {
                    Entry::Operation(i) => rank::weight(&self.traits[i], &intent),
                    Entry::Schema(_) => 0.5,
                    Entry::Guide(_) => 0.8,
                })?;
        // Nothing lexical at all (not even a typo away) is a query with no word of the API:
        // the nearest operations in meaning would be confident-looking noise, and the hint
        // says more.
        if let Some(semantic) = semantic
            && !found.is_empty()
        {
            found = self.fused(semantic, query, &found, filters);
        }
        found.truncate(limit);
        let hits: Vec<Hit> = found
            .into_iter()
            .map(|(entry, score)| hit::render(&self.api, &self.guides, entry, detail, score))
            .collect();
        let hint = hits
            .is_empty()
            .then(|| crate::egress::cut(&self.no_results_hint(query, filters), MAX_HINT_CHARS));
        Ok(Results { hits, hint })
    }

    /// The lexical candidates fused with the operations nearest in meaning that pass the
    /// filters; the lexical ones alone if the model fails.
    fn fused(
        &self,
        semantic: &semantic::Semantic,
        query: &str,
        lexical: &[(Entry, f32)],
        filters: &Filters,
    ) -> Vec<(Entry, f32)> {
        let passes = |i: usize| {
            let operation = &self.api.operations[i];
            filters
                .method
                .as_ref()
                .is_none_or(|m| operation.method.eq_ignore_ascii_case(m))
                && filters
                    .group
                    .as_ref()
                    .is_none_or(|g| in_group(&operation.group, g))
        };
        let nearest = match semantic.nearest(query, self.fusion.candidates, passes) {
            Ok(nearest) => nearest,
            Err(error) => {
                tracing::warn!(%error, "the embedding model failed; this search is lexical");
                return lexical.to_vec();
            }
        };
        let lexical: Vec<Entry> = lexical.iter().map(|(entry, _)| *entry).collect();
        let nearest: Vec<usize> = nearest.into_iter().map(|(i, _)| i).collect();
        self.fusion.fuse(&lexical, &nearest)
    }

    fn no_results_hint(&self, query: &str, filters: &Filters) -> String {
        let groups: Vec<&str> = {
            let mut g: Vec<&str> = self
                .api
                .operations
                .iter()
                .map(|o| o.group.as_str())
                .collect();
            g.sort();
            g.dedup();
            g
        };
        let mut hint = format!("no results for \"{query}\"");
        if let Some(group) = &filters.group
            && !groups.iter().any(|g| in_group(g, group))
        {
            hint.push_str(&format!(
                ": there is no group `{group}`{}",
                did_you_mean(group, &groups)
            ));
            return hint;
        }
        let suggestion = query
            .split_whitespace()
            .map(|word| did_you_mean(word, &groups))
            .find(|s| s.starts_with(';'));
        match suggestion {
            Some(s) => hint.push_str(&s.replacen(';', ":", 1)),
            None => hint.push_str(". Try other words, or fewer filters"),
        }
        hint
    }
}

/// Whether an operation of `group` is in the group a filter names (`dns` or `api.dns` holds
/// `dns.records`; a group named `api` is found by its own name too), up to case.
fn in_group(group: &str, filter: &str) -> bool {
    let within = |filter: &str| {
        group.len() >= filter.len()
            && group.is_char_boundary(filter.len())
            && group[..filter.len()].eq_ignore_ascii_case(filter)
            && (group.len() == filter.len() || group.as_bytes()[filter.len()] == b'.')
    };
    within(filter) || filter.strip_prefix("api.").is_some_and(within)
}
