//! SearchService adapter: checks the client token, validates with `lps_proto::model`,
//! calls [`Queue::enqueue`] and [`Searches`], and translates the answers to `pb::`.
//!
//! WatchSearch is a task per call that polls the search's version (one cheap indexed query
//! every `watch_poll`, default 200 ms) and reads the full status only when it moved. It
//! ends after the final status, when the client goes away (the response stream is dropped),
//! or on shutdown (with UNAVAILABLE: the client resumes with `after_version`).

use std::{sync::Arc, time::Duration};

use lps_proto::{
    model::{FieldError, ProductSpec, SearchRequest, timestamp_from_pb, timestamp_to_pb},
    pb::{self, search_service_server::SearchServiceServer},
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, metadata::MetadataMap};
use tracing::{Instrument as _, info, info_span, warn};

use super::{
    invalid,
    limits::{Admitted, ClientLimits},
    paging, refused, status,
};
use crate::{
    auth::{Caller, Tokens},
    delivery::{Destinations, Outbox},
    queue::{EnqueueContext, Queue},
    search::{
        self, AttemptInfo, HistoryCursor, HistoryQuery, JobInfo, PriceHistoryEntry, SearchStatus,
        SearchSummary, Searches,
    },
};

/// Metadata a caller may set to name itself in the search record (not a secret; at most
/// 64 printable ASCII characters are kept). Without it the peer's IP address is recorded.
pub const CALLER_HEADER: &str = "x-lps-caller";

/// ListSearches page size when the caller gives none, and the most it may ask for.
const DEFAULT_LIST_PAGE: u32 = 50;
const MAX_LIST_PAGE: u32 = 500;

/// How often a watcher looks for a new version by default.
pub const DEFAULT_WATCH_POLL: Duration = Duration::from_millis(200);

/// Consecutive failed version polls (transient database errors) a watcher rides out before
/// it ends the stream with UNAVAILABLE.
const WATCH_MAX_POLL_FAILURES: u32 = 25;

/// The SearchService implementation.
#[derive(Debug, Clone)]
pub struct SearchApi {
    queue: Queue,
    searches: Searches,
    tokens: Arc<Tokens>,
    limits: ClientLimits,
    watch_poll: Duration,
    shutdown: CancellationToken,
    /// The destinations a search may name (none by default).
    destinations: Arc<Destinations>,
    outbox: Outbox,
}

impl SearchApi {
    pub fn new(queue: Queue, tokens: Arc<Tokens>) -> Self {
        Self {
            searches: Searches::new(queue.clone()),
            outbox: Outbox::new(queue.pool().clone()),
            queue,
            tokens,
            limits: ClientLimits::default(),
            watch_poll: DEFAULT_WATCH_POLL,
            shutdown: CancellationToken::new(),
            destinations: Arc::default(),
        }
    }

    /// The destinations searches may name (`LPS_DESTINATIONS`).
    #[must_use]
    pub fn with_destinations(mut self, destinations: Destinations) -> Self {
        self.destinations = Arc::new(destinations);
        self
    }

    /// `destinations[i]` when a named destination is not configured.
    fn check_destinations(&self, req: &SearchRequest) -> Result<(), Status> {
        check_destinations(&self.destinations, &req.destinations)
    }

