//! `crawler-node probe`, run as the built binary with real Chromium: on saved real pages
//! (`tests/fixtures/real-pages/`) and on the test mall through the test kit's proxy gateway.
//! What a profile author reads: each field's rules, the answer line, `--json`.

mod common;

use std::path::{Path, PathBuf};

use lps_test_kit::{
    gateway::GatewayConfig,
    stack::{Stack, StackConfig},
};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/real-pages")
        .join(name)
}

fn builtin(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../profiles/builtin")
        .join(name)
}

/// Runs the probe with `args`; its stdout, or a panic with both streams.
async fn probe(args: &[&std::ffi::OsStr]) -> String {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_crawler-node"))
        .arg("probe")
        .args(args)
        .output()
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

#[tokio::test]
async fn the_probe_reports_every_fields_rules_and_the_answer_the_job_would_give() {
    let _serial = common::serial().await;
    let profile = builtin("naver.toml");
    let page = fixture("naver-2026-composite-list.html");
    let out = probe(&[
        os("--profile"),
        profile.as_os_str(),
        os("--query"),
        os("닭가슴살 100g"),
        os("--html"),
        page.as_os_str(),
    ])
    .await;
    for line in [
        // The rule whose value the field took, a later rule that read the same, and why
        // a rule read nothing: a JSON path, a selector.
        r#"rule title[0] $.productTitle: used "하루닭 수비드 닭가슴살 100g 1팩""#,
        r#"rule price[1] $.lowPrice: unused "1890""#,
        "rule list_price[0] $.listPrice: empty: $.listPrice found nothing",
        r#"rule shipping_fee[0] $.dlvryFee: used "3000""#,
        r#"rule title[0] css "a[class^='product_link__']" attr "title": empty: selector matched nothing"#,
        // The answer: the lowest over known shipping (an ad card is excluded).
        "answer lowest 하루닭 수비드 닭가슴살 100g 1팩 1890 + shipping paid 3000 = 4890",
    ] {
        assert!(out.contains(line), "{line:?} missing:\n{out}");
    }

    // The same as JSON.
    let json = probe(&[
        os("--profile"),
        profile.as_os_str(),
        os("--query"),
        os("닭가슴살 100g"),
        os("--html"),
        page.as_os_str(),
        os("--json"),
    ])
    .await;
    let report: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}:\n{json}"));
    assert_eq!(report["profile"], "naver");
    assert_eq!(report["verdict"]["kind"], "cards");
    assert_eq!(report["verdict"]["source"], "next_data");
    assert_eq!(report["answer"]["lowest"]["effective_price"], 4890);
    assert_eq!(report["answer"]["lowest"]["shipping"], "paid");
    assert!(report["answer"]["not_found"].is_null());
    let source = &report["sources"][0];
    assert_eq!(source["chosen"], true);
    let card = source["cards"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["price"] == 1890)
        .expect("the 1890 card");
    assert_eq!(card["kept"], true);
    assert_eq!(card["judge"]["same"], true);
    assert_eq!(card["shipping"]["status"], "paid");
    let rule = |field: &str, index: u64| {
        card["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["field"] == field && r["index"] == index)
            .unwrap_or_else(|| panic!("no {field}[{index}] in {card}"))
            .clone()
    };
    assert_eq!(rule("price", 0)["outcome"], "used");
    assert_eq!(rule("price", 0)["detail"], "1890");
    assert_eq!(rule("price", 0)["rule"], "$.price");
    assert_eq!(rule("list_price", 0)["outcome"], "empty");
}

#[tokio::test]
async fn a_saved_page_is_read_at_once_and_a_rule_landing_on_an_array_is_unreadable() {
    let _serial = common::serial().await;
    // A profile that reads nothing on this page: the verdict comes once the saved document
    // is ready, not after the profile's 10 s wait_timeout.
    let out = probe(&[
        os("--profile"),
        builtin("testmall-alpha.toml").as_os_str(),
        os("--query"),
        os("닭가슴살 100g"),
        os("--html"),
        fixture("naver-ns-search-dom.html").as_os_str(),
    ])
    .await;
    assert!(
        out.contains(
            "verdict layout (no card source found a card and no no-results marker showed within 1s"
        ),
        "{out}"
    );
    assert!(
        out.contains("answer not_found (no source found a card: the job fails `layout` at once)"),
        "{out}"
    );

    // A rule whose path lands on an array, and a captured_json source a file cannot feed.
    let dir = std::env::temp_dir().join(format!("lps-probe-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = lps_profiles::format::builtin_text("naver.toml")
        .unwrap()
        .replacen(
            "shipping_fee = [",
            "shipping = \"$.lowMallList\"\nshipping_fee = [",
            1,
        )
        .replacen(
            "[[sources]]\nkind = \"dom\"",
            "[[sources]]\nkind = \"captured_json\"\nname = \"search_api\"\nurl_pattern = \"/api/search\"\nlist = \"$.items[*]\"\n[sources.fields]\ntitle = \"$.name\"\nprice = \"$.price\"\nlink = \"$.url\"\n\n[[sources]]\nkind = \"dom\"",
            1,
        );
    assert!(text.contains("kind = \"captured_json\""));
    let profile = dir.join("naver-probe.toml");
    std::fs::write(&profile, text).unwrap();
    let json = probe(&[
        os("--profile"),
        profile.as_os_str(),
        os("--query"),
        os("닭가슴살 100g"),
        os("--html"),
        fixture("naver-2026-composite-list.html").as_os_str(),
        os("--json"),
    ])
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    let report: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}:\n{json}"));
    let notes = report["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("\"search_api\" reads the page's captured fetch/XHR responses: a saved HTML file cannot provide them")),
        "{notes:?}"
    );
    let unreadable: Vec<&Value> = report["sources"][0]["cards"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["rules"].as_array().unwrap())
        .filter(|r| r["outcome"] == "unreadable")
        .collect();
    assert_eq!(unreadable.len(), 1, "{unreadable:?}");
    assert_eq!(unreadable[0]["field"], "shipping");
    assert_eq!(
        unreadable[0]["detail"],
        "$.lowMallList lands on an array, not a value"
    );
}

