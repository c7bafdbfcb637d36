//! The node's side of `NodeService.Connect`, against a scripted coordinator on loopback
//! (`support::FakeCoordinator`): handshake, credits, deadlines, cancels, the outbox across
//! reconnects, drain, and the fatal statuses.

mod support;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use lps_crawler_node::{NodeError, StreamState, health};
use lps_proto::pb::{self, coordinator_message::Body as In, node_message::Body as Out};
use support::{Behaviour, FakeCoordinator, Seen, TestNode, ack, assign, report_job, report_seq};
use tokio::time::Instant;
use tonic::{Code, Status};

const LONG: Duration = Duration::from_secs(60);

fn is_report_for(body: &Out, job_id: i64) -> bool {
    report_job(body) == Some(job_id)
}

#[tokio::test]
async fn hello_describes_the_node_and_credit_follows_welcome() {
    let coord = FakeCoordinator::start().await;
    let node = TestNode::start(&coord, |c| {
        c.slots = 3;
        c.malls = "testmall-alpha".parse().unwrap();
    });
    let hello = coord.hello(0).await;
    assert_eq!(hello.protocol_version, lps_proto::PROTOCOL_VERSION);
    assert_eq!(hello.node_id, "node-test");
    assert_eq!(hello.slots, 3);
    assert_eq!(hello.malls, [support::MALL]);
    assert!(!hello.version.is_empty());
    assert!(hello.running.is_empty());
    let status = node
        .wait_status("welcomed", |s| s.stream == StreamState::Connected)
        .await;
    assert_eq!(status.stream_id.as_deref(), Some("stream-0"));
    coord
        .wait_message(0, "a credit", |m| matches!(m, Out::Credit(_)).then_some(()))
        .await;
    let messages = coord.messages(0);
    assert!(matches!(messages[0], Out::Hello(_)));
    assert!(
        matches!(messages[1], Out::Credit(pb::Credit { free_slots: 3 })),
        "credit right after the welcome: {messages:?}"
    );
    // The site profiles of the Welcome are published.
    let profiles = node.handle.profiles().borrow().clone();
    assert_eq!(profiles.malls(), [support::MALL]);
    assert_eq!(profiles.limits().ip_request_budget, 3);
    // Heartbeats flow even when idle.
    coord
        .wait_message(0, "an idle heartbeat", |m| match m {
            Out::Heartbeat(h) if h.running.is_empty() && h.free_slots == 3 => Some(()),
            _ => None,
        })
        .await;
}

#[tokio::test]
async fn hello_carries_running_jobs_after_a_reconnect() {
    let coord = FakeCoordinator::start().await;
    let node = TestNode::start(&coord, |_| {});
    coord.hello(0).await;
    node.wait_status("welcomed", |s| s.stream == StreamState::Connected)
        .await;
    coord.send(0, assign(41, "hang", LONG));
    coord
        .wait_message(0, "a heartbeat with job 41", |m| match m {
            Out::Heartbeat(h) if h.running.iter().any(|j| j.job_id == 41) => Some(()),
            _ => None,
        })
        .await;

    coord.kill(0, Status::unavailable("coordinator restarting"));
    let hello = coord.hello(1).await;
    assert_eq!(
        hello.running,
        [pb::HeldJob {
            job_id: 41,
            lease_epoch: 1
        }]
    );
    // The job kept running through the reconnect and is heartbeated on the new stream.
    coord
        .wait_message(
            1,
            "a heartbeat with job 41 on the new stream",
            |m| match m {
                Out::Heartbeat(h) if h.running.iter().any(|j| j.job_id == 41) => Some(()),
                _ => None,
            },
        )
        .await;
    let status = node.handle.status();
    assert_eq!(status.connects, 2);
    assert_eq!(status.running_jobs, 1);
    assert_eq!(node.executor.started(), 1, "the job was not restarted");
}

