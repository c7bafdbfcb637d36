//! The optional OpenAI-compatible LLM endpoint (DESIGN §5 "Matching"): more search strings
//! and a second opinion on result cards, asked for only after the rule-based rounds found
//! no match on healthy pages (the browser executor decides when; this module only talks).
//!
//! [`LlmClient`] speaks the Chat Completions API: one `POST {base}/chat/completions` per
//! call, `Authorization: Bearer <key>` when a key is set, `temperature: 0`,
//! `response_format: {"type": "json_object"}`, a system prompt that names the one JSON
//! object the answer must be, and the question as a JSON object in the user message. The
//! answer is the first choice's `message.content`, parsed with serde (a Markdown code fence
//! around it is tolerated) and then validated:
//! - keywords, `{"keywords": ["…"]}`: at most [`MAX_KEYWORDS`] search strings, each
//!   whitespace-collapsed, 1..=[`MAX_KEYWORD_CHARS`] characters without control
//!   characters, none repeating (after [`normalize`]) another one or a string already
//!   tried; the rest are dropped;
//! - judge, `{"same": [1, 3]}`: the 1-based numbers of the candidate titles that are the
//!   product; numbers that name no candidate are dropped.
//!
//! Every [`keywords`](LlmClient::keywords) or [`judge`](LlmClient::judge) call sends
//! exactly one request (no retries; none at all for an empty candidate list), so callers
//! count calls for the job's cost. Neither ever fails the job: a timeout, a transport
//! error, an HTTP error status or an answer that is not the JSON asked for is logged at
//! WARN, marks the call's span (`llm.keywords` / `llm.judge`) as an error and comes back as
//! `None` ("no LLM answer"). The `try_` variants return the [`LlmError`] instead.
//!
//! Secrets: the API key is a [`Secret`] and only ever goes into the `Authorization`
//! header. No error carries a URL (reqwest errors are stripped of it), and every error text
//! is scrubbed of the key in case an endpoint echoes it. Like any egress, the client
//! honours the standard `HTTPS_PROXY`/`NO_PROXY` variables (the malls' traffic does not:
//! it goes through the browsers' relays). Stateless and cancel-safe: dropping a call drops
//! its request.

use std::{borrow::Cow, fmt, time::Duration};

use serde::{Deserialize, Serialize};
use tracing::{Instrument as _, Span, field::Empty, info_span, warn};

use crate::{judge::normalize, secret::Secret};

/// Most search strings taken from one keywords answer.
pub const MAX_KEYWORDS: usize = 3;
/// Longest search string taken from a keywords answer, in characters.
pub const MAX_KEYWORD_CHARS: usize = 100;
/// Most candidate titles sent in one judge call (the rest are not asked about).
pub const MAX_CANDIDATES: usize = 20;
/// Candidate titles are clipped to this many characters.
const MAX_TITLE_CHARS: usize = 200;
/// Largest answer body read; a longer one is a bad answer.
const MAX_ANSWER_BYTES: usize = 256 * 1024;
/// Characters of an error status's body kept in the error, for the operator.
const MAX_ERROR_BODY_CHARS: usize = 200;

const KEYWORDS_PROMPT: &str = "You help a price-comparison crawler search Korean shopping \
malls. The user message is a JSON object: `product` (its `name`, and maybe a product `code` \
and a `brand`) and `tried`, the search strings that already found nothing. Answer with one \
JSON object and nothing else: {\"keywords\": [\"...\"]} with up to 3 new search strings a \
shopper would type into the mall's search box to find exactly this product - the mall's \
usual wording (the Korean product name, brand, size and pack count) - most promising first.";

const JUDGE_PROMPT: &str = "You check search results for a price-comparison crawler. The \
user message is a JSON object: `product` (its `name`, and maybe a product `code` and a \
`brand`) and `candidates`, result titles from a shopping mall, each with an `id`. A \
candidate is the same product only when it is the same item in the same size and the same \
pack count; an accessory, a refill, a used item or another variant is not. Answer with one \
JSON object and nothing else: {\"same\": [ids]} listing the ids of the candidates that are \
the same product, [] when none is.";

/// The endpoint settings (from `LPS_LLM_*`, validated by the config).
#[derive(Debug, Clone)]
pub struct LlmSettings {
    /// The API base, e.g. `https://api.openai.com/v1`; `/chat/completions` is appended.
    pub base_url: reqwest::Url,
    /// The model name sent with every request.
    pub model: String,
    /// Bearer token, if the endpoint needs one.
    pub api_key: Option<Secret>,
    /// Longest one call may take, connecting and reading included.
    pub timeout: Duration,
    /// What one call costs, in USD (added to the job's cost).
    pub usd_per_call: f64,
}