    /// Per-client rate and concurrency limits (default: none).
    #[must_use]
    pub fn with_limits(mut self, limits: ClientLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The caller of a call, admitted under its limits.
    fn admit<T>(&self, request: &Request<T>) -> Result<(Caller, Admitted), Status> {
        let caller = self.tokens.caller(request.metadata())?;
        let admitted = self.limits.admit(&caller.name)?;
        Ok((caller, admitted))
    }

    /// A search's status for `caller`: another client's search is NOT_FOUND to it, as if
    /// there were none.
    async fn status_for(&self, caller: &Caller, id: i64) -> Result<SearchStatus, Status> {
        let s = self.searches.status(id).await.map_err(status)?;
        match caller.scope() {
            Some(client) if s.client != client => {
                Err(status(crate::error::Error::NotFound("search", id)))
            }
            _ => Ok(s),
        }
    }

    /// How often watchers poll for a new version.
    #[must_use]
    pub fn with_watch_poll(mut self, poll: Duration) -> Self {
        self.watch_poll = poll.max(Duration::from_millis(10));
        self
    }

    /// Open WatchSearch streams end (UNAVAILABLE) when `shutdown` is cancelled, so a
    /// graceful server shutdown does not wait for searches to finish.
    #[must_use]
    pub fn with_shutdown(mut self, shutdown: CancellationToken) -> Self {
        self.shutdown = shutdown;
        self
    }

    pub fn into_service(self) -> SearchServiceServer<Self> {
        SearchServiceServer::new(self)
    }
}

#[tonic::async_trait]
impl pb::search_service_server::SearchService for SearchApi {
    async fn search(
        &self,
        request: Request<pb::SearchRequest>,
    ) -> Result<Response<pb::SearchResponse>, Status> {
        let (caller, _admitted) = self.admit(&request)?;
        let mut ctx = enqueue_context(&request);
        ctx.client = caller.name.to_string();
        let req = SearchRequest::try_from(request.into_inner()).map_err(invalid)?;
        self.check_destinations(&req)?;
        let span = info_span!(
            "grpc.search",
            otel.kind = "server",
            rpc.system = "grpc",
            rpc.service = "lps.v1.SearchService",
            rpc.method = "Search",
            products = req.products.len() as i64,
            search.id = tracing::field::Empty,
            client = %caller.name,
            grpc.code = tracing::field::Empty,
        );
        // One search is one trace: continue the caller's, and store this span's context
        // with the jobs so the nodes' work hangs under it.
        if let Some(parent) = &ctx.traceparent {
            lps_telemetry::set_parent(&span, parent, ctx.tracestate.as_deref().unwrap_or(""));
        }
        let result: Result<Response<pb::SearchResponse>, Status> = async {
            if let Some((parent, state)) = lps_telemetry::current_traceparent() {
                ctx.traceparent = Some(parent);
                ctx.tracestate = Some(state).filter(|s| !s.is_empty());
            }
            let accepted = self.queue.enqueue(&req, &ctx).await.map_err(status)?;
            tracing::Span::current().record("search.id", accepted.search_id);
            // NB: the search is stored: a failed read of its version must not turn the
            // answer into an error (the client would retry a search it has). Version 0
            // means "send the current status first" to WatchSearch.
            let version = match self.searches.version(accepted.search_id).await {
                Ok(version) => version.unwrap_or_default(),
                Err(e) => {
                    warn!(error = %e, "search stored; its version could not be read, answering 0");
                    0
                }
            };
            info!(
                items = accepted.items.len(),
                replayed = accepted.replayed,
                caller = ctx.caller.as_deref().unwrap_or(""),
                "search accepted"
            );
            Ok(Response::new(pb::SearchResponse {
                search_id: accepted.search_id,
                items: accepted
                    .items
                    .iter()
                    .map(|i| pb::SearchItem {
                        product_index: u32::try_from(i.product_index).unwrap_or(u32::MAX),
                        mall: i.mall.to_string(),
                        disposition: pb::Disposition::from(i.disposition) as i32,
                        job_id: i.job_id,
                    })
                    .collect(),
                replayed: accepted.replayed,
                version,
            }))
        }
        .instrument(span.clone())
        .await;
        if let Err(status) = &result {
            span.record("grpc.code", tracing::field::debug(status.code()));
            lps_telemetry::fail(&span, status.message());
        }
        result
    }

    async fn get_search(
        &self,
        request: Request<pb::GetSearchRequest>,
    ) -> Result<Response<pb::SearchStatus>, Status> {
        let (caller, _admitted) = self.admit(&request)?;
        let id = positive("search_id", request.into_inner().search_id)?;
        let status = self.status_for(&caller, id).await?;
        let mut pb = pb::SearchStatus::from(&status);
        pb.deliveries = self
            .outbox
            .for_search(id)
            .await
            .map_err(super::status)?
            .iter()
            .map(pb::Delivery::from)
            .collect();
        Ok(Response::new(pb))
    }

    type WatchSearchStream = ReceiverStream<Result<pb::SearchStatus, Status>>;