#[tokio::test]
async fn heartbeats_carry_progress() {
    let coord = FakeCoordinator::start().await;
    let node = TestNode::start(&coord, |_| {});
    coord.hello(0).await;
    node.wait_status("welcomed", |s| s.stream == StreamState::Connected)
        .await;
    coord.send(0, assign(7, "progress sleep:5000", LONG));
    let progress = coord
        .wait_message(0, "progress of job 7", |m| match m {
            Out::Heartbeat(h) => h
                .running
                .iter()
                .find(|j| j.job_id == 7 && j.round == 3)
                .cloned(),
            _ => None,
        })
        .await;
    assert_eq!(progress.lease_epoch, 1);
    assert_eq!(progress.pages_loaded, 3);
    assert_eq!(progress.bytes, 30_000);
}

#[tokio::test]
async fn credits_never_exceed_slots() {
    let coord = FakeCoordinator::start().await;
    let node = TestNode::start(&coord, |c| c.slots = 2);
    coord.hello(0).await;
    node.wait_status("welcomed", |s| s.stream == StreamState::Connected)
        .await;
    let max_running = Arc::new(AtomicUsize::new(0));
    let watcher = tokio::spawn({
        let mut rx = node.handle.subscribe();
        let max_running = max_running.clone();
        async move {
            while rx.changed().await.is_ok() {
                let running = rx.borrow().running_jobs;
                max_running.fetch_max(running, Ordering::Relaxed);
            }
        }
    });

    // Three assignments against two credits (one crossed a credit in flight): the third is
    // handed back at once instead of overrunning the slots.
    for job in 1..=3 {
        coord.send(0, assign(job, "sleep:300", LONG));
    }
    let hand_back = coord
        .wait_message(0, "a hand-back of the extra job", |m| match m {
            Out::HandBack(h) => Some(h.clone()),
            _ => None,
        })
        .await;
    assert_eq!(hand_back.job_id, 3);
    assert_eq!(hand_back.reason, "no free slot");
    coord
        .wait_for("results of jobs 1 and 2", |log| {
            let done = log
                .iter()
                .filter(
                    |s| matches!(s, Seen::Message { body: Out::Result(r), .. } if r.job_id <= 2),
                )
                .count();
            (done == 2).then_some(())
        })
        .await;
    coord
        .wait_message(0, "credit back to 2", |m| match m {
            Out::Credit(pb::Credit { free_slots: 2 }) => Some(()),
            _ => None,
        })
        .await;

    // A burst of quick jobs, each sent when a credit says there is room.
    for job in 10..20 {
        coord.send(0, assign(job, "ok", LONG));
        if job % 2 == 1 {
            coord
                .wait_for("the pair's results", |log| {
                    let done = log
                        .iter()
                        .filter(|s| matches!(s, Seen::Message { body: Out::Result(r), .. } if r.job_id == job || r.job_id == job - 1))
                        .count();
                    (done == 2).then_some(())
                })
                .await;
        }
    }
    node.shutdown.cancel();
    let executor = node.executor.clone();
    node.finished().await.unwrap();
    watcher.abort();

    for body in coord.messages(0) {
        match body {
            Out::Credit(c) => assert!(c.free_slots <= 2, "credit {c:?}"),
            Out::Heartbeat(h) => {
                assert!(h.free_slots <= 2, "heartbeat {h:?}");
                assert!(h.running.len() <= 2, "heartbeat {h:?}");
            }
            _ => {}
        }
    }
    assert!(max_running.load(Ordering::Relaxed) <= 2);
    assert_eq!(max_running.load(Ordering::Relaxed), 2);
    assert_eq!(executor.started(), 12, "the handed-back job never ran");
}

#[tokio::test]
async fn a_job_past_its_deadline_reports_deadline() {
    let coord = FakeCoordinator::start().await;
    let node = TestNode::start(&coord, |_| {});
    coord.hello(0).await;
    node.wait_status("welcomed", |s| s.stream == StreamState::Connected)
        .await;
    let sent = Instant::now();
    coord.send(0, assign(5, "hang", Duration::from_millis(400)));
    let failure = coord
        .wait_message(0, "the deadline failure", |m| match m {
            Out::Failure(f) if f.job_id == 5 => Some(f.clone()),
            _ => None,
        })
        .await;
    let after = sent.elapsed();
    assert_eq!(failure.class, pb::ErrorClass::Deadline as i32);
    assert_eq!(failure.lease_epoch, 1);
    assert!(failure.report_seq > 0);
    assert!(
        after >= Duration::from_millis(300),
        "reported after {after:?}"
    );
    node.wait_status("the slot freed", |s| s.running_jobs == 0)
        .await;
    // Exactly one report for the job.
    let reports = coord
        .messages(0)
        .iter()
        .filter(|m| is_report_for(m, 5))
        .count();
    assert_eq!(reports, 1);
}

