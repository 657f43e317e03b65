//! Search benchmark: relevance on the evaluation sets in tests/eval (recall@1, recall@5 and
//! MRR of sdkbox's search next to a plain BM25 over the same operations), index build time,
//! query latency and memory, for the real specs in ../shared/specs. Run with
//! `cargo bench --bench search`; the committed figures are in docs/BENCHMARKS.md.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    reason = "a benchmark"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sdkbox::search::semantic::{Embedder, Semantic};
use sdkbox::search::{Detail, DocsIndex, Filters, Fusion};
use sdkbox::spec::Api;
use serde::Deserialize;
use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{STORED, Schema, TEXT, Value};
use tantivy::{Index, TantivyDocument, doc};

#[derive(Deserialize)]
struct EvalSet {
    spec: String,
    intents: Vec<Intent>,
}

#[derive(Deserialize)]
struct Intent {
    query: String,
    accept: Vec<String>,
}

/// Speed figures of one spec: the first load and build, and every query's latency.
struct Timing {
    operations: usize,
    load: Duration,
    build: Duration,
    queries: Vec<Duration>,
    /// Embedding every operation, uncached, and the hybrid queries' latencies.
    embed: Option<Duration>,
    hybrid_queries: Vec<Duration>,
}

/// The embedding model for the hybrid rows: `SEARCH_MODEL_DIR`, else the one
/// `scripts/test-deps` installs; none (lexical rows only) when absent.
fn embedder(root: &Path) -> Option<Arc<Embedder>> {
    let dir = std::env::var_os("SEARCH_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("tests/model/all-MiniLM-L6-v2"));
    if !sdkbox::search::semantic::weights::is_complete(&dir) {
        println!("no embedding model in {}: lexical rows only", dir.display());
        return None;
    }
    let started = Instant::now();
    let embedder = Embedder::load(&dir).unwrap();
    println!(
        "model load (read, digest, weights): {} ms",
        started.elapsed().as_millis()
    );
    Some(Arc::new(embedder))
}

/// `SEARCH_FUSION=k,weight,candidates` measures another mix than the default.
fn fusion() -> Fusion {
    let Ok(text) = std::env::var("SEARCH_FUSION") else {
        return Fusion::default();
    };
    let parts: Vec<f32> = text.split(',').map(|p| p.trim().parse().unwrap()).collect();
    Fusion {
        k: parts[0],
        semantic_weight: parts[1],
        candidates: parts[2] as usize,
    }
}

#[derive(Default)]
struct Scores {
    at1: usize,
    at5: usize,
    at10: usize,
    reciprocal: f64,
    total: usize,
}

impl Scores {
    fn add(&mut self, ranked: &[String], accept: &[String]) {
        self.total += 1;
        if let Some(rank) = ranked.iter().position(|id| accept.contains(id)) {
            self.at1 += usize::from(rank == 0);
            self.at5 += usize::from(rank < 5);
            self.at10 += usize::from(rank < 10);
            self.reciprocal += 1.0 / (rank + 1) as f64;
        }
    }

    fn row(&self, name: &str) -> String {
        let n = self.total as f64;
        format!(
            "| {name} | {:.2} | {:.2} | {:.2} | {:.2} |",
            self.at1 as f64 / n,
            self.at5 as f64 / n,
            self.at10 as f64 / n,
            self.reciprocal / n
        )
    }
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let specs = root.join("../shared/specs");
    if !specs.exists() {
        println!("skipped: {} is absent", specs.display());
        return;
    }
    let mut relevance = vec![
        "| spec and search | recall@1 | recall@5 | recall@10 | MRR (top 10) |".to_owned(),
        "|---|---|---|---|---|".to_owned(),
    ];
    let mut loaded: BTreeMap<String, Loaded> = BTreeMap::new();
    let model = embedder(root);
    // Embeddings are cached across runs only with SEARCH_EMBED_CACHE; by default each run
    // measures the uncached build.
    let scratch = tempfile::tempdir().unwrap();
    let embed_cache = std::env::var_os("SEARCH_EMBED_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| scratch.path().to_owned());
    // With SEARCH_CANDIDATES=<file>, every intent's top 20 hits are written there, for
    // experiments that rerank them (docs/experiments/semantic-rerank).
    let candidates = std::env::var_os("SEARCH_CANDIDATES");
    let mut dump: BTreeMap<String, BTreeMap<String, Vec<serde_json::Value>>> = BTreeMap::new();
    let mut speed = vec![
        "| spec | operations | spec load | index build | query p50 / p95 |".to_owned(),
        "|---|---|---|---|---|".to_owned(),
    ];
    // SEARCH_SETS=a.json,b.json measures only those sets.
    let only = std::env::var("SEARCH_SETS").ok();
    for eval in [
        "stripe.json",
        "github.json",
        "stripe-heldout.json",
        "github-heldout.json",
        "stripe-fresh.json",
        "github-fresh.json",
        "stripe-fresh2.json",
        "github-fresh2.json",
        // Written blind for the semantic ranker (issue 12), frozen before its first score.
        "stripe-blind3.json",
        "github-blind3.json",
        "cloudflare-blind3.json",
    ]
    .into_iter()
    .filter(|eval| {
        only.as_deref()
            .is_none_or(|only| only.split(',').any(|o| o == *eval))
    }) {
        let set: EvalSet = serde_json::from_str(
            &std::fs::read_to_string(root.join("tests/eval").join(eval)).unwrap(),
        )
        .unwrap();
        let loaded = loaded.entry(set.spec.clone()).or_insert_with(|| {
            let path: PathBuf = specs.join(&set.spec);
            let started = Instant::now();
            let api = Arc::new(
                runtime
                    .block_on(sdkbox::spec::load(path.to_str().unwrap()))
                    .unwrap()
                    .api,
            );
            let load = started.elapsed();
            let started = Instant::now();
            let docs = DocsIndex::build(api.clone(), Vec::new()).unwrap();
            let build = started.elapsed();
            let plain = PlainBm25::build(&api);
            let (hybrid, embed) = match &model {
                Some(model) => {
                    let started = Instant::now();
                    let semantic =
                        Semantic::build(model.clone(), &api, Some(&embed_cache), |_, _| {})
                            .unwrap();
                    let embed = started.elapsed();
                    let hybrid = DocsIndex::build(api.clone(), Vec::new())
                        .unwrap()
                        .with_semantic(semantic)
                        .with_fusion(fusion());
                    (Some(hybrid), Some(embed))
                }
                None => (None, None),
            };
            let timing = Timing {
                operations: api.operations.len(),
                load,
                build,
                queries: Vec::new(),
                embed,
                hybrid_queries: Vec::new(),
            };
            (api, docs, plain, timing, hybrid)
        });
        let (api, docs, plain, timing) = (&loaded.0, &loaded.1, &loaded.2, &mut loaded.3);
        let hybrid = loaded.4.as_ref();
        let (mut ours, mut baseline, mut fused) =
            (Scores::default(), Scores::default(), Scores::default());
        let mut latencies = Vec::new();
        for intent in &set.intents {
            let started = Instant::now();
            let results = docs
                .search(&intent.query, 10, Detail::Compact, &Filters::default())
                .unwrap();
            latencies.push(started.elapsed());
            let ranked: Vec<String> = results
                .hits
                .iter()
                .map(|h| operation_id(api, &h.id))
                .collect();
            let missed = ranked.first().is_none_or(|r| !intent.accept.contains(r));
            if missed && std::env::var_os("SEARCH_MISSES").is_some() {
                let shown = &ranked[..ranked.len().min(3)];
                println!(
                    "miss: {:?} wants {:?}, got {shown:?}",
                    intent.query, intent.accept
                );
            }
            if candidates.is_some() {
                let top: Vec<serde_json::Value> = docs
                    .search(&intent.query, 20, Detail::Compact, &Filters::default())
                    .unwrap()
                    .hits
                    .iter()
                    .map(|h| {
                        let id = operation_id(api, &h.id);
                        let id = if id == h.id {
                            format!("non-operation:{id}")
                        } else {
                            id
                        };
                        serde_json::json!({"id": id, "score": h.score})
                    })
                    .collect();
                dump.entry(set.spec.clone())
                    .or_default()
                    .entry(eval.to_owned())
                    .or_default()
                    .push(serde_json::json!({"query": intent.query, "accept": intent.accept, "sdkbox_top20": top}));
            }
            ours.add(&ranked, &intent.accept);
            baseline.add(&plain.search(&intent.query), &intent.accept);
            if let Some(hybrid) = hybrid {
                let started = Instant::now();
                let results = hybrid
                    .search(&intent.query, 10, Detail::Compact, &Filters::default())
                    .unwrap();
                timing.hybrid_queries.push(started.elapsed());
                let ranked: Vec<String> = results
                    .hits
                    .iter()
                    .map(|h| operation_id(api, &h.id))
                    .collect();
                fused.add(&ranked, &intent.accept);
            }
        }
        relevance.push(ours.row(&format!("{eval} ({} intents), sdkbox lexical", ours.total)));
        if hybrid.is_some() {
            relevance.push(fused.row(&format!("{eval}, sdkbox hybrid")));
        }
        relevance.push(baseline.row(&format!("{eval}, plain BM25")));
        timing.queries.extend(latencies);
    }
    for (spec, (_, _, _, timing, _)) in &mut loaded {
        timing.queries.sort();
        let at = |share: usize| ms(timing.queries[timing.queries.len() * share / 100]);
        speed.push(format!(
            "| {spec} | {} | {} ms | {} ms | {:.2} ms / {:.2} ms |",
            timing.operations,
            timing.load.as_millis(),
            timing.build.as_millis(),
            at(50),
            at(95)
        ));
        if let Some(embed) = timing.embed {
            timing.hybrid_queries.sort();
            let n = timing.hybrid_queries.len();
            speed.push(format!(
                "| {spec}, hybrid | | | embedding {} operations: {} ms | {:.2} ms / {:.2} ms |",
                timing.operations,
                embed.as_millis(),
                ms(timing.hybrid_queries[n / 2]),
                ms(timing.hybrid_queries[n * 95 / 100])
            ));
        }
    }
    if let Some(path) = &candidates {
        std::fs::write(path, serde_json::to_string_pretty(&dump).unwrap()).unwrap();
    }
    println!("{}\n\n{}", relevance.join("\n"), speed.join("\n"));
    println!(
        "\nresident memory with both specs and indexes loaded: {} MiB",
        rss_mib()
    );
    query_size_cost(&loaded);
    sdk_call_cost(&runtime, &specs);
}

/// One spec loaded for the benchmark: its model, its index, the plain BM25 baseline, how
/// long loading took, and the index with embeddings when a model is present.
type Loaded = (Arc<Api>, DocsIndex, PlainBm25, Timing, Option<DocsIndex>);

/// What one search costs by the size of its query: ordinary questions, and queries at the
/// bounds (`MAX_QUERY_CHARS`, `MAX_QUERY_WORDS`) of the spec's own words or of made-up
/// words (each one a fuzzy lookup, the path that once cost 1.6 MB a word). Latency p50 and
/// p99 over 300 queries of each kind, and the most the resident memory rose above where it
/// was before them (the kernel's high-water mark, reset first).
fn query_size_cost(loaded: &BTreeMap<String, Loaded>) {
    let mut rows = vec![
        "| spec | queries | chars / words | p50 | p99 | peak RSS above before |".to_owned(),
        "|---|---|---|---|---|---|".to_owned(),
    ];
    let ordinary = [
        "create a customer",
        "list open pull requests for a repository",
        "refund a charge",
        "delete a webhook",
        "which invoices are past due",
        "add a label to an issue",
    ];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for (spec, (api, docs, _, _, hybrid)) in loaded {
        let vocabulary: Vec<String> = api
            .operations
            .iter()
            .flat_map(|op| {
                op.summary
                    .split_whitespace()
                    .map(str::to_lowercase)
                    .collect::<Vec<_>>()
            })
            .filter(|w| w.len() > 3 && w.chars().all(char::is_alphabetic))
            .collect();
        let fill = |words: &mut dyn FnMut() -> String| {
            let mut query = String::new();
            for _ in 0..sdkbox::search::MAX_QUERY_WORDS {
                let word = words();
                if query.len() + word.len() + 1 > sdkbox::search::MAX_QUERY_CHARS {
                    break;
                }
                query.push_str(&word);
                query.push(' ');
            }
            query.trim_end().to_owned()
        };
        let kinds: Vec<(&str, Vec<String>)> = vec![
            (
                "ordinary questions",
                (0..300)
                    .map(|i| ordinary[i % ordinary.len()].to_owned())
                    .collect(),
            ),
            (
                "at the bounds, the spec's words",
                (0..300)
                    .map(|_| fill(&mut || vocabulary[next() as usize % vocabulary.len()].clone()))
                    .collect(),
            ),
            (
                "at the bounds, made-up words",
                (0..300)
                    .map(|_| {
                        fill(&mut || {
                            (0..11)
                                .map(|_| (b'a' + (next() % 26) as u8) as char)
                                .collect()
                        })
                    })
                    .collect(),
            ),
        ];
        let indexes =
            std::iter::once(("lexical", docs)).chain(hybrid.iter().map(|h| ("hybrid", h)));
        for ((kind, queries), (search, docs)) in kinds
            .iter()
            .flat_map(|kind| indexes.clone().map(move |index| (kind, index)))
        {
            let before = rss_kib();
            reset_peak();
            let mut latencies: Vec<Duration> = queries
                .iter()
                .map(|q| {
                    let started = Instant::now();
                    docs.search(q, 10, Detail::Compact, &Filters::default())
                        .unwrap();
                    started.elapsed()
                })
                .collect();
            let peak = peak_kib().saturating_sub(before);
            latencies.sort();
            let chars = queries.iter().map(String::len).max().unwrap_or(0);
            let words = queries
                .iter()
                .map(|q| q.split_whitespace().count())
                .max()
                .unwrap_or(0);
            rows.push(format!(
                "| {spec}, {search} | {kind} | {chars} / {words} | {:.2} ms | {:.2} ms | {:.1} MiB |",
                ms(latencies[latencies.len() / 2]),
                ms(latencies[latencies.len() * 99 / 100]),
                peak as f64 / 1024.0
            ));
        }
    }
    println!("\n{}", rows.join("\n"));
}

/// Resets the kernel's high-water mark of this process's resident memory.
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0)
}

