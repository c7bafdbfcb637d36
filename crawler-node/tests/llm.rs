//! The LLM endpoint, against a mock OpenAI-compatible server: a real axum server on
//! 127.0.0.1:0 in the test that records every request and answers canned JSON (the one
//! thing here that cannot run for real: a remote model).
//!
//! - `LlmClient` alone: the request shape (path, model, bearer key, messages,
//!   `response_format`), parsing and validation of both answers, and every failure (timeout,
//!   error status, malformed JSON, wrong shape, unreachable endpoint) as "no answer", with
//!   the key in no error text;
//! - a whole node (`Node` + `BrowserExecutor` with the client) against the scripted
//!   coordinator and the test kit's mall with real Chromium: a product the rule-based
//!   rounds cannot find is found through the mock's search strings and judgement (two
//!   calls, priced into the cost); a broken endpoint still ends the job `NOT_FOUND`; a
//!   product the rules find, or a job too close to its deadline, never reaches the
//!   endpoint.

mod common;
mod support;

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode, Uri, header},
    response::{IntoResponse, Response},
    routing::post,
};
use common::{Harness, alpha_profile};
use lps_crawler_node::{
    BrowserExecutor, Node,
    config::Secret,
    llm::{CallFor, LlmClient, LlmError, LlmSettings, Product},
};
use lps_proto::pb::{self, node_message::Body as Out};
use lps_test_kit::stack::{Stack, StackConfig, StackHandle};
use serde_json::{Value, json};
use support::{Behaviour, FakeCoordinator, assign, browser_node_config, drain, wait_welcomed};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const KEY: &str = "sk-test-4f9c2e7b";
const MODEL: &str = "lps-test-model";
const JOB_WAIT: Duration = Duration::from_secs(120);
/// USD per call in the node tests.
const PER_CALL: f64 = 0.01;

// ---------------------------------------------------------------------- the mock server

/// How the mock answers.
#[derive(Debug, Clone)]
enum Mode {
    /// Keywords: these strings; judge: every candidate id.
    Answer { keywords: Vec<String> },
    /// This text as the first choice's content.
    Content(String),
    /// This status and body.
    Status(u16, String),
    /// Never answers.
    Hang,
}

/// One request the mock received.
#[derive(Debug, Clone)]
struct Recorded {
    path: String,
    authorization: Option<String>,
    body: Value,
}

impl Recorded {
    /// The question: the user message's JSON content.
    fn ask(&self) -> Value {
        let content = self.body["messages"][1]["content"]
            .as_str()
            .expect("a user message");
        serde_json::from_str(content).expect("the user message is JSON")
    }

    fn task(&self) -> String {
        self.ask()["task"].as_str().unwrap_or_default().to_owned()
    }
}

struct MockState {
    mode: Mutex<Mode>,
    requests: Mutex<Vec<Recorded>>,
}

/// The mock server; stops when dropped.
struct MockLlm {
    addr: SocketAddr,
    state: Arc<MockState>,
    server: JoinHandle<()>,
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl MockLlm {
    async fn start(mode: Mode) -> Self {
        let state = Arc::new(MockState {
            mode: Mutex::new(mode),
            requests: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            addr,
            state,
            server,
        }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn set_mode(&self, mode: Mode) {
        *self.state.mode.lock().unwrap() = mode;
    }

    fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    fn client(&self, key: Option<&str>, timeout: Duration) -> LlmClient {
        client_for(&self.base_url(), key, timeout)
    }
}

fn client_for(base_url: &str, key: Option<&str>, timeout: Duration) -> LlmClient {
    LlmClient::new(LlmSettings {
        base_url: reqwest::Url::parse(base_url).unwrap(),
        model: MODEL.into(),
        api_key: key.map(Secret::new),
        timeout,
        usd_per_call: PER_CALL,
    })
    .unwrap()
}

async fn chat(
    State(state): State<Arc<MockState>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = Recorded {
        path: uri.path().to_owned(),
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    state.requests.lock().unwrap().push(recorded.clone());
    let mode = state.mode.lock().unwrap().clone();
    let content = match mode {
        Mode::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            return StatusCode::GATEWAY_TIMEOUT.into_response();
        }
        Mode::Status(status, body) => {
            return (StatusCode::from_u16(status).unwrap(), body).into_response();
        }
        Mode::Content(content) => content,
        Mode::Answer { keywords } => match recorded.task().as_str() {
            "search_keywords" => json!({ "keywords": keywords }).to_string(),
            "same_product" => {
                let ids: Vec<Value> = recorded.ask()["candidates"]
                    .as_array()
                    .map(|c| c.iter().map(|c| c["id"].clone()).collect())
                    .unwrap_or_default();
                json!({ "same": ids }).to_string()
            }
            other => panic!("unknown task {other:?}"),
        },
    };
    Json(json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": MODEL,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop",
        }],
    }))
    .into_response()
}