    async fn watch_search(
        &self,
        request: Request<pb::WatchSearchRequest>,
    ) -> Result<Response<Self::WatchSearchStream>, Status> {
        let (caller, admitted) = self.admit(&request)?;
        let req = request.into_inner();
        let id = positive("search_id", req.search_id)?;
        // NB: read the first status here, so an unknown search is a plain NOT_FOUND status
        // rather than a stream that fails.
        let first = self.status_for(&caller, id).await?;
        let (tx, rx) = mpsc::channel(4);
        let watcher = Watcher {
            _admitted: admitted,
            searches: self.searches.clone(),
            search_id: id,
            poll: self.watch_poll,
            shutdown: self.shutdown.clone(),
            tx,
        };
        tokio::spawn(
            watcher.run(first, req.after_version).instrument(
                info_span!(parent: None, "search.watch", search.id = id, log_only = true),
            ),
        );
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn cancel_search(
        &self,
        request: Request<pb::CancelSearchRequest>,
    ) -> Result<Response<pb::CancelSearchResponse>, Status> {
        let (caller, _admitted) = self.admit(&request)?;
        let id = positive("search_id", request.into_inner().search_id)?;
        let report = self
            .searches
            .cancel(id, caller.scope())
            .await
            .map_err(status)?;
        info!(
            search.id = id,
            cancelled_queued = report.cancelled_queued,
            cancelling_running = report.cancelling_running,
            kept_shared = report.kept_shared,
            "search cancelled"
        );
        Ok(Response::new(pb::CancelSearchResponse {
            cancelled_queued: report.cancelled_queued,
            cancelling_running: report.cancelling_running,
            kept_shared: report.kept_shared,
        }))
    }

    async fn get_job(
        &self,
        request: Request<pb::GetJobRequest>,
    ) -> Result<Response<pb::Job>, Status> {
        let (caller, _admitted) = self.admit(&request)?;
        let id = positive("job_id", request.into_inner().job_id)?;
        let job = self
            .searches
            .job(id, caller.scope())
            .await
            .map_err(status)?;
        Ok(Response::new(job_to_pb(&job)))
    }

    async fn get_price_history(
        &self,
        request: Request<pb::GetPriceHistoryRequest>,
    ) -> Result<Response<pb::PriceHistory>, Status> {
        let (caller, _admitted) = self.admit(&request)?;
        #[allow(deprecated)] // `limit`: older clients' page size
        let req = request.into_inner();
        let client = list_scope(&caller, &req.client, "price history")?.map(str::to_owned);
        let product = history_product(req.product).map_err(invalid)?;
        let search_id = match req.search_id {
            0 => None,
            id if id > 0 => Some(id),
            id => {
                return Err(invalid(FieldError::new(
                    "search_id",
                    format!("must be a search id (positive), got {id}"),
                )));
            }
        };
        let since = req
            .since
            .map(|t| timestamp_from_pb("since", t))
            .transpose()
            .map_err(invalid)?;
        #[allow(deprecated)]
        let requested = if req.page_size == 0 {
            req.limit
        } else {
            req.page_size
        };
        let limit = paging::page_size(
            requested,
            search::DEFAULT_HISTORY_LIMIT,
            search::MAX_HISTORY_LIMIT,
        );
        let filter = format!(
            "{}|{}|{}|{}|{}",
            product.identity(),
            since.map(|t| t.timestamp_micros()).unwrap_or_default(),
            req.include_incomplete,
            client.as_deref().unwrap_or("*"),
            search_id.unwrap_or_default(),
        );
        let after = paging::decode(&req.page_token, "price_history", &filter)
            .and_then(|p| p.map(|p| history_cursor(&p)).transpose())
            .map_err(invalid)?;
        let page = self
            .searches
            .price_history(
                &product,
                &HistoryQuery {
                    since,
                    limit,
                    include_incomplete: req.include_incomplete,
                    after,
                    client,
                    search_id,
                },
            )
            .await
            .map_err(status)?;
        let entries = page.items;
        let next_page_token = match entries.last() {
            Some(last) if page.more => paging::encode(
                "price_history",
                &filter,
                &format!("{}:{}", last.observed_at.timestamp_micros(), last.id),
            ),
            _ => String::new(),
        };
        Ok(Response::new(pb::PriceHistory {
            product: Some(pb::Product {
                code: product.code().unwrap_or_default().to_owned(),
                name: product.name().to_owned(),
                ..Default::default()
            }),
            entries: entries.iter().map(history_entry_to_pb).collect(),
            next_page_token,
        }))
    }

    async fn list_searches(
        &self,
        request: Request<pb::ListSearchesRequest>,
    ) -> Result<Response<pb::ListSearchesResponse>, Status> {
        let (caller, _admitted) = self.admit(&request)?;
        let req = request.into_inner();
        let client = list_scope(&caller, &req.client, "searches")?;
        let limit = paging::page_size(req.page_size, DEFAULT_LIST_PAGE, MAX_LIST_PAGE);
        let filter = client.unwrap_or("*");
        let before = paging::decode_id(&req.page_token, "searches", filter).map_err(invalid)?;
        let page = self
            .searches
            .list(client, before, limit)
            .await
            .map_err(status)?;
        let searches = page.items;
        let next_page_token = match searches.last() {
            Some(last) if page.more => {
                paging::encode("searches", filter, &last.search_id.to_string())
            }
            _ => String::new(),
        };
        Ok(Response::new(pb::ListSearchesResponse {
            searches: searches.iter().map(summary_to_pb).collect(),
            next_page_token,
        }))
    }
}

/// A price-history page position: `observed_at` in µs since the epoch, `:`, the entry id.
fn history_cursor(position: &str) -> Result<HistoryCursor, FieldError> {
    let refused = || FieldError::new("page_token", "is not a token this list gave out");
    let (micros, id) = position.split_once(':').ok_or_else(refused)?;
    let observed_at = micros
        .parse::<i64>()
        .ok()
        .and_then(chrono::DateTime::from_timestamp_micros)
        .ok_or_else(refused)?;
    let id = id.parse::<i64>().map_err(|_| refused())?;
    Ok(HistoryCursor { observed_at, id })
}

fn summary_to_pb(s: &SearchSummary) -> pb::SearchSummary {
    pb::SearchSummary {
        search_id: s.search_id,
        client: s.client.clone(),
        caller: s.caller.clone().unwrap_or_default(),
        created_at: Some(timestamp_to_pb(s.created_at)),
        products: s.products,
        items: s.items,
        final_items: s.final_items,
        r#final: s.is_final(),
        cancelled: s.cancelled_at.is_some(),
        version: s.version,
    }
}

/// One WatchSearch call.
struct Watcher {
    /// The call's place among its client's calls in progress, held while it streams.
    _admitted: Admitted,
    searches: Searches,
    search_id: i64,
    poll: Duration,
    shutdown: CancellationToken,
    tx: mpsc::Sender<Result<pb::SearchStatus, Status>>,
}

impl Watcher {
    async fn run(self, mut current: SearchStatus, after_version: i64) {
        let mut last = after_version;
        loop {
            let is_final = current.is_final();
            if current.version > last {
                last = current.version;
                if self
                    .tx
                    .send(Ok(pb::SearchStatus::from(&current)))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            // NB: a final status at or below `after_version` was seen by the client already;
            // the stream ends without repeating it.
            if is_final {
                return;
            }
            if !self.wait_for_newer(last).await {
                return;
            }
            current = match self.searches.status(self.search_id).await {
                Ok(s) => s,
                Err(e) => {
                    let _ = self.tx.send(Err(status(e))).await;
                    return;
                }
            };
        }
    }

    /// Polls until the version passes `last`. `false`: the stream is over (client gone,
    /// shutdown, or an error that was sent).
    async fn wait_for_newer(&self, last: i64) -> bool {
        let mut failures = 0;
        loop {
            tokio::select! {
                () = self.tx.closed() => return false,
                () = self.shutdown.cancelled() => {
                    let _ = self
                        .tx
                        .send(Err(super::unavailable(
                            "coordinator shutting down; watch again with after_version",
                            std::time::Duration::from_secs(1),
                        )))
                        .await;
                    return false;
                }
                () = tokio::time::sleep(self.poll) => {}
            }
            match self.searches.version(self.search_id).await {
                Ok(Some(v)) if v > last => return true,
                Ok(Some(_)) => failures = 0,
                Ok(None) => {
                    let _ = self
                        .tx
                        .send(Err(Status::not_found(format!(
                            "search {} not found",
                            self.search_id
                        ))))
                        .await;
                    return false;
                }
                Err(e) if e.is_transient() && failures < WATCH_MAX_POLL_FAILURES => {
                    failures += 1;
                    warn!(error = %e, failures, "watch poll failed; retrying");
                }
                Err(e) => {
                    let _ = self.tx.send(Err(status(e))).await;
                    return false;
                }
            }
        }
    }
}

/// Whose `what` a list shows: the `requested` client's (empty: the caller's own, or for an
/// admin every client's, `None`); a client naming another is PERMISSION_DENIED.
pub(crate) fn list_scope<'a>(
    caller: &'a Caller,
    requested: &'a str,
    what: &str,
) -> Result<Option<&'a str>, Status> {
    match (caller.scope(), requested.trim()) {
        (None, "") => Ok(None),
        (None, named) => Ok(Some(named)),
        (Some(own), "") => Ok(Some(own)),
        (Some(own), named) if named == own => Ok(Some(own)),
        (Some(_), named) => Err(refused(
            tonic::Code::PermissionDenied,
            "ADMIN_TOKEN_REQUIRED",
            format!("only an admin token lists another client's {what} ({named:?})"),
        )),
    }
}

/// INVALID_ARGUMENT naming `destinations[i]` when a destination `named` is not
/// `configured` (SearchService and ScheduleService alike).
pub(crate) fn check_destinations(
    configured: &Destinations,
    named: &[lps_proto::model::DestinationName],
) -> Result<(), Status> {
    match named
        .iter()
        .enumerate()
        .find(|(_, d)| configured.get(d.as_str()).is_none())
    {
        Some((i, d)) => Err(invalid(FieldError::new(
            format!("destinations[{i}]"),
            format!("no destination {d} is configured"),
        ))),
        None => Ok(()),
    }
}

pub(crate) fn positive(field: &str, id: i64) -> Result<i64, Status> {
    if id > 0 {
        Ok(id)
    } else {
        Err(invalid(FieldError::new(field, "must be positive")))
    }
}

/// The product of a price-history lookup: its code, or when it has none its name. A code
/// without a name is fine here (the identity is the code).
pub(super) fn history_product(product: Option<pb::Product>) -> Result<ProductSpec, FieldError> {
    let p = product.ok_or_else(|| FieldError::new("product", "required"))?;
    let code = p.code.trim();
    let name = if p.name.trim().is_empty() && !code.is_empty() {
        code
    } else {
        &p.name
    };
    ProductSpec::new(Some(code), name).map_err(|e| e.under("product"))
}

/// Who asked and the trace the jobs join, from the call's metadata. Malformed trace
/// headers are dropped (W3C: an invalid `traceparent` is ignored), never rejected.
fn enqueue_context<T>(request: &Request<T>) -> EnqueueContext {
    let md = request.metadata();
    let caller = header(md, CALLER_HEADER)
        .map(|c| {
            c.chars()
                .filter(|c| c.is_ascii_graphic() || *c == ' ')
                .take(64)
                .collect::<String>()
        })
        .filter(|c| !c.is_empty())
        .or_else(|| request.remote_addr().map(|a| a.ip().to_string()));
    let traceparent = header(md, "traceparent")
        .map(str::trim)
        .filter(|t| valid_traceparent(t))
        .map(str::to_owned);
    let tracestate = traceparent
        .as_ref()
        .and_then(|_| header(md, "tracestate"))
        .map(str::trim)
        .filter(|s| !s.is_empty() && s.len() <= 512 && s.bytes().all(|b| (0x20..0x7f).contains(&b)))
        .map(str::to_owned);
    EnqueueContext {
        client: String::new(),
        caller,
        traceparent,
        tracestate,
        schedule_id: None,
    }
}

fn header<'a>(md: &'a MetadataMap, name: &str) -> Option<&'a str> {
    md.get(name)?.to_str().ok()
}