fn rss_kib() -> u64 {
    status_kib("VmRSS")
}

fn peak_kib() -> u64 {
    status_kib("VmHWM")
}

/// What the SDK costs: nothing per runtime (the isolate holds only a proxy), and per call the
/// check and encoding in the supervisor, measured here on GitHub's spec.
fn sdk_call_cost(runtime: &tokio::runtime::Runtime, specs: &Path) {
    let path = specs.join("github-api.github.com.json");
    let api = Arc::new(
        runtime
            .block_on(sdkbox::spec::load(path.to_str().unwrap()))
            .unwrap()
            .api,
    );
    let sdk = sdkbox::sdk::Sdk::new(api);
    let call = sdkbox::sdk::SdkCall {
        group: "issues".into(),
        method: "create".into(),
        params: serde_json::json!({"owner": "o", "repo": "r", "title": "Bug", "body": "text", "labels": ["bug"]}),
        extra: 0,
        files: Vec::new(),
    };
    let mut times: Vec<Duration> = (0..2_000)
        .map(|_| {
            let started = Instant::now();
            sdk.prepare(&call).unwrap();
            started.elapsed()
        })
        .collect();
    times.sort();
    println!(
        "SDK call check and encoding (GitHub issues.create): p50 {:.1} µs",
        times[1_000].as_secs_f64() * 1e6
    );
}

