//! Cross-replica control messages: "tell the node running job N to cancel it" and "drain
//! node X", delivered with NOTIFY on [`CONTROL_CHANNEL`] so that whichever coordinator
//! replica holds the node's stream acts on it. The database state is already final when a
//! message is sent (a cancelled job's lease is gone; a draining node is marked), so a lost
//! message only delays the node: its next heartbeat is answered with the same decision.

use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::queue::Cancelled;

/// The NOTIFY channel of control messages; the payload is a JSON [`Control`].
pub const CONTROL_CHANNEL: &str = "lps_control";

/// NOTIFY payloads must stay under 8000 bytes; cancels are sent in chunks of this many.
const CANCELS_PER_MESSAGE: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Control {
    /// Stop these jobs on the nodes that run them.
    Cancel(Vec<CancelJob>),
    /// Drain this node: no new jobs, finish running ones, then leave.
    Drain { node_id: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelJob {
    pub job_id: i64,
    pub lease_epoch: i64,
    pub node_id: String,
    pub reason: String,
}

/// Tells the nodes running the `cancelled` jobs that were running to stop them.
pub async fn send_cancels(
    pool: &PgPool,
    cancelled: &[Cancelled],
    reason: &str,
) -> Result<(), crate::error::Error> {
    let jobs: Vec<CancelJob> = cancelled
        .iter()
        .filter_map(|c| {
            c.node.as_ref().map(|node| CancelJob {
                job_id: c.lease.job_id,
                lease_epoch: c.lease.epoch,
                node_id: node.clone(),
                reason: reason.chars().take(200).collect(),
            })
        })
        .collect();
    for chunk in jobs.chunks(CANCELS_PER_MESSAGE) {
        send(pool, &Control::Cancel(chunk.to_vec())).await?;
    }
    Ok(())
}

/// Marks `node_id` draining and tells its coordinator. Returns whether such a node is
/// connected or between streams (disconnected less than 5 minutes ago): the mark stays on
/// its row, so a node that reconnects (the same process) is drained then, and every
/// heartbeat answer repeats the Drain.
pub async fn request_drain(pool: &PgPool, node_id: &str) -> Result<bool, crate::error::Error> {
    if !crate::node_session::mark_draining(pool, node_id).await? {
        return Ok(false);
    }
    send(
        pool,
        &Control::Drain {
            node_id: node_id.to_owned(),
        },
    )
    .await?;
    Ok(true)
}

async fn send(pool: &PgPool, control: &Control) -> Result<(), crate::error::Error> {
    let payload =
        serde_json::to_string(control).map_err(|e| crate::error::Error::Internal(e.to_string()))?;
    sqlx::query!("select pg_notify($1, $2)", CONTROL_CHANNEL, payload)
        .execute(pool)
        .await?;
    Ok(())
}
