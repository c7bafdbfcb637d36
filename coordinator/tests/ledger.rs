//! Every proxy-ledger transition against real PostgreSQL (`#[sqlx::test]`: a fresh,
//! migrated database per test). Exclusive holding is checked from the acquirers' own log,
//! counts from the database, never from the ledger's word about itself.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use chrono::{DateTime, TimeDelta, Utc};
use lps_coordinator::{
    db::MIGRATOR,
    ledger::{
        Acquired, AdviceParams, Grant, Ledger, LedgerConfig, PORTS_SETTING, PortSet, PortState,
        Secret,
    },
};
use lps_proto::model::{BlockEvent, MallId, SessionEndReason, SessionStats};
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};

const HOST: &str = "gw.test";
const PASSWORD: &str = "s3cret-Pa55word-xyzzy";
const NAVER: &str = "naver";
const COUPANG: &str = "coupang";

fn mall(id: &str) -> MallId {
    MallId::new(id).unwrap()
}

fn config(ports: impl IntoIterator<Item = u16>) -> LedgerConfig {
    LedgerConfig::new(
        HOST,
        PortSet::from_ports(ports),
        "lps-user",
        Secret::new(PASSWORD),
    )
}

async fn ledger_with(pool: &PgPool, config: LedgerConfig) -> Ledger {
    let ledger = Ledger::new(pool.clone(), config);
    ledger.reconcile().await.unwrap();
    ledger
}

async fn ledger(pool: &PgPool, ports: impl IntoIterator<Item = u16>) -> Ledger {
    ledger_with(pool, config(ports)).await
}

fn stats(mall_id: &str, requests: u32, blocked: u32, job_id: Option<i64>) -> SessionStats {
    SessionStats::new(
        mall(mall_id),
        requests,
        requests - blocked,
        blocked,
        Duration::from_secs(20),
        job_id,
    )
    .unwrap()
}

async fn db_now(pool: &PgPool) -> DateTime<Utc> {
    sqlx::query_scalar::<_, DateTime<Utc>>("select date_trunc('milliseconds', now())")
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(pool)
        .await
        .unwrap()
}

fn secs(s: i64) -> TimeDelta {
    TimeDelta::seconds(s)
}

fn ms(m: i64) -> TimeDelta {
    TimeDelta::milliseconds(m)
}

async fn grant(ledger: &Ledger, node: &str, mall_id: &str, job: Option<i64>) -> Grant {
    match ledger.acquire(node, &mall(mall_id), job).await.unwrap() {
        Acquired::Grant(g) => g,
        other => panic!("{node} expected a grant for {mall_id}, got {other:?}"),
    }
}

async fn none_free(ledger: &Ledger, node: &str, mall_id: &str) -> Option<DateTime<Utc>> {
    match ledger.acquire(node, &mall(mall_id), None).await.unwrap() {
        Acquired::NoneFree { next_free_at } => next_free_at,
        Acquired::Grant(g) => panic!("{node} expected no port for {mall_id}, got port {}", g.port),
    }
}

/// A pool big enough for many concurrent acquirers (the default test pool has 5), with
/// LPS's connection settings.
async fn big_pool(opts: PgConnectOptions, size: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(size)
        .connect_with(opts.options([("jit", "off"), ("plan_cache_mode", "force_generic_plan")]))
        .await
        .unwrap()
}

/// A queued job of `mall_id`, for the per-job burn cap.
async fn job(pool: &PgPool, mall_id: &str) -> i64 {
    sqlx::query("insert into mall (mall_id) values ($1) on conflict do nothing")
        .bind(mall_id)
        .execute(pool)
        .await
        .unwrap();
    sqlx::query_scalar::<_, i64>(
        "insert into job (dedupe_key, mall, product_name, product_key, priority)
         values ($1::text || '|name:x', $1::text, 'x', 'name:x', 10) returning job_id",
    )
    .bind(mall_id)
    .fetch_one(pool)
    .await
    .unwrap()
}

// ------------------------------------------------------------------ exclusive holding

