//! The tantivy index over the entries: each query word scored by its best field (field
//! boosts for BM25, a small share for its other fields), filters by method and group, and a
//! typo-tolerant fallback when nothing matches.

use std::collections::HashMap;

use tantivy::collector::TopDocs;
use tantivy::query::{
    BooleanQuery, BoostQuery, DisjunctionMaxQuery, FuzzyTermQuery, Occur, Query, TermQuery,
};
use tantivy::schema::{
    Field, IndexRecordOption, STORED, STRING, Schema, TantivyDocument, TextFieldIndexing,
    TextOptions, Value,
};
use tantivy::{Index, IndexReader, Term, doc};

use super::SearchError;
use super::entries::{self, Entry, Fields, GuideSection};
use super::tokenize::{self, ANALYZER};
use crate::spec::Api;

/// The text fields and their boosts: names and summaries say most about an operation.
const BOOSTS: &[(&str, f32)] = &[
    ("name", 2.0),
    ("summary", 2.5),
    ("path", 2.0),
    ("verbs", 2.0),
    ("description", 1.0),
    ("params", 1.0),
    ("about", 1.0),
];

/// Entries scored by text before weighing: enough that weighing can lift an operation from
/// well below the first page.
const CANDIDATES: usize = 200;

/// How much a query word's matches in its other fields add to its best field's score: a word
/// found in an operation's name, path and summary is one word matched, not three.
const TIE_BREAKER: f32 = 0.1;

/// Analysed terms a query searches with at most (synonyms add some to the query's own).
const MAX_TERMS: usize = 64;

/// Terms the fuzzy fallback tries at most, and the longest it tries.
const MAX_FUZZY_TERMS: usize = 6;
const MAX_FUZZY_CHARS: usize = 24;

/// The built index and the entries its documents stand for.
pub struct Built {
    reader: IndexReader,
    text_fields: Vec<(Field, f32)>,
    entry: Field,
    method: Field,
    group: Field,
    kind: Field,
    /// Entry of each document, by the stored `entry` number.
    pub entries: Vec<Entry>,
}

/// A search's filters.
#[derive(Debug, Clone, Default)]
pub struct Filters {
    /// Only operations with this HTTP method.
    pub method: Option<String>,
    /// Only operations of this SDK group.
    pub group: Option<String>,
}

impl Filters {
    /// Filters on `method` and `group`, as a client sent them. An empty one (`""`, blanks)
    /// is none: clients that make every optional property required (the OpenAI Agents SDK's
    /// strict schemas) send `""` for a filter the model did not mean.
    pub fn new(method: Option<String>, group: Option<String>) -> Self {
        let given = |value: Option<String>| value.filter(|v| !v.trim().is_empty());
        Self {
            method: given(method),
            group: given(group),
        }
    }
}

/// Builds the index in memory.
pub fn build(api: &Api, guides: &[GuideSection]) -> Result<Built, SearchError> {
    let mut schema = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let text_fields: Vec<(Field, f32)> = BOOSTS
        .iter()
        .map(|(name, boost)| (schema.add_text_field(name, text.clone()), *boost))
        .collect();
    let entry = schema.add_u64_field("entry", STORED);
    let method = schema.add_text_field("method", STRING);
    let group = schema.add_text_field("group", STRING);
    let kind = schema.add_text_field("kind", STRING);
    let index = Index::create_in_ram(schema.build());
    tokenize::register(&index);
    let mut writer = index.writer_with_num_threads(1, 50_000_000)?;
    let entries = entries::all(api, guides);
    let resources: HashMap<&str, &str> = api
        .schemas
        .iter()
        .map(|s| (s.name.as_str(), s.description.as_str()))
        .collect();
    for (number, item) in entries.iter().enumerate() {
        let (fields, kind_name) = match *item {
            Entry::Operation(i) => {
                let op = &api.operations[i];
                let about = op
                    .resource
                    .as_deref()
                    .and_then(|name| resources.get(name))
                    .copied()
                    .unwrap_or_default();
                (entries::operation_fields(op, about), "operation")
            }
            Entry::Schema(i) => (entries::schema_fields(&api.schemas[i]), "schema"),
            Entry::Guide(i) => (entries::guide_fields(&guides[i]), "guide"),
        };
        let mut document = doc!(entry => number as u64, kind => kind_name);
        for ((field, _), value) in text_fields.iter().zip(texts(&fields)) {
            document.add_text(*field, value);
        }
        if !fields.method.is_empty() {
            document.add_text(method, fields.method.to_ascii_uppercase());
            // A nested group is found by each of its prefixes (`dns` and `dns.records`).
            let lower = fields.group.to_ascii_lowercase();
            for (end, _) in lower.match_indices('.').chain([(lower.len(), "")]) {
                document.add_text(group, &lower[..end]);
            }
        }
        writer.add_document(document)?;
    }
    writer.commit()?;
    let reader = index.reader()?;
    Ok(Built {
        reader,
        text_fields,
        entry,
        method,
        group,
        kind,
        entries,
    })
}