/// What 30,000 bytes (the scripted `progress` step) cost at the fake's 3 USD per GB.
const PROGRESS_COST: f64 = 30_000.0 * 3.0 / 1e9;

/// The `Stopped` reports the fake received on `stream`, by job id.
fn stops(coord: &FakeCoordinator, stream: usize) -> Vec<pb::JobStopped> {
    let mut stops: Vec<pb::JobStopped> = coord
        .messages(stream)
        .into_iter()
        .filter_map(|m| match m {
            Out::Stopped(s) => Some(s),
            _ => None,
        })
        .collect();
    stops.sort_by_key(|s| s.job_id);
    stops
}

#[tokio::test]
async fn cancel_stops_a_job_and_reports_what_it_spent() {
    let coord = FakeCoordinator::start().await;
    let node = TestNode::start(&coord, |_| {});
    coord.hello(0).await;
    node.wait_status("welcomed", |s| s.stream == StreamState::Connected)
        .await;
    coord.send(0, assign(8, "progress hang", LONG));
    coord.send(0, assign(9, "progress hang", LONG));
    node.wait_status("two jobs running", |s| s.running_jobs == 2)
        .await;
    coord
        .wait_message(0, "both jobs' bytes in a heartbeat", |m| match m {
            Out::Heartbeat(h)
                if h.running.len() == 2 && h.running.iter().all(|p| p.bytes == 30_000) =>
            {
                Some(())
            }
            _ => None,
        })
        .await;

    // A Cancel for another epoch is not for this run.
    coord.send(
        0,
        In::Cancel(pb::Cancel {
            job_id: 8,
            lease_epoch: 2,
            reason: "old lease".into(),
        }),
    );
    coord.send(
        0,
        In::Cancel(pb::Cancel {
            job_id: 8,
            lease_epoch: 1,
            reason: "search cancelled".into(),
        }),
    );
    node.wait_status("job 8 stopped", |s| s.running_jobs == 1)
        .await;
    // HeartbeatAck.cancel stops a job the same way.
    coord.send(
        0,
        In::HeartbeatAck(pb::HeartbeatAck {
            extended: vec![],
            cancel: vec![9],
        }),
    );
    node.wait_status("job 9 stopped", |s| s.running_jobs == 0)
        .await;
    coord
        .wait_message(0, "credit back to 2", |m| match m {
            Out::Credit(pb::Credit { free_slots: 2 }) => Some(()),
            _ => None,
        })
        .await;
    // Give a stray report every chance to show up.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let reports: Vec<Out> = coord
        .messages(0)
        .into_iter()
        .filter(|m| report_seq(m).is_some())
        .collect();
    assert_eq!(reports.len(), 2, "one stop report per run: {reports:?}");
    let stops = stops(&coord, 0);
    let reasons: Vec<(i64, &str)> = stops
        .iter()
        .map(|s| (s.job_id, s.reason.as_str()))
        .collect();
    assert_eq!(reasons, [(8, "search cancelled"), (9, "lease not renewed")]);
    for s in &stops {
        let m = s.metrics.unwrap();
        assert_eq!((s.lease_epoch, m.bytes_in), (1, 30_000), "{s:?}");
        assert!((m.cost_usd - PROGRESS_COST).abs() < 1e-12, "priced: {s:?}");
    }
    assert_eq!(node.executor.finished(), 2, "both executors returned");
    node.wait_status("acked", |s| s.unacked_reports == 0).await;
}