/// Why an LLM call gave no answer. The texts hold neither the URL nor the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Setup(String),
    /// No complete answer within the timeout.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The endpoint could not be reached (connect, TLS, reset).
    #[error("the endpoint could not be reached: {0}")]
    Transport(String),
    /// The endpoint answered with an HTTP error status.
    #[error("the endpoint answered HTTP {status}: {body}")]
    Status {
        /// The HTTP status code.
        status: u16,
        /// The start of the answer body.
        body: String,
    },
    /// The answer is not the JSON object asked for.
    #[error("the answer is not the JSON asked for: {0}")]
    BadAnswer(String),
}

impl LlmError {
    /// A stable `snake_case` label, for logs and metrics.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Setup(_) => "setup",
            Self::Timeout(_) => "timeout",
            Self::Transport(_) => "transport",
            Self::Status { .. } => "status",
            Self::BadAnswer(_) => "bad_answer",
        }
    }
}

/// The product a call is about.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Product<'a> {
    /// The product name as the client gave it.
    pub name: &'a str,
    /// The client's product code, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'a str>,
    /// A brand hint, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub brand: Option<&'a str>,
}

/// Which job a call is made for (the span's attributes).
#[derive(Debug, Clone, Copy)]
pub struct CallFor<'a> {
    pub job_id: i64,
    pub mall: &'a str,
}

/// The client (see the module docs). Cheap to clone: clones share the connection pool.
#[derive(Clone)]
pub struct LlmClient {
    http: reqwest::Client,
    endpoint: String,
    model: String,
    key: Option<Secret>,
    timeout: Duration,
    usd_per_call: f64,
}

impl fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmClient")
            .field("endpoint", &self.endpoint)
            .field("model", &self.model)
            .field("key", &self.key.as_ref().map(|_| "***"))
            .field("timeout", &self.timeout)
            .field("usd_per_call", &self.usd_per_call)
            .finish()
    }
}

