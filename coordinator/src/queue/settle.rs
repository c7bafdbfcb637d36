//! Batching of completions and claims across callers: what many node streams report and
//! claim at the same moment is written by one transaction (one statement per kind, one
//! commit) instead of one transaction each.
//!
//! A request (a node's finished jobs and how many jobs it wants next) waits in a line. Up
//! to [`QueueConfig::max_batches_in_flight`](super::QueueConfig) drivers each take every
//! waiting request (up to [`MAX_BATCH_REQUESTS`] / [`MAX_BATCH_JOBS`]) and run them as one
//! batch: `complete.sql` over every reported job, `spend.sql` over what they spent, then one
//! claim statement per group of requests that claim from the same malls. While a batch
//! runs, new requests wait for the next one, so batches grow with the load; an idle queue
//! runs a request at once.
//!
//! Each request keeps its own answer: its leases' applied flags and the jobs claimed for
//! it (never more than it asked for). A batch that fails with a database error is run
//! again request by request, so one bad report fails alone; an unavailable database fails
//! the whole batch at once. Batches run in their own tasks: a caller that goes away cannot
//! stop a commit half-answered, and jobs claimed for a caller that is gone are handed back
//! to the queue at once.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
};

use chrono::{DateTime, Utc};
use lps_proto::model::Lease;
use sqlx::{Connection as _, PgConnection, Postgres, pool::PoolConnection};
use tokio::sync::oneshot;
use tracing::{Instrument as _, Span, field, info_span, warn};

use super::{ClaimedJob, CompleteColumns, CompletedAndClaimed, Error, Queue};

/// Most requests in one batch.
pub(super) const MAX_BATCH_REQUESTS: usize = 64;
/// Most jobs (reported plus wanted) in one batch; a larger single request runs alone.
pub(super) const MAX_BATCH_JOBS: usize = 2000;

/// One caller's part of a batch.
pub(super) struct Request {
    pub node: String,
    pub leases: Vec<Lease>,
    pub reported: CompleteColumns,
    pub claim: Option<ClaimWanted>,
    /// The caller's pinned clock (`None`: the database's); a batch shares one.
    pub now: Option<DateTime<Utc>>,
    pub span: Span,
    pub reply: oneshot::Sender<Result<CompletedAndClaimed, Error>>,
}

pub(super) struct ClaimWanted {
    /// The malls the node serves (`None`: all).
    pub malls: Option<Vec<String>>,
    pub n: i32,
    /// Whether one of those malls may have a cap or a start gap (picks `claim.sql`).
    pub limited: bool,
}

impl Request {
    fn size(&self) -> usize {
        self.leases.len()
            + self
                .claim
                .as_ref()
                .map_or(0, |c| c.n.unsigned_abs() as usize)
    }
}

/// The waiting line and the number of running drivers (shared by a queue's clones).
#[derive(Default)]
pub(super) struct Settler {
    state: Mutex<State>,
    batches: AtomicU64,
    requests: AtomicU64,
}

/// How many batches ran and how many requests they carried (a queue's clones together).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchCounts {
    pub batches: u64,
    pub requests: u64,
}

#[derive(Default)]
struct State {
    waiting: VecDeque<Request>,
    drivers: usize,
}

impl Settler {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next batch: the oldest waiting request and every later one that shares its clock
    /// and reports none of its jobs, within the size limits.
    fn next_batch(&self) -> Option<Vec<Request>> {
        let mut state = self.state();
        let first = state.waiting.pop_front()?;
        let mut jobs: HashSet<i64> = first.leases.iter().map(|l| l.job_id).collect();
        let mut size = first.size();
        let mut batch = vec![first];
        let mut i = 0;
        while i < state.waiting.len() && batch.len() < MAX_BATCH_REQUESTS {
            let r = &state.waiting[i];
            let fits = r.now == batch[0].now
                && size + r.size() <= MAX_BATCH_JOBS
                && r.leases.iter().all(|l| !jobs.contains(&l.job_id));
            if !fits {
                i += 1;
                continue;
            }
            if let Some(r) = state.waiting.remove(i) {
                jobs.extend(r.leases.iter().map(|l| l.job_id));
                size += r.size();
                batch.push(r);
            }
        }
        Some(batch)
    }
}