#[tokio::test]
async fn an_older_coordinator_gets_no_stop_reports() {
    let coord = FakeCoordinator::start_with(Behaviour {
        stopped_reports: false,
        ..Behaviour::default()
    })
    .await;
    let node = TestNode::start(&coord, |_| {});
    coord.hello(0).await;
    node.wait_status("welcomed", |s| s.stream == StreamState::Connected)
        .await;
    coord.send(0, assign(8, "hang", LONG));
    node.wait_status("running", |s| s.running_jobs == 1).await;
    coord.send(
        0,
        In::Cancel(pb::Cancel {
            job_id: 8,
            lease_epoch: 1,
            reason: "search cancelled".into(),
        }),
    );
    node.wait_status("job 8 stopped", |s| s.running_jobs == 0)
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let reports: Vec<Out> = coord
        .messages(0)
        .into_iter()
        .filter(|m| report_seq(m).is_some())
        .collect();
    assert!(
        reports.is_empty(),
        "it would end the stream on one: {reports:?}"
    );
    assert_eq!(node.handle.status().unacked_reports, 0);
}

#[tokio::test]
async fn unacked_reports_are_resent_after_a_reconnect_and_acked_ones_are_not() {
    let coord = FakeCoordinator::start_with(Behaviour {
        auto_ack: false,
        ..Behaviour::default()
    })
    .await;
    let node = TestNode::start(&coord, |_| {});
    coord.hello(0).await;
    node.wait_status("welcomed", |s| s.stream == StreamState::Connected)
        .await;
    let result_seq = |job: i64| {
        move |m: &Out| match m {
            Out::Result(r) if r.job_id == job => Some(r.report_seq),
            _ => None,
        }
    };

    coord.send(0, assign(1, "ok:1000", LONG));
    let applied = coord.wait_message(0, "job 1's result", result_seq(1)).await;
    coord.send(0, ack(applied, pb::AckStatus::Applied));
    coord.send(0, assign(2, "notfound", LONG));
    let stale = coord.wait_message(0, "job 2's result", result_seq(2)).await;
    coord.send(0, ack(stale, pb::AckStatus::Stale));
    coord.send(0, assign(3, "ok:777", LONG));
    let unacked = coord.wait_message(0, "job 3's result", result_seq(3)).await;
    assert!(applied < stale && stale < unacked, "seqs increase");
    node.wait_status("one report pending", |s| s.unacked_reports == 1)
        .await;

    coord.kill(0, Status::unavailable("coordinator restarting"));
    let hello = coord.hello(1).await;
    // The pending report's job is still held: a coordinator releases jobs a node does not
    // list, which would make the resent result stale.
    assert_eq!(
        hello.running,
        [pb::HeldJob {
            job_id: 3,
            lease_epoch: 1
        }]
    );
    let resent = coord
        .wait_message(1, "the resent result", |m| match m {
            Out::Result(r) => Some(r.clone()),
            _ => None,
        })
        .await;
    assert_eq!(resent.report_seq, unacked);
    assert_eq!(resent.job_id, 3);
    assert_eq!(resent.offers[0].price, 777);
    // Everything resent comes right after the welcome, before the first heartbeat.
    coord
        .wait_message(1, "a heartbeat", |m| {
            matches!(m, Out::Heartbeat(_)).then_some(())
        })
        .await;
    let reports: Vec<u64> = coord.messages(1).iter().filter_map(report_seq).collect();
    assert_eq!(reports, [unacked], "only the un-acked report is resent");

    coord.send(1, ack(unacked, pb::AckStatus::Applied));
    node.wait_status("nothing pending", |s| s.unacked_reports == 0)
        .await;
}