impl LlmClient {
    /// A client for `settings` (nothing is sent yet).
    pub fn new(settings: LlmSettings) -> Result<Self, LlmError> {
        let http = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| LlmError::Setup(describe(e)))?;
        let endpoint = format!(
            "{}/chat/completions",
            settings.base_url.as_str().trim_end_matches('/')
        );
        Ok(Self {
            http,
            endpoint,
            model: settings.model,
            key: settings.api_key.filter(|k| !k.expose().is_empty()),
            timeout: settings.timeout,
            usd_per_call: settings.usd_per_call,
        })
    }

    /// The model asked.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// `POST` target of every call (`{base}/chat/completions`).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Longest one call takes.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// What one call costs, in USD.
    pub fn usd_per_call(&self) -> f64 {
        self.usd_per_call
    }

    /// Up to [`MAX_KEYWORDS`] new search strings for `product`, none repeating one of
    /// `tried`; `None` when the endpoint gave no usable answer (logged). One request.
    pub async fn keywords(
        &self,
        call: CallFor<'_>,
        product: &Product<'_>,
        tried: &[&str],
    ) -> Option<Vec<String>> {
        let span = info_span!(
            "llm.keywords",
            job.id = call.job_id,
            mall = call.mall,
            llm.model = %self.model,
            answer.count = Empty,
            error = Empty,
            otel.status_code = Empty,
        );
        let result = self
            .try_keywords(product, tried)
            .instrument(span.clone())
            .await;
        if let Ok(keywords) = &result {
            span.record("answer.count", keywords.len() as i64);
        }
        settle(&span, result)
    }

    /// The 0-based indices into `titles` of the cards the endpoint judges to be `product`,
    /// ascending; `None` when it gave no usable answer (logged). One request, none for an
    /// empty list; titles past [`MAX_CANDIDATES`] are not asked about.
    pub async fn judge(
        &self,
        call: CallFor<'_>,
        product: &Product<'_>,
        titles: &[&str],
    ) -> Option<Vec<usize>> {
        let span = info_span!(
            "llm.judge",
            job.id = call.job_id,
            mall = call.mall,
            llm.model = %self.model,
            candidates = titles.len().min(MAX_CANDIDATES),
            answer.count = Empty,
            error = Empty,
            otel.status_code = Empty,
        );
        let result = self
            .try_judge(product, titles)
            .instrument(span.clone())
            .await;
        if let Ok(same) = &result {
            span.record("answer.count", same.len() as i64);
        }
        settle(&span, result)
    }

    /// [`keywords`](Self::keywords), with the error instead of a log line.
    pub async fn try_keywords(
        &self,
        product: &Product<'_>,
        tried: &[&str],
    ) -> Result<Vec<String>, LlmError> {
        #[derive(Serialize)]
        struct Ask<'a> {
            task: &'static str,
            product: &'a Product<'a>,
            tried: &'a [&'a str],
            max: usize,
        }
        #[derive(Deserialize)]
        struct Answer {
            keywords: Vec<String>,
        }
        let ask = Ask {
            task: "search_keywords",
            product,
            tried,
            max: MAX_KEYWORDS,
        };
        let answer: Answer = self.chat(KEYWORDS_PROMPT, &ask).await?;
        Ok(clean_keywords(answer.keywords, tried))
    }

    /// [`judge`](Self::judge), with the error instead of a log line.
    pub async fn try_judge(
        &self,
        product: &Product<'_>,
        titles: &[&str],
    ) -> Result<Vec<usize>, LlmError> {
        #[derive(Serialize)]
        struct Candidate {
            id: usize,
            title: String,
        }
        #[derive(Serialize)]
        struct Ask<'a> {
            task: &'static str,
            product: &'a Product<'a>,
            candidates: Vec<Candidate>,
        }
        #[derive(Deserialize)]
        struct Answer {
            same: Vec<u64>,
        }
        let titles = &titles[..titles.len().min(MAX_CANDIDATES)];
        if titles.is_empty() {
            return Ok(Vec::new());
        }
        let ask = Ask {
            task: "same_product",
            product,
            candidates: titles
                .iter()
                .enumerate()
                .map(|(i, title)| Candidate {
                    id: i + 1,
                    title: title.trim().chars().take(MAX_TITLE_CHARS).collect(),
                })
                .collect(),
        };
        let answer: Answer = self.chat(JUDGE_PROMPT, &ask).await?;
        Ok(clean_judgement(&answer.same, titles.len()))
    }

    /// One chat completion: `system` + `ask` as JSON → the answer's content parsed as `T`.
    async fn chat<A: Serialize, T: for<'de> Deserialize<'de>>(
        &self,
        system: &str,
        ask: &A,
    ) -> Result<T, LlmError> {
        let user = serde_json::to_string(ask)
            .map_err(|e| LlmError::BadAnswer(format!("cannot encode the question: {e}")))?;
        let body = ChatRequest {
            model: &self.model,
            messages: [
                Message {
                    role: "system",
                    content: Cow::Borrowed(system),
                },
                Message {
                    role: "user",
                    content: Cow::Owned(user),
                },
            ],
            temperature: 0.0,
            response_format: ResponseFormat {
                kind: "json_object",
            },
        };
        let mut request = self.http.post(&self.endpoint).json(&body);
        if let Some(key) = &self.key {
            request = request.bearer_auth(key.expose());
        }
        let exchange = async {
            let mut response = request.send().await.map_err(|e| self.transport(e))?;
            let status = response.status();
            let mut bytes = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|e| self.transport(e))? {
                if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
                    return Err(LlmError::BadAnswer(format!(
                        "the answer is longer than {MAX_ANSWER_BYTES} bytes"
                    )));
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok((status, bytes))
        };
        // NB: reqwest's own timeout covers the same; this one also bounds a slow body.
        let (status, bytes) = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| LlmError::Timeout(self.timeout))??;
        if !status.is_success() {
            let body: String = String::from_utf8_lossy(&bytes)
                .chars()
                .filter(|c| !c.is_control())
                .take(MAX_ERROR_BODY_CHARS)
                .collect();
            return Err(LlmError::Status {
                status: status.as_u16(),
                body: self.scrub(body),
            });
        }
        let reply: ChatResponse = serde_json::from_slice(&bytes)
            .map_err(|e| self.bad(format!("not a chat completion: {e}")))?;
        let content = reply
            .choices
            .into_iter()
            .next()
            .and_then(|c| c.message.content)
            .ok_or_else(|| self.bad("no choice with content".into()))?;
        serde_json::from_str(strip_fence(&content))
            .map_err(|e| self.bad(format!("the content is not the object asked for: {e}")))
    }

    fn transport(&self, err: reqwest::Error) -> LlmError {
        if err.is_timeout() {
            LlmError::Timeout(self.timeout)
        } else {
            LlmError::Transport(self.scrub(describe(err)))
        }
    }

    fn bad(&self, text: String) -> LlmError {
        LlmError::BadAnswer(self.scrub(text))
    }

    /// `text` with the key replaced by `***`.
    fn scrub(&self, text: String) -> String {
        match &self.key {
            Some(key) if text.contains(key.expose()) => text.replace(key.expose(), "***"),
            _ => text,
        }
    }
}

