//! LPS telemetry, shared by the coordinator and the crawler node.
//!
//! - [`init`] (a service) or [`init_cli`] (a command-line tool: export only, no log lines)
//!   installs the global `tracing` subscriber. [`init`]: text or JSON logs filtered by
//!   `RUST_LOG`, plus an OpenTelemetry layer exporting spans over OTLP/gRPC when
//!   `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set. The
//!   standard `OTEL_*` variables configure it (`OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`,
//!   `OTEL_TRACES_SAMPLER_ARG`, `OTEL_RESOURCE_ATTRIBUTES`, …). Export is batched in the
//!   background: a collector that is down never blocks the service, spans are dropped.
//! - W3C trace context: [`current_traceparent`] captures the current span's context as
//!   `traceparent`/`tracestate` strings (stored with jobs, sent in `Assign`),
//!   [`set_parent`] continues such a context in a span, and [`parent_from_metadata`]
//!   reads a caller's `traceparent` from gRPC metadata.
//! - [`record_span`] exports a span whose start lies in the past (the time a job waited in
//!   the queue is only known when it is claimed); `tracing` spans always start now.
//! - Span conventions for a trace viewer: [`fail`] ends a span in failure with its message
//!   (status ERROR, an `exception` event); `otel.kind = "server"` / `"client"` /
//!   `"producer"` / `"consumer"` on the spans at the edges between services;
//!   [`inject_metadata`] sends the current span's context with an outgoing gRPC call. The
//!   resource names the build (`service.version`) and the process (`service.instance.id`,
//!   a UUID per start) unless `OTEL_RESOURCE_ATTRIBUTES` does.
//!
//! Exported spans are short. A span that lives as long as a loop, a stream or the process
//! (a reaper, a node session) is declared with the [`LOG_ONLY`] field: it gives its log
//! lines context but is not exported, so each iteration's spans are roots of their own
//! instead of children of a parent a collector would only see at shutdown. thirtyfour's
//! own `run_webdriver_cmd` spans are not exported either (they name no command; the node
//! exports its own `webdriver.<command>` spans).
//!
//! - [`exposition`]: what both services' `/metrics` serve — the Prometheus text format
//!   0.0.4 unless the scraper asks for OpenMetrics, plus process and build-info families.
//!
//! Secrets: nothing here logs or exports a setting's value; services must not put tokens,
//! proxy credentials or API keys in span fields either (the end-to-end trace test greps
//! every exported span and log line for the secrets it configured).

pub mod exposition;

use std::{collections::HashMap, time::SystemTime};

use opentelemetry::{
    Context, Key, KeyValue,
    propagation::{Extractor, Injector, TextMapPropagator as _},
    trace::{Span as _, Status, Tracer as _, TracerProvider as _},
};
use opentelemetry_sdk::{Resource, propagation::TraceContextPropagator, trace::SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::{
    EnvFilter, Layer as _, filter::filter_fn, layer::SubscriberExt as _,
    util::SubscriberInitExt as _,
};

/// The field that marks a long-lived span as one for logs only (see the crate docs):
/// `info_span!("reaper", log_only = true)`, `#[instrument(fields(log_only = true))]`.
/// Only its presence counts. NB: create such a span with `parent: None` when it may start
/// inside an exported span — a child keeps its parent open, so the parent would not be
/// exported before the loop ends.
pub const LOG_ONLY: &str = "log_only";

/// Whether the OTLP layer exports spans and events of `meta`.
fn exported(meta: &tracing::Metadata<'_>) -> bool {
    !meta.is_span()
        || !(meta.fields().field(LOG_ONLY).is_some() || meta.target().starts_with("thirtyfour"))
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// Keeps the exporter alive; [`Telemetry::shutdown`] flushes it.
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Flushes and stops the exporter (bounded by the SDK's own timeouts).
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            tracing::warn!(error = %e, "trace exporter shutdown failed");
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("OTLP exporter: {0}")]
    Exporter(String),
    #[error("a global tracing subscriber is already installed")]
    AlreadyInstalled,
}

fn otlp_configured() -> bool {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var(v).is_ok_and(|s| !s.is_empty()))
}

