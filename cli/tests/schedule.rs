//! `lpsctl schedule add|list|show|pause|resume|delete` through the built binary against a
//! real coordinator (on 127.0.0.1:0, a fresh migrated database per test): what it stores
//! is what the flags said (products, cadence, rules), the table and JSON show it, pause,
//! resume and delete change it, and bad input is refused — by lpsctl before any call when
//! it cannot read a flag, by the coordinator (InvalidArgument naming the field) otherwise.

use lps_coordinator::{app::Running, db::MIGRATOR};
use sqlx::PgPool;

mod common;

use common::CLIENT_TOKEN;

const ALPHA: &str = "testmall-alpha";
/// A configured destination (never reached here: nothing is notified in these tests).
const DESTINATION: [&str; 4] = [
    "--destinations",
    "watch=http://127.0.0.1:9/watch",
    "--destination-secrets",
    "watch=schedule-test-secret-01",
];

async fn start(pool: &PgPool) -> Running {
    let mut flags = vec!["--schedule-min-interval", "10m"];
    flags.extend(DESTINATION);
    common::start_with_mall(pool, ALPHA, &flags).await
}

async fn lpsctl(running: &Running, args: &[&str]) -> std::process::Output {
    common::lpsctl(
        &format!("http://{}", running.grpc_addr),
        CLIENT_TOKEN,
        &[],
        args,
    )
    .await
}

fn ok_json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "lpsctl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_schedule_is_added_shown_paused_resumed_and_deleted(pool: PgPool) {
    let running = start(&pool).await;

    let added = ok_json(
        &lpsctl(
            &running,
            &[
                "schedule",
                "add",
                "제주 삼다수 2L x 12",
                "햇반 210g 12개",
                "--mall",
                ALPHA,
                "--every",
                "6h",
                "--below",
                "2=9,900",
                "--move-percent",
                "5",
                "--destination",
                "watch",
                "--idempotency-key",
                "watch-1",
                "--json",
            ],
        )
        .await,
    );
    let id = added["schedule_id"].as_i64().unwrap();
    assert_eq!(added["client"], common::CLIENT_NAME);
    assert_eq!(added["products"][1]["name"], "햇반 210g 12개");
    assert_eq!(added["malls"], serde_json::json!([ALPHA]));
    assert_eq!(added["interval_seconds"], 21_600.0);
    assert_eq!(added["paused"], false);
    assert_eq!(added["destinations"], serde_json::json!(["watch"]));
    assert_eq!(
        added["rules"],
        serde_json::json!([
            {"product_index": 1, "below": 9900, "move_percent": null},
            {"product_index": null, "below": null, "move_percent": 5.0},
        ])
    );
    // The same key and request again: the same schedule.
    let again = lpsctl(
        &running,
        &[
            "schedule",
            "add",
            "제주 삼다수 2L x 12",
            "햇반 210g 12개",
            "--mall",
            ALPHA,
            "--every",
            "6h",
            "--below",
            "2=9,900",
            "--move-percent",
            "5",
            "--destination",
            "watch",
            "--idempotency-key",
            "watch-1",
            "--json",
        ],
    )
    .await;
    assert_eq!(ok_json(&again)["schedule_id"], id);
    assert!(String::from_utf8_lossy(&again.stderr).contains("replayed"));

    let out = lpsctl(&running, &["schedule", "list"]).await;
    let table = String::from_utf8(out.stdout).unwrap();
    let row = table
        .lines()
        .find(|l| l.starts_with(&id.to_string()))
        .unwrap_or_else(|| panic!("no row of {id} in\n{table}"));
    assert!(
        row.contains("every 6h") && row.contains("active"),
        "{table}"
    );

    let out = lpsctl(&running, &["schedule", "show", &id.to_string()]).await;
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(shown.contains("  2. 햇반 210g 12개"), "{shown}");
    assert!(shown.contains("  product 2: below 9,900"), "{shown}");
    assert!(shown.contains("  every product: move ≥ 5%"), "{shown}");

    let paused =
        ok_json(&lpsctl(&running, &["schedule", "pause", &id.to_string(), "--json"]).await);
    assert_eq!(paused["paused"], true);
    let resumed =
        ok_json(&lpsctl(&running, &["schedule", "resume", &id.to_string(), "--json"]).await);
    assert_eq!(resumed["paused"], false);
    let out = lpsctl(&running, &["schedule", "delete", &id.to_string()]).await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("schedule {id} deleted\n")
    );
    let out = lpsctl(&running, &["schedule", "show", &id.to_string()]).await;
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("lpsctl: NotFound: "),
        "{out:?}"
    );
    let listed = ok_json(&lpsctl(&running, &["schedule", "list", "--json"]).await);
    assert_eq!(listed, serde_json::json!([]));
    running.shutdown().await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn bad_schedules_are_refused_naming_what_is_wrong(pool: PgPool) {
    let running = start(&pool).await;
    // The coordinator's checks: one line naming the field.
    for (args, field) in [
        (&["--every", "1m"][..], "interval"),
        (&["--cron", "not a pattern"][..], "cron"),
        (
            &["--every", "1h", "--below=-5", "--destination", "watch"][..],
            "rules[0].below",
        ),
        (&["--every", "1h", "--below", "9900"][..], "destinations"),
        (
            &[
                "--every",
                "1h",
                "--move-percent",
                "0",
                "--destination",
                "watch",
            ][..],
            "rules[0].move_percent",
        ),
        (
            &["--every", "1h", "--destination", "nowhere"][..],
            "destinations[0]",
        ),
        (&["--every", "1h", "--mall", "no-such-mall"][..], "malls[0]"),
    ] {
        let mut all = vec!["schedule", "add", "제주 삼다수 2L x 12"];
        all.extend_from_slice(args);
        let out = lpsctl(&running, &all).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was stored");
        assert!(
            stderr.starts_with(&format!("lpsctl: InvalidArgument: {field}")),
            "{args:?}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    // What lpsctl cannot read is refused before any call.
    for args in [
        &["--every", "1h", "--below", "0=100"][..],
        &["--every", "1h", "--below", "cheap"][..],
        &["--every", "1h", "--cron", "0 6 * * *"][..],
        &[][..],
    ] {
        let mut all = vec!["schedule", "add", "제주 삼다수 2L x 12"];
        all.extend_from_slice(args);
        let out = lpsctl(&running, &all).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
    let stored: i64 = sqlx::query_scalar("select count(*) from schedule")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0);
    running.shutdown().await;
}