#[tokio::test]
async fn reports_made_while_disconnected_wait_for_the_next_stream() {
    let coord = FakeCoordinator::start().await;
    let node = TestNode::start(&coord, |_| {});
    coord.hello(0).await;
    node.wait_status("welcomed", |s| s.stream == StreamState::Connected)
        .await;
    coord.send(0, assign(4, "sleep:400 ok:4000", LONG));
    node.wait_status("job 4 running", |s| s.running_jobs == 1)
        .await;
    // The coordinator is away while the job finishes.
    coord.change(|b| b.refuse = Some((Code::Unavailable, "restarting".into())));
    coord.kill(0, Status::unavailable("coordinator restarting"));
    node.wait_status("the job finished offline", |s| {
        s.running_jobs == 0 && s.unacked_reports == 1
    })
    .await;
    coord.change(|b| b.refuse = None);
    let hello = coord.hello(1).await;
    assert_eq!(hello.running.len(), 1, "the finished job is still held");
    let result = coord
        .wait_message(1, "the result on the new stream", |m| match m {
            Out::Result(r) if r.job_id == 4 => Some(r.clone()),
            _ => None,
        })
        .await;
    assert_eq!(result.offers[0].price, 4000);
    node.wait_status("acked", |s| s.unacked_reports == 0).await;
}

/// Jobs a reconnect's Welcome calls lost: a running one is stopped with a `Stopped` report,
/// and an un-acked report of a finished one is still resent (the coordinator acks it STALE
/// and records what the run spent).
#[tokio::test]
async fn lost_jobs_are_stopped_and_their_reports_still_sent() {
    let coord = FakeCoordinator::start_with(Behaviour {
        auto_ack: false,
        ..Behaviour::default()
    })
    .await;
    let node = TestNode::start(&coord, |c| c.slots = 3);
    coord.hello(0).await;
    node.wait_status("welcomed", |s| s.stream == StreamState::Connected)
        .await;
    coord.send(0, assign(12, "ok:900", LONG));
    coord.send(0, assign(13, "hang", LONG));
    coord.send(0, assign(14, "hang", LONG));
    coord
        .wait_message(0, "job 12's result", |m| match m {
            Out::Result(r) if r.job_id == 12 => Some(()),
            _ => None,
        })
        .await;
    node.wait_status("two jobs running", |s| s.running_jobs == 2)
        .await;
    coord.change(|b| {
        b.lost = vec![12, 13];
        b.auto_ack = true;
    });
    coord.kill(0, Status::internal("boom"));
    let hello = coord.hello(1).await;
    let mut held: Vec<i64> = hello.running.iter().map(|j| j.job_id).collect();
    held.sort_unstable();
    assert_eq!(
        held,
        [12, 13, 14],
        "running jobs and the one with a pending report"
    );
    node.wait_status("job 13 stopped", |s| s.connects == 2 && s.running_jobs == 1)
        .await;
    coord
        .wait_message(1, "job 12's result, resent", |m| match m {
            Out::Result(r) if r.job_id == 12 => Some(()),
            _ => None,
        })
        .await;
    coord
        .wait_message(1, "a heartbeat with job 14 only", |m| match m {
            Out::Heartbeat(h) if h.running.len() == 1 && h.running[0].job_id == 14 => Some(()),
            _ => None,
        })
        .await;
    let stops = stops(&coord, 1);
    assert_eq!(stops.len(), 1, "{stops:?}");
    assert_eq!((stops[0].job_id, stops[0].reason.as_str()), (13, "lost"));
    node.wait_status("acked", |s| s.unacked_reports == 0).await;
}