const CALL: CallFor<'static> = CallFor {
    job_id: 7,
    mall: "testmall-alpha",
};

fn product() -> Product<'static> {
    Product {
        name: "Jeju Samdasoo 2L x 12",
        code: Some("SKU-7"),
        brand: None,
    }
}

// ---------------------------------------------------------------------- the client

#[tokio::test]
async fn requests_are_chat_completions_and_answers_are_validated() {
    let mock = MockLlm::start(Mode::Answer {
        keywords: vec![
            " 제주   삼다수 2L ".into(),
            "Jeju Samdasoo 2L x 12".into(),
            String::new(),
            "제주삼다수 생수 2L 12개".into(),
        ],
    })
    .await;
    let client = mock.client(Some(KEY), Duration::from_secs(10));
    let tried = ["Jeju Samdasoo 2L x 12", "Jeju Samdasoo 2L 12개"];
    let keywords = client.keywords(CALL, &product(), &tried).await;
    assert_eq!(
        keywords,
        Some(vec![
            "제주 삼다수 2L".to_owned(),
            "제주삼다수 생수 2L 12개".to_owned()
        ]),
        "trimmed, without repeats of what was tried or empty strings"
    );

    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(
        request.authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = &request.body;
    assert_eq!(body["model"], MODEL);
    assert_eq!(body["response_format"]["type"], "json_object");
    assert_eq!(body["temperature"], 0.0);
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(
        body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("\"keywords\"")
    );
    assert_eq!(body["messages"][1]["role"], "user");
    let ask = request.ask();
    assert_eq!(ask["task"], "search_keywords");
    assert_eq!(ask["product"]["name"], "Jeju Samdasoo 2L x 12");
    assert_eq!(ask["product"]["code"], "SKU-7");
    assert!(ask["product"].get("brand").is_none());
    assert_eq!(ask["tried"], json!(tried));
    assert!(
        !body.to_string().contains(KEY),
        "the key only in the header"
    );

    // The judge: numbered candidates; the answer's ids become 0-based indices.
    let titles = [
        "제주 삼다수 2L x 12병",
        "제주 삼다수 2L x 6병",
        "삼다수 2L 12개",
    ];
    mock.set_mode(Mode::Content(
        "```json\n{\"same\": [3, 1, 3, 9, 0]}\n```".into(),
    ));
    assert_eq!(
        client.judge(CALL, &product(), &titles).await,
        Some(vec![0, 2])
    );
    let request = mock.requests().pop().unwrap();
    let ask = request.ask();
    assert_eq!(ask["task"], "same_product");
    assert_eq!(
        ask["candidates"],
        json!([
            {"id": 1, "title": titles[0]},
            {"id": 2, "title": titles[1]},
            {"id": 3, "title": titles[2]},
        ])
    );
    assert!(
        request.body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("\"same\"")
    );

    // Nothing to judge: no request.
    assert_eq!(client.judge(CALL, &product(), &[]).await, Some(vec![]));
    assert_eq!(mock.requests().len(), 2);

    // Without a key: no Authorization header.
    let keyless = mock.client(None, Duration::from_secs(10));
    mock.set_mode(Mode::Content("{\"keywords\": []}".into()));
    assert_eq!(
        keyless.keywords(CALL, &product(), &tried).await,
        Some(vec![])
    );
    assert_eq!(mock.requests().pop().unwrap().authorization, None);
}

#[tokio::test]
async fn every_failure_is_no_answer_and_never_shows_the_key() {
    let mock = MockLlm::start(Mode::Hang).await;
    let tried = ["Jeju Samdasoo 2L x 12"];
    let titles = ["제주 삼다수 2L x 12병"];
    let check = |err: &LlmError| {
        let text = err.to_string();
        assert!(!text.contains(KEY), "{text}");
        assert!(!text.contains("sk-test"), "{text}");
        assert!(!text.contains(&mock.addr.to_string()), "no URL: {text}");
    };

    // A hung endpoint: the call ends at the timeout.
    let client = mock.client(Some(KEY), Duration::from_millis(500));
    let err = client.try_keywords(&product(), &tried).await.unwrap_err();
    assert!(matches!(err, LlmError::Timeout(_)), "{err:?}");
    check(&err);
    assert_eq!(client.keywords(CALL, &product(), &tried).await, None);
    assert_eq!(client.judge(CALL, &product(), &titles).await, None);

    let client = mock.client(Some(KEY), Duration::from_secs(10));
    // An error status, whose body echoes the key.
    mock.set_mode(Mode::Status(
        500,
        format!("internal error for Bearer {KEY}"),
    ));
    let err = client.try_keywords(&product(), &tried).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::Status { status: 500, body } if body.contains("internal error")),
        "{err:?}"
    );
    check(&err);
    assert_eq!(client.keywords(CALL, &product(), &tried).await, None);
    mock.set_mode(Mode::Status(429, "slow down".into()));
    assert_eq!(client.judge(CALL, &product(), &titles).await, None);

    // Bad answers: not a chat completion, content not JSON, the wrong object, the key in a
    // value serde quotes back.
    let bad_answers = [
        Mode::Status(200, "<html>proxy login</html>".into()),
        Mode::Content("Sure! Here are some keywords: 제주 삼다수".into()),
        Mode::Content("{\"words\": [\"제주 삼다수\"]}".into()),
        Mode::Content(format!("{{\"keywords\": \"{KEY}\", \"same\": \"{KEY}\"}}")),
    ];
    for mode in bad_answers {
        mock.set_mode(mode.clone());
        let err = client.try_keywords(&product(), &tried).await.unwrap_err();
        assert!(matches!(err, LlmError::BadAnswer(_)), "{mode:?}: {err:?}");
        check(&err);
        let err = client.try_judge(&product(), &titles).await.unwrap_err();
        assert!(matches!(err, LlmError::BadAnswer(_)), "{mode:?}: {err:?}");
        check(&err);
        assert_eq!(client.keywords(CALL, &product(), &tried).await, None);
        assert_eq!(client.judge(CALL, &product(), &titles).await, None);
    }

    // Nobody listening.
    let closed = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap()
    };
    let client = client_for(
        &format!("http://{closed}/v1"),
        Some(KEY),
        Duration::from_secs(10),
    );
    let err = client.try_keywords(&product(), &tried).await.unwrap_err();
    assert!(matches!(err, LlmError::Transport(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        !text.contains(KEY) && !text.contains(&closed.to_string()),
        "{text}"
    );
    assert_eq!(client.keywords(CALL, &product(), &tried).await, None);
}

// ---------------------------------------------------------------------- a whole node

/// Waits (up to [`JOB_WAIT`]) for the result of `job_id`.
async fn result_of(coord: &FakeCoordinator, job_id: i64) -> pb::JobResult {
    let deadline = tokio::time::Instant::now() + JOB_WAIT;
    loop {
        let hit = coord.all_messages().into_iter().find_map(|(_, m)| match m {
            Out::Result(r) if r.job_id == job_id => Some(r),
            Out::Failure(f) if f.job_id == job_id => panic!("job {job_id} failed: {f:?}"),
            _ => None,
        });
        if let Some(result) = hit {
            return result;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for the result of job {job_id}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A one-slot node with `llm`, connected to a scripted coordinator that knows the alpha
/// mall of `stack`; runs `check`, then drains the node.
async fn with_node<F, Fut>(name: &str, stack: &StackHandle, llm: LlmClient, check: F)
where
    F: FnOnce(Arc<FakeCoordinator>) -> Fut,
    Fut: Future<Output = ()>,
{
    let coord = Arc::new(
        FakeCoordinator::start_with(Behaviour {
            profiles: vec![alpha_profile(&stack.alpha)],
            ..Behaviour::default()
        })
        .await,
    );
    let harness = Harness::build(name, |settings| {
        BrowserExecutor::new(settings).with_llm(llm)
    });
    let config = browser_node_config(&coord, &format!("node-{name}"));
    let node = Node::new(config, harness.executor.clone());
    let handle = node.handle();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(node.run(shutdown.clone()));
    let body = async {
        wait_welcomed(&handle).await;
        check(coord.clone()).await;
        drain(&shutdown, run).await;
    };
    harness.finish(body).await;
}

#[tokio::test]
async fn the_llm_finds_what_the_rules_cannot_and_a_broken_one_changes_nothing() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    // The mall lists `LG생활건강 테크 액체세제 3L`; nothing in it matches the English name.
    let mock = MockLlm::start(Mode::Answer {
        keywords: vec!["Tech Liquid Laundry".into(), "테크 액체세제".into()],
    })
    .await;
    let llm = mock.client(Some(KEY), Duration::from_secs(20));
    let mock = &mock;
    with_node("llm-found", &stack, llm, |coord| async move {
        coord.send(0, assign(1, "Tech Liquid Laundry", JOB_WAIT));
        let found = result_of(&coord, 1).await;
        assert_eq!(found.outcome, pb::Outcome::Found as i32, "{found:?}");
        assert_eq!(found.offers.len(), 1, "{found:?}");
        let offer = &found.offers[0];
        assert_eq!(offer.title, "LG생활건강 테크 액체세제 3L");
        assert_eq!((offer.price, offer.shipping_fee), (12_900, 3_000));
        // The rule-based round saw nothing; the LLM's string (its repeat of the tried one
        // dropped) found the card, and its judge accepted it.
        let rounds: Vec<(&str, &str, u32, u32)> = found
            .rounds
            .iter()
            .map(|r| (kind_name(r), r.query.as_str(), r.cards_seen, r.matches))
            .collect();
        assert_eq!(
            rounds,
            [
                ("original", "Tech Liquid Laundry", 0, 0),
                ("llm", "테크 액체세제", 1, 1),
            ]
        );
        let metrics = found.metrics.unwrap();
        assert_eq!(metrics.llm_calls, 2, "{metrics:?}");
        // Direct mode meters no bytes: the cost is the two calls.
        assert!(
            (metrics.cost_usd - 2.0 * PER_CALL).abs() < 1e-9,
            "{metrics:?}"
        );
        let requests = mock.requests();
        let tasks: Vec<String> = requests.iter().map(Recorded::task).collect();
        assert_eq!(tasks, ["search_keywords", "same_product"]);
        assert_eq!(requests[0].ask()["tried"], json!(["Tech Liquid Laundry"]));
        assert_eq!(
            requests[1].ask()["candidates"],
            json!([{"id": 1, "title": "LG생활건강 테크 액체세제 3L"}])
        );

        // The endpoint fails: the job still ends normally, not found, the call counted.
        mock.set_mode(Mode::Status(503, "overloaded".into()));
        coord.send(0, assign(2, "Tech Liquid Laundry", JOB_WAIT));
        let not_found = result_of(&coord, 2).await;
        assert_eq!(
            not_found.outcome,
            pb::Outcome::NotFound as i32,
            "{not_found:?}"
        );
        assert_eq!(not_found.rounds.len(), 1, "{not_found:?}");
        let metrics = not_found.metrics.unwrap();
        assert_eq!(metrics.llm_calls, 1, "no candidates, so no judge call");
        assert!((metrics.cost_usd - PER_CALL).abs() < 1e-9, "{metrics:?}");
        assert_eq!(mock.requests().len(), 3);
    })
    .await;
    stack.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_llm_is_not_asked_when_the_rules_find_the_product_or_time_is_short() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    let mock = MockLlm::start(Mode::Answer {
        keywords: vec!["테크 액체세제".into()],
    })
    .await;
    // A long call timeout: a job due in 90 s has no time for a call and a page load.
    let llm = mock.client(Some(KEY), Duration::from_secs(100));
    let mock = &mock;
    with_node("llm-idle", &stack, llm, |coord| async move {
        coord.send(0, assign(1, "삼다수 2L x 12", JOB_WAIT));
        let found = result_of(&coord, 1).await;
        assert_eq!(found.outcome, pb::Outcome::Found as i32, "{found:?}");
        assert_eq!(found.offers[0].price, 12_900);
        assert!(
            found.rounds.iter().all(|r| kind_name(r) != "llm"),
            "{found:?}"
        );
        let metrics = found.metrics.unwrap();
        assert_eq!(metrics.llm_calls, 0);
        assert!(metrics.cost_usd.abs() < 1e-12, "{metrics:?}");
        assert_eq!(mock.requests().len(), 0, "the mock was never called");

        // Nothing found by the rules, but the deadline is too close for the llm: the job
        // ends not found instead of running into its deadline.
        coord.send(0, assign(2, "Tech Liquid Laundry", Duration::from_secs(90)));
        let not_found = result_of(&coord, 2).await;
        assert_eq!(
            not_found.outcome,
            pb::Outcome::NotFound as i32,
            "{not_found:?}"
        );
        assert_eq!(not_found.metrics.unwrap().llm_calls, 0);
        assert_eq!(mock.requests().len(), 0, "the mock was never called");
    })
    .await;
    stack.shutdown().await.unwrap();
}

/// A round's kind as the enum on the wire says it, checked against the older string field.
fn kind_name(r: &pb::RoundReport) -> &'static str {
    let name = match pb::RoundKind::try_from(r.round_kind) {
        Ok(pb::RoundKind::Original) => "original",
        Ok(pb::RoundKind::Precise) => "precise",
        Ok(pb::RoundKind::Broad) => "broad",
        Ok(pb::RoundKind::Llm) => "llm",
        _ => "unspecified",
    };
    #[allow(deprecated)]
    let old = r.kind.as_str();
    assert_eq!(old, name, "the deprecated string says the same");
    name
}
