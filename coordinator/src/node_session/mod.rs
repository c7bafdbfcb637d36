//! The `node_session` table: one row per node id, naming its latest stream (DESIGN §3,
//! "Rolling restarts"). Its statements are all here (`sql/`); the node streams write it,
//! the operator's drain marks it, and the read side lists it.
//!
//! - [`register`] when a stream's Hello is accepted (refused while another node process
//!   holds a live stream under the id through another replica: [`holder`] says which);
//!   [`forget_unwelcomed`] deletes a row it inserted when the stream is not welcomed;
//! - [`refresh`] on a heartbeat (at least every 30 s), which also reads an operator's drain;
//! - [`disconnect`] when the stream ends, [`disconnect_replica`] when a replica starts;
//! - [`mark_draining`] for `lpsctl drain`;
//! - [`lift_quarantine`] for `lpsctl lift-quarantine`;
//! - [`dropped`] when a node dropped its jobs (a lost stream's grace release, a Hello that
//!   no longer lists them), which quarantines a node that keeps doing it;
//! - [`connected`] and [`fleet`]: the nodes of ListNodes and of the ops snapshot;
//! - [`retire_ended`]: retention's batches (`LPS_RETAIN_NODE_SESSIONS`) of rows whose
//!   stream ended longer ago than the age, on the sweep's connection.
//!
//! Invariants: a row is refreshed at least every 30 s plus a heartbeat while its stream
//! lives, so a row not seen for 90 s belongs to a coordinator that crashed and is not
//! connected (every statement here that asks "connected?" says so). The row outlives its
//! stream: the drain mark is kept for a reconnect, and the queue's and the ledger's
//! release of a lost node read it in their guarded statements (`release_node.sql`) —
//! reads in the same statement as their write, so they are not calls into this module.
//!
//! Every function is one autocommit statement: cancellation-safe, and none needs a `now`
//! from the caller except [`fleet`] (tests pin the ops snapshot's clock).

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

/// What a node said in its Hello, for its row.
#[derive(Debug, Clone, Copy)]
pub struct Stream<'a> {
    pub node_id: &'a str,
    pub session_id: Uuid,
    /// The replica holding the stream.
    pub coordinator_id: &'a str,
    pub version: &'a str,
    pub slots: u32,
    /// Empty: every mall.
    pub malls: &'a [String],
    /// The node process (`None`: an older node).
    pub instance: Option<&'a str>,
}

/// Who holds a node's row: the replica and node process of its stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holder {
    pub coordinator_id: String,
    /// Empty: an older node that does not say.
    pub instance: String,
}

/// A connected crawler node (a row of `node_session`) with the jobs it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    pub node_id: String,
    pub session_id: Uuid,
    /// The coordinator replica holding the node's stream.
    pub coordinator_id: String,
    pub version: String,
    pub slots: u32,
    pub free_slots: u32,
    /// Empty: every mall.
    pub malls: Vec<String>,
    pub running_jobs: Vec<i64>,
    pub connected_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub draining: bool,
    /// No new assignments until then (see [`dropped`]).
    pub quarantined_until: Option<DateTime<Utc>>,
    /// Why, while quarantined.
    pub quarantine_reason: Option<String>,
}

/// What a node's row says when a stream registers or refreshes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Standing {
    /// An operator asked the node to drain.
    pub draining: bool,
    /// Quarantined until then: no new assignments (see [`dropped`]).
    pub quarantined_until: Option<DateTime<Utc>>,
    /// [`register`] inserted the row (the node id had none): [`forget_unwelcomed`] deletes
    /// it when the stream is not welcomed. Always false from [`refresh`].
    pub new_row: bool,
}

/// When a node that keeps dropping its jobs is quarantined (LPS_NODE_QUARANTINE_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuarantinePolicy {
    /// Drops within [`QuarantinePolicy::window`] that quarantine the node (0: never).
    pub drops: u32,
    pub window: std::time::Duration,
    /// The first quarantine's length; each later one doubles it (at most 16 times).
    pub back_off: std::time::Duration,
}

