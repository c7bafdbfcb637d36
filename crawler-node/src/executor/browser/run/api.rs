//! A round through a mall's own JSON HTTP API (an `http_api` card source,
//! `docs/site-profiles.md`): no browser. The request goes through the slot's relay in proxy
//! mode, so the same IP session, ledger, per-IP budget, block handling and byte metering
//! apply as to a page; the answer's items are read by `lps_profiles::extract` and judged
//! like any page's cards.
//!
//! Secrets stay on the node: a header value's `${env:NAME}` is read from the node's
//! environment when the request is made; an unset variable fails the job `permanent`,
//! naming it (another attempt on this node cannot help).

use std::time::Duration;

use lps_profiles::extract::extract_json;
use lps_proto::{model::ErrorClass, pb};
use tokio::time::Instant;
use tracing::warn;

use super::{JobError, Read, Run};
use crate::chromium::{
    page::wait_timeout,
    parse::{fill_env, page_url},
};

/// The largest API answer read.
const MAX_BODY: usize = 8 * 1024 * 1024;

/// The profile's `http_api` source (validation makes it the profile's only source).
#[derive(Debug, Clone)]
pub(in crate::executor::browser) struct ApiSource {
    index: usize,
    name: String,
    url_template: String,
    headers: Vec<(String, String)>,
}

/// An answer, or why there is none.
enum Answer {
    Body { status: u16, body: Vec<u8> },
    Failed(String),
}