#[tokio::test]
async fn shutdown_finishes_short_jobs_hands_back_the_rest_and_says_goodbye() {
    let coord = FakeCoordinator::start().await;
    let node = TestNode::start(&coord, |c| {
        c.slots = 2;
        c.drain_timeout = Duration::from_millis(2000);
    });
    coord.hello(0).await;
    node.wait_status("welcomed", |s| s.stream == StreamState::Connected)
        .await;
    coord.send(0, assign(1, "sleep:200 ok:1500", LONG));
    coord.send(0, assign(2, "hang", LONG));
    node.wait_status("two jobs running", |s| s.running_jobs == 2)
        .await;
    // From here on the test acks by hand, to see that Goodbye waits for the acks.
    coord.change(|b| b.auto_ack = false);

    let started = Instant::now();
    node.shutdown.cancel();
    coord
        .wait_message(0, "credit 0", |m| match m {
            Out::Credit(pb::Credit { free_slots: 0 }) => Some(()),
            _ => None,
        })
        .await;
    // An assignment that crossed the drain is handed back, not run.
    coord.send(0, assign(3, "ok", LONG));
    let result = coord
        .wait_message(0, "the short job's result", |m| match m {
            Out::Result(r) if r.job_id == 1 => Some(r.clone()),
            _ => None,
        })
        .await;
    coord
        .wait_message(0, "hand-back of the late assignment", |m| match m {
            Out::HandBack(h) if h.job_id == 3 => Some(()),
            _ => None,
        })
        .await;
    let hand_back = coord
        .wait_message(0, "hand-back of the hung job", |m| match m {
            Out::HandBack(h) if h.job_id == 2 => Some(h.clone()),
            _ => None,
        })
        .await;
    let handed_back_after = started.elapsed();
    // Jobs get the drain timeout minus the ack reserve (a quarter: 500 ms of 2 s).
    assert!(
        handed_back_after >= Duration::from_millis(1400),
        "handed back after {handed_back_after:?}"
    );
    tokio::time::sleep(Duration::from_millis(150)).await;
    let goodbye = |m: &Out| matches!(m, Out::Goodbye(_));
    assert!(
        !coord.messages(0).iter().any(goodbye),
        "no goodbye while reports are un-acked"
    );
    let late = coord
        .messages(0)
        .iter()
        .find_map(|m| match m {
            Out::HandBack(h) if h.job_id == 3 => Some(h.report_seq),
            _ => None,
        })
        .unwrap();
    for seq in [result.report_seq, late, hand_back.report_seq] {
        coord.send(0, ack(seq, pb::AckStatus::Applied));
    }
    coord
        .wait_for("the half-close", |log| {
            log.iter()
                .any(|s| matches!(s, Seen::HalfClosed { stream: 0 }))
                .then_some(())
        })
        .await;
    let node_exec = node.executor.clone();
    node.finished().await.expect("a clean drain is Ok");

    let messages = coord.messages(0);
    let position = |pred: &dyn Fn(&Out) -> bool| messages.iter().position(pred).unwrap();
    let credit0 = position(&|m| matches!(m, Out::Credit(pb::Credit { free_slots: 0 })));
    let result1 = position(&|m| matches!(m, Out::Result(r) if r.job_id == 1));
    let back2 = position(&|m| matches!(m, Out::HandBack(h) if h.job_id == 2));
    let bye = position(&goodbye);
    assert!(
        credit0 < result1 && result1 < back2 && back2 < bye,
        "{messages:?}"
    );
    assert_eq!(bye, messages.len() - 1, "goodbye is the last message");
    assert_eq!(hand_back.lease_epoch, 1);
    assert_eq!(node_exec.started(), 2);
    // Nothing was sent after the drain started that announced a free slot.
    assert!(messages[credit0..].iter().all(|m| match m {
        Out::Credit(c) => c.free_slots == 0,
        Out::Heartbeat(h) => h.free_slots == 0,
        _ => true,
    }));
}

#[tokio::test]
async fn a_coordinator_drain_ends_the_node_cleanly() {
    let coord = FakeCoordinator::start().await;
    let node = TestNode::start(&coord, |_| {});
    coord.hello(0).await;
    node.wait_status("welcomed", |s| s.stream == StreamState::Connected)
        .await;
    coord.send(0, assign(1, "sleep:100", LONG));
    coord.send(
        0,
        In::Drain(pb::Drain {
            reason: "scale down".into(),
            deadline: None,
        }),
    );
    coord
        .wait_for("the half-close", |log| {
            log.iter()
                .any(|s| matches!(s, Seen::HalfClosed { stream: 0 }))
                .then_some(())
        })
        .await;
    node.finished().await.expect("a drain is Ok");
    let messages = coord.messages(0);
    assert!(
        messages
            .iter()
            .any(|m| matches!(m, Out::Result(r) if r.job_id == 1))
    );
    match messages.last() {
        Some(Out::Goodbye(g)) => assert!(g.reason.contains("scale down"), "{g:?}"),
        other => panic!("want a goodbye last, got {other:?}"),
    }
}

