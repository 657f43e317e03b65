//! The HTTP client behind the bridge: reqwest following no redirect (the session follows a
//! read's, each hop checked and decided again), a resolver that enforces the origin policy,
//! and the credential added last.

use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, redirect};

use url::Url;

use super::auth::Credential;
use super::policy::OriginPolicy;
use super::resolver::{GuardedResolver, RefusedAddress};
use super::scrub::Scrubber;
use super::{EgressConfig, EgressError, EgressLimits};

/// A request that passed every check and may be sent (and re-sent, for retries).
#[derive(Debug, Clone)]
pub struct CheckedRequest {
    pub method: Method,
    pub url: Url,
    pub headers: HeaderMap,
    pub body: Option<bytes::Bytes>,
    /// Sent without the credential: a hop to a download origin.
    pub anonymous: bool,
}

/// What came back, before it is scrubbed and handed to the script.
pub struct RawResponse {
    pub status: reqwest::StatusCode,
    pub url: Url,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// The long-lived part of egress: configuration, HTTP client and the runtime it runs on.
/// Cheap to clone: the HTTP client's connections are shared.
#[derive(Clone)]
pub struct Client {
    pub config: EgressConfig,
    policy: Arc<OriginPolicy>,
    downloads: OriginPolicy,
    scrubber: Scrubber,
    /// Follows no redirect: each hop is a request of its own, checked, decided and logged by
    /// the session.
    http: reqwest::Client,
    /// See [`super::Egress::identity`].
    identity: u64,
    pub runtime: tokio::runtime::Handle,
}

/// A keyed hash of the base URL and the credential; the key is random per process.
fn identity_of(config: &EgressConfig) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static KEY: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    let mut hasher = KEY.get_or_init(Default::default).build_hasher();
    hasher.write(config.base_url.as_str().as_bytes());
    if let Some(credential) = &config.credential {
        credential.hash_into(&mut hasher);
    }
    hasher.finish()
}

/// How long an idle connection to the provider is kept.
const POOL_IDLE: Duration = Duration::from_secs(600);

impl Client {
    pub fn new(config: EgressConfig) -> Result<Self, EgressError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            EgressError::Setup("egress must be created inside a tokio runtime".into())
        })?;
        let policy = Arc::new(OriginPolicy::new(
            std::iter::once(&config.base_url)
                .chain(&config.extra_origins)
                .chain(&config.download_origins),
        )?);
        let reachable =
            OriginPolicy::new(std::iter::once(&config.base_url).chain(&config.extra_origins))?;
        let downloads = OriginPolicy::new(
            config
                .download_origins
                .iter()
                .filter(|url| reachable.check(url).is_err()),
        )?;
        // Connections to the provider stay warm across the minutes between a model's calls
        // (reqwest's default drops them after 90 s idle): kept for 10 minutes, HTTP/2 ones
        // pinged every 30 s while idle and TCP ones kept alive, so a call after a pause does
        // not pay a new TLS handshake.
        let http = reqwest::Client::builder()
            .pool_idle_timeout(POOL_IDLE)
            .http2_keep_alive_interval(Duration::from_secs(30))
            .http2_keep_alive_while_idle(true)
            .tcp_keepalive(Duration::from_secs(60))
            .redirect(redirect::Policy::none())
            .dns_resolver(Arc::new(GuardedResolver::new(policy.clone())))
            .no_proxy()
            .user_agent(concat!("sdkbox/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| EgressError::Setup(e.to_string()))?;
        let scrubber = config
            .credential
            .as_ref()
            .map_or_else(Scrubber::default, Credential::scrubber);
        let identity = identity_of(&config);
        Ok(Self {
            config,
            policy,
            downloads,
            scrubber,
            identity,
            http,
            runtime,
        })
    }

    pub fn identity(&self) -> u64 {
        self.identity
    }

    /// Who this client acts as, under `key`: the same for every process that shares the key.
    pub fn keyed_identity(&self, key: &[u8]) -> u64 {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        let mut feed = |bytes: &[u8]| {
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(bytes);
        };
        feed(key);
        feed(self.config.base_url.as_str().as_bytes());
        if let Some(credential) = &self.config.credential {
            credential.feed(&mut feed);
        }
        let digest = hash.finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_le_bytes(first)
    }

    pub fn policy(&self) -> &OriginPolicy {
        &self.policy
    }

    /// Whether `url` is on an origin only a read's redirect may reach (a download origin
    /// that is not also an allowed origin).
    pub fn download_only(&self, url: &Url) -> bool {
        self.downloads.check(url).is_ok()
    }

    pub fn scrubber(&self) -> &Scrubber {
        &self.scrubber
    }

    pub fn limits(&self) -> &EgressLimits {
        &self.config.limits
    }

    /// Sends one attempt and reads the body up to the size limit, counting every byte
    /// against the execution's `received` total as it arrives.
    pub async fn send_once(
        &self,
        request: &CheckedRequest,
        timeout: Duration,
        received: &std::sync::atomic::AtomicUsize,
    ) -> Result<RawResponse, EgressError> {
        let shown = request.url.to_string();
        let mut builder = self
            .http
            .request(request.method.clone(), request.url.clone())
            .headers(request.headers.clone())
            .timeout(timeout);
        if let Some(body) = &request.body {
            builder = builder.body(body.clone());
        }
        if let Some(credential) = self
            .config
            .credential
            .as_ref()
            .filter(|_| !request.anonymous)
        {
            builder = credential.apply(builder);
        }
        let mut response = builder
            .send()
            .await
            .map_err(|e| self.classify(e, &shown, timeout))?;
        let limit = self.config.limits.max_response_bytes;
        let too_large = || EgressError::ResponseTooLarge {
            url: shown.clone(),
            limit,
        };
        if response.content_length().is_some_and(|n| n > limit as u64) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.classify(e, &shown, timeout))?
        {
            if body.len() + chunk.len() > limit {
                return Err(too_large());
            }
            let total = self.config.limits.max_total_response_bytes;
            let before = received.fetch_add(chunk.len(), std::sync::atomic::Ordering::SeqCst);
            if before + chunk.len() > total {
                return Err(EgressError::ResponseBudget { limit: total });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(RawResponse {
            status: response.status(),
            url: response.url().clone(),
            headers: response.headers().clone(),
            body,
        })
    }

    /// Turns a reqwest failure into the error the script sees, secret scrubbed.
    fn classify(&self, error: reqwest::Error, url: &str, timeout: Duration) -> EgressError {
        let mut source = error.source();
        while let Some(cause) = source {
            if let Some(refused) = cause.downcast_ref::<RefusedAddress>() {
                return EgressError::PrivateAddress {
                    host: refused.host.clone(),
                };
            }
            source = cause.source();
        }
        if error.is_timeout() {
            return EgressError::Timeout {
                url: url.to_owned(),
                millis: timeout.as_millis(),
            };
        }
        let mut reason = String::new();
        let mut source = error.source();
        while let Some(cause) = source {
            reason.push_str(": ");
            reason.push_str(&cause.to_string());
            source = cause.source();
        }
        let reason = format!("{}{reason}", error.without_url());
        EgressError::Network {
            url: url.to_owned(),
            reason,
        }
    }
}

/// Parses a header pair from the script, refusing malformed names and values.
pub fn header_pair(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), EgressError> {
    let invalid = || EgressError::InvalidHeader {
        name: name.to_owned(),
    };
    let name_ok = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid())?;
    let value_ok = HeaderValue::from_str(value).map_err(|_| invalid())?;
    Ok((name_ok, value_ok))
}
