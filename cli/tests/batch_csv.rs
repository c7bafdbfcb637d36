//! `lpsctl search --file` and `--csv` through the built `lpsctl` binary against a real
//! coordinator (on 127.0.0.1:0, a fresh migrated database per test): a products file with a
//! BOM, a header and RFC 4180 quoting goes in, the results come out as CSV that reads back
//! in (and searches the same products again), the price history as CSV, and a malformed
//! file is refused naming its line before anything is enqueued. Jobs are finished through
//! the queue, as a node would.

use std::time::Duration;

use lps_coordinator::{app::Running, db::MIGRATOR};
use lps_proto::model::{JobResult, MallId, Offer, ShippingStatus};
use sqlx::PgPool;

mod common;

const ALPHA: &str = "testmall-alpha";

async fn lpsctl(running: &Running, args: &[&str]) -> std::process::Output {
    let addr = format!("http://{}", running.grpc_addr);
    common::lpsctl(&addr, common::CLIENT_TOKEN, &[], args).await
}

async fn count(pool: &PgPool, table: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!("select count(*) from {table}")))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The rows of CSV `out` (header first), read with the `csv` crate as a spreadsheet tool
/// would.
fn rows(out: &[u8]) -> Vec<Vec<String>> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(out);
    reader
        .records()
        .map(|r| r.unwrap().iter().map(str::to_owned).collect())
        .collect()
}

fn column(rows: &[Vec<String>], name: &str) -> Vec<String> {
    let i = rows[0]
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {:?}", rows[0]));
    rows[1..].iter().map(|r| r[i].clone()).collect()
}