/// Builds the OTLP tracer provider when configured by the environment.
pub fn tracer_provider(default_service_name: &str) -> Result<Option<SdkTracerProvider>, Error> {
    if !otlp_configured() {
        return Ok(None);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .build()
        .map_err(|e| Error::Exporter(e.to_string()))?;
    let mut resource = Resource::builder();
    if std::env::var("OTEL_SERVICE_NAME").is_err() {
        resource = resource.with_service_name(default_service_name.to_owned());
    }
    // What OTEL_RESOURCE_ATTRIBUTES says wins over these defaults.
    let detected = Resource::builder().build();
    let unset = |key: &'static str| detected.get(&Key::from_static_str(key)).is_none();
    if unset("service.version") {
        resource =
            resource.with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    }
    if unset("service.instance.id") {
        resource = resource.with_attribute(KeyValue::new(
            "service.instance.id",
            uuid::Uuid::new_v4().to_string(),
        ));
    }
    Ok(Some(
        SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build(),
    ))
}

/// Installs logging and (when configured) trace export for `service_name`.
pub fn init(service_name: &str, format: LogFormat) -> Result<Telemetry, Error> {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let provider = tracer_provider(service_name)?;
    if let Some(provider) = &provider {
        // For `record_span`: the same exporter and resource as the `tracing` layer.
        opentelemetry::global::set_tracer_provider(provider.clone());
    }
    let otel = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer(service_name.to_owned()))
            .with_filter(filter_fn(exported))
    });
    let registry = tracing_subscriber::registry().with(filter).with(otel);
    let installed = match format {
        // NB: colour codes only for a terminal: a log file or collector gets plain text.
        LogFormat::Text => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout())),
            )
            .try_init(),
        LogFormat::Json => registry
            .with(tracing_subscriber::fmt::layer().json().flatten_event(true))
            .try_init(),
    };
    installed.map_err(|_| Error::AlreadyInstalled)?;
    Ok(Telemetry { provider })
}

/// Installs trace export only, for a command-line tool whose output is its own: no log
/// lines (a CLI prints its own errors), spans exported when `OTEL_*` says so.
pub fn init_cli(service_name: &str) -> Result<Telemetry, Error> {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let provider = tracer_provider(service_name)?;
    let otel = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer(service_name.to_owned()))
            .with_filter(filter_fn(exported))
    });
    // `RUST_LOG` picks the spans, as in the services (not h2's trace spans).
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::registry()
        .with(filter)
        .with(otel)
        .try_init()
        .map_err(|_| Error::AlreadyInstalled)?;
    Ok(Telemetry { provider })
}

struct Carrier(HashMap<String, String>);

impl Injector for Carrier {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), value);
    }
}

