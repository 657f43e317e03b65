//! OpenTelemetry traces, for operators who follow a call across services: each call, its type
//! check, each approval wait and each provider request is a span, exported over OTLP (HTTP,
//! protobuf) when an endpoint is configured, and nothing at all otherwise.
//!
//! The spans are `tracing` spans (see [`span`]); this module only bridges them to an OTLP
//! exporter. The exporter is the OpenTelemetry project's own: it reads the standard
//! `OTEL_EXPORTER_OTLP_*` settings (headers, timeout, compression) and the resource's
//! (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), batches spans on its own thread and drops
//! what does not fit its bounded queue, so a collector that is slow or gone never holds a call.

use std::time::Duration;

use anyhow::{Context, Result};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;

/// The span names sdkbox exports, one place for each concern: a tool call, its type check,
/// a wait for a human's approval, one provider request.
pub mod span {
    /// A tool call (`search_docs` or `execute`), from its arrival to its result.
    pub const CALL: &str = "call";
    /// A script's type check, from its start to its verdict.
    pub const TYPECHECK: &str = "typecheck";
    /// A write or read waiting for a human's answer.
    pub const APPROVAL: &str = "approval";
    /// One request to the provider, retries included, decided and sent by the egress.
    pub const PROVIDER_REQUEST: &str = "provider_request";
}

/// The traces endpoint's own setting, which wins over the base endpoint as the standard says.
const TRACES_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";

/// How long the last spans may take to leave at exit.
const FLUSH_AT_EXIT: Duration = Duration::from_secs(5);

/// Where traces go: the OTLP traces URL, from `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as given,
/// else from the base endpoint (the `--otlp-endpoint` flag or `OTEL_EXPORTER_OTLP_ENDPOINT`)
/// with `/v1/traces` appended; `None` when neither is set, and traces are off.
pub fn traces_endpoint(base: Option<&str>) -> Option<String> {
    chosen_endpoint(std::env::var(TRACES_ENDPOINT_ENV).ok(), base)
}

/// The traces URL from the traces setting (`specific`) or the base endpoint.
fn chosen_endpoint(specific: Option<String>, base: Option<&str>) -> Option<String> {
    let specific = specific.filter(|value| !value.trim().is_empty());
    specific.or_else(|| {
        base.map(str::trim)
            .filter(|base| !base.is_empty())
            .map(|base| format!("{}/v1/traces", base.trim_end_matches('/')))
    })
}

/// The exporting side of traces, kept for the process's life: dropping it sends the spans
/// still queued (within a few seconds) and stops the exporter.
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// Starts exporting to `endpoint` (a full OTLP/HTTP traces URL). Fails on a URL the
    /// exporter cannot use; a collector that does not answer is only logged, later.
    pub fn start(endpoint: &str) -> Result<Self> {
        let url = url::Url::parse(endpoint)
            .with_context(|| format!("the OTLP endpoint `{endpoint}` is not a URL"))?;
        anyhow::ensure!(
            matches!(url.scheme(), "http" | "https"),
            "the OTLP endpoint `{endpoint}` is not http or https: sdkbox exports traces over \
             OTLP/HTTP (protobuf), as a collector takes them on port 4318"
        );
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(endpoint)
            .build()
            .context("cannot start the OTLP trace exporter")?;
        let mut resource = opentelemetry_sdk::Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("sdkbox");
        }
        let resource = resource
            .with_attribute(opentelemetry::KeyValue::new(
                "service.version",
                env!("CARGO_PKG_VERSION"),
            ))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        Ok(Self { provider })
    }

    /// The `tracing` layer that turns sdkbox's spans (info and above) into exported spans;
    /// other crates' spans and every event stay out of traces.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        let only_ours = tracing_subscriber::filter::Targets::new()
            .with_target("sdkbox", tracing::Level::INFO)
            .with_default(tracing::level_filters::LevelFilter::OFF);
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("sdkbox"))
            .with_filter(only_ours)
    }
}

impl Drop for Traces {
    fn drop(&mut self) {
        if let Err(error) = self.provider.shutdown_with_timeout(FLUSH_AT_EXIT) {
            tracing::warn!(%error, "traces still queued at exit were not all exported");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_endpoint_gets_the_traces_path_once_and_the_traces_setting_wins() {
        let base = Some("http://collector:4318/");
        assert_eq!(
            chosen_endpoint(None, base).as_deref(),
            Some("http://collector:4318/v1/traces")
        );
        let specific = Some("http://other:4318/custom".to_owned());
        assert_eq!(
            chosen_endpoint(specific, base).as_deref(),
            Some("http://other:4318/custom")
        );
        assert_eq!(chosen_endpoint(Some(" ".into()), Some("  ")), None);
        assert_eq!(chosen_endpoint(None, None), None);
    }

    #[test]
    fn an_endpoint_that_is_not_http_is_refused_saying_so() {
        let error = Traces::start("grpc://collector:4317")
            .err()
            .expect("refused")
            .to_string();
        assert!(error.contains("OTLP/HTTP"), "{error}");
    }
}
