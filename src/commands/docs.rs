//! `sdkbox index` and `sdkbox search`: what sdkbox makes of a spec, and searching it as the
//! model would.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use sdkbox::config::ModelArgs;
use sdkbox::search::semantic::{Semantic, embeddings_cache};
use sdkbox::search::{Detail, DocsIndex, Filters};

/// The command's flags.
#[derive(Args)]
pub struct SpecArgs {
    /// The OpenAPI spec: a file or an http(s) URL.
    #[arg(long)]
    pub spec: String,
    /// Markdown guides to index with it (default: `guides/` beside a spec file).
    #[arg(long)]
    pub guides: Option<PathBuf>,
    /// A rename of a group or of one operation, as a provider file's `[names]` gives them
    /// (repeatable), so hits show the names the server serves: `--name
    /// access=zeroTrust.access`.
    #[arg(long = "name", value_name = "GROUP=NEW", value_parser = sdkbox::config::group_rename)]
    pub names: Vec<(String, String)>,
}

/// The command's flags.
#[derive(Args)]
pub struct SearchArgs {
    #[command(flatten)]
    pub spec: SpecArgs,
    /// What to look for, in plain words.
    pub query: String,
    /// Hits to show (1-20).
    #[arg(long, default_value_t = sdkbox::search::DEFAULT_LIMIT)]
    pub limit: usize,
    /// Show signatures, response shapes and examples.
    #[arg(long)]
    pub full: bool,
    /// Only operations with this HTTP method.
    #[arg(long)]
    pub method: Option<String>,
    /// Only operations of this SDK group.
    #[arg(long)]
    pub group: Option<String>,
    /// A search synonym, as a provider file's `[synonyms]` gives them: `chargeback=dispute`.
    #[arg(long = "synonym", value_name = "WORDS=API_WORDS", value_parser = synonym)]
    pub synonyms: Vec<(String, String)>,
    /// The embedding model.
    #[command(flatten)]
    pub model: ModelArgs,
}

fn synonym(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((said, means)) if !said.trim().is_empty() && !means.trim().is_empty() => {
            Ok((said.trim().to_owned(), means.trim().to_owned()))
        }
        _ => Err(format!(
            "`{text}` is not WORDS=API_WORDS, like --synonym chargeback=dispute"
        )),
    }
}

/// Loads a spec and its guides and builds the docs index.
async fn load_docs(args: &SpecArgs) -> Result<(Arc<sdkbox::spec::Api>, DocsIndex, usize)> {
    let started = std::time::Instant::now();
    let mut spec = sdkbox::spec::load(&args.spec).await?;
    let names = args.names.iter().cloned().collect();
    sdkbox::spec::apply_names(&mut spec.api.operations, &names).map_err(anyhow::Error::msg)?;
    for warning in &spec.warnings {
        eprintln!("warning: {warning}");
    }
    let guides_dir = match &args.guides {
        Some(dir) => Some(dir.clone()),
        None if !args.spec.contains("://") => std::path::Path::new(&args.spec)
            .parent()
            .map(|p| p.join("guides")),
        None => None,
    };
    let guides = match guides_dir {
        Some(dir) => sdkbox::search::read_guides(&dir)
            .with_context(|| format!("cannot read the guides in {}", dir.display()))?,
        None => Vec::new(),
    };
    let api = Arc::new(spec.api);
    let docs = DocsIndex::build(api.clone(), guides)?;
    Ok((api, docs, started.elapsed().as_millis() as usize))
}

/// Prints what sdkbox makes of a spec.
pub async fn index(args: SpecArgs) -> Result<ExitCode> {
    let (api, docs, millis) = load_docs(&args).await?;
    println!(
        "{} {}: {} operations in {} groups, {} schemas, {} documents indexed in {millis} ms",
        api.title,
        api.version,
        api.operations.len(),
        api.operations
            .iter()
            .map(|o| &o.group)
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        api.schemas.len(),
        docs.len(),
    );
    Ok(ExitCode::SUCCESS)
}

/// The command's flags.
#[derive(Args)]
pub struct TypesArgs {
    /// The OpenAPI spec: a file or an http(s) URL.
    #[arg(long)]
    pub spec: String,
    /// A rename of a group or of one operation, as a provider file's `[names]` gives them
    /// (repeatable).
    #[arg(long = "name", value_name = "GROUP=NEW", value_parser = sdkbox::config::group_rename)]
    pub names: Vec<(String, String)>,
}

/// Prints the SDK a script sees as TypeScript declarations (`api` and the sandbox's globals).
pub async fn types(args: TypesArgs) -> Result<ExitCode> {
    let mut spec = sdkbox::spec::load(&args.spec).await?;
    let names = args.names.iter().cloned().collect();
    sdkbox::spec::apply_names(&mut spec.api.operations, &names).map_err(anyhow::Error::msg)?;
    for warning in &spec.warnings {
        eprintln!("warning: {warning}");
    }
    print!("{}", sdkbox::sdk::declarations(&spec.api));
    Ok(ExitCode::SUCCESS)
}

/// Prints the hits the model would get; fails when there are none.
pub async fn search(args: SearchArgs) -> Result<ExitCode> {
    let (api, docs, _) = load_docs(&args.spec).await?;
    let mut docs = docs.with_synonyms(args.synonyms);
    let choice = args.model.choice(None);
    choice.check()?;
    // One search: wait for the model and the embeddings (cached after the first time).
    let prepared = tokio::task::spawn_blocking(move || choice.prepare()).await?;
    match prepared {
        None => {}
        Some(Err(error)) => eprintln!("warning: {error}; the search is lexical only"),
        Some(Ok(embedder)) => {
            let cache = embeddings_cache();
            let semantic = tokio::task::spawn_blocking(move || {
                Semantic::build(embedder, &api, cache.as_deref(), |done, total| {
                    if done == total || done % 160 == 0 {
                        eprintln!("embedding operations: {done}/{total}");
                    }
                })
            })
            .await??;
            docs = docs.with_semantic(semantic);
        }
    }
    let detail = if args.full {
        Detail::Full
    } else {
        Detail::Compact
    };
    let filters = Filters::new(args.method, args.group);
    let results = docs.search(&args.query, args.limit, detail, &filters)?;
    println!("{}", results.to_text());
    Ok(if results.hits.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
