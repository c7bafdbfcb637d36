//! The built `lpsctl` against a real coordinator (on 127.0.0.1:0, a fresh migrated
//! database per test): a search it waits for while a node finishes the jobs (progress on
//! stderr, the final status as JSON on stdout), the same search answered from the store as
//! a table, reads for scripts (`ops --json`, `job`, `deliveries`), and failures as one line on stderr with
//! the status code and a nonzero exit. Jobs are finished through the queue, as a node
//! would.

use std::time::Duration;

use lps_coordinator::{app::Running, db::MIGRATOR, queue::MallLimits};
use lps_proto::model::{JobResult, MallId, Offer, ShippingStatus};
use sqlx::PgPool;

mod common;

use common::CLIENT_TOKEN;

const ALPHA: &str = "testmall-alpha";
const BETA: &str = "testmall-beta";
const WATER: &str = "제주 삼다수 2L x 12";
const ADMIN_TOKENS: &str = "ops=ops-admin-token-00001";
const ADMIN: &str = "ops-admin-token-00001";

async fn lpsctl(running: &Running, token: &str, args: &[&str]) -> std::process::Output {
    common::lpsctl(&format!("http://{}", running.grpc_addr), token, &[], args).await
}

fn offer(mall: &str, price: i64, shipping_fee: i64) -> Offer {
    Offer {
        mall: MallId::new(mall).unwrap(),
        title: format!("{WATER} ({price})"),
        price,
        shipping_fee,
        url: format!("http://127.0.0.1/{mall}/{price}"),
        seller: "seller".into(),
        match_score: 0.9,
        shipping: ShippingStatus::Paid,
        list_price: 0,
        flags: Vec::new(),
    }
}

/// A node: finishes `n` jobs, alpha's at 12,000 + 3,000 and beta's at 13,000 + 500.
fn node(running: &Running, n: usize) -> tokio::task::JoinHandle<()> {
    let queue = running.queue.clone();
    tokio::spawn(async move {
        let mut done = 0;
        while done < n {
            for job in queue.claim("node-1", None, 64).await.unwrap() {
                let offer = if job.mall.as_str() == ALPHA {
                    offer(ALPHA, 12_000, 3_000)
                } else {
                    offer(BETA, 13_000, 500)
                };
                let result = JobResult::found(job.lease, vec![offer]).unwrap();
                queue.complete_if_leased("node-1", &result).await.unwrap();
                done += 1;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn search_wait_prints_the_final_status_and_failures_are_one_line(pool: PgPool) {
    let running = common::start_with_mall(&pool, ALPHA, &["--admin-tokens", ADMIN_TOKENS]).await;
    running
        .queue
        .upsert_mall(&MallLimits::unlimited(MallId::new(BETA).unwrap()))
        .await
        .unwrap();

    // A node's work, done while lpsctl waits.
    let node = node(&running, 2);
    let out = lpsctl(
        &running,
        CLIENT_TOKEN,
        &[
            "search", WATER, "--mall", ALPHA, "--mall", BETA, "--wait", "--json",
        ],
    )
    .await;
    node.await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "lpsctl failed: {stderr}");
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["final"], true);
    let product = &status["products"][0];
    assert_eq!(product["product"]["name"], WATER);
    assert_eq!(product["malls"].as_array().unwrap().len(), 2);
    assert_eq!(product["malls"][0]["state"], "done");
    assert_eq!(product["malls"][0]["outcome"], "found");
    assert_eq!(product["lowest"]["mall"], BETA);
    assert_eq!(product["lowest"]["effective_price"], 13_500);
    assert!(stderr.contains("2/2 finished"), "{stderr}");
    assert!(
        stderr.lines().last().unwrap().ends_with("final"),
        "{stderr}"
    );

    // Answered from the store (max age), as a table.
    let out = lpsctl(
        &running,
        CLIENT_TOKEN,
        &[
            "search",
            WATER,
            "--mall",
            ALPHA,
            "--mall",
            BETA,
            "--max-age",
            "1h",
            "--wait",
        ],
    )
    .await;
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("done/found"), "{table}");
    assert!(
        table.contains("15,000") && table.contains("13,500"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .last()
            .unwrap()
            .starts_with("lowest: 13,500 (13,000 + 500 shipping) at testmall-beta"),
        "{table}"
    );

    // Reads for scripts.
    let out = lpsctl(&running, ADMIN, &["ops", "--json"]).await;
    assert!(out.status.success());
    let ops: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(ops["jobs"]["done"], 2);
    // A client token reads its own figures alone.
    let out = lpsctl(&running, CLIENT_TOKEN, &["ops", "--json"]).await;
    assert!(out.status.success());
    let own: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(own["scope_client"], common::CLIENT_NAME);
    assert_eq!(own["clients"].as_array().unwrap().len(), 1, "{own}");
    assert!(
        own["clients"][0]["searches_last_hour"].as_i64().unwrap() >= 1,
        "{own}"
    );
    let out = lpsctl(&running, CLIENT_TOKEN, &["ops"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("a client token sees its own figures only"),
        "{text}"
    );
    let job_id = status["products"][0]["malls"][0]["job_id"]
        .as_i64()
        .unwrap();
    let out = lpsctl(&running, CLIENT_TOKEN, &["job", &job_id.to_string()]).await;
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("done/found"));

    // Failures: one line on stderr with the status code, nonzero exit.
    let out = lpsctl(&running, "wrong-token", &["ops"]).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("lpsctl: Unauthenticated: "), "{stderr}");
    let out = lpsctl(&running, CLIENT_TOKEN, &["drain", "node-1"]).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("lpsctl: PermissionDenied: "));
    let out = lpsctl(&running, CLIENT_TOKEN, &["search", "", "--mall", ALPHA]).await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .starts_with("lpsctl: InvalidArgument: products[0].name: ")
    );

    // Deliveries are an operator's: none yet, and an unknown one is NOT_FOUND.
    let out = lpsctl(&running, CLIENT_TOKEN, &["deliveries"]).await;
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("lpsctl: PermissionDenied: "));
    let out = lpsctl(&running, ADMIN, &["deliveries", "--json"]).await;
    assert!(out.status.success(), "{out:?}");
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed, serde_json::json!([]));
    let out = lpsctl(&running, ADMIN, &["delivery", "retry", "999"]).await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("lpsctl: NotFound: "),
        "{out:?}"
    );
    running.shutdown().await;
}

