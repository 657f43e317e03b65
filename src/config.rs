//! Provider configuration: one TOML file per provider, flags on top, validated once into the
//! values the server is built from. The secret is read from the environment here, once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use thiserror::Error;
use url::Url;

use crate::approval::{
    Approvals, AuditLog, DEFAULT_APPROVAL_TIMEOUT, PolicyFile, PolicyOverrides, Rule, Rules,
};
use crate::egress::{AuthScheme, Credential, Egress, EgressConfig, EgressLimits, Secret};
use crate::sandbox::ExecLimits;
use crate::sdk::Sdk;
use crate::search::semantic::ModelChoice;
use crate::search::{DocsIndex, read_guides};
use crate::server::Provider;
use crate::spec::{Api, AuthHint};
use crate::state::StateStore;
use crate::worker::{Pool, PoolConfig};

/// A provider file as written: every field optional, paths relative to the file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderFile {
    /// A short name: `stripe`.
    pub name: Option<String>,
    /// The OpenAPI spec: a path or an http(s) URL.
    pub spec: Option<String>,
    /// Markdown guides to index with the spec.
    pub guides: Option<PathBuf>,
    /// Where requests go; defaults to the spec's first server.
    pub base_url: Option<Url>,
    /// More origins scripts may reach.
    #[serde(default)]
    pub allowed_origins: Vec<Url>,
    /// `bearer`, `basic`, `header:NAME` or `query:NAME`; defaults to the spec's first
    /// security scheme, else bearer.
    pub auth: Option<String>,
    /// The environment variable holding the provider secret.
    pub secret_env: Option<String>,
    /// The HTTP header a remote client may send its own provider key in.
    pub session_key_header: Option<String>,
    /// Execution limits.
    #[serde(default)]
    pub limits: LimitsFile,
    /// How callers share the server: per-caller bounds (see [`crate::fair`]).
    #[serde(default)]
    pub fairness: crate::fair::FairnessFile,
    /// `[tasks]`: long executions as MCP tasks (limit, bounds).
    #[serde(default)]
    pub tasks: crate::tasks::TasksFile,
    /// `[skills]`: provider playbooks served as MCP skills.
    #[serde(default)]
    pub skills: SkillsFile,
    /// Words people use for this API's things, and the API's own words for them, added to
    /// the built-in search vocabulary: `chargeback = "dispute"`, `"sign up" = "create"`.
    #[serde(default)]
    pub synonyms: BTreeMap<String, String>,
    /// Renames, `"access" = "zeroTrust.access"` (a group and those in it) or `"intel.dns" =
    /// "intel.dns.list"` (one operation): where the provider's official SDK names things in a
    /// way its spec does not say (applied before the approval rules, which name the renamed
    /// operations, and hold for their former names too).
    #[serde(default)]
    pub names: BTreeMap<String, String>,
    /// The approval rules: `writes = "approve"`, and `[policy.operations]` by SDK name or glob.
    #[serde(default)]
    pub policy: PolicyFile,
    /// How `search_docs` ranks: `model_dir` for the embedding model.
    #[serde(default)]
    pub search: SearchFile,
    /// Where the provider's downloads live: `[network] download_origins`.
    #[serde(default)]
    pub network: NetworkFile,
    /// The type check of `execute`: `block` (certain errors in SDK calls stop the run; the
    /// default), `warn` (never stops), or `off`.
    pub typecheck: Option<crate::typecheck::Mode>,
    /// The TypeScript 7 compiler (`tsc`) the type check uses; default: `tsc` on `PATH`, else
    /// the pinned one in sdkbox's cache (see [`crate::typecheck::compiler`]).
    pub tsc: Option<PathBuf>,
    /// Sign-in for remote clients over HTTP (OAuth; `--oauth-issuer` and `--public-url` on
    /// the command line): not `auth`, the provider credential's scheme.
    #[serde(default)]
    pub oauth: crate::signin::OAuthFile,
    /// Account linking: each signed-in user acts with their own provider account, which
    /// sdkbox links through the provider's OAuth (needs `[oauth]`).
    pub provider_oauth: Option<crate::linking::ProviderOAuthFile>,
    /// The command line's model settings, put over `search` (not read from the file).
    #[serde(skip)]
    pub model: ModelArgs,
    /// The command line's approval settings, put over `policy` (not read from the file).
    #[serde(skip)]
    pub approval: ApprovalArgs,
}

