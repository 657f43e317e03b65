//! `search_docs`: full-text search over the provider's operations, schemas and guides, built
//! in memory from the same spec as the SDK, so that every hit names a method the sandbox can
//! call.

mod entries;
mod hit;
mod index;
mod intent;
mod lexicon;
mod rank;
mod tokenize;

pub use entries::{GuideSection, read_guides, split_guide};

use entries::Entry;
pub use hit::{Detail, Hit};
pub use index::Filters;
use intent::{Intent, Vocabulary};

use std::sync::Arc;

use serde::Serialize;
use thiserror::Error;

use crate::sdk::did_you_mean;
use crate::spec::Api;

/// Hits returned when the caller does not say.
pub const DEFAULT_LIMIT: usize = 5;
/// The most hits one search returns.
pub const MAX_LIMIT: usize = 20;

/// The index failed; a server fault, not the model's.
#[derive(Debug, Error)]
pub enum SearchError {
    /// Tantivy failed.
    #[error("search index error: {0}")]
    Index(#[from] tantivy::TantivyError),
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
        })
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
        let limit = limit.clamp(1, MAX_LIMIT);
        let intent = Intent::read(query, &self.vocabulary);
        let found = self
            .built
            .search(&intent.terms, limit, filters, |entry| match entry {
                Entry::Operation(i) => rank::weight(&self.traits[i], &intent),
                Entry::Schema(_) => 0.5,
                Entry::Guide(_) => 0.8,
            })?;
        let hits: Vec<Hit> = found
            .into_iter()
            .map(|(entry, score)| hit::render(&self.api, &self.guides, entry, detail, score))
            .collect();
        let hint = hits
            .is_empty()
            .then(|| self.no_results_hint(query, filters));
        Ok(Results { hits, hint })
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
            && !groups.contains(&group.as_str())
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