/// `search --brand/--model-code/--gtin`: the hints are stored with the job a node leases;
/// a bad one is named by its flag before anything is sent.
#[sqlx::test(migrator = "MIGRATOR")]
async fn search_sends_the_product_hints_and_names_a_bad_one_by_its_flag(pool: PgPool) {
    let running = common::start_with_mall(&pool, ALPHA, &[]).await;
    let out = lpsctl(
        &running,
        CLIENT_TOKEN,
        &[
            "search",
            "갤럭시 S24 울트라 256GB",
            "--code",
            "SKU-S24U",
            "--brand",
            "삼성",
            "--model-code",
            "SM-S928N",
            "--gtin",
            "8801234567893",
            "--mall",
            ALPHA,
        ],
    )
    .await;
    assert!(out.status.success(), "{out:?}");
    let jobs = running.queue.claim("node-1", None, 8).await.unwrap();
    assert_eq!(jobs.len(), 1);
    let hints = &jobs[0].hints;
    assert_eq!(
        (hints.brand(), hints.model_code(), hints.gtin()),
        (Some("삼성"), Some("SM-S928N"), Some("8801234567893"))
    );

    let out = lpsctl(
        &running,
        CLIENT_TOKEN,
        &[
            "search",
            "갤럭시 S24",
            "--gtin",
            "8801234567894",
            "--mall",
            ALPHA,
        ],
    )
    .await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("lpsctl: --gtin: the check digit"),
        "{stderr}"
    );
    running.shutdown().await;
}

/// `negative-cache clear`: an operator forgets a wrong "not found" and the next search
/// crawls; a client token may not.
#[sqlx::test(migrator = "MIGRATOR")]
async fn negative_cache_clear_forgets_a_products_not_found(pool: PgPool) {
    let running = common::start_with_mall(&pool, ALPHA, &["--admin-tokens", ADMIN_TOKENS]).await;
    let search = |running: &Running| {
        let running_addr = running.grpc_addr;
        async move {
            let out = common::lpsctl(
                &format!("http://{running_addr}"),
                CLIENT_TOKEN,
                &[],
                &["search", WATER, "--mall", ALPHA, "--json"],
            )
            .await;
            assert!(out.status.success(), "{out:?}");
            let accepted: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            accepted["items"][0]["disposition"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    assert_eq!(search(&running).await, "queued");
    let judge = running.queue.current_judge().unwrap().clone();
    for job in running.queue.claim("node-1", None, 8).await.unwrap() {
        let result = JobResult::not_found(job.lease).judged_with(judge.judged_with(ALPHA));
        running
            .queue
            .complete_if_leased("node-1", &result)
            .await
            .unwrap();
    }
    assert_eq!(search(&running).await, "cached_not_found");

    let args = ["negative-cache", "clear", WATER, "--mall", ALPHA, "--json"];
    let out = lpsctl(&running, CLIENT_TOKEN, &args).await;
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("lpsctl: PermissionDenied: "),
        "{out:?}"
    );
    let out = lpsctl(&running, ADMIN, &args).await;
    assert!(out.status.success(), "{out:?}");
    let cleared: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cleared, serde_json::json!({ "cleared": 1 }));
    assert_eq!(search(&running).await, "queued");
    running.shutdown().await;
}