impl Extractor for Carrier {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// The W3C context of the current span: `(traceparent, tracestate)`, or `None` when the
/// span is not sampled into a trace (no exporter, or not recording).
pub fn current_traceparent() -> Option<(String, String)> {
    let cx = tracing::Span::current().context();
    let mut carrier = Carrier(HashMap::new());
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    let parent = carrier.0.remove("traceparent")?;
    Some((parent, carrier.0.remove("tracestate").unwrap_or_default()))
}

/// Adds the current span's W3C context to an outgoing call's metadata (nothing when the
/// span is not traced).
pub fn inject_metadata(metadata: &mut tonic::metadata::MetadataMap) {
    let Some((parent, state)) = current_traceparent() else {
        return;
    };
    if let Ok(v) = parent.parse() {
        metadata.insert("traceparent", v);
    }
    if !state.is_empty()
        && let Ok(v) = state.parse()
    {
        metadata.insert("tracestate", v);
    }
}

/// Ends `span` in failure: status ERROR with `message` as its description, and an
/// `exception` event carrying the message, as trace viewers expect. A no-op for a span
/// that is not exported.
pub fn fail(span: &tracing::Span, message: impl Into<String>) {
    let message = message.into();
    span.add_event(
        "exception",
        vec![KeyValue::new("exception.message", message.clone())],
    );
    span.set_status(Status::error(message));
}

/// The context carried by W3C `traceparent`/`tracestate` strings (invalid ones give an
/// empty context).
pub fn context_from(traceparent: &str, tracestate: &str) -> Context {
    let mut map = HashMap::new();
    map.insert("traceparent".to_owned(), traceparent.to_owned());
    if !tracestate.is_empty() {
        map.insert("tracestate".to_owned(), tracestate.to_owned());
    }
    TraceContextPropagator::new().extract(&Carrier(map))
}

/// Makes `span` a child of the W3C context in `traceparent` (no-op when it is empty or
/// invalid).
pub fn set_parent(span: &tracing::Span, traceparent: &str, tracestate: &str) {
    if traceparent.is_empty() {
        return;
    }
    let _ = span.set_parent(context_from(traceparent, tracestate));
}

/// Exports a finished span `name` from `start` to `end`, a child of the W3C context in
/// `traceparent` (a no-op when it is empty or invalid: a span outside any trace is noise,
/// or when no exporter is installed).
pub fn record_span(
    name: &'static str,
    traceparent: &str,
    tracestate: &str,
    start: SystemTime,
    end: SystemTime,
    attributes: Vec<KeyValue>,
) {
    if traceparent.is_empty() {
        return;
    }
    let parent = context_from(traceparent, tracestate);
    {
        use opentelemetry::trace::TraceContextExt as _;
        if !parent.span().span_context().is_valid() {
            return;
        }
    }
    let tracer = opentelemetry::global::tracer(TRACER_NAME);
    let mut span = tracer
        .span_builder(name)
        .with_start_time(start.min(end))
        .with_attributes(attributes)
        .start_with_context(&tracer, &parent);
    span.end_with_timestamp(end);
}

/// The instrumentation scope of spans made by [`record_span`].
const TRACER_NAME: &str = "lps-telemetry";

/// The caller's `traceparent`/`tracestate` gRPC metadata, if it sent a valid one.
pub fn parent_from_metadata(metadata: &tonic::metadata::MetadataMap) -> Option<(String, String)> {
    let parent = metadata.get("traceparent")?.to_str().ok()?;
    if !valid_traceparent(parent) {
        return None;
    }
    let state = metadata
        .get("tracestate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    Some((parent.to_owned(), state.chars().take(512).collect()))
}

/// `00-<32 hex>-<16 hex>-<2 hex>`, with non-zero ids.
pub fn valid_traceparent(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    let hex = |p: &str, n: usize| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit());
    parts.len() == 4
        && hex(parts[0], 2)
        && parts[0] != "ff"
        && hex(parts[1], 32)
        && parts[1].bytes().any(|b| b != b'0')
        && hex(parts[2], 16)
        && parts[2].bytes().any(|b| b != b'0')
        && hex(parts[3], 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_validation() {
        assert!(valid_traceparent(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        ));
        assert!(!valid_traceparent(
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01"
        ));
        assert!(!valid_traceparent("garbage"));
        assert!(!valid_traceparent(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"
        ));
    }

    #[test]
    fn log_only_and_thirtyfour_spans_are_not_exported() {
        use std::sync::{Arc, Mutex};

        use tracing_subscriber::layer::Context as LayerContext;

        /// Records the names of the spans it sees.
        struct Names(Arc<Mutex<Vec<String>>>);
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Names {
            fn on_new_span(
                &self,
                attrs: &tracing::span::Attributes<'_>,
                _: &tracing::span::Id,
                _: LayerContext<'_, S>,
            ) {
                self.0
                    .lock()
                    .unwrap()
                    .push(attrs.metadata().name().to_owned());
            }
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry()
            .with(Names(seen.clone()).with_filter(filter_fn(exported)));
        tracing::subscriber::with_default(subscriber, || {
            let _loop = tracing::info_span!("reaper", log_only = true).entered();
            let _tick = tracing::info_span!("queue.reap").entered();
            let _cmd =
                tracing::info_span!(target: "thirtyfour::session::http", "run_webdriver_cmd")
                    .entered();
        });
        assert_eq!(*seen.lock().unwrap(), ["queue.reap"]);
    }

    #[test]
    fn context_round_trips_through_strings() {
        use opentelemetry::trace::TraceContextExt as _;
        let cx = context_from(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "k=v",
        );
        let sc = cx.span().span_context().clone();
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
        assert!(sc.is_sampled());
        assert!(!context_from("bad", "").span().span_context().is_valid());
    }
}