/// How approvals work, from the command line.
#[derive(Debug, Clone, clap::Args)]
pub struct ApprovalArgs {
    /// Deny every write (POST, PUT, PATCH, DELETE), whatever the policy says.
    #[arg(long)]
    pub read_only: bool,
    /// The rule for writes no other rule names: allow, approve or deny (default: the provider
    /// file's `[policy] writes`, else approve).
    #[arg(long, value_parser = parse_rule)]
    pub writes: Option<Rule>,
    /// Seconds a human has to decide about a request before it is refused.
    #[arg(long, default_value_t = 120)]
    pub approval_timeout_s: u64,
    /// Append every decision about a write to this file, as JSON lines (synced).
    #[arg(long)]
    pub audit_log: Option<PathBuf>,
    /// The approval page, for clients without elicitation: a loopback address it listens on
    /// (default), the public URL humans reach this server by (`https://mcp.example.com`:
    /// served by the HTTP server itself at /approve/, by any replica), or `off`.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub approval_page: String,
    /// Environment variable holding the key that seals 2026-07-28 approval request states
    /// (at least 32 bytes); set the same on every replica behind one load balancer. Default:
    /// a random key of this process.
    #[arg(long)]
    pub approval_key_env: Option<String>,
    /// Where approvals, write journals, approval-page questions and HTTP sessions are kept:
    /// `memory` (this process alone), or a Redis URL (`redis://host:6379`) every replica
    /// shares, with the same --approval-key-env.
    #[arg(long, env = "SDKBOX_STATE", default_value = "memory")]
    pub state: String,
}

impl Default for ApprovalArgs {
    /// The command line's defaults.
    fn default() -> Self {
        Self {
            read_only: false,
            writes: None,
            approval_timeout_s: DEFAULT_APPROVAL_TIMEOUT.as_secs(),
            audit_log: None,
            approval_page: "127.0.0.1:0".to_owned(),
            approval_key_env: None,
            state: "memory".to_owned(),
        }
    }
}

fn parse_rule(text: &str) -> Result<Rule, String> {
    text.parse()
}

/// `[skills]` in a provider file: the provider's own skill (written from its spec) and the
/// operator's, read once at startup.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillsFile {
    /// `false`: no skills at all (the extension is not offered).
    pub enabled: Option<bool>,
    /// A directory of the operator's skills: one folder per skill with its `SKILL.md`.
    pub dir: Option<PathBuf>,
}

/// `[network]` in a provider file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkFile {
    /// Origins where the provider hands out downloads (GitHub's artifacts and release assets
    /// answer 302 to another host): read by a redirect or the script, never written to,
    /// never sent the provider credential.
    #[serde(default)]
    pub download_origins: Vec<Url>,
}

/// `[search]` in a provider file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchFile {
    /// A directory with the embedding model (`config.json`, `tokenizer.json`,
    /// `model.safetensors`), for machines that cannot download it.
    pub model_dir: Option<PathBuf>,
}

/// The embedding model, from the command line.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ModelArgs {
    /// A directory with search_docs' embedding model (config.json, tokenizer.json,
    /// model.safetensors), for machines that cannot download it.
    #[arg(long, env = "SDKBOX_MODEL_DIR")]
    pub model_dir: Option<PathBuf>,
    /// Rank search_docs lexically only: no embedding model, no download.
    #[arg(long, env = "SDKBOX_NO_MODEL", value_parser = clap::builder::FalseyValueParser::new())]
    pub no_model: bool,
}

impl ModelArgs {
    /// The model these flags choose, over a provider file's `model_dir`.
    pub fn choice(&self, file_dir: Option<PathBuf>) -> ModelChoice {
        ModelChoice::from_settings(self.no_model, self.model_dir.clone().or(file_dir))
    }
}

/// Limits as written in a provider file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    /// Wall time of one execution.
    pub timeout_ms: Option<u64>,
    /// JavaScript heap of one execution.
    pub memory_mb: Option<usize>,
    /// Requests per execution.
    pub max_requests: Option<u32>,
    /// Result size, in characters.
    pub max_result_chars: Option<usize>,
    /// Size of a whole `execute` result as sent, in bytes.
    pub max_output_bytes: Option<usize>,
    /// Executions at once.
    pub workers: Option<usize>,
}

/// A spec given as text, with its guides, instead of a location.
pub struct Embedded {
    /// A name for messages.
    pub name: &'static str,
    /// The spec's text.
    pub spec: &'static str,
    /// Its guide sections.
    pub guides: Vec<crate::search::GuideSection>,
}