/// Maps a hit id (`api.group.method`, or a schema or guide) back to the operation id.
fn operation_id(api: &Api, hit: &str) -> String {
    api.operations
        .iter()
        .find(|o| format!("api.{}.{}", o.group, o.name) == hit)
        .map(|o| o.id.clone())
        .unwrap_or_else(|| hit.to_owned())
}

/// The baseline: one field of operationId, path, summary and description, tantivy's default
/// tokenizer, no boosts, no identifier splitting, no stemming.
struct PlainBm25 {
    index: Index,
    text: tantivy::schema::Field,
    id: tantivy::schema::Field,
}

impl PlainBm25 {
    fn build(api: &Api) -> Self {
        let mut schema = Schema::builder();
        let text = schema.add_text_field("text", TEXT);
        let id = schema.add_text_field("id", STORED);
        let index = Index::create_in_ram(schema.build());
        let mut writer = index.writer_with_num_threads(1, 50_000_000).unwrap();
        for op in &api.operations {
            let body = format!("{} {} {} {}", op.id, op.path, op.summary, op.description);
            writer
                .add_document(doc!(text => body, id => op.id.clone()))
                .unwrap();
        }
        writer.commit().unwrap();
        Self { index, text, id }
    }

    fn search(&self, query: &str) -> Vec<String> {
        let searcher = self.index.reader().unwrap().searcher();
        let parser = QueryParser::for_index(&self.index, vec![self.text]);
        let words: String = query
            .chars()
            .map(|c| if c.is_alphanumeric() { c } else { ' ' })
            .collect();
        let (parsed, _) = parser.parse_query_lenient(&words);
        let top = searcher
            .search(&parsed, &TopDocs::with_limit(10).order_by_score())
            .unwrap();
        top.into_iter()
            .map(|(_, address)| {
                let document: TantivyDocument = searcher.doc(address).unwrap();
                document
                    .get_first(self.id)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}