#[tokio::test]
async fn an_unauthenticated_node_stops_without_retrying() {
    let coord = FakeCoordinator::start().await;
    let node = TestNode::start(&coord, |c| {
        c.node_token = lps_crawler_node::config::Secret::new("wrong-token")
    });
    let err = node.finished().await.unwrap_err();
    match &err {
        NodeError::Refused { code, .. } => assert_eq!(*code, Code::Unauthenticated),
        other => panic!("want refused, got {other:?}"),
    }
    assert!(err.to_string().contains("LPS_NODE_TOKEN"), "{err}");
    assert!(!err.to_string().contains("wrong-token"), "{err}");
    let refusals = coord
        .seen()
        .iter()
        .filter(|s| matches!(s, Seen::Refused { .. }))
        .count();
    assert_eq!(refusals, 1, "exactly one attempt");
}

#[tokio::test]
async fn a_protocol_refusal_mid_stream_is_fatal() {
    let coord = FakeCoordinator::start().await;
    let node = TestNode::start(&coord, |_| {});
    coord.hello(0).await;
    node.wait_status("welcomed", |s| s.stream == StreamState::Connected)
        .await;
    coord.kill(
        0,
        Status::failed_precondition("protocol_version 1 not supported"),
    );
    match node.finished().await {
        Err(NodeError::Refused { code, .. }) => assert_eq!(code, Code::FailedPrecondition),
        other => panic!("want refused, got {other:?}"),
    }
    let opened = coord
        .seen()
        .iter()
        .filter(|s| matches!(s, Seen::Opened { .. }))
        .count();
    assert_eq!(opened, 1);
}