/// The answer, or `None` after a WARN and an error mark on `span`.
fn settle<T>(span: &Span, result: Result<T, LlmError>) -> Option<T> {
    match result {
        Ok(answer) => Some(answer),
        Err(err) => {
            span.record("error", tracing::field::display(&err));
            lps_telemetry::fail(span, err.to_string());
            warn!(parent: span, error = %err, kind = err.kind(), "llm call gave no answer; going on without it");
            None
        }
    }
}

/// A reqwest error without its URL, with its causes.
fn describe(err: reqwest::Error) -> String {
    let err = err.without_url();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The content inside a Markdown code fence (```` ```json … ``` ````), else all of it.
fn strip_fence(content: &str) -> &str {
    let text = content.trim();
    let Some(inner) = text.strip_prefix("```") else {
        return text;
    };
    let inner = inner.strip_suffix("```").unwrap_or(inner);
    // The info string (`json`) runs to the first line break.
    match inner.split_once('\n') {
        Some((info, rest)) if !info.trim_start().starts_with('{') => rest.trim(),
        _ => inner.trim(),
    }
}

/// The usable search strings of an answer (rules in the module docs).
fn clean_keywords(raw: Vec<String>, tried: &[&str]) -> Vec<String> {
    let mut seen: Vec<String> = tried.iter().map(|t| normalize(t)).collect();
    let mut out = Vec::new();
    for text in raw {
        if out.len() == MAX_KEYWORDS {
            break;
        }
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let chars = text.chars().count();
        if chars == 0 || chars > MAX_KEYWORD_CHARS || text.chars().any(char::is_control) {
            continue;
        }
        let key = normalize(&text);
        if key.is_empty() || seen.contains(&key) {
            continue;
        }
        seen.push(key);
        out.push(text);
    }
    out
}

/// 1-based ids of an answer → 0-based indices below `count`, ascending, once each.
fn clean_judgement(ids: &[u64], count: usize) -> Vec<usize> {
    let mut out: Vec<usize> = ids
        .iter()
        .filter_map(|&id| usize::try_from(id).ok())
        .filter(|&id| (1..=count).contains(&id))
        .map(|id| id - 1)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: [Message<'a>; 2],
    temperature: f32,
    response_format: ResponseFormat,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: Cow<'a, str>,
}

#[derive(Serialize)]
struct ResponseFormat {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Deserialize)]
struct ChatResponse {
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    message: ChoiceMessage,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    content: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_are_cleaned() {
        let raw = vec![
            "  제주   삼다수 2L ".to_owned(),
            "Jeju Samdasoo 2L x 12".to_owned(),
            "제주 삼다수 2l".to_owned(),
            String::new(),
            "x".repeat(MAX_KEYWORD_CHARS + 1),
            "bad\u{7}bell".to_owned(),
            "삼다수 생수".to_owned(),
            "삼다수 12병".to_owned(),
            "one too many".to_owned(),
        ];
        let tried = ["Jeju Samdasoo 2L x 12"];
        assert_eq!(
            clean_keywords(raw, &tried),
            ["제주 삼다수 2L", "삼다수 생수", "삼다수 12병"]
        );
        assert!(clean_keywords(vec!["JEJU samdasoo 2l X 12".into()], &tried).is_empty());
    }

    #[test]
    fn judgements_are_cleaned() {
        assert_eq!(clean_judgement(&[3, 1, 3, 0, 9], 3), [0, 2]);
        assert!(clean_judgement(&[], 3).is_empty());
        assert!(clean_judgement(&[1], 0).is_empty());
    }

    #[test]
    fn fences_are_stripped() {
        assert_eq!(strip_fence(" {\"same\": []} "), "{\"same\": []}");
        assert_eq!(
            strip_fence("```json\n{\"same\": [1]}\n```"),
            "{\"same\": [1]}"
        );
        assert_eq!(strip_fence("```\n{\"same\": [1]}\n```"), "{\"same\": [1]}");
        assert_eq!(strip_fence("```{\"same\": [2]}```"), "{\"same\": [2]}");
    }

    #[test]
    fn the_key_is_never_shown() {
        let client = LlmClient::new(LlmSettings {
            base_url: reqwest::Url::parse("http://127.0.0.1:9/v1/").unwrap(),
            model: "m".into(),
            api_key: Some(Secret::new("sk-very-secret")),
            timeout: Duration::from_secs(1),
            usd_per_call: 0.0,
        })
        .unwrap();
        assert_eq!(client.endpoint(), "http://127.0.0.1:9/v1/chat/completions");
        assert!(!format!("{client:?}").contains("sk-very"));
        let scrubbed = client.scrub("echo: Bearer sk-very-secret".into());
        assert_eq!(scrubbed, "echo: Bearer ***");
    }
}