/// The field texts in the order of [`BOOSTS`].
fn texts(fields: &Fields) -> [&str; 7] {
    [
        &fields.name,
        &fields.summary,
        &fields.path,
        &fields.verbs,
        &fields.description,
        &fields.params,
        &fields.about,
    ]
}

impl Built {
    /// The best `limit` entries for the analyzed `terms`, with scores; fuzzy when exact terms
    /// find nothing.
    /// `weight` scales an entry's BM25 score: an agent searching docs mostly wants operations.
    pub fn search(
        &self,
        terms: &[String],
        limit: usize,
        filters: &Filters,
        weight: impl Fn(Entry) -> f32,
    ) -> Result<Vec<(Entry, f32)>, SearchError> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let candidates = (limit * 4).max(CANDIDATES);
        let exact = self.query(terms, filters, false);
        let mut found = self.run(&*exact, candidates)?;
        if found.is_empty() {
            let fuzzy = self.query(terms, filters, true);
            found = self.run(&*fuzzy, candidates)?;
        }
        for (entry, score) in &mut found {
            *score *= weight(*entry);
        }
        found.sort_by(|a, b| b.1.total_cmp(&a.1));
        found.truncate(limit);
        Ok(found)
    }

    fn query(&self, terms: &[String], filters: &Filters, fuzzy: bool) -> Box<dyn Query> {
        let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        // Each fuzzy term builds a Levenshtein automaton per field (about a megabyte at
        // distance 2): a few terms of a reasonable length, not all of them.
        let terms: Vec<&String> = match fuzzy {
            true => terms
                .iter()
                .filter(|t| (3..=MAX_FUZZY_CHARS).contains(&t.chars().count()))
                .take(MAX_FUZZY_TERMS)
                .collect(),
            false => terms.iter().take(MAX_TERMS).collect(),
        };
        for term in terms {
            let mut per_field: Vec<Box<dyn Query>> = Vec::new();
            for (field, boost) in &self.text_fields {
                let t = Term::from_field_text(*field, term);
                let q: Box<dyn Query> = if fuzzy {
                    let distance = if term.len() > 5 { 2 } else { 1 };
                    Box::new(FuzzyTermQuery::new(t, distance, true))
                } else {
                    Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs))
                };
                per_field.push(Box::new(BoostQuery::new(q, *boost)));
            }
            should.push((
                Occur::Should,
                Box::new(DisjunctionMaxQuery::with_tie_breaker(
                    per_field,
                    TIE_BREAKER,
                )),
            ));
        }
        let mut clauses: Vec<(Occur, Box<dyn Query>)> =
            vec![(Occur::Must, Box::new(BooleanQuery::new(should)))];
        let exact = |field: Field, value: String| -> Box<dyn Query> {
            Box::new(TermQuery::new(
                Term::from_field_text(field, &value),
                IndexRecordOption::Basic,
            ))
        };
        if let Some(method) = &filters.method {
            clauses.push((Occur::Must, exact(self.method, method.to_ascii_uppercase())));
        }
        if let Some(group) = &filters.group {
            // As named, or after the `api.` a script writes before it.
            let group = group.to_ascii_lowercase();
            let mut named = vec![(Occur::Should, exact(self.group, group.clone()))];
            if let Some(bare) = group.strip_prefix("api.") {
                named.push((Occur::Should, exact(self.group, bare.to_owned())));
            }
            clauses.push((Occur::Must, Box::new(BooleanQuery::new(named))));
        }
        if filters.method.is_some() || filters.group.is_some() {
            clauses.push((Occur::Must, exact(self.kind, "operation".into())));
        }
        Box::new(BooleanQuery::new(clauses))
    }

    fn run(&self, query: &dyn Query, limit: usize) -> Result<Vec<(Entry, f32)>, SearchError> {
        let searcher = self.reader.searcher();
        let top = searcher.search(query, &TopDocs::with_limit(limit).order_by_score())?;
        let mut out = Vec::new();
        for (score, address) in top {
            let document: TantivyDocument = searcher.doc(address)?;
            let number = document
                .get_first(self.entry)
                .and_then(|v| v.as_u64())
                .unwrap_or(0) as usize;
            if let Some(entry) = self.entries.get(number) {
                out.push((*entry, score));
            }
        }
        Ok(out)
    }
}