/// `version-traceid-parentid-flags` in lowercase hex (2-32-16-2), not all-zero ids; later
/// versions may append fields, so anything up to 128 characters after them is kept.
fn valid_traceparent(t: &str) -> bool {
    if t.len() < 55 || t.len() > 128 {
        return false;
    }
    let mut parts = t.split('-');
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let (Some(version), Some(trace), Some(parent), Some(flags)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    hex(version, 2)
        && version != "ff"
        && hex(trace, 32)
        && trace.bytes().any(|b| b != b'0')
        && hex(parent, 16)
        && parent.bytes().any(|b| b != b'0')
        && flags.len() >= 2
        && hex(&flags[..2], 2)
}

/// A job on the wire.
pub fn job_to_pb(j: &JobInfo) -> pb::Job {
    pb::Job {
        job_id: j.job_id,
        product: Some(j.hints.to_pb(
            j.product_code.as_deref().unwrap_or_default(),
            &j.product_name,
        )),
        mall: j.mall.to_string(),
        state: pb::JobState::from(j.state) as i32,
        priority: u32::from(j.priority),
        attempts: j.attempts,
        max_attempts: j.max_attempts,
        reclaims: j.reclaims,
        lease_epoch: j.lease_epoch,
        node_id: j.node_id.clone().unwrap_or_default(),
        created_at: Some(timestamp_to_pb(j.created_at)),
        run_after: Some(timestamp_to_pb(j.run_after)),
        run_started_at: j.run_started_at.map(timestamp_to_pb),
        deadline_at: j.deadline_at.map(timestamp_to_pb),
        finished_at: j.finished_at.map(timestamp_to_pb),
        outcome: j.outcome.map_or(0, |o| pb::Outcome::from(o) as i32),
        offers: j.offers.iter().map(pb::Offer::from).collect(),
        error_class: j.error_class.map_or(0, |c| pb::ErrorClass::from(c) as i32),
        last_error: j.last_error.clone().unwrap_or_default(),
        rounds: j.rounds.iter().map(pb::RoundReport::from).collect(),
        bytes: j.bytes,
        cost_usd: j.cost_usd,
        runs: j.runs.iter().map(attempt_to_pb).collect(),
        trace_id: j.trace_id().unwrap_or_default().to_owned(),
        next_retry_at: j.next_retry_at().map(timestamp_to_pb),
    }
}

fn attempt_to_pb(a: &AttemptInfo) -> pb::Attempt {
    let ended = match a.ended.as_str() {
        "done" => pb::AttemptEnd::Done,
        "failed" => pb::AttemptEnd::Failed,
        "lease_expired" => pb::AttemptEnd::LeaseExpired,
        "deadline" => pb::AttemptEnd::Deadline,
        "reclaimed" => pb::AttemptEnd::Reclaimed,
        "handed_back" => pb::AttemptEnd::HandedBack,
        "cancelled" => pb::AttemptEnd::Cancelled,
        _ => pb::AttemptEnd::Unspecified,
    };
    let class = a.error_class.as_deref().map_or(0, |name| {
        pb::ErrorClass::from_str_name(&format!("ERROR_CLASS_{}", name.to_ascii_uppercase()))
            .map_or(0, |c| c as i32)
    });
    pb::Attempt {
        lease_epoch: a.lease_epoch,
        node_id: a.node_id.clone().unwrap_or_default(),
        started_at: a.started_at.map(timestamp_to_pb),
        ended_at: Some(timestamp_to_pb(a.ended_at)),
        ended: ended as i32,
        error_class: class,
        error: a.error.clone().unwrap_or_default(),
        bytes: u64::try_from(a.bytes).unwrap_or_default(),
        cost_usd: a.cost_usd,
        evidence: a.evidence.as_ref().map(pb::PageEvidence::from),
    }
}

fn history_entry_to_pb(e: &PriceHistoryEntry) -> pb::PriceHistoryEntry {
    pb::PriceHistoryEntry {
        at: Some(timestamp_to_pb(e.observed_at)),
        lowest_effective_price: e.lowest_effective_price,
        lowest_mall: e.lowest_mall.clone(),
        malls: e
            .malls
            .iter()
            .map(|m| pb::MallPrice {
                mall: m.mall.clone(),
                price: m.price,
                shipping_fee: m.shipping_fee,
                effective_price: m.effective_price,
                url: m.url.clone(),
                title: m.title.clone(),
                // NB: entries from before the status was kept have none: UNSPECIFIED.
                shipping: if m.shipping.is_empty() {
                    0
                } else {
                    pb::ShippingStatus::from(lps_proto::model::ShippingStatus::from_name(
                        &m.shipping,
                    )) as i32
                },
                observed_at: m.observed_at.map(timestamp_to_pb),
                cached: m.cached,
                currency: lps_proto::model::CURRENCY.to_owned(),
            })
            .collect(),
        search_id: e.search_id.unwrap_or_default(),
        observed_at: Some(timestamp_to_pb(e.observed_at)),
        covered_malls: e.covered_malls.clone(),
        complete: e.complete,
        currency: lps_proto::model::CURRENCY.to_owned(),
        client: e.client.clone(),
        schedule_id: e.schedule_id.unwrap_or_default(),
        product: e.product_name.as_ref().map(|name| pb::Product {
            code: e.product_code.clone().unwrap_or_default(),
            name: name.clone(),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_checked() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert!(valid_traceparent(good));
        assert!(!valid_traceparent(
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01"
        ));
        assert!(!valid_traceparent(
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"
        ));
        assert!(!valid_traceparent("garbage"));
        assert!(!valid_traceparent(&format!("{good}-{}", "a".repeat(80))));
    }

    #[test]
    fn history_product_takes_a_code_alone() {
        let p = history_product(Some(pb::Product {
            code: "SKU-1".into(),
            name: String::new(),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(p.identity(), "code:SKU-1");
        let e = history_product(Some(pb::Product::default())).unwrap_err();
        assert_eq!(e.field, "product.name");
        assert_eq!(history_product(None).unwrap_err().field, "product");
    }
}