/// Ends a driver: the count goes down, and a request that came in while this driver was
/// deciding to stop (or a panic) gets a new driver.
struct DriverGuard(Queue);

impl Drop for DriverGuard {
    fn drop(&mut self) {
        let mut state = self.0.settler.state();
        state.drivers -= 1;
        let restart = !state.waiting.is_empty();
        drop(state);
        if restart {
            self.0.start_driver();
        }
    }
}

/// The claim requests of a batch that can share one claim statement.
struct ClaimGroup<'a> {
    malls: Option<&'a [String]>,
    limited: bool,
    /// Indices into the batch.
    requests: Vec<usize>,
}

impl Queue {
    /// The batches of completions and claims run so far.
    pub fn batch_counts(&self) -> BatchCounts {
        BatchCounts {
            batches: self.settler.batches.load(Ordering::Relaxed),
            requests: self.settler.requests.load(Ordering::Relaxed),
        }
    }

    /// Queues `request` and waits for its answer.
    pub(super) async fn settle_request(
        &self,
        request: Request,
        answer: oneshot::Receiver<Result<CompletedAndClaimed, Error>>,
    ) -> Result<CompletedAndClaimed, Error> {
        self.settler.state().waiting.push_back(request);
        self.start_driver();
        answer.await.unwrap_or_else(|_| {
            Err(Error::Internal(
                "the queue's batch ended without an answer".into(),
            ))
        })
    }

    /// Starts a driver unless enough are running.
    fn start_driver(&self) {
        {
            let mut state = self.settler.state();
            if state.waiting.is_empty() || state.drivers >= self.config.max_batches_in_flight {
                return;
            }
            state.drivers += 1;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime: nobody can be waiting for an answer.
            self.settler.state().drivers -= 1;
            return;
        };
        let queue = self.clone();
        runtime.spawn(async move {
            let _guard = DriverGuard(queue.clone());
            // The driver keeps its connection while batches keep coming (no pool round trip
            // per batch); after an error it goes back to the pool, which checks it.
            let mut conn = None;
            while let Some(batch) = queue.settler.next_batch() {
                queue.run_and_answer(&mut conn, batch).await;
            }
        });
    }

    async fn run_and_answer(
        &self,
        conn: &mut Option<PoolConnection<Postgres>>,
        batch: Vec<Request>,
    ) {
        self.settler.batches.fetch_add(1, Ordering::Relaxed);
        self.settler
            .requests
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let span = info_span!(
            "queue.batch",
            requests = batch.len() as i64,
            jobs = batch.iter().map(|r| r.leases.len()).sum::<usize>() as i64,
            claimed = field::Empty,
        );
        for r in &batch {
            span.follows_from(&r.span);
        }
        let outcome = self.run_batch(conn, &batch).instrument(span.clone()).await;
        match outcome {
            Ok(answers) => {
                span.record(
                    "claimed",
                    answers.iter().map(|a| a.claimed.len()).sum::<usize>() as i64,
                );
                for (request, answer) in batch.into_iter().zip(answers) {
                    self.answer(request, Ok(answer)).await;
                }
            }
            Err(e) if batch.len() > 1 && !e.is_transient() => {
                warn!(parent: &span, error = %e, requests = batch.len(), "a batch failed; running its requests one by one");
                for request in batch {
                    let answer = self
                        .run_batch(conn, std::slice::from_ref(&request))
                        .await
                        .map(|mut answers| answers.remove(0));
                    self.answer(request, answer).await;
                }
            }
            Err(e) => {
                for request in batch {
                    self.answer(request, Err(e.clone())).await;
                }
            }
        }
    }

    /// Gives `request` its answer; jobs claimed for a caller that is gone go back to the
    /// queue at once (no attempt, no reclaim).
    async fn answer(&self, request: Request, answer: Result<CompletedAndClaimed, Error>) {
        let Err(Ok(unheard)) = request.reply.send(answer) else {
            return;
        };
        let queue = Queue {
            now: request.now,
            ..self.clone()
        };
        for job in unheard.claimed {
            if let Err(e) = queue.hand_back_if_leased(&request.node, job.lease).await {
                warn!(error = %e, job.id = job.lease.job_id, node.id = %request.node,
                      "could not hand back a job claimed for a caller that went away");
            }
        }
    }