/// A node: finishes every job it can claim, an offer priced by the product's place in
/// `names`, whose title has a comma and quotes; returns when `n` jobs are done.
fn node(running: &Running, names: Vec<String>, n: usize) -> tokio::task::JoinHandle<()> {
    let queue = running.queue.clone();
    tokio::spawn(async move {
        let mut done = 0;
        while done < n {
            for job in queue.claim("node-1", None, 16).await.unwrap() {
                let i = names
                    .iter()
                    .position(|name| *name == job.product_name)
                    .unwrap_or_else(|| panic!("unexpected product {:?}", job.product_name));
                let offer = Offer {
                    mall: MallId::new(ALPHA).unwrap(),
                    title: format!("=\"{}\", 1+1", job.product_name),
                    price: 10_000 + i as i64,
                    shipping_fee: 2_500,
                    url: format!("http://127.0.0.1/p/{i}"),
                    seller: "seller, inc.".into(),
                    match_score: 0.9,
                    shipping: ShippingStatus::Paid,
                    list_price: 0,
                    flags: Vec::new(),
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
async fn a_malformed_products_file_names_its_line_and_starts_nothing(pool: PgPool) {
    let running = common::start_with_mall(&pool, ALPHA, &[]).await;
    let dir = common::TempDir::new("csv-bad");
    let file = dir.0.join("products.csv");
    std::fs::write(
        &file,
        "name,code,brand\n\"햇반 210g, 12개\",HB-1,CJ\n\"\",X-2,\n스팸 200g,SP-3,\n",
    )
    .unwrap();
    let path = file.display().to_string();
    let out = lpsctl(&running, &["search", "--file", &path, "--mall", ALPHA]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("{path} line 3: name must not be empty")),
        "{stderr}"
    );
    // A bad code, and a row longer than the header, are named the same way.
    std::fs::write(&file, "a,ok-1\nb,no spaces\n").unwrap();
    let out = lpsctl(&running, &["search", "--file", &path, "--mall", ALPHA]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{path} line 2: code only letters")),
        "{stderr}"
    );
    assert_eq!(count(&pool, "search_request").await, 0);
    assert_eq!(count(&pool, "job").await, 0);
    running.shutdown().await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn csv_products_in_and_results_out_round_trip(pool: PgPool) {
    let running = common::start_with_mall(&pool, ALPHA, &[]).await;
    let dir = common::TempDir::new("csv-trip");
    let file = dir.0.join("products.csv");
    // A BOM, CRLF, a header in its own order, quoted names with commas, quotes and a line
    // break (read as a space), a brand hint put in front of a name that lacks it, and a
    // blank line.
    std::fs::write(
        &file,
        "\u{feff}code,name,brand\r\nHB-1,\"햇반 210g, 12개\",CJ\r\nSP-3,\"스팸 \"\"클래식\"\" 200g\",\r\n\r\n,\"삼다수 2L\nx 12\",제주\r\n",
    )
    .unwrap();
    let names = vec![
        "CJ 햇반 210g, 12개".to_owned(),
        "스팸 \"클래식\" 200g".to_owned(),
        "제주 삼다수 2L x 12".to_owned(),
    ];
    let worker = node(&running, names.clone(), names.len());
    let out = lpsctl(
        &running,
        &[
            "search",
            "--file",
            &file.display().to_string(),
            "--mall",
            ALPHA,
            "--wait",
            "--csv",
        ],
    )
    .await;
    worker.await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.stdout.starts_with("\u{feff}".as_bytes()),
        "no BOM unless --bom"
    );
    let table = rows(&out.stdout);
    assert_eq!(
        table[0][..5],
        ["search_id", "product_index", "name", "code", "mall"]
    );
    assert_eq!(table.len(), 4, "{table:?}");
    assert_eq!(column(&table, "name"), names);
    assert_eq!(column(&table, "code"), ["HB-1", "SP-3", ""]);
    assert_eq!(column(&table, "price"), ["10000", "10001", "10002"]);
    assert_eq!(
        column(&table, "effective_price"),
        ["12500", "12501", "12502"]
    );
    assert_eq!(column(&table, "shipping"), ["paid", "paid", "paid"]);
    assert_eq!(column(&table, "currency"), ["KRW", "KRW", "KRW"]);
    assert_eq!(column(&table, "lowest"), ["true", "true", "true"]);
    assert_eq!(column(&table, "outcome"), ["found", "found", "found"]);
    assert_eq!(column(&table, "seller")[0], "seller, inc.");
    // A mall's title that starts like a formula is written so that it cannot run.
    assert_eq!(column(&table, "title")[0], "'=\"CJ 햇반 210g, 12개\", 1+1");

    // The results file reads back in as the same products: answered from the store.
    let results = dir.0.join("results.csv");
    std::fs::write(&results, &out.stdout).unwrap();
    let again = lpsctl(
        &running,
        &[
            "search",
            "--file",
            &results.display().to_string(),
            "--mall",
            ALPHA,
            "--max-age",
            "1h",
            "--wait",
            "--csv",
            "--bom",
        ],
    )
    .await;
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(
        again.stdout.starts_with("\u{feff}".as_bytes()),
        "--bom writes one"
    );
    let table_again = rows(&again.stdout[3..]);
    assert_eq!(column(&table_again, "name"), names);
    assert_eq!(
        column(&table_again, "disposition"),
        ["cached_result", "cached_result", "cached_result"]
    );
    assert_eq!(count(&pool, "job").await, 3, "nothing crawled twice");

    // Price history as CSV, one row per entry and mall.
    let history = lpsctl(&running, &["history", "--code", "HB-1", "--csv"]).await;
    assert!(
        history.status.success(),
        "{}",
        String::from_utf8_lossy(&history.stderr)
    );
    let entries = rows(&history.stdout);
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!(column(&entries, "code"), ["HB-1"]);
    assert_eq!(column(&entries, "mall"), [ALPHA]);
    assert_eq!(column(&entries, "effective_price"), ["12500"]);
    assert_eq!(column(&entries, "complete"), ["true"]);
    assert_eq!(column(&entries, "lowest"), ["true"]);

    // --csv is refused where there is nothing to tabulate that way.
    let ops = lpsctl(&running, &["ops", "--csv"]).await;
    assert!(!ops.status.success());
    assert!(
        String::from_utf8_lossy(&ops.stderr)
            .contains("--csv is for search, status, watch and history")
    );
    running.shutdown().await;
}