/// A configuration that cannot work, and why.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file cannot be read or parsed.
    #[error("cannot read the provider file {path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// A value is missing or wrong.
    #[error("{0}")]
    Invalid(String),
    /// The spec cannot be used.
    #[error(transparent)]
    Spec(#[from] crate::spec::SpecError),
    /// Egress cannot be set up.
    #[error(transparent)]
    Egress(#[from] crate::egress::EgressError),
    /// The docs index cannot be built.
    #[error(transparent)]
    Search(#[from] crate::search::SearchError),
    /// The worker pool cannot start.
    #[error(transparent)]
    Pool(#[from] crate::worker::PoolError),
}

impl ProviderFile {
    /// Reads a provider file; relative paths in it are made relative to its folder.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let failed = |reason: String| ConfigError::File {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| failed(e.to_string()))?;
        let mut file: Self = toml::from_str(&text).map_err(|e| failed(e.to_string()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        if let Some(spec) = &file.spec
            && !spec.contains("://")
            && Path::new(spec).is_relative()
        {
            file.spec = Some(dir.join(spec).display().to_string());
        }
        if let Some(guides) = &file.guides
            && guides.is_relative()
        {
            file.guides = Some(dir.join(guides));
        }
        if let Some(model) = &file.search.model_dir
            && model.is_relative()
        {
            file.search.model_dir = Some(dir.join(model));
        }
        if let Some(skills) = &file.skills.dir
            && skills.is_relative()
        {
            file.skills.dir = Some(dir.join(skills));
        }
        Ok(file)
    }

    /// Loads what a provider file describes: the spec (if any), egress settings with the
    /// secret read once, the limits and the guides. `embedded` gives a spec's text and
    /// guides directly (the bundled demo), and `secret` a secret directly instead of
    /// `secret_env`.
    pub async fn load(
        self,
        embedded: Option<Embedded>,
        secret: Option<String>,
    ) -> Result<Loaded, ConfigError> {
        let (spec, spec_source, embedded_guides) = match (embedded, &self.spec) {
            (Some(e), _) => (
                Some(crate::spec::parse(e.name, e.spec)?),
                None,
                Some(e.guides),
            ),
            (None, Some(source)) => (
                Some(crate::spec::load(source).await?),
                Some(source.clone()),
                None,
            ),
            (None, None) => (None, None, None),
        };
        for warning in spec.iter().flat_map(|s| &s.warnings) {
            tracing::warn!(%warning, "spec");
        }
        let api = match spec {
            Some(mut spec) => {
                crate::spec::apply_names(&mut spec.api.operations, &self.names)
                    .map_err(ConfigError::Invalid)?;
                Some(Arc::new(spec.api))
            }
            None => None,
        };
        let base_url = base_url(self.base_url, api.as_deref())?;
        let scheme = match (&self.auth, &api) {
            (Some(text), _) => text.parse::<AuthScheme>().map_err(ConfigError::Invalid)?,
            (None, Some(api)) => scheme_from_spec(api),
            (None, None) => AuthScheme::Bearer,
        };
        let secret = match (secret, &self.secret_env) {
            (Some(secret), _) => Some(secret),
            (None, Some(name)) => Some(
                std::env::var(name)
                    .ok()
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| {
                        ConfigError::Invalid(format!(
                            "the environment variable {name} is not set (secret_env)"
                        ))
                    })?,
            ),
            (None, None) => None,
        };
        if secret.is_some() {
            let from = if self.auth.is_some() {
                "auth"
            } else {
                "the spec"
            };
            eprintln!("sdkbox: the provider secret goes in {scheme} (from {from})");
        }
        let limits = &self.limits;
        let egress_config = EgressConfig {
            base_url,
            extra_origins: self.allowed_origins,
            download_origins: self.network.download_origins,
            credential: secret.map(|s| Credential {
                scheme,
                secret: Secret::new(s),
            }),
            limits: EgressLimits {
                max_requests: limits
                    .max_requests
                    .unwrap_or(EgressLimits::default().max_requests),
                ..EgressLimits::default()
            },
        };
        let defaults = ExecLimits::default();
        let exec_limits = ExecLimits {
            timeout: limits
                .timeout_ms
                .map_or(defaults.timeout, Duration::from_millis),
            memory_bytes: limits
                .memory_mb
                .map_or(defaults.memory_bytes, |mb| mb * 1024 * 1024),
            max_result_chars: limits.max_result_chars.unwrap_or(defaults.max_result_chars),
            max_output_bytes: limits.max_output_bytes.unwrap_or(defaults.max_output_bytes),
            ..defaults
        };
        if exec_limits.max_output_bytes < 8_192
            || exec_limits.max_output_bytes > crate::answer::MAX_ANSWER_BYTES
            || exec_limits.max_result_chars > exec_limits.max_output_bytes / 2
        {
            return Err(ConfigError::Invalid(format!(
                "limits.max_output_bytes ({}) must be from 8192 to {} and hold \
                 limits.max_result_chars ({}) twice over: the structured result and its text each \
                 get half",
                exec_limits.max_output_bytes,
                crate::answer::MAX_ANSWER_BYTES,
                exec_limits.max_result_chars
            )));
        }
        let guides_dir = self.guides.or_else(|| {
            let source = spec_source.filter(|s| !s.contains("://"))?;
            Path::new(&source).parent().map(|p| p.join("guides"))
        });
        let guides = match (embedded_guides, guides_dir) {
            (Some(guides), _) => guides,
            (None, Some(dir)) => read_guides(&dir).map_err(|e| {
                ConfigError::Invalid(format!("cannot read the guides in {}: {e}", dir.display()))
            })?,
            (None, None) => Vec::new(),
        };
        let overrides = PolicyOverrides {
            read_only: self.approval.read_only,
            writes: self.approval.writes,
        };
        let rules = match &api {
            Some(api) => Rules::build(
                Some(api.clone()),
                egress_config.base_url.clone(),
                &self.policy,
                overrides,
            )
            .map_err(ConfigError::Invalid)?,
            None => Rules::without_spec(egress_config.base_url.clone(), overrides),
        };
        let audit = match &self.approval.audit_log {
            Some(path) => Some(Arc::new(AuditLog::open(path).map_err(|e| {
                ConfigError::Invalid(format!("cannot open the audit log {}: {e}", path.display()))
            })?)),
            None => None,
        };
        let timeout = Duration::from_secs(self.approval.approval_timeout_s.max(1));
        let approval_key = match &self.approval.approval_key_env {
            Some(name) => Some(
                std::env::var(name)
                    .ok()
                    .filter(|key| key.len() >= 32)
                    .ok_or_else(|| {
                        ConfigError::Invalid(format!(
                            "the environment variable {name} must hold a key of at least 32 \
                             bytes (--approval-key-env)"
                        ))
                    })?
                    .into_bytes(),
            ),
            None => None,
        };
        if crate::state::is_shared(&self.approval.state) && approval_key.is_none() {
            return Err(ConfigError::Invalid(
                "a shared state store (--state) needs --approval-key-env: the same key on every \
                 replica, which names the deployment's records and seals its approvals"
                    .into(),
            ));
        }
        let key = Approvals::key_or_random(approval_key).map_err(ConfigError::Invalid)?;
        let state = StateStore::open(&self.approval.state, &crate::state::namespace(&key))
            .await
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let approvals = Approvals::new(Arc::new(rules), timeout, audit, key, state)
            .map_err(ConfigError::Invalid)?
            .with_longest_run(exec_limits.timeout);
        Ok(Loaded {
            approvals,
            approval_page: self.approval.approval_page.clone(),
            name: self.name,
            api,
            egress_config,
            limits: exec_limits,
            guides,
            workers: limits.workers,
            session_key_header: self.session_key_header,
            synonyms: checked_synonyms(self.synonyms)?,
            model: self.model.choice(self.search.model_dir),
        })
    }

    /// Builds the provider the MCP server serves: loads it, indexes its docs, starts the pool.
    pub async fn build(
        self,
        pool_config: PoolConfig,
        embedded: Option<Embedded>,
        secret: Option<String>,
    ) -> Result<Arc<Provider>, ConfigError> {
        let (typecheck_mode, tsc_path) = (self.typecheck.unwrap_or_default(), self.tsc.clone());
        let fairness = self.fairness.settings();
        let task_settings = self.tasks.settings();
        let skills_file = self.skills.clone();
        let loaded = self.load(embedded, secret).await?;
        let api = loaded.api.ok_or_else(|| {
            ConfigError::Invalid(
                "no spec: set `spec` in the provider file, or pass --spec or --demo".into(),
            )
        })?;
        let name = loaded.name.unwrap_or_else(|| api.title.clone());
        let skills = match skills_file.enabled.unwrap_or(true) {
            true => Some(Arc::new(
                crate::skills::Skills::build(
                    &name,
                    &api,
                    &loaded.guides,
                    skills_file.dir.as_deref(),
                )
                .map_err(|e| ConfigError::Invalid(e.to_string()))?,
            )),
            false => None,
        };
        let mut sections = loaded.guides;
        if let Some(skills) = &skills {
            sections.extend(skills.sections());
        }
        let docs = DocsIndex::build(api.clone(), sections)?.with_synonyms(loaded.synonyms);
        loaded
            .model
            .check()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        loaded.model.start(&docs);
        let mut pool_config = pool_config;
        pool_config.worker.runtime.memory_bytes = loaded.limits.memory_bytes;
        if let Some(workers) = loaded.workers {
            pool_config.workers = workers.max(1);
        }
        // Unless set, one caller runs on all workers but one, which stays for the others (all
        // of them when there is one caller). A run waiting for a human does not count.
        pool_config.max_running_per_caller = match fairness.executions_per_caller {
            usize::MAX if !fairness.one_caller => pool_config.workers.saturating_sub(1).max(1),
            set => set,
        };
        pool_config.max_calls_per_caller = if fairness.one_caller {
            usize::MAX
        } else {
            fairness.calls_per_caller
        };
        let sdk = Arc::new(Sdk::new(api.clone()));
        let typecheck = match typecheck_mode {
            crate::typecheck::Mode::Off => None,
            mode => crate::typecheck::TypeCheck::start(
                mode,
                tsc_path.as_deref(),
                sdk.clone(),
                loaded.egress_config.base_url.clone(),
                &fairness,
            )
            .await
            .map(Arc::new),
        };
        let tasks = task_settings.enabled.then(|| {
            let room = pool_config.workers.saturating_sub(1);
            crate::tasks::Tasks::new(task_settings, loaded.approvals.state().clone(), room)
        });
        Ok(Arc::new(Provider {
            typecheck,
            tasks,
            skills,
            name,
            docs,
            sdk,
            egress: Egress::new(loaded.egress_config.clone())?,
            egress_config: loaded.egress_config,
            pool: Pool::start(pool_config).await?,
            limits: loaded.limits,
            session_key_header: loaded.session_key_header,
            approvals: with_page(&loaded.approval_page, loaded.approvals).await?,
            searches: crate::server::search_queue(fairness.one_caller),
        }))
    }
}

/// A provider file, loaded and validated.
pub struct Loaded {
    /// The approval rules, grants and audit trail.
    pub approvals: Approvals,
    /// Where the approval page listens, or `off`.
    pub approval_page: String,
    /// Its name, if the file gives one.
    pub name: Option<String>,
    /// The API, when a spec was given.
    pub api: Option<Arc<Api>>,
    /// Egress settings, secret included.
    pub egress_config: EgressConfig,
    /// Limits of one execution.
    pub limits: ExecLimits,
    /// Guide sections to index.
    pub guides: Vec<crate::search::GuideSection>,
    /// Executions at once, if set.
    pub workers: Option<usize>,
    /// The header for clients' own keys, if set.
    pub session_key_header: Option<String>,
    /// Search synonyms: (what people say, the API's words).
    pub synonyms: Vec<(String, String)>,
    /// The embedding model search uses.
    pub model: ModelChoice,
}

/// Starts the approval page at `addr`, unless it is `off`; a URL serves it on the HTTP
/// server itself, at that public origin (behind a balancer, any replica answers).
async fn with_page(addr: &str, approvals: Approvals) -> Result<Approvals, ConfigError> {
    if addr == "off" {
        return Ok(approvals);
    }
    if addr.starts_with("https://") || addr.starts_with("http://") {
        let origin = Url::parse(addr).map_err(|e| {
            ConfigError::Invalid(format!("--approval-page `{addr}` is not a URL: {e}"))
        })?;
        return approvals
            .with_public_page(&origin)
            .map_err(|e| ConfigError::Invalid(format!("--approval-page: {e}")));
    }
    let addr: std::net::SocketAddr = addr.parse().map_err(|_| {
        ConfigError::Invalid(format!(
            "--approval-page `{addr}` is not an address like 127.0.0.1:8765 (or `off`)"
        ))
    })?;
    approvals
        .with_page(addr)
        .await
        .map_err(|e| ConfigError::Invalid(format!("cannot start the approval page: {e}")))
}

/// Synonyms as the search reads them, refusing entries it could never use.
fn checked_synonyms(
    synonyms: BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, ConfigError> {
    synonyms
        .into_iter()
        .map(|(said, means)| {
            let usable = |text: &str| text.chars().any(char::is_alphanumeric);
            if !usable(&said) || !usable(&means) {
                return Err(ConfigError::Invalid(format!(
                    "synonyms: `{said}` = \"{means}\" needs words on both sides, like \
                     chargeback = \"dispute\""
                )));
            }
            Ok((said, means))
        })
        .collect()
}

/// Flags that describe a provider, shared by `serve` and `exec`; they override a provider
/// file's values.
#[derive(Debug, Default, clap::Args)]
pub struct ProviderArgs {
    /// The OpenAPI spec (file or http(s) URL): `api.<group>.<method>` calls its operations.
    #[arg(long)]
    pub spec: Option<String>,
    /// The provider's base URL (default: the spec's first server); `api.request` paths and
    /// relative `fetch` URLs resolve here.
    #[arg(long)]
    pub base_url: Option<Url>,
    /// Another origin scripts may reach (repeatable).
    #[arg(long = "allow-origin")]
    pub allow_origins: Vec<Url>,
    /// An origin where the provider hands out downloads: read (a redirect followed there)
    /// without the credential (repeatable; `[network] download_origins` in a provider file).
    #[arg(long = "download-origin")]
    pub download_origins: Vec<Url>,
    /// How the secret is sent: bearer, basic, header:NAME or query:NAME (default: the
    /// spec's first security scheme, else bearer).
    #[arg(long)]
    pub auth: Option<String>,
    /// Environment variable holding the provider secret; read once, never shown to scripts.
    #[arg(long)]
    pub secret_env: Option<String>,
    /// A rename of a group or of one operation, as a provider file's `[names]` gives them
    /// (repeatable):
    /// `--name access=zeroTrust.access`.
    #[arg(long = "name", value_name = "GROUP=NEW", value_parser = group_rename)]
    pub names: Vec<(String, String)>,
    /// Approval rules and channels.
    #[command(flatten)]
    pub approval: ApprovalArgs,
    /// The search model.
    #[command(flatten)]
    pub model: ModelArgs,
}

/// Parses `GROUP=NEW`, a rename of a group (or of one operation, `group.method=NEW`) given on
/// the command line.
pub fn group_rename(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((from, to)) if !from.trim().is_empty() && !to.trim().is_empty() => {
            Ok((from.trim().to_owned(), to.trim().to_owned()))
        }
        _ => Err(format!(
            "`{text}` is not GROUP=NEW, like --name access=zeroTrust.access"
        )),
    }
}

impl ProviderArgs {
    /// Puts the given flags over `file`'s values.
    pub fn apply(self, file: &mut ProviderFile) {
        file.spec = self.spec.or(file.spec.take());
        file.base_url = self.base_url.or(file.base_url.take());
        file.allowed_origins.extend(self.allow_origins);
        file.network.download_origins.extend(self.download_origins);
        file.names.extend(self.names);
        file.auth = self.auth.or(file.auth.take());
        file.secret_env = self.secret_env.or(file.secret_env.take());
        file.approval = self.approval;
        file.model = self.model;
    }
}

/// The credential scheme the spec prefers (one a secret works with alone, bearer first);
/// bearer when it declares none.
fn scheme_from_spec(api: &Api) -> AuthScheme {
    match api.auth.first() {
        Some(AuthHint::Basic) => AuthScheme::Basic,
        Some(AuthHint::Header(name)) => AuthScheme::Header(name.clone()),
        Some(AuthHint::Query(name)) => AuthScheme::Query(name.clone()),
        Some(AuthHint::Bearer) | None => AuthScheme::Bearer,
    }
}

fn base_url(given: Option<Url>, api: Option<&Api>) -> Result<Url, ConfigError> {
    if let Some(url) = given {
        return Ok(url);
    }
    let server = api.and_then(|api| api.servers.first()).ok_or_else(|| {
        ConfigError::Invalid(
            "no base URL: there is no spec naming a server; set `base_url` in the provider file or pass --base-url"
                .into(),
        )
    })?;
    Url::parse(server).map_err(|_| {
        ConfigError::Invalid(format!(
            "the spec's server `{server}` is not an absolute URL: set `base_url` or pass --base-url"
        ))
    })
}