#[tokio::test]
async fn the_probe_goes_through_a_given_proxy_and_keeps_cookies_only_when_asked() {
    let _serial = common::serial().await;
    let mut config = StackConfig::new(2);
    config.gateway = GatewayConfig::new(2).with_credentials("probe-user", "pr0be-pw");
    let stack = Stack::start(config).await.unwrap();
    let port = common::gateway_ports(&stack)[1];
    let dir = std::env::temp_dir().join(format!("lps-probe-proxy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = lps_profiles::format::builtin_text("testmall-alpha.toml")
        .unwrap()
        .replace(
            "http://127.0.0.1:18081",
            stack.alpha.base_url().trim_end_matches('/'),
        );
    let profile = dir.join("alpha.toml");
    std::fs::write(&profile, text).unwrap();
    let cookies = dir.join("cookies");
    let proxy = format!("http://probe-user:pr0be-pw@127.0.0.1:{port}");
    let out = probe(&[
        os("--profile"),
        profile.as_os_str(),
        os("--query"),
        os("삼다수 2L x 12"),
        os("--proxy"),
        os(&proxy),
        os("--keep-cookies"),
        cookies.as_os_str(),
    ])
    .await;
    assert!(
        out.contains(&format!("proxy http://probe-user:***@127.0.0.1:{port}")),
        "{out}"
    );
    assert!(!out.contains("pr0be-pw"), "the password is never shown");
    assert!(out.contains("answer lowest "), "{out}");
    assert!(out.contains("= 12900"), "{out}");
    let stats = stack.alpha.stats();
    assert_eq!(stats.searches.get("exit-02"), Some(&1), "{stats:?}");
    assert!(
        !stats.requests.contains_key("direct"),
        "nothing bypassed the proxy: {stats:?}"
    );
    // The browser profile (its cookies) is kept for the next run.
    assert!(cookies.join("slot-0").exists(), "{cookies:?}");
    let _ = std::fs::remove_dir_all(&dir);
    stack.shutdown().await.unwrap();
}