#[sqlx::test(migrator = "MIGRATOR")]
async fn two_coordinators_never_hand_one_port_to_two_holders(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    const CYCLES: usize = 2000;
    const ACQUIRERS: usize = 32;
    // Two coordinators: two ledgers on two pools, starting (reconciling) together.
    let pool_a = big_pool(opts.clone(), 17).await;
    let pool_b = big_pool(opts, 17).await;
    let a = Ledger::new(pool_a.clone(), config(1..=16));
    let b = Ledger::new(pool_b.clone(), config(1..=16));
    let (ra, rb) = tokio::join!(a.reconcile(), b.reconcile());
    assert_eq!(ra.unwrap().added + rb.unwrap().added, 16);

    let reserved = Arc::new(AtomicUsize::new(0));
    let origin = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..ACQUIRERS {
        let ledger = if c % 2 == 0 { a.clone() } else { b.clone() };
        let reserved = reserved.clone();
        tasks.push(tokio::spawn(async move {
            let node = format!("node-{c}");
            let mall = mall(if c % 3 == 0 { COUPANG } else { NAVER });
            // (port, acquire returned, release called), on one monotonic clock.
            let mut log: Vec<(u16, Duration, Duration)> = Vec::new();
            let mut waits = 0u32;
            let mut lost = 0usize;
            while reserved.fetch_add(1, Ordering::SeqCst) < CYCLES {
                let grant = loop {
                    match ledger.acquire(&node, &mall, None).await.unwrap() {
                        Acquired::Grant(g) => break g,
                        Acquired::NoneFree { .. } => {
                            waits += 1;
                            tokio::time::sleep(Duration::from_micros(300)).await;
                        }
                    }
                };
                let got = origin.elapsed();
                // Hold the IP for a moment, as a browser would.
                tokio::time::sleep(Duration::from_micros(fastrand::u64(0..1500))).await;
                let released = origin.elapsed();
                let session =
                    SessionStats::new(mall.clone(), 1, 1, 0, released.saturating_sub(got), None)
                        .unwrap();
                let r = ledger
                    .release(
                        &node,
                        grant.port,
                        Some(grant.lease_id),
                        SessionEndReason::Rotate,
                        &session,
                    )
                    .await
                    .unwrap();
                // Checked after the log: the log is the evidence, not the ledger's word.
                lost += usize::from(!r.held);
                log.push((grant.port, got, released));
            }
            (log, waits, lost)
        }));
    }
    let mut by_port: HashMap<u16, Vec<(Duration, Duration)>> = HashMap::new();
    let mut cycles = 0;
    let mut lost = 0;
    for t in tasks {
        let (log, _waits, lost_here) = t.await.unwrap();
        cycles += log.len();
        lost += lost_here;
        for (port, got, released) in log {
            by_port.entry(port).or_default().push((got, released));
        }
    }
    assert_eq!(cycles, CYCLES);
    for (port, intervals) in &mut by_port {
        intervals.sort();
        for w in intervals.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "port {port} held twice at once: {:?} overlaps {:?}",
                w[0],
                w[1]
            );
        }
    }
    // The database agrees: every cycle counted once and recorded once, nothing still held.
    assert_eq!(
        count(&pool_a, "select sum(use_count)::bigint from proxy_port").await,
        CYCLES as i64
    );
    assert_eq!(
        count(&pool_a, "select count(*) from ip_session").await,
        CYCLES as i64
    );
    assert_eq!(
        count(
            &pool_a,
            "select count(*) from proxy_port where holder_node is not null"
        )
        .await,
        0
    );
    for (port, intervals) in &by_port {
        let used = sqlx::query_scalar::<_, i64>("select use_count from proxy_port where port = $1")
            .bind(i32::from(*port))
            .fetch_one(&pool_a)
            .await
            .unwrap();
        assert_eq!(used, intervals.len() as i64, "port {port}");
    }
    assert!(by_port.len() > 1, "every cycle used one port");
    assert_eq!(lost, 0, "releases found the port held by someone else");
}