    /// One transaction for the whole batch (one statement without a transaction when the
    /// batch needs only one).
    async fn run_batch(
        &self,
        conn: &mut Option<PoolConnection<Postgres>>,
        batch: &[Request],
    ) -> Result<Vec<CompletedAndClaimed>, Error> {
        let mut held = match conn.take() {
            Some(held) => held,
            None => self.pool.acquire().await?,
        };
        let answers = self.run_batch_on(&mut held, batch).await?;
        *conn = Some(held);
        Ok(answers)
    }

    async fn run_batch_on(
        &self,
        conn: &mut PgConnection,
        batch: &[Request],
    ) -> Result<Vec<CompletedAndClaimed>, Error> {
        let now = batch.first().and_then(|r| r.now);
        let mut reported = CompleteColumns::default();
        for r in batch {
            reported.extend(&r.reported);
        }
        let mut groups: Vec<ClaimGroup<'_>> = Vec::new();
        for (i, r) in batch.iter().enumerate() {
            let Some(c) = &r.claim else { continue };
            let malls = c.malls.as_deref();
            match groups
                .iter_mut()
                .find(|g| g.malls == malls && g.limited == c.limited)
            {
                Some(g) => g.requests.push(i),
                None => groups.push(ClaimGroup {
                    malls,
                    limited: c.limited,
                    requests: vec![i],
                }),
            }
        }
        let statements =
            usize::from(!reported.is_empty()) + usize::from(reported.spent_any()) + groups.len();
        if statements > 1 {
            let mut tx = conn.begin().await?;
            let answers = self
                .batch_statements(&mut tx, batch, &reported, &groups, now)
                .await?;
            tx.commit().await?;
            Ok(answers)
        } else {
            self.batch_statements(conn, batch, &reported, &groups, now)
                .await
        }
    }

    async fn batch_statements(
        &self,
        conn: &mut PgConnection,
        batch: &[Request],
        reported: &CompleteColumns,
        groups: &[ClaimGroup<'_>],
        now: Option<DateTime<Utc>>,
    ) -> Result<Vec<CompletedAndClaimed>, Error> {
        let applied: HashMap<i64, bool> = if reported.is_empty() {
            HashMap::new()
        } else {
            self.complete_on(&mut *conn, reported, now)
                .await?
                .into_iter()
                .collect()
        };
        // What every reported run spent, applied or stale, on its attempt: a statement of its
        // own, so that it sees the attempt rows of leases ended by a transaction that
        // committed while complete.sql waited for their jobs.
        self.spend_reported(&mut *conn, reported, now).await?;
        let mut claimed: Vec<Vec<ClaimedJob>> = batch.iter().map(|_| Vec::new()).collect();
        for g in groups {
            let (nodes, counts): (Vec<String>, Vec<i32>) = g
                .requests
                .iter()
                .map(|&i| {
                    let r = &batch[i];
                    (r.node.clone(), r.claim.as_ref().map_or(0, |c| c.n))
                })
                .unzip();
            let rows = self
                .claim_on(&mut *conn, &nodes, &counts, g.malls, g.limited, now)
                .await?;
            for (req, job) in rows {
                let i = usize::try_from(req - 1)
                    .ok()
                    .and_then(|k| g.requests.get(k))
                    .ok_or_else(|| Error::Internal(format!("claim row for request {req}")))?;
                claimed[*i].push(job);
            }
        }
        Ok(batch
            .iter()
            .zip(claimed)
            .map(|(r, claimed)| CompletedAndClaimed {
                applied: r
                    .leases
                    .iter()
                    .map(|&l| (l, applied.get(&l.job_id).copied().unwrap_or(false)))
                    .collect(),
                claimed,
            })
            .collect())
    }
}

impl std::fmt::Debug for Settler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        f.debug_struct("Settler")
            .field("waiting", &state.waiting.len())
            .field("drivers", &state.drivers)
            .finish()
    }
}