impl Run<'_> {
    /// The profile's `http_api` source, if it has one.
    pub(super) fn api_source(&self) -> Option<ApiSource> {
        self.profile
            .sources
            .iter()
            .enumerate()
            .find_map(|(index, source)| match &source.kind {
                Some(pb::card_source::Kind::HttpApi(api)) => Some(ApiSource {
                    index,
                    name: if source.name.is_empty() {
                        "http_api".to_owned()
                    } else {
                        source.name.clone()
                    },
                    url_template: api.url_template.clone(),
                    headers: api
                        .headers
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                }),
                _ => None,
            })
    }

    /// The round's pages from the API: `None` when the first answer has no items.
    pub(super) async fn api_round(
        &mut self,
        round: &crate::judge::Round,
        api: &ApiSource,
    ) -> Result<Option<Read>, JobError> {
        let headers = resolve_headers(&api.headers)?;
        let max_pages = self
            .profile
            .more
            .as_ref()
            .and_then(|m| m.next_page.as_ref())
            .map_or(1, |n| n.max_pages.max(1));
        let max_cards = self.max_cards();
        'round: loop {
            let mut read = Read {
                source: api.name.clone(),
                ..Read::default()
            };
            let mut per_page = 0;
            for page in 1..=max_pages {
                self.ensure_ip().await?;
                let url = page_url(&api.url_template, &round.query, page, per_page.max(1));
                self.forget_gateway_refusal(&url);
                let before = self.relay_counters();
                let loading = Instant::now();
                let answer = self.get(&url, &headers).await;
                self.count_request(before);
                if let Some(refused) = self.gateway_refused(&url) {
                    return Err(refused);
                }
                let moved = self.relay_counters().since(before);
                let (status, body) = match answer {
                    Answer::Body { status, body } => (status, body),
                    Answer::Failed(why) => {
                        self.inner
                            .metrics
                            .page_loaded(&self.job.mall, "failed", loading.elapsed());
                        if moved.upstream_errors > 0 && self.slot.ip.is_some() {
                            self.on_proxy_error()?;
                            continue 'round;
                        }
                        if page > 1 {
                            warn!(page, error = %why, "a later API page failed; using the pages read");
                            break;
                        }
                        return Err(JobError::new(
                            ErrorClass::Network,
                            format!("the mall's API could not be reached: {why}"),
                        ));
                    }
                };
                let blocked = self
                    .profile
                    .block
                    .as_ref()
                    .is_some_and(|b| b.statuses.contains(&u32::from(status)));
                let verdict = match status {
                    _ if blocked => "blocked",
                    200..=299 => "results",
                    _ => "error_page",
                };
                self.inner
                    .metrics
                    .page_loaded(&self.job.mall, verdict, loading.elapsed());
                if blocked {
                    let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
                    self.on_block(round, &format!("status:{status}"), len)
                        .await?;
                    continue 'round;
                }
                match status {
                    200..=299 => {}
                    401 | 403 => {
                        return Err(JobError::new(
                            ErrorClass::Permanent,
                            format!(
                                "the mall's API refused the request (HTTP {status}): check the source's headers and the node's secrets"
                            ),
                        ));
                    }
                    _ if page > 1 => break,
                    _ => {
                        return Err(JobError::new(
                            ErrorClass::Network,
                            format!("the mall's API answered HTTP {status}"),
                        ));
                    }
                }
                let value: serde_json::Value = match serde_json::from_slice(&body) {
                    Ok(value) => value,
                    Err(err) if page > 1 => {
                        warn!(page, error = %err, "a later API page is not JSON; using the pages read");
                        break;
                    }
                    Err(err) => {
                        return Err(JobError::new(
                            ErrorClass::Parse,
                            format!("the mall's API answer is not JSON: {err}"),
                        ));
                    }
                };
                self.page_ok();
                let cards = extract_json(self.compiled, api.index, &value, &url);
                if cards.cards.is_empty() {
                    if page > 1 {
                        break;
                    }
                    if cards.unparsed > 0 {
                        self.inner.metrics.layout_page(&self.job.mall);
                        return Err(JobError::new(
                            ErrorClass::Layout,
                            format!(
                                "the mall's API answered {} items without a title or a price: its format changed",
                                cards.unparsed
                            ),
                        ));
                    }
                    return Ok(None);
                }
                let got = u32::try_from(cards.cards.len()).unwrap_or(u32::MAX);
                if page == 1 {
                    per_page = got;
                }
                read.pages = page;
                read.add(cards.cards, max_cards);
                if read.cards.len() >= max_cards || got < per_page {
                    break;
                }
            }
            return Ok(Some(read));
        }
    }

    /// One GET through the slot's relay (proxy mode) or straight out.
    async fn get(&self, url: &str, headers: &[(String, String)]) -> Answer {
        let timeout = wait_timeout(self.profile).max(Duration::from_secs(5));
        let mut builder = reqwest::Client::builder()
            .timeout(timeout)
            .no_proxy()
            .redirect(reqwest::redirect::Policy::limited(3));
        if let Some(relay) = &self.slot.relay {
            match reqwest::Proxy::all(format!("http://{}", relay.addr())) {
                Ok(proxy) => builder = builder.proxy(proxy),
                Err(err) => return Answer::Failed(format!("proxy: {err}")),
            }
        }
        let client = match builder.build() {
            Ok(client) => client,
            Err(err) => return Answer::Failed(format!("http client: {err}")),
        };
        let mut request = client
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json");
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let mut response = match request.send().await {
            Ok(response) => response,
            Err(err) => return Answer::Failed(without_url(&err)),
        };
        let status = response.status().as_u16();
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > MAX_BODY {
                        return Answer::Failed(format!(
                            "the answer is larger than {MAX_BODY} bytes"
                        ));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => return Answer::Body { status, body },
                Err(err) => return Answer::Failed(without_url(&err)),
            }
        }
    }
}

/// A reqwest error without its URL (a URL may carry a key in its query).
fn without_url(err: &reqwest::Error) -> String {
    let kind = if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "could not connect"
    } else {
        "failed"
    };
    let mut source = std::error::Error::source(err);
    let mut detail = String::new();
    while let Some(s) = source {
        detail = s.to_string();
        source = s.source();
    }
    if detail.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}: {detail}")
    }
}

/// Header values with `${env:NAME}` read from this process's environment.
fn resolve_headers(headers: &[(String, String)]) -> Result<Vec<(String, String)>, JobError> {
    headers
        .iter()
        .map(|(name, value)| {
            fill_env(value, |var| std::env::var(var).ok())
                .map(|v| (name.clone(), v))
                .map_err(|var| {
                    JobError::new(
                        ErrorClass::Permanent,
                        format!("the API header {name} needs the environment variable {var}, which is not set on this node"),
                    )
                })
        })
        .collect()
}