// ------------------------------------------------------------------ leases

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_expired_lease_frees_the_port(pool: PgPool) {
    let ledger = ledger(&pool, [10_000]).await;
    let t0 = db_now(&pool).await;
    let g = grant(&ledger.at(t0), "node-a", NAVER, Some(1)).await;
    assert_eq!(g.port, 10_000);
    assert_eq!(g.host, HOST);
    assert_eq!(g.lease_until, t0 + secs(60));

    // Just before the lease ends the port is still taken, and the answer says until when.
    let before = ledger.at(t0 + secs(60) - ms(1));
    assert_eq!(
        none_free(&before, "node-b", NAVER).await,
        Some(t0 + secs(60))
    );

    // At the end of the lease, unrenewed, it is free again.
    let after = ledger.at(t0 + secs(60));
    let g2 = grant(&after, "node-b", NAVER, Some(2)).await;
    assert_eq!(g2.port, 10_000);
    // The old holder lost it: a renewal does not bring it back and a release changes nothing.
    assert!(after.renew("node-a", &[10_000]).await.unwrap().is_empty());
    let r = after
        .release(
            "node-a",
            10_000,
            None,
            SessionEndReason::Block,
            &stats(NAVER, 3, 1, Some(1)),
        )
        .await
        .unwrap();
    assert!(!r.held);
    let port = &ledger.ports().await.unwrap()[0];
    assert_eq!(port.holder.as_ref().unwrap().node, "node-b");
    assert_eq!(port.burn_count, 0);
    assert_eq!(
        count(&pool, "select count(*) from proxy_port_cooldown").await,
        0
    );
    // ...but its session was recorded.
    assert_eq!(count(&pool, "select count(*) from ip_session").await, 1);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn renew_extends_live_leases_only(pool: PgPool) {
    let ledger = ledger(&pool, [1, 2, 3]).await;
    let t0 = db_now(&pool).await;
    let p1 = grant(&ledger.at(t0), "node-a", NAVER, None).await.port;
    let p2 = grant(&ledger.at(t0 + secs(30)), "node-a", NAVER, None)
        .await
        .port;
    let p3 = grant(&ledger.at(t0), "node-b", NAVER, None).await.port;

    // At t0 + 70 s the first lease has expired; the second is live; p3 is another node's.
    let t = t0 + secs(70);
    let renewed = ledger
        .at(t)
        .renew("node-a", &[p1, p2, p3, 999])
        .await
        .unwrap();
    assert_eq!(renewed.len(), 1);
    assert_eq!(renewed[0].port, p2);
    assert_eq!(renewed[0].lease_until, t + secs(60));
    // The renewed lease holds past its original end; the expired one is free.
    assert_eq!(
        grant(&ledger.at(t + secs(1)), "node-c", NAVER, None)
            .await
            .port,
        p1
    );
    assert!(ledger.at(t).renew("node-a", &[]).await.unwrap().is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_non_holder_release_changes_nothing_but_records_the_session(pool: PgPool) {
    let ledger = ledger(&pool, [1]).await;
    let g = grant(&ledger, "node-a", NAVER, Some(7)).await;
    // Another node, and the same node speaking for another job, do not hold it.
    for (node, job) in [("node-b", Some(7)), ("node-a", Some(8)), ("node-a", None)] {
        let r = ledger
            .release(
                node,
                g.port,
                None,
                SessionEndReason::Block,
                &stats(NAVER, 2, 1, job),
            )
            .await
            .unwrap();
        assert!(!r.held, "{node} {job:?}");
        assert_eq!(r.mall_cooldown_until, None);
    }
    let port = &ledger.ports().await.unwrap()[0];
    assert_eq!(port.state, PortState::Leased);
    assert_eq!(port.holder.as_ref().unwrap().job_id, Some(7));
    assert_eq!(port.burn_count, 0);
    assert_eq!(port.last_reason, None);
    assert_eq!(count(&pool, "select count(*) from ip_session").await, 3);

    let r = ledger
        .release(
            "node-a",
            g.port,
            None,
            SessionEndReason::Window,
            &stats(NAVER, 2, 0, Some(7)),
        )
        .await
        .unwrap();
    assert!(r.held);
    let port = &ledger.ports().await.unwrap()[0];
    assert_eq!(port.state, PortState::Available);
    assert_eq!(port.holder, None);
    assert_eq!(port.last_reason, Some(SessionEndReason::Window));
    assert_eq!(count(&pool, "select count(*) from ip_session").await, 4);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_lease_is_released_by_its_id_whichever_job_used_the_ip_last(pool: PgPool) {
    let ledger = ledger(&pool, [1]).await.with_jitter(1.0);
    let first = job(&pool, NAVER).await;
    let second: i64 = sqlx::query_scalar(
        "insert into job (dedupe_key, mall, product_name, product_key, priority)
         values ('naver|name:y', 'naver', 'y', 'name:y', 10) returning job_id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let g = grant(&ledger, "node-a", NAVER, Some(first)).await;
    // The IP session served `first`, then `second`, which was blocked on it: the release
    // names the lease and the job that used the IP last.
    let r = ledger
        .release(
            "node-a",
            g.port,
            Some(g.lease_id),
            SessionEndReason::Block,
            &stats(NAVER, 3, 1, Some(second)),
        )
        .await
        .unwrap();
    assert!(r.held, "the lease was not released");
    assert_eq!(r.job_ip_burns, Some(1));
    let burns: Vec<i16> = sqlx::query_scalar("select ip_burns from job order by job_id")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(burns, vec![0, 1], "the block burns the job that saw it");
    let port = &ledger.ports().await.unwrap()[0];
    assert_ne!(port.state, PortState::Leased);

    // The port is leased again (for another mall: it cools down for naver). A late copy of
    // the first release (a resend after a reconnect) must not end the new lease.
    let again = grant(&ledger, "node-a", COUPANG, Some(second)).await;
    assert_eq!(again.port, g.port);
    assert!(again.lease_id > g.lease_id, "lease ids only grow");
    let late = ledger
        .release(
            "node-a",
            g.port,
            Some(g.lease_id),
            SessionEndReason::Block,
            &stats(NAVER, 3, 1, Some(second)),
        )
        .await
        .unwrap();
    assert!(!late.held, "a stale release ended a newer lease");
    let port = &ledger.ports().await.unwrap()[0];
    assert_eq!(port.state, PortState::Leased);
    assert_eq!(port.holder.as_ref().unwrap().job_id, Some(second));

    let r = ledger
        .release(
            "node-a",
            again.port,
            Some(again.lease_id),
            SessionEndReason::Budget,
            &stats(COUPANG, 3, 0, Some(second)),
        )
        .await
        .unwrap();
    assert!(r.held);
    assert_eq!(count(&pool, "select count(*) from ip_session").await, 3);
}

// ------------------------------------------------------------------ rest and cooldowns

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_block_cools_the_port_for_that_mall_only(pool: PgPool) {
    let ledger = ledger(&pool, [1]).await.with_jitter(1.0);
    let t0 = db_now(&pool).await;
    let at = |d: TimeDelta| ledger.at(t0 + d);
    grant(&at(secs(0)), "node-a", NAVER, None).await;
    let r = at(secs(5))
        .release(
            "node-a",
            1,
            None,
            SessionEndReason::Block,
            &stats(NAVER, 3, 1, None),
        )
        .await
        .unwrap();
    assert!(r.held);
    // First burn: min(cap, 60 s * 2^0), jitter pinned at the ceiling.
    assert_eq!(r.mall_cooldown_until, Some(t0 + secs(65)));

    // During the cooldown: not for naver, but yes for coupang.
    assert_eq!(
        none_free(&at(secs(64)), "node-b", NAVER).await,
        Some(t0 + secs(65))
    );
    let g = grant(&at(secs(64)), "node-b", COUPANG, None).await;
    at(secs(64))
        .release(
            "node-b",
            g.port,
            None,
            SessionEndReason::Rotate,
            &stats(COUPANG, 1, 0, None),
        )
        .await
        .unwrap();
    // After it: naver again.
    grant(&at(secs(65)), "node-c", NAVER, None).await;

    let ops = at(secs(10)).ops().await.unwrap();
    assert_eq!(ops.cooling_per_mall.len(), 1);
    assert_eq!(ops.cooling_per_mall[0].mall, NAVER);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn block_cooldowns_grow_exponentially_with_full_jitter(pool: PgPool) {
    let mut cfg = config([1]);
    cfg.block_cooldown_cap = Duration::from_secs(200);
    let ledger = ledger_with(&pool, cfg).await;
    let t0 = db_now(&pool).await;
    // Pinned at the ceiling: 60, 120, then the 200 s cap.
    let mut t = t0;
    for (burns, ceiling) in [(0, 60), (1, 120), (2, 200), (3, 200)] {
        let l = ledger.at(t).with_jitter(1.0);
        grant(&l, "node-a", NAVER, None).await;
        let r = l
            .release(
                "node-a",
                1,
                None,
                SessionEndReason::Block,
                &stats(NAVER, 2, 1, None),
            )
            .await
            .unwrap();
        assert_eq!(
            r.mall_cooldown_until,
            Some(t + secs(ceiling)),
            "after {burns} burns"
        );
        t += secs(ceiling);
    }
    // Half-way jitter: half the ceiling (burns = 4, ceiling 200 s).
    let l = ledger.at(t).with_jitter(0.5);
    grant(&l, "node-a", NAVER, None).await;
    let r = l
        .release(
            "node-a",
            1,
            None,
            SessionEndReason::Block,
            &stats(NAVER, 2, 1, None),
        )
        .await
        .unwrap();
    assert_eq!(r.mall_cooldown_until, Some(t + secs(100)));
    assert_eq!(ledger.ports().await.unwrap()[0].burn_count, 5);

    // Drawn jitter lands anywhere in [0, ceiling] and varies.
    let mut seen = Vec::new();
    for i in 0..20 {
        let t = t0 + TimeDelta::days(1 + i);
        let l = ledger.at(t);
        grant(&l, "node-a", COUPANG, None).await;
        let r = l
            .release(
                "node-a",
                1,
                None,
                SessionEndReason::Block,
                &stats(COUPANG, 2, 1, None),
            )
            .await
            .unwrap();
        let cooldown = r.mall_cooldown_until.unwrap() - t;
        assert!(
            cooldown >= TimeDelta::zero() && cooldown <= secs(200),
            "{cooldown}"
        );
        seen.push(cooldown);
    }
    seen.sort();
    seen.dedup();
    assert!(seen.len() > 10, "jitter does not vary: {seen:?}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn budget_rests_the_port(pool: PgPool) {
    let ledger = ledger(&pool, [1]).await;
    let t0 = db_now(&pool).await;
    grant(&ledger.at(t0), "node-a", NAVER, None).await;
    let r = ledger
        .at(t0 + secs(10))
        .release(
            "node-a",
            1,
            None,
            SessionEndReason::Budget,
            &stats(NAVER, 3, 0, None),
        )
        .await
        .unwrap();
    assert_eq!(r.rest_until, Some(t0 + secs(130)));
    assert_eq!(r.mall_cooldown_until, None);
    // Resting for every mall until the rest ends; not burned.
    for m in [NAVER, COUPANG] {
        assert_eq!(
            none_free(&ledger.at(t0 + secs(130) - ms(1)), "node-b", m).await,
            Some(t0 + secs(130))
        );
    }
    let port = &ledger.at(t0 + secs(20)).ports().await.unwrap()[0];
    assert_eq!(port.state, PortState::Resting);
    assert_eq!(port.burn_count, 0);
    grant(&ledger.at(t0 + secs(130)), "node-b", NAVER, None).await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_proxy_error_cools_the_port_for_every_mall(pool: PgPool) {
    let ledger = ledger(&pool, [1]).await;
    let t0 = db_now(&pool).await;
    grant(&ledger.at(t0), "node-a", NAVER, None).await;
    let r = ledger
        .at(t0)
        .release(
            "node-a",
            1,
            None,
            SessionEndReason::ProxyError,
            &stats(NAVER, 1, 0, None),
        )
        .await
        .unwrap();
    assert_eq!(r.cooldown_until, Some(t0 + secs(30)));
    for m in [NAVER, COUPANG] {
        assert_eq!(
            none_free(&ledger.at(t0 + secs(29)), "node-b", m).await,
            Some(t0 + secs(30))
        );
    }
    assert_eq!(ledger.ports().await.unwrap()[0].burn_count, 0);
    grant(&ledger.at(t0 + secs(30)), "node-b", COUPANG, None).await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_least_recently_used_port_is_granted_first(pool: PgPool) {
    let ledger = ledger(&pool, [1, 2, 3]).await;
    let t0 = db_now(&pool).await;
    // Never-used ports first, in port order.
    let mut got = Vec::new();
    for n in ["a", "b", "c"] {
        got.push(grant(&ledger.at(t0), n, NAVER, None).await.port);
    }
    assert_eq!(got, [1, 2, 3]);
    // Released in the order 3, 1, 2: that is the order they come back in.
    for (i, (node, port)) in [("c", 3), ("a", 1), ("b", 2)].into_iter().enumerate() {
        ledger
            .at(t0 + secs(1 + i as i64))
            .release(
                node,
                port,
                None,
                SessionEndReason::Window,
                &stats(NAVER, 1, 0, None),
            )
            .await
            .unwrap();
    }
    let mut got = Vec::new();
    for n in ["d", "e", "f"] {
        got.push(grant(&ledger.at(t0 + secs(10)), n, NAVER, None).await.port);
    }
    assert_eq!(got, [3, 1, 2]);
    assert!(
        none_free(&ledger.at(t0 + secs(10)), "g", NAVER)
            .await
            .is_some()
    );
}

// ------------------------------------------------------------------ burn cap

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_burn_cap_trips_after_n_plus_one_blocks(pool: PgPool) {
    let ledger = ledger(&pool, 1..=6).await;
    assert_eq!(ledger.config().max_ip_burns_per_job, 3);
    let job = job(&pool, NAVER).await;
    let mut ports = Vec::new();
    for i in 1..=4u32 {
        let g = grant(&ledger, "node-a", NAVER, Some(job)).await;
        let r = ledger
            .release(
                "node-a",
                g.port,
                None,
                SessionEndReason::Block,
                &stats(NAVER, 2, 1, Some(job)),
            )
            .await
            .unwrap();
        assert!(r.held);
        assert_eq!(r.job_ip_burns, Some(i));
        assert_eq!(r.over_burn_cap, i > 3, "after {i} blocks");
        ports.push(g.port);
    }
    // Each block cooled a different port for naver.
    ports.sort();
    ports.dedup();
    assert_eq!(ports.len(), 4);
    assert_eq!(
        count(
            &pool,
            &format!("select ip_burns::bigint from job where job_id = {job}")
        )
        .await,
        4
    );
    // Other reasons do not burn: the job stays where it is.
    let g = grant(&ledger, "node-a", NAVER, Some(job)).await;
    let r = ledger
        .release(
            "node-a",
            g.port,
            None,
            SessionEndReason::Budget,
            &stats(NAVER, 3, 0, Some(job)),
        )
        .await
        .unwrap();
    assert_eq!(r.job_ip_burns, Some(4));
    assert!(r.over_burn_cap);
}

// ------------------------------------------------------------------ lost nodes

#[sqlx::test(migrator = "MIGRATOR")]
async fn release_node_returns_a_vanished_nodes_ports(pool: PgPool) {
    let ledger = ledger(&pool, 1..=5).await;
    let mut held = Vec::new();
    for job in [11, 12, 13] {
        held.push(grant(&ledger, "node-a", NAVER, Some(job)).await.port);
    }
    let kept = grant(&ledger, "node-b", COUPANG, None).await.port;
    // Every remaining port taken: only node-a's can come back.
    let last = grant(&ledger, "node-c", NAVER, None).await.port;
    assert!(none_free(&ledger, "node-d", NAVER).await.is_some());

    let released = ledger.release_node("node-a").await.unwrap();
    let mut ports: Vec<u16> = released.iter().map(|r| r.port).collect();
    ports.sort();
    held.sort();
    assert_eq!(ports, held);
    assert!(released.iter().all(|r| r.mall.as_deref() == Some(NAVER)));
    let jobs: Vec<_> = released.iter().filter_map(|r| r.job_id).collect();
    assert_eq!(jobs.len(), 3);

    let rows = ledger.ports().await.unwrap();
    for r in &rows {
        if held.contains(&r.port) {
            assert_eq!(r.state, PortState::Available);
            assert_eq!(r.last_reason, Some(SessionEndReason::Shutdown));
        } else {
            assert_eq!(r.state, PortState::Leased, "port {}", r.port);
        }
    }
    assert!(
        rows.iter()
            .any(|r| r.port == kept && r.holder.as_ref().unwrap().node == "node-b")
    );
    assert!(rows.iter().any(|r| r.port == last));
    for n in ["x", "y", "z"] {
        assert!(held.contains(&grant(&ledger, n, NAVER, None).await.port));
    }
    assert!(ledger.release_node("node-a").await.unwrap().is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn release_lost_node_spares_a_node_that_reconnected(pool: PgPool) {
    let ledger = ledger(&pool, 1..=2).await;
    grant(&ledger, "node-a", NAVER, None).await;
    let old = uuid::Uuid::new_v4();
    let new = uuid::Uuid::new_v4();
    sqlx::query(
        "insert into node_session (node_id, session_id, coordinator_id, slots, free_slots)
         values ('node-a', $1, 'c1', 1, 1)",
    )
    .bind(new)
    .execute(&pool)
    .await
    .unwrap();
    // The node is connected on a new stream: the old stream's loss releases nothing.
    assert!(
        ledger
            .release_lost_node("node-a", old)
            .await
            .unwrap()
            .is_empty()
    );
    sqlx::query("update node_session set disconnected_at = now() where node_id = 'node-a'")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        ledger.release_lost_node("node-a", new).await.unwrap().len(),
        1
    );
}

// ------------------------------------------------------------------ configuration

#[sqlx::test(migrator = "MIGRATOR")]
async fn reconcile_disables_removed_ports_and_keeps_their_history(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    let pool = big_pool(opts.clone(), 4).await;
    let five = ledger(&pool, 1..=5).await;
    // Use every port once.
    for n in 0..5 {
        let node = format!("n{n}");
        let g = grant(&five, &node, NAVER, None).await;
        five.release(
            &node,
            g.port,
            None,
            SessionEndReason::Block,
            &stats(NAVER, 1, 1, None),
        )
        .await
        .unwrap();
    }

    let three = Ledger::new(pool.clone(), config(1..=3));
    let r = three.reconcile().await.unwrap();
    assert_eq!((r.added, r.enabled, r.disabled), (0, 0, 2));
    let rows = three.ports().await.unwrap();
    assert_eq!(rows.len(), 5);
    for row in &rows {
        assert_eq!(row.enabled, row.port <= 3, "port {}", row.port);
        assert_eq!(row.use_count, 1, "history of port {}", row.port);
        assert_eq!(row.burn_count, 1, "history of port {}", row.port);
        if row.port > 3 {
            assert_eq!(row.state, PortState::Disabled);
        }
    }
    assert_eq!(
        count(
            &pool,
            "select count(*) from ip_session where port in (4, 5)"
        )
        .await,
        2
    );
    assert_eq!(three.ops().await.unwrap().total, 3);
    let mut got = Vec::new();
    for n in ["a", "b", "c"] {
        got.push(grant(&three, n, COUPANG, None).await.port);
    }
    got.sort();
    assert_eq!(got, [1, 2, 3]);
    assert!(none_free(&three, "d", COUPANG).await.is_some());

    // Port 4 comes back with its history; 6 is new.
    let again = Ledger::new(pool.clone(), config([1, 2, 3, 4, 6]));
    let r = again.reconcile().await.unwrap();
    assert_eq!((r.added, r.enabled, r.disabled), (1, 1, 0));
    let p4 = again
        .ports()
        .await
        .unwrap()
        .into_iter()
        .find(|p| p.port == 4)
        .unwrap();
    assert!(p4.enabled);
    assert_eq!(p4.use_count, 1);

    // Another gateway host takes over: every port of the old host is disabled.
    let mut moved = config([1, 2]);
    moved.host = "gw2.test".into();
    let r = Ledger::new(pool.clone(), moved).reconcile().await.unwrap();
    assert_eq!((r.added, r.disabled), (2, 5));

    // Coordinators starting together (two pools, differing configs) never fail.
    let other = big_pool(opts, 4).await;
    let mut tasks = Vec::new();
    for i in 0..8u16 {
        let pool = if i % 2 == 0 {
            pool.clone()
        } else {
            other.clone()
        };
        tasks.push(tokio::spawn(async move {
            Ledger::new(pool, config(1..=(10 + i % 3)))
                .reconcile()
                .await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let enabled = count(&pool, "select count(*) from proxy_port where enabled").await;
    assert!((10..=12).contains(&enabled), "{enabled}");
}

#[test]
fn bad_port_specs_are_rejected_naming_lps_proxy_ports() {
    for spec in [
        "",
        "ports",
        "10099-10000",
        "0",
        "65536",
        "10000,,10001",
        "1-3,3",
    ] {
        let e = PortSet::parse(spec).unwrap_err();
        assert_eq!(e.setting, PORTS_SETTING);
        assert!(e.to_string().contains("LPS_PROXY_PORTS"), "{spec:?}: {e}");
    }
    assert_eq!(
        PortSet::parse("10000,10002,10005-10007").unwrap().ports(),
        [10000, 10002, 10005, 10006, 10007]
    );
    assert_eq!(PortSet::parse("10000-10099").unwrap().len(), 100);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn grants_carry_credentials_and_the_malls_budget(pool: PgPool) {
    let mut cfg = config([1, 2]);
    cfg.mall_budgets.insert(mall(NAVER), 2);
    let ledger = ledger_with(&pool, cfg).await;
    let g = grant(&ledger, "a", NAVER, None).await;
    assert_eq!(g.request_budget, 2);
    assert_eq!(g.username, "lps-user");
    assert_eq!(g.password.expose(), PASSWORD);
    assert_eq!(grant(&ledger, "b", COUPANG, None).await.request_budget, 3);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_password_never_shows(pool: PgPool) {
    let ledger = ledger(&pool, [1]).await;
    let g = ledger.acquire("a", &mall(NAVER), None).await.unwrap();
    let grant = g.clone().grant().unwrap();
    let mut shown = vec![
        format!("{:?}", ledger.config()),
        format!("{ledger:?}"),
        format!("{g:?}"),
        format!("{grant:?}"),
        format!("{:?}", grant.password),
    ];
    // Errors: a database that is gone, and bad input.
    pool.close().await;
    let e = ledger.acquire("a", &mall(NAVER), None).await.unwrap_err();
    shown.push(format!("{e:?}"));
    shown.push(e.to_string());
    let e = ledger
        .release(
            "a",
            1,
            None,
            SessionEndReason::Rotate,
            &stats(NAVER, 1, 0, None),
        )
        .await
        .unwrap_err();
    shown.push(format!("{e:?}"));
    for s in &shown {
        assert!(!s.contains(PASSWORD), "password shown in {s}");
    }
    assert!(format!("{grant:?}").contains("***"));
}

// ------------------------------------------------------------------ records and figures

#[sqlx::test(migrator = "MIGRATOR")]
async fn sessions_and_blocks_are_recorded(pool: PgPool) {
    let ledger = ledger(&pool, [7]).await;
    ledger
        .record_session(
            "node-a",
            7,
            &stats(NAVER, 3, 1, Some(5)),
            SessionEndReason::Idle,
        )
        .await
        .unwrap();
    let row = sqlx::query_as::<_, (String, i32, String, Option<String>, Option<i64>, i32, i32, i32, i64, String)>(
        "select host, port, mall, node_id, job_id, requests, ok, blocked, elapsed_ms, end_reason::text from ip_session",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        row,
        (
            HOST.into(),
            7,
            NAVER.into(),
            Some("node-a".into()),
            Some(5),
            3,
            2,
            1,
            20_000,
            "idle".into()
        )
    );
    // The port itself is untouched by a session end.
    assert_eq!(ledger.ports().await.unwrap()[0].last_reason, None);

    let block = BlockEvent {
        report_seq: 1,
        mall: mall(COUPANG),
        query: "삼다수 2L".into(),
        ip_request_no: 2,
        port: Some(7),
        marker: "captcha".into(),
        html_len: 512,
        elapsed: Duration::from_millis(1500),
        headless: true,
        job_id: Some(5),
    };
    ledger.record_block("node-a", &block).await.unwrap();
    ledger
        .record_block(
            "node-a",
            &BlockEvent {
                port: None,
                ..block.clone()
            },
        )
        .await
        .unwrap();
    let rows = sqlx::query_as::<_, (String, String, i32, Option<String>, Option<i32>, String, i32, i64)>(
        "select mall, query, ip_request_no, host, port, marker, html_len, elapsed_ms from bot_detection order by id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[0],
        (
            COUPANG.into(),
            "삼다수 2L".into(),
            2,
            Some(HOST.into()),
            Some(7),
            "captcha".into(),
            512,
            1500
        )
    );
    assert_eq!((rows[1].3.clone(), rows[1].4), (None, None));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn ops_counts_every_state(pool: PgPool) {
    let empty = Ledger::new(pool.clone(), config([]));
    let ops = empty.ops().await.unwrap();
    assert_eq!((ops.total, ops.available), (0, 0));
    assert_eq!(ops.available_pct, 100.0);

    let ledger = ledger(&pool, 1..=5).await.with_jitter(1.0);
    let t0 = db_now(&pool).await;
    let l = ledger.at(t0);
    // 1 leased, 2 resting (budget), 3 cooling (proxy error), 4 cooling for naver only, 5 free.
    for (node, reason) in [
        ("a", None),
        ("b", Some(SessionEndReason::Budget)),
        ("c", Some(SessionEndReason::ProxyError)),
        ("d", Some(SessionEndReason::Block)),
    ] {
        let g = grant(&l, node, NAVER, None).await;
        if let Some(reason) = reason {
            l.release(node, g.port, None, reason, &stats(NAVER, 3, 1, None))
                .await
                .unwrap();
        }
    }
    l.record_block(
        "d",
        &BlockEvent {
            report_seq: 1,
            mall: mall(NAVER),
            query: String::new(),
            ip_request_no: 3,
            port: Some(4),
            marker: "text".into(),
            html_len: 0,
            elapsed: Duration::ZERO,
            headless: true,
            job_id: None,
        },
    )
    .await
    .unwrap();

    let ops = ledger.at(t0 + secs(1)).ops().await.unwrap();
    assert_eq!(ops.total, 5);
    assert_eq!(ops.leased, 1);
    assert_eq!(ops.resting, 1);
    assert_eq!(ops.cooling, 1);
    assert_eq!(ops.available, 2);
    assert_eq!(ops.available_pct, 40.0);
    assert_eq!(ops.cooling_per_mall.len(), 1);
    assert_eq!(
        (
            ops.cooling_per_mall[0].mall.as_str(),
            ops.cooling_per_mall[0].ports
        ),
        (NAVER, 1)
    );
    assert_eq!(ops.block_sessions_6h, 1);
    assert_eq!(ops.bot_detections_1h, 1);
    let states: Vec<PortState> = ledger
        .at(t0 + secs(1))
        .ports()
        .await
        .unwrap()
        .iter()
        .map(|p| p.state)
        .collect();
    assert_eq!(
        states,
        [
            PortState::Leased,
            PortState::Resting,
            PortState::Cooling,
            PortState::Available,
            PortState::Available
        ]
    );

    // Two hours on: the lease (60 s) expired, the rest and cooldowns are over; the block is
    // out of the 1 h window but the block-ended session is still within 6 h.
    let ops = ledger.at(t0 + TimeDelta::hours(2)).ops().await.unwrap();
    assert_eq!(
        (ops.available, ops.leased, ops.resting, ops.cooling),
        (5, 0, 0, 0)
    );
    assert!(ops.cooling_per_mall.is_empty());
    assert_eq!((ops.block_sessions_6h, ops.bot_detections_1h), (1, 0));
    let ops = ledger.at(t0 + TimeDelta::hours(7)).ops().await.unwrap();
    assert_eq!(ops.block_sessions_6h, 0);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn advise_suggests_the_budget_where_blocks_start(pool: PgPool) {
    let ledger = ledger(&pool, [1]).await;
    let t0 = db_now(&pool).await;
    let l = ledger.at(t0);
    // 100 naver sessions: 60 rotated at the budget (3) unblocked, 1 blocked at request 1,
    // 2 at request 2; 37 ran to 4 requests and 7 of those were blocked at the 4th.
    let mut sessions = Vec::new();
    sessions.extend(std::iter::repeat_n((3, 0, SessionEndReason::Budget), 60));
    sessions.push((1, 1, SessionEndReason::Block));
    sessions.extend(std::iter::repeat_n((2, 1, SessionEndReason::Block), 2));
    sessions.extend(std::iter::repeat_n((4, 0, SessionEndReason::Window), 30));
    sessions.extend(std::iter::repeat_n((4, 1, SessionEndReason::Block), 7));
    for (requests, blocked, reason) in sessions {
        l.record_session("a", 1, &stats(NAVER, requests, blocked, None), reason)
            .await
            .unwrap();
    }
    // Noise that must not count: another mall, and naver sessions older than the lookback.
    for _ in 0..50 {
        l.record_session("a", 1, &stats(COUPANG, 1, 1, None), SessionEndReason::Block)
            .await
            .unwrap();
        ledger
            .at(t0 - TimeDelta::days(8))
            .record_session("a", 1, &stats(NAVER, 1, 1, None), SessionEndReason::Block)
            .await
            .unwrap();
    }

    let advice = ledger.at(t0 + secs(1)).advise(&mall(NAVER)).await.unwrap();
    assert_eq!(advice.sessions, 100);
    assert_eq!(advice.blocked_sessions, 10);
    assert_eq!(advice.current_budget, 3);
    let reached: Vec<u64> = advice.steps.iter().map(|s| s.reached).collect();
    let blocked: Vec<u64> = advice.steps.iter().map(|s| s.blocked_at).collect();
    assert_eq!(reached, [100, 99, 97, 37]);
    assert_eq!(blocked, [1, 2, 0, 7]);
    assert!((advice.steps[2].cumulative_block_share - 0.03).abs() < 1e-9);
    assert!(advice.steps[3].cumulative_block_share > 0.05);
    assert_eq!(advice.suggested_budget, Some(3));

    // A looser threshold lets request 4 through; too few sessions gives no advice.
    let loose = ledger
        .at(t0 + secs(1))
        .advise_with(
            &mall(NAVER),
            AdviceParams {
                threshold: 0.25,
                ..AdviceParams::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(loose.suggested_budget, Some(4));
    let none = ledger
        .at(t0 + secs(1))
        .advise(&mall("testmall-alpha"))
        .await
        .unwrap();
    assert_eq!((none.sessions, none.suggested_budget), (0, None));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn acquire_and_release_update_ports_in_place(_: PgPoolOptions, opts: PgConnectOptions) {
    // One connection, so the statistics read below are this backend's, flushed.
    let pool = big_pool(opts, 1).await;
    let ledger = ledger(&pool, 1..=20).await;
    for i in 0..100 {
        let node = format!("n{i}");
        let g = grant(&ledger, &node, NAVER, None).await;
        let reason = if i % 10 == 0 {
            SessionEndReason::Budget
        } else {
            SessionEndReason::Rotate
        };
        ledger
            .release(&node, g.port, None, reason, &stats(NAVER, 1, 0, None))
            .await
            .unwrap();
    }
    sqlx::query("select pg_stat_force_next_flush()")
        .execute(&pool)
        .await
        .unwrap();
    let (updates, hot): (i64, i64) = sqlx::query_as(
        "select n_tup_upd, n_tup_hot_upd from pg_stat_user_tables where relname = 'proxy_port'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    // Every acquire and release writes last_used_at: an index on it (or on the holder)
    // would make every one of them a non-HOT update and bloat this hot table (migration
    // 0004). Without one, most are HOT; not all, as a full page is only pruned when a read
    // finds its dead versions old enough, which depends on timing.
    assert!(updates >= 200, "{updates}");
    assert!(
        hot * 2 >= updates,
        "only {hot} of {updates} updates were HOT"
    );
}

/// A port's burn count decays (LPS_PROXY_BURN_HALF_LIFE): blocked three times in a row,
/// its next block soon after cools it as the fourth; the same block three half-lives
/// later cools it as if it were the first again (0.375 burns left, rounded to 0).
#[sqlx::test(migrator = "MIGRATOR")]
async fn burn_counts_decay_by_their_half_life(pool: PgPool) {
    let mut cfg = config([1]);
    cfg.block_cooldown_cap = Duration::from_secs(3600);
    cfg.burn_half_life = Duration::from_secs(3600);
    let ledger = ledger_with(&pool, cfg).await;
    let t0 = db_now(&pool).await;
    let block = |t: DateTime<Utc>| {
        let l = ledger.at(t).with_jitter(1.0);
        async move {
            grant(&l, "node-a", NAVER, None).await;
            l.release(
                "node-a",
                1,
                None,
                SessionEndReason::Block,
                &stats(NAVER, 2, 1, None),
            )
            .await
            .unwrap()
        }
    };
    let mut t = t0;
    for ceiling in [60, 120, 240] {
        let r = block(t).await;
        assert_eq!(r.mall_cooldown_until, Some(t + secs(ceiling)));
        t += secs(ceiling);
    }
    assert_eq!(ledger.ports().await.unwrap()[0].burn_count, 3);
    // Three half-lives after the last block: 3 * 1/8 burns left, rounded to none.
    let later = t + TimeDelta::hours(3);
    let r = block(later).await;
    assert_eq!(
        r.mall_cooldown_until,
        Some(later + secs(60)),
        "cooled as a first block"
    );
    assert_eq!(ledger.ports().await.unwrap()[0].burn_count, 1);
    // Half a half-life on, 1 burn is 0.71: rounded, it still counts (cooled as a second).
    let next = later + TimeDelta::minutes(30);
    let r = block(next).await;
    assert_eq!(r.mall_cooldown_until, Some(next + secs(120)));
}