/// The nodes' figures of the ops snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fleet {
    pub nodes_connected: i64,
    /// Free slots of connected nodes that are not draining.
    pub free_slots: i64,
    /// Nodes quarantined now, connected or not.
    pub nodes_quarantined: i64,
}

/// Records `stream` as its node's latest. `Some(standing)`: recorded, whether the node is
/// to drain (an operator's drain of the same process survives its reconnect) and its
/// quarantine; `None`: another node process holds a live stream under this id through
/// another replica.
pub async fn register(pool: &PgPool, stream: &Stream<'_>) -> Result<Option<Standing>, sqlx::Error> {
    let row = sqlx::query_file!(
        "src/node_session/sql/register.sql",
        stream.node_id,
        stream.session_id,
        stream.coordinator_id,
        stream.version,
        i32::try_from(stream.slots).unwrap_or(i32::MAX),
        stream.malls,
        stream.instance,
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| Standing {
        draining: r.draining,
        quarantined_until: r.quarantined_until,
        new_row: r.new_row,
    }))
}

/// Stream `session_id` of `node_id` registered a new row ([`Standing::new_row`]) and was
/// not welcomed: the row is deleted, so an unanswered Hello records no node.
pub async fn forget_unwelcomed(
    pool: &PgPool,
    node_id: &str,
    session_id: Uuid,
) -> Result<bool, sqlx::Error> {
    Ok(sqlx::query_file!(
        "src/node_session/sql/forget_unwelcomed.sql",
        node_id,
        session_id
    )
    .execute(pool)
    .await?
    .rows_affected()
        > 0)
}

/// Node `node_id` dropped `jobs` of its jobs (> 0): counted, and the node quarantined when
/// it is `policy.drops`-th drop within the window (`sql/dropped.sql`). Returns the node's
/// quarantine, if any (`None` also when the node has no row or the policy is off).
pub async fn dropped(
    pool: &PgPool,
    node_id: &str,
    jobs: usize,
    policy: &QuarantinePolicy,
    now: Option<DateTime<Utc>>,
) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    if policy.drops == 0 || jobs == 0 {
        return Ok(None);
    }
    let millis = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let row = sqlx::query_file!(
        "src/node_session/sql/dropped.sql",
        node_id,
        i32::try_from(jobs).unwrap_or(i32::MAX),
        millis(policy.window),
        i32::try_from(policy.drops).unwrap_or(i32::MAX),
        millis(policy.back_off),
        now,
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.and_then(|r| r.quarantined_until))
}

/// Who holds `node_id`'s row (default: no row).
pub async fn holder(pool: &PgPool, node_id: &str) -> Result<Holder, sqlx::Error> {
    Ok(
        sqlx::query_file!("src/node_session/sql/holder.sql", node_id)
            .fetch_optional(pool)
            .await?
            .map(|r| Holder {
                coordinator_id: r.coordinator_id,
                instance: r.instance.unwrap_or_default(),
            })
            .unwrap_or_default(),
    )
}

/// Stream `session_id` of `node_id` is alive with `free_slots`. Returns whether an operator
/// asked the node to drain and its quarantine (the default when the row names another
/// stream now).
pub async fn refresh(
    pool: &PgPool,
    node_id: &str,
    session_id: Uuid,
    free_slots: u32,
) -> Result<Standing, sqlx::Error> {
    Ok(sqlx::query_file!(
        "src/node_session/sql/refresh.sql",
        node_id,
        session_id,
        i32::try_from(free_slots).unwrap_or(i32::MAX)
    )
    .fetch_optional(pool)
    .await?
    .map(|r| Standing {
        draining: r.draining,
        quarantined_until: r.quarantined_until,
        new_row: false,
    })
    .unwrap_or_default())
}

