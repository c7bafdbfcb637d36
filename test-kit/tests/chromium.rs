//! Real headless Chromium through the gateway to the malls, proving the fake internet
//! works for a browser: results exist only after the page's script ran, markers show up,
//! every request leaves through an exit-IP port, and blocking images saves bytes; gamma
//! shows placeholders first, then one batch of cards, more on scrolling, a second page,
//! its card classes, and a challenge that clears itself.
//!
//! Two drivers: `chromium --dump-dom` (with a virtual-time budget so the page's `fetch`
//! completes before the dump) and chromedriver spoken to over plain W3C WebDriver JSON,
//! waiting for cards as a crawler does. Chromium cannot send proxy credentials given on
//! its command line, so these gateways run without authentication.
//!
//! Cleanup: every browser runs in its own process group with a fresh profile directory;
//! after each run the group is killed and `/proc` is checked for any process still using
//! that profile directory. Browser runs are serialized (two cores).

mod common;

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::HttpConn;
use futures::FutureExt as _;
use hyper::Method;
use lps_test_kit::catalog::MallStyle;
use lps_test_kit::mall::gamma::{BATCH, PAGE_SIZE, SKELETONS};
use lps_test_kit::mall::{GAMMA_MARKUP, IMAGE_BYTES, markup};
use lps_test_kit::stack::{Stack, StackConfig, StackHandle};
use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const BROWSER_TIMEOUT: Duration = Duration::from_secs(90);

/// Serializes browser runs inside this test binary.
static BROWSER_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
static PROFILE_SEQ: AtomicUsize = AtomicUsize::new(0);

/// A fresh profile directory, removed (after the leftover check) on drop.
struct Profile {
    dir: PathBuf,
}

impl Profile {
    fn new() -> Profile {
        let seq = PROFILE_SEQ.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("lps-tk-chromium-{}-{seq}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("profile dir");
        Profile { dir }
    }

    fn arg(&self) -> String {
        format!("--user-data-dir={}", self.dir.display())
    }
}

impl Drop for Profile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn browser_flags(profile: &Profile, proxy_url: &str) -> Vec<String> {
    let mut flags: Vec<String> = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-default-apps",
        "--proxy-bypass-list=<-loopback>",
        // NB: gamma's lazy loading depends on the viewport; keep it fixed.
        "--window-size=1280,800",
    ]
    .map(str::to_owned)
    .to_vec();
    flags.push(profile.arg());
    flags.push(format!("--proxy-server={proxy_url}"));
    flags
}

fn require(path: &str) {
    assert!(
        Path::new(path).exists(),
        "{path} is missing: apt-get install -y chromium chromium-driver"
    );
}

/// Pids of processes (not us) whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let own = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != own)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(needle))
                .unwrap_or(false)
        })
        .collect()
}