#[tokio::test]
async fn an_unreachable_coordinator_ends_the_node_at_the_reconnect_deadline() {
    let coord = FakeCoordinator::start_with(Behaviour {
        refuse: Some((Code::Unavailable, "overloaded".into())),
        ..Behaviour::default()
    })
    .await;
    let started = Instant::now();
    let node = TestNode::start(&coord, |c| {
        c.reconnect_deadline = Duration::from_millis(1500)
    });
    match node.finished().await {
        Err(NodeError::CoordinatorLost { last_error, .. }) => {
            assert!(last_error.contains("overloaded"), "{last_error}");
        }
        other => panic!("want coordinator lost, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    let attempts = coord
        .seen()
        .iter()
        .filter(|s| matches!(s, Seen::Refused { .. }))
        .count();
    assert!(attempts >= 3, "retried with backoff, {attempts} attempts");
}

#[tokio::test]
async fn a_silent_coordinator_is_left_and_reconnected() {
    let coord = FakeCoordinator::start_with(Behaviour {
        auto_heartbeat_ack: false,
        heartbeat_interval: Duration::from_millis(50),
        lease_ttl: Duration::from_millis(300),
        ..Behaviour::default()
    })
    .await;
    let node = TestNode::start(&coord, |_| {});
    coord.hello(0).await;
    // Nothing arrives after the Welcome: the node gives up on the stream and reconnects.
    coord.hello(1).await;
    node.wait_status("welcomed again", |s| s.connects >= 2)
        .await;
    let left = coord.seen().iter().any(|s| {
        matches!(
            s,
            Seen::Broken { stream: 0, .. } | Seen::HalfClosed { stream: 0 }
        )
    });
    assert!(left, "the node ended the silent stream");
}

#[tokio::test]
async fn probes_follow_the_stream() {
    let coord = FakeCoordinator::start().await;
    let node = TestNode::start(&coord, |_| {});
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(health::serve(listener, node.handle.clone(), stop.clone()));

    node.wait_status("welcomed", |s| s.stream == StreamState::Connected)
        .await;
    assert_eq!(get(addr, "/readyz").await, 200);
    assert_eq!(get(addr, "/healthz").await, 200);

    coord.change(|b| b.refuse = Some((Code::Unavailable, "restarting".into())));
    coord.kill(0, Status::unavailable("restarting"));
    node.wait_status("reconnecting", |s| s.stream == StreamState::Connecting)
        .await;
    assert_eq!(get(addr, "/readyz").await, 503);
    assert_eq!(get(addr, "/healthz").await, 200, "alive while reconnecting");

    node.shutdown.cancel();
    let handle = node.handle.clone();
    node.finished().await.unwrap();
    assert_eq!(handle.status().stream, StreamState::Stopped);
    assert_eq!(get(addr, "/healthz").await, 503);
    assert_eq!(get(addr, "/readyz").await, 503);
    stop.cancel();
}

#[tokio::test]
async fn metrics_count_jobs_reconnects_and_resent_reports() {
    let coord = FakeCoordinator::start_with(Behaviour {
        auto_ack: false,
        ..Behaviour::default()
    })
    .await;
    let node = TestNode::start(&coord, |_| {});
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(health::serve(listener, node.handle.clone(), stop.clone()));
    node.wait_status("welcomed", |s| s.stream == StreamState::Connected)
        .await;

    coord.send(0, assign(7, "ok:500", LONG));
    coord
        .wait_message(0, "the result of job 7", |m| {
            matches!(m, Out::Result(r) if r.job_id == 7).then_some(())
        })
        .await;
    coord.send(0, assign(8, "hang", LONG));
    node.wait_status("job 8 running", |s| s.running_jobs == 1)
        .await;
    let running = get_text(addr, "/metrics").await;
    assert!(running.contains("lps_node_jobs_running 1\n"), "{running}");
    assert!(running.contains("lps_node_slots_free 1\n"), "{running}");
    coord.send(
        0,
        In::Cancel(pb::Cancel {
            job_id: 8,
            lease_epoch: 1,
            reason: "lease lost".into(),
        }),
    );
    node.wait_status("job 8 stopped", |s| s.running_jobs == 0)
        .await;
    // The result of job 7 and the stop of job 8 were never acked: the reconnect resends
    // both.
    coord.kill(0, Status::unavailable("restarting"));
    coord
        .wait_message(1, "the resent result of job 7", |m| {
            matches!(m, Out::Result(r) if r.job_id == 7).then_some(())
        })
        .await;
    coord
        .wait_message(1, "the resent stop of job 8", |m| {
            matches!(m, Out::Stopped(s) if s.job_id == 8).then_some(())
        })
        .await;

    let text = get_text(addr, "/metrics").await;
    for line in [
        "lps_node_jobs_finished_total{mall=\"testmall-alpha\",outcome=\"found\"} 1\n",
        "lps_node_jobs_finished_total{mall=\"testmall-alpha\",outcome=\"cancelled\"} 1\n",
        "lps_node_jobs_running 0\n",
        "lps_node_slots_free 2\n",
        "lps_node_reconnects_total 1\n",
        "lps_node_reports_resent_total 2\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    node.shutdown.cancel();
    stop.cancel();
}

#[tokio::test]
async fn several_nodes_share_one_process() {
    let coord = FakeCoordinator::start().await;
    let a = TestNode::start(&coord, |c| c.node_id = "node-a".into());
    let b = TestNode::start(&coord, |c| c.node_id = "node-b".into());
    assert_eq!(a.handle.node_id(), "node-a");
    assert_eq!(b.handle.node_id(), "node-b");
    a.wait_status("a welcomed", |s| s.stream == StreamState::Connected)
        .await;
    b.wait_status("b welcomed", |s| s.stream == StreamState::Connected)
        .await;
    let ids: Vec<String> = coord
        .all_messages()
        .into_iter()
        .filter_map(|(_, m)| match m {
            Out::Hello(h) => Some(h.node_id),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&"node-a".to_owned()) && ids.contains(&"node-b".to_owned()));
    a.shutdown.cancel();
    b.shutdown.cancel();
    a.finished().await.unwrap();
    b.finished().await.unwrap();
}

/// `GET path` over plain HTTP/1.1; the status code.
async fn get(addr: std::net::SocketAddr, path: &str) -> u16 {
    support::http_get(addr, path).await.0
}

/// `GET path`; the body of a 200 response.
async fn get_text(addr: std::net::SocketAddr, path: &str) -> String {
    let (code, body) = support::http_get(addr, path).await;
    assert_eq!(code, 200, "GET {path}: {body}");
    body
}