/// Stream `session_id` of `node_id` ended.
/// What one retention batch did ([`retire_ended`]): rows deleted and scanned, and the last
/// scanned key (the next cursor).
#[derive(Debug)]
pub struct Retired {
    pub deleted: i64,
    pub scanned: i64,
    pub last_at: Option<DateTime<Utc>>,
    pub last_id: Option<i64>,
}

/// Deletes one retention batch of rows whose stream ended (or, a crashed coordinator's,
/// was last seen) longer than `age_ms` ago, after the `(ended, row_id)` cursor, at most
/// `limit` scanned (`sql/retire.sql`).
pub async fn retire_ended(
    conn: &mut sqlx::PgConnection,
    age_ms: i64,
    limit: i64,
    (after_at, after_id): (DateTime<Utc>, i64),
) -> Result<Retired, sqlx::Error> {
    sqlx::query_file_as!(
        Retired,
        "src/node_session/sql/retire.sql",
        age_ms,
        limit,
        after_at,
        after_id
    )
    .fetch_one(conn)
    .await
}

pub async fn disconnect(pool: &PgPool, node_id: &str, session_id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query_file!("src/node_session/sql/disconnect.sql", node_id, session_id)
        .execute(pool)
        .await
        .map(|_| ())
}

/// Replica `coordinator_id` starts: the streams an earlier process under its id held are
/// gone. Returns how many were marked.
pub async fn disconnect_replica(pool: &PgPool, coordinator_id: &str) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query_file!(
        "src/node_session/sql/disconnect_replica.sql",
        coordinator_id
    )
    .execute(pool)
    .await?
    .rows_affected())
}

/// Ends `node_id`'s quarantine now (an operator's `lpsctl lift-quarantine`): its drop
/// count starts over (the number of quarantines stays, so a relapse lasts longer). Returns
/// whether it was quarantined.
pub async fn lift_quarantine(pool: &PgPool, node_id: &str) -> Result<bool, sqlx::Error> {
    let lifted = sqlx::query_file!("src/node_session/sql/lift_quarantine.sql", node_id)
        .execute(pool)
        .await?
        .rows_affected();
    Ok(lifted > 0)
}

/// Marks `node_id` draining. Returns whether such a node is connected or between streams
/// (disconnected less than 5 minutes ago).
pub async fn mark_draining(pool: &PgPool, node_id: &str) -> Result<bool, sqlx::Error> {
    let marked = sqlx::query_file!("src/node_session/sql/drain.sql", node_id)
        .execute(pool)
        .await?
        .rows_affected();
    Ok(marked > 0)
}

/// Connected nodes (a closed stream in its grace period is not listed) with the jobs they
/// run, by node id.
pub async fn connected(pool: &PgPool) -> Result<Vec<NodeInfo>, sqlx::Error> {
    let rows = sqlx::query_file!("src/node_session/sql/connected.sql")
        .fetch_all(pool)
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| NodeInfo {
            node_id: r.node_id,
            session_id: r.session_id,
            coordinator_id: r.coordinator_id,
            version: r.version,
            slots: u32::try_from(r.slots).unwrap_or_default(),
            free_slots: u32::try_from(r.free_slots).unwrap_or_default(),
            malls: r.malls,
            running_jobs: r.running_jobs,
            connected_at: r.connected_at,
            last_seen_at: r.last_seen_at,
            draining: r.draining,
            quarantined_until: r.quarantined_until,
            quarantine_reason: r.quarantine_reason,
        })
        .collect())
}

/// The nodes' figures of the ops snapshot at `now` (`None`: the database clock).
pub async fn fleet(pool: &PgPool, now: Option<DateTime<Utc>>) -> Result<Fleet, sqlx::Error> {
    let r = sqlx::query_file!("src/node_session/sql/fleet.sql", now)
        .fetch_one(pool)
        .await?;
    Ok(Fleet {
        nodes_connected: r.nodes_connected,
        free_slots: r.free_slots,
        nodes_quarantined: r.nodes_quarantined,
    })
}