/// Kills a process group we created (`process_group(0)` made its id the child's pid).
fn kill_group(pgid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// After a browser run: nothing may still use the profile directory.
async fn assert_no_browser_left(profile: &Profile) {
    let needle = profile.dir.display().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_mentioning(&needle);
        if left.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            for pid in &left {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
            panic!("browser processes left behind: {left:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs `chromium --dump-dom url` through `proxy_url` and returns the DOM.
async fn dump_dom(proxy_url: &str, url: &str, extra: &[&str]) -> String {
    require(CHROMIUM);
    let profile = Profile::new();
    let mut cmd = tokio::process::Command::new(CHROMIUM);
    cmd.args(browser_flags(&profile, proxy_url))
        .args(extra)
        .arg("--virtual-time-budget=15000")
        .arg("--dump-dom")
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .process_group(0);
    let child = cmd.spawn().expect("spawn chromium");
    let pgid = child.id().expect("chromium pid");
    let output = tokio::time::timeout(BROWSER_TIMEOUT, child.wait_with_output()).await;
    kill_group(pgid);
    assert_no_browser_left(&profile).await;
    let output = output
        .expect("chromium timed out")
        .expect("chromium output");
    assert!(
        output.status.success(),
        "chromium failed: {:?}",
        output.status
    );
    String::from_utf8(output.stdout).expect("utf-8 DOM")
}

async fn stack(ports: usize) -> StackHandle {
    Stack::start(StackConfig::new(ports)).await.expect("stack")
}

fn proxy(stack: &StackHandle, label: &str) -> String {
    stack.gateway.port(label).expect("port").proxy_url()
}

#[tokio::test]
async fn chromium_renders_cards_of_both_styles_through_the_gateway() {
    let _lock = BROWSER_LOCK.lock().await;
    let stack = stack(2).await;

    let alpha = dump_dom(
        &proxy(&stack, "exit-01"),
        &stack.alpha.search_url("삼다수 2L x 12"),
        &[],
    )
    .await;
    assert!(
        alpha.contains(r#"<li class="product-item" data-id="a101">"#),
        "{alpha}"
    );
    assert!(alpha.contains(r#"<div class="product-title">제주 삼다수 2L x 12병</div>"#));
    assert!(alpha.contains(r#"<strong class="price-value">12,900</strong>원"#));
    assert!(alpha.contains(r#"<div class="product-shipping">무료배송</div>"#));
    assert!(
        alpha.contains(r#"<div class="product-shipping">배송비 3,000원</div>"#),
        "decoy a152"
    );
    assert!(!alpha.contains(r#"class="no-result""#));

    let beta = dump_dom(
        &proxy(&stack, "exit-02"),
        &stack.beta.search_url("삼다수 2L x 12"),
        &[],
    )
    .await;
    assert!(
        beta.contains(r#"<div class="srp-card" data-product-id="b201">"#),
        "{beta}"
    );
    assert!(beta.contains(r#"<span class="srp-price">₩11,500</span>"#));
    assert!(beta.contains(r#"<span class="srp-delivery">배송비 ₩3,000</span>"#));
    assert!(beta.contains(r#"<span class="srp-vendor">베타유통</span>"#));

    // Everything went through the gateway, each mall through its own exit port.
    let (alpha_stats, beta_stats) = (stack.alpha.stats(), stack.beta.stats());
    assert!(
        !alpha_stats.requests.contains_key("direct"),
        "{alpha_stats:?}"
    );
    assert_eq!(alpha_stats.searches.get("exit-01"), Some(&1));
    assert!(
        alpha_stats.api_requests >= 1,
        "the page's script called the API"
    );
    assert!(alpha_stats.font_requests >= 1, "the web font was loaded");
    assert_eq!(beta_stats.searches.get("exit-02"), Some(&1));
    assert!(!beta_stats.requests.contains_key("direct"));
    let gw = stack.gateway.stats();
    assert!(gw[0].forwarded >= 3 && gw[1].forwarded >= 3, "{gw:?}");
    stack.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn chromium_sees_no_result_and_block_markers() {
    let _lock = BROWSER_LOCK.lock().await;
    let stack = stack(2).await;

    let alpha = dump_dom(
        &proxy(&stack, "exit-01"),
        &stack.alpha.search_url("존재하지않는상품"),
        &[],
    )
    .await;
    assert!(
        alpha.contains(r#"<div class="no-result">검색결과가 없습니다</div>"#),
        "{alpha}"
    );
    let beta = dump_dom(
        &proxy(&stack, "exit-01"),
        &stack.beta.search_url("존재하지않는상품"),
        &[],
    )
    .await;
    assert!(
        beta.contains(
            r#"<p class="srp-empty">"존재하지않는상품"에 대한 검색 결과가 없습니다.</p>"#
        ),
        "{beta}"
    );

    stack.alpha.block_exit("exit-02");
    let blocked = dump_dom(
        &proxy(&stack, "exit-02"),
        &stack.alpha.search_url("삼다수"),
        &[],
    )
    .await;
    assert!(
        blocked.contains(r#"<div id="captcha">비정상적인 접근이 감지되었습니다</div>"#),
        "{blocked}"
    );
    assert!(
        !blocked.contains("product-item\""),
        "no cards on a block page"
    );
    assert_eq!(stack.alpha.stats().blocked, 1);
    stack.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn blocking_images_in_the_browser_cuts_bytes() {
    let _lock = BROWSER_LOCK.lock().await;
    let stack = stack(2).await;
    let url = stack.alpha.search_url("삼다수");

    let with_images = dump_dom(&proxy(&stack, "exit-01"), &url, &[]).await;
    let without = dump_dom(
        &proxy(&stack, "exit-02"),
        &url,
        &["--blink-settings=imagesEnabled=false"],
    )
    .await;
    assert!(with_images.contains(r#"data-id="a101""#));
    assert!(
        without.contains(r#"data-id="a101""#),
        "cards render without images"
    );

    let gw = stack.gateway.stats();
    let (on, off) = (gw[0].bytes_to_client, gw[1].bytes_to_client);
    let three_images = 3 * u64::try_from(IMAGE_BYTES).expect("fits");
    // NB: the rest of the two page loads differs by a few hundred bytes from run to run
    // (headers, a favicon request); the images are 150 KiB each.
    let slack = 4 * 1024;
    assert!(
        on + slack > off + three_images,
        "images on: {on} B, off: {off} B"
    );
    assert!(stack.alpha.stats().image_requests >= 3);
    stack.shutdown().await.expect("shutdown");
}

// ---------------------------------------------------------------------------------------
// W3C WebDriver over plain HTTP JSON.
// ---------------------------------------------------------------------------------------

const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

struct WebDriver {
    addr: std::net::SocketAddr,
}

impl WebDriver {
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let headers = [("content-type", "application/json")];
        let reply = HttpConn::open(self.addr)
            .await
            .request(method, path, &headers, body)
            .await;
        let json = reply.json();
        assert!(reply.status.is_success(), "webdriver {path}: {json}");
        json["value"].clone()
    }

    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if tokio::net::TcpStream::connect(self.addr).await.is_ok()
                && self.call(Method::GET, "/status", None).await["ready"] == true
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("chromedriver did not become ready");
    }

    async fn find_all(&self, session: &str, css: &str) -> Vec<String> {
        let found = self
            .call(
                Method::POST,
                &format!("/session/{session}/elements"),
                Some(json!({ "using": "css selector", "value": css })),
            )
            .await;
        found
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e[ELEMENT_KEY].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Polls until `css` matches, as a crawler's wait condition does.
    async fn wait_for(&self, session: &str, css: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let found = self.find_all(session, css).await;
            if !found.is_empty() {
                return found;
            }
            assert!(Instant::now() < deadline, "no element matched {css}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Polls until exactly `n` elements match `css`.
    async fn wait_count(&self, session: &str, css: &str, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let found = self.find_all(session, css).await.len();
            if found == n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{found} elements match {css}, not {n}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Runs `script` in the page and returns its value.
    async fn execute(&self, session: &str, script: &str) -> Value {
        self.call(
            Method::POST,
            &format!("/session/{session}/execute/sync"),
            Some(json!({ "script": script, "args": [] })),
        )
        .await
    }

    async fn go(&self, session: &str, url: &str) {
        self.call(
            Method::POST,
            &format!("/session/{session}/url"),
            Some(json!({ "url": url })),
        )
        .await;
    }

    async fn attribute(&self, session: &str, css: &str, name: &str) -> Value {
        let elements = self.wait_for(session, css).await;
        let path = format!(
            "/session/{session}/element/{}/attribute/{name}",
            elements[0]
        );
        self.call(Method::GET, &path, None).await
    }

    async fn text(&self, session: &str, css: &str) -> String {
        let elements = self.wait_for(session, css).await;
        let path = format!("/session/{session}/element/{}/text", elements[0]);
        self.call(Method::GET, &path, None)
            .await
            .as_str()
            .expect("text")
            .to_owned()
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

async fn browse_both_malls(wd: &WebDriver, session: &str, stack: &StackHandle) {
    wd.go(session, &stack.alpha.search_url("신라면 120g 5개입"))
        .await;
    let a = markup(MallStyle::Alpha);
    let card = format!(r#"{}[{}="a103"]"#, a.card, a.card_id_attr);
    assert_eq!(
        wd.text(session, &format!("{card} {}", a.price)).await,
        "4,480원"
    );
    assert_eq!(
        wd.text(session, &format!("{card} {}", a.shipping)).await,
        "배송비 3,000원"
    );
    assert_eq!(
        wd.text(session, &format!("{card} {}", a.title)).await,
        "농심 신라면 120g 5개입"
    );

    wd.go(session, &stack.beta.search_url("신라면 120g 5개입"))
        .await;
    let b = markup(MallStyle::Beta);
    let card = format!(r#"{}[{}="b203"]"#, b.card, b.card_id_attr);
    assert_eq!(
        wd.text(session, &format!("{card} {}", b.price)).await,
        "₩4,780"
    );
    assert_eq!(
        wd.text(session, &format!("{card} {}", b.shipping)).await,
        "배송비 ₩2,500"
    );
    let related = wd.find_all(session, b.card).await;
    assert!(related.len() >= 2, "the 40-pack decoy is shown too");
}

/// Starts chromedriver and one session through `proxy_url`, runs `check`, and always
/// deletes the session and kills the driver's process group, whatever `check` asserted.
async fn with_session(proxy_url: &str, check: impl AsyncFnOnce(&WebDriver, &str)) {
    require(CHROMIUM);
    require(CHROMEDRIVER);
    let profile = Profile::new();
    let port = free_port();
    let driver = tokio::process::Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .process_group(0)
        .spawn()
        .expect("spawn chromedriver");
    let pgid = driver.id().expect("chromedriver pid");
    let wd = WebDriver {
        addr: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
    };

    let run = async {
        wd.wait_ready().await;
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": browser_flags(&profile, proxy_url),
            },
        }}});
        let created = wd.call(Method::POST, "/session", Some(caps)).await;
        let session = created["sessionId"]
            .as_str()
            .expect("session id")
            .to_owned();
        // NB: the session is deleted whatever the assertions say.
        let checked = AssertUnwindSafe(check(&wd, &session)).catch_unwind().await;
        wd.call(Method::DELETE, &format!("/session/{session}"), None)
            .await;
        checked
    };
    let result = tokio::time::timeout(BROWSER_TIMEOUT, run).await;
    kill_group(pgid);
    drop(driver);
    assert_no_browser_left(&profile).await;
    if let Err(panic) = result.expect("webdriver run timed out") {
        std::panic::resume_unwind(panic);
    }
}

#[tokio::test]
async fn webdriver_session_waits_for_rendered_cards() {
    let _lock = BROWSER_LOCK.lock().await;
    let stack = stack(1).await;
    with_session(&proxy(&stack, "exit-01"), async |wd, session| {
        browse_both_malls(wd, session, &stack).await;
    })
    .await;

    let stats = stack.alpha.stats();
    assert_eq!(stats.searches.get("exit-01"), Some(&1));
    assert!(!stats.requests.contains_key("direct"));
    assert_eq!(stack.beta.stats().searches.get("exit-01"), Some(&1));
    stack.shutdown().await.expect("shutdown");
}

// ---------------------------------------------------------------------------------------
// Gamma: placeholders, lazy loading, pages, card classes, the challenge.
// ---------------------------------------------------------------------------------------

const REAL_CARDS: &str = "li.g-card:not(.g-skeleton)";

/// Right after `load`: the placeholders only, without any text.
async fn assert_placeholders_only(wd: &WebDriver, session: &str) {
    let state = wd
        .execute(
            session,
            "var s = document.querySelectorAll('li.g-card.g-skeleton');\
             return [s.length, document.querySelectorAll('li.g-card:not(.g-skeleton)').length,\
             Array.prototype.map.call(s, function (e) { return e.textContent; }).join('')];",
        )
        .await;
    assert_eq!(state, json!([SKELETONS, 0, ""]), "placeholders first");
}

async fn scroll_to_bottom(wd: &WebDriver, session: &str) {
    wd.execute(
        session,
        "window.scrollTo(0, document.body.scrollHeight); return 0;",
    )
    .await;
}

async fn browse_gamma_pages(wd: &WebDriver, session: &str, stack: &StackHandle) {
    let m = markup(MallStyle::Gamma);
    let g = &GAMMA_MARKUP;
    wd.go(session, &stack.gamma.search_url("신라면 120g 5개입"))
        .await;
    assert_placeholders_only(wd, session).await;
    wd.wait_count(session, REAL_CARDS, BATCH).await;
    assert!(
        wd.find_all(session, g.skeleton).await.is_empty(),
        "replaced"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        wd.find_all(session, REAL_CARDS).await.len(),
        BATCH,
        "no more cards without scrolling"
    );
    let card = |id: &str| format!(r#"{}[{}="{id}"]"#, m.card, m.card_id_attr);
    assert_eq!(
        wd.text(session, &format!("{} {}", card("g205"), m.price))
            .await,
        "7,900원"
    );
    scroll_to_bottom(wd, session).await;
    wd.wait_count(session, REAL_CARDS, 2 * BATCH).await;
    scroll_to_bottom(wd, session).await;
    wd.wait_count(session, REAL_CARDS, PAGE_SIZE).await;
    assert!(
        wd.find_all(session, &card("g225")).await.is_empty(),
        "page 2's"
    );

    let href = wd.attribute(session, g.next_page, "href").await;
    assert!(
        href.as_str().is_some_and(|h| h.ends_with("&page=2")),
        "{href}"
    );
    let next = wd
        .execute(session, "return document.querySelector('a.g-next').href;")
        .await;
    let next = next.as_str().expect("absolute next href").to_owned();
    wd.go(session, &next).await;
    wd.wait_for(session, &card("g225")).await;
    let first = wd
        .execute(
            session,
            "return document.querySelector('li.g-card').getAttribute('data-gid');",
        )
        .await;
    assert_eq!(first, "g225", "the true lowest opens page 2");
    assert!(wd.find_all(session, g.next_page).await.is_empty());
}

async fn browse_gamma_classes(wd: &WebDriver, session: &str, stack: &StackHandle) {
    let m = markup(MallStyle::Gamma);
    let g = &GAMMA_MARKUP;
    let card = |id: &str| format!(r#"{}[{}="{id}"]"#, m.card, m.card_id_attr);
    stack.gamma.set_challenge(1, Duration::from_secs(2));
    wd.go(session, &stack.gamma.search_url("햇반 210g 12개"))
        .await;
    let challenge = wd
        .execute(
            session,
            "var c = document.querySelector('#g-challenge'); return c ? c.textContent : null;",
        )
        .await;
    assert!(
        challenge
            .as_str()
            .is_some_and(|t| t.contains(g.challenge_text)),
        "interstitial first: {challenge}"
    );
    // The interstitial reloads by itself within the profile's 8 s.
    let cleared = Instant::now();
    wd.wait_for(session, &card("g301")).await;
    assert!(cleared.elapsed() < Duration::from_secs(8));
    assert_eq!(
        wd.text(session, &format!("{} {}", card("g301"), g.badge_ad))
            .await,
        "광고"
    );
    let ad_link = wd
        .attribute(session, &format!("{} {}", card("g301"), m.link), "href")
        .await;
    assert!(
        ad_link
            .as_str()
            .is_some_and(|h| h.contains("/adcr?u=%2Fp%2Fg301")),
        "{ad_link}"
    );
    assert_eq!(
        wd.text(session, &format!("{} {}", card("g302"), m.price))
            .await,
        "9,900원~"
    );
    for (id, badge, text) in [
        ("g303", g.badge_used, "중고"),
        ("g304", g.badge_sold_out, "품절"),
        ("g305", g.badge_overseas, "해외직구"),
        ("g306", g.sellers, "판매처 12"),
    ] {
        assert_eq!(
            wd.text(session, &format!("{} {badge}", card(id))).await,
            text
        );
    }

    wd.go(session, &stack.gamma.search_url("코카콜라 500ml 24개"))
        .await;
    assert_eq!(
        wd.text(session, &format!("{} {}", card("g402"), m.price))
            .await,
        "31,800원 23,500원"
    );
    assert_eq!(
        wd.text(session, &format!("{} {}", card("g402"), g.list_price))
            .await,
        "31,800원"
    );

    wd.go(session, &stack.gamma.search_url("진라면 순한맛 120g 5개입"))
        .await;
    assert_eq!(
        wd.text(session, &format!("{} {}", card("g601"), m.shipping))
            .await,
        "2만원 이상 무료배송"
    );
    wd.wait_for(session, &card("g602")).await;
    assert!(
        wd.find_all(session, &format!("{} {}", card("g602"), m.shipping))
            .await
            .is_empty(),
        "no shipping element at all"
    );

    wd.go(session, &stack.gamma.search_url("스팸 클래식 200g 10개"))
        .await;
    let title = format!("{} {}", card("g701"), m.title);
    assert_eq!(wd.text(session, &title).await, "CJ 스팸 클래식 200g x 1…");
    assert_eq!(
        wd.attribute(session, &title, "title").await,
        "CJ 스팸 클래식 200g x 10개 선물세트 (쇼핑백 포함)"
    );
    assert_eq!(
        wd.attribute(session, &format!("{} {}", card("g702"), m.title), "title")
            .await,
        Value::Null,
        "an uncut title has no title attribute"
    );
}

#[tokio::test]
async fn gamma_renders_placeholders_then_batches_then_page_two() {
    let _lock = BROWSER_LOCK.lock().await;
    let stack = stack(1).await;
    with_session(&proxy(&stack, "exit-01"), async |wd, session| {
        browse_gamma_pages(wd, session, &stack).await;
    })
    .await;
    let stats = stack.gamma.stats();
    assert_eq!(stats.searches.get("exit-01"), Some(&2), "two pages");
    assert!(!stats.requests.contains_key("direct"));
    stack.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn gamma_challenge_clears_itself_and_cards_show_their_classes() {
    let _lock = BROWSER_LOCK.lock().await;
    let stack = stack(1).await;
    with_session(&proxy(&stack, "exit-01"), async |wd, session| {
        browse_gamma_classes(wd, session, &stack).await;
    })
    .await;
    let stats = stack.gamma.stats();
    assert_eq!(stats.challenges_served, 1);
    assert!(
        stats.challenges_cleared >= 4,
        "the reload and every later page: {stats:?}"
    );
    stack.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn chromium_dumps_gamma_pages_as_a_crawler_would_see_them() {
    let _lock = BROWSER_LOCK.lock().await;
    let stack = stack(1).await;
    let exit = proxy(&stack, "exit-01");
    let m = markup(MallStyle::Gamma);

    let dom = dump_dom(&exit, &stack.gamma.search_url("삼다수 2L x 12"), &[]).await;
    assert_eq!(
        dom.matches(r#"<li class="g-card" data-gid=""#).count(),
        BATCH,
        "{dom}"
    );
    assert!(!dom.contains("g-skeleton\""), "placeholders replaced");
    assert!(dom.contains(r#"<div class="g-ship">배송비 3,000원</div>"#));
    assert!(
        !dom.contains(r#"data-gid="g113""#),
        "card 13 needs scrolling"
    );
    assert!(dom.contains("__NEXT_DATA__"), "the blob stays");

    let empty = dump_dom(&exit, &stack.gamma.search_url("존재하지않는상품"), &[]).await;
    assert!(
        empty.contains(&format!(
            r#"<div class="g-empty">{}</div>"#,
            m.no_result_text
        )),
        "{empty}"
    );

    stack.gamma.set_layout_changed(true);
    let changed = dump_dom(&exit, &stack.gamma.search_url("햇반 210g 12개"), &[]).await;
    assert!(
        changed.contains(r#"<article class="pc-item" data-item-no="g301">"#),
        "{changed}"
    );
    assert!(!changed.contains("__NEXT_DATA__") && !changed.contains("class=\"g-"));
    stack.gamma.set_layout_changed(false);

    stack.gamma.set_restricted(true);
    let restricted = dump_dom(&exit, &stack.gamma.search_url("햇반"), &[]).await;
    assert!(
        restricted.contains(GAMMA_MARKUP.restricted_text),
        "{restricted}"
    );
    stack.shutdown().await.expect("shutdown");
}
