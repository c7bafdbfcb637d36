//! Wakes claimers when jobs are enqueued (LISTEN/NOTIFY on [`super::JOB_CHANNEL`]), with a
//! jittered poll as the fallback for lost notifications, listener reconnects and jobs that
//! become claimable by time alone (backoff ends, gaps pass). The same connection LISTENs on
//! [`DELIVERY_CHANNEL`] for the delivery worker (a delivery event was stored), so delivery
//! holds no connection of its own.
//!
//! [`Wakeups`] is a counter behind a `watch` channel: a claimer notes the counter before it
//! claims and waits for it to move, so a notification that arrives between "claimed
//! nothing" and "start waiting" is never lost.

use std::time::Duration;

use sqlx::{PgPool, postgres::PgListener};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span, warn};

use super::{Error, JOB_CHANNEL};

/// The NOTIFY channel on which a transaction that stored delivery events wakes the
/// delivery workers (migration 0018's trigger, the enqueue statement).
pub const DELIVERY_CHANNEL: &str = "lps_delivery";

/// A handle claimers wait on. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Wakeups {
    rx: watch::Receiver<u64>,
}

impl Wakeups {
    /// Waits until a job was enqueued since the last call, or `poll` (jittered by up to
    /// ±20 %) passed. Returns `true` when woken by a notification.
    pub async fn wait(&mut self, poll: Duration) -> bool {
        let jitter = 0.8 + fastrand::f64() * 0.4;
        let poll = poll.mul_f64(jitter);
        matches!(
            tokio::time::timeout(poll, self.rx.changed()).await,
            Ok(Ok(()))
        )
    }

    /// Marks everything so far as seen (call before claiming).
    pub fn mark_seen(&mut self) {
        self.rx.borrow_and_update();
    }
}

/// The task that LISTENs and bumps the counter.
#[derive(Debug)]
pub struct JobListener {
    tx: watch::Sender<u64>,
    deliveries: watch::Sender<u64>,
}

impl JobListener {
    /// Connects, LISTENs, and spawns the loop. Fails when the first LISTEN fails (startup
    /// should stop then); later connection losses are retried inside the loop.
    pub async fn spawn(
        pool: &PgPool,
        cancel: CancellationToken,
    ) -> Result<(Wakeups, tokio::task::JoinHandle<()>), Error> {
        let (jobs, _, task) = Self::spawn_with_deliveries(pool, cancel).await?;
        Ok((jobs, task))
    }

    /// [`Self::spawn`], also returning the delivery workers' wake-ups.
    pub async fn spawn_with_deliveries(
        pool: &PgPool,
        cancel: CancellationToken,
    ) -> Result<(Wakeups, Wakeups, tokio::task::JoinHandle<()>), Error> {
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen_all([JOB_CHANNEL, DELIVERY_CHANNEL]).await?;
        let (tx, rx) = watch::channel(0u64);
        let (deliveries, deliveries_rx) = watch::channel(0u64);
        let this = Self { tx, deliveries };
        let task = tokio::spawn(
            async move { this.run(listener, cancel).await }
                .instrument(info_span!(parent: None, "queue.listener", log_only = true)),
        );
        Ok((Wakeups { rx }, Wakeups { rx: deliveries_rx }, task))
    }

    async fn run(self, mut listener: PgListener, cancel: CancellationToken) {
        loop {
            let received = tokio::select! {
                () = cancel.cancelled() => return,
                r = listener.try_recv() => r,
            };
            match received {
                Ok(Some(n)) if n.channel() == DELIVERY_CHANNEL => {
                    debug!("delivery event stored");
                    self.deliveries.send_modify(|n| *n = n.wrapping_add(1));
                }
                Ok(Some(n)) => {
                    debug!(mall = n.payload(), "job enqueued");
                    self.tx.send_modify(|n| *n = n.wrapping_add(1));
                }
                // NB: `None` means the connection was lost and PgListener will reconnect on the
                // next call; notifications sent meanwhile are gone, so wake everyone to look.
                Ok(None) => {
                    warn!("job listener connection lost; reconnecting");
                    self.bump();
                }
                Err(e) => {
                    warn!(error = %e, "job listener failed; retrying in 1s");
                    self.bump();
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                }
            }
        }
    }

    /// Wakes every claimer (and, as notifications may have been lost, every delivery
    /// worker) to look.
    fn bump(&self) {
        self.tx.send_modify(|n| *n = n.wrapping_add(1));
        self.deliveries.send_modify(|n| *n = n.wrapping_add(1));
    }
}
