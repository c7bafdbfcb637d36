//! Caller hints (`lps.v1.Product` brand, model_code, gtin) through the real coordinator
//! (127.0.0.1:0, real PostgreSQL): validated on receive naming the field, stored with the
//! job, sent to the node in its Assign, shown by GetSearch, and part of the job's identity
//! (DESIGN §2 "Dedupe"): another set of hints is another job with its own cached answers,
//! the same hints spelled another way are the same job.

use std::time::Duration;

use lps_coordinator::app::Running;
use lps_proto::{
    PROTOCOL_VERSION,
    model::{JUDGE_VERSION, vocabulary_revision},
    pb::{
        self, coordinator_message::Body as Out, node_message::Body as In,
        node_service_client::NodeServiceClient, search_service_client::SearchServiceClient,
    },
};
use sqlx::PgPool;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Streaming, transport::Channel};

mod common;

use common::{CLIENT_TOKEN, NODE_TOKEN, with_token};

const MALL: &str = "testmall-alpha";
const NAME: &str = "오뚜기 진라면 매운맛 120g 5개";
const CODE: &str = "SKU-RAMEN-5";
/// Two EAN-13s with valid check digits.
const GTIN: &str = "8801234567893";
const OTHER_GTIN: &str = "8801043014830";

async fn channel(running: &Running) -> Channel {
    Channel::from_shared(format!("http://{}", running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

fn product(brand: &str, model_code: &str, gtin: &str) -> pb::Product {
    pb::Product {
        code: CODE.into(),
        name: NAME.into(),
        brand: brand.into(),
        model_code: model_code.into(),
        gtin: gtin.into(),
    }
}

/// What a node is sent of a caller's product: everything but the caller's code (a crawl is
/// shared by every client naming the same product; the code is the client's identity,
/// DESIGN "Identity per client").
fn crawled(product: &pb::Product) -> pb::Product {
    pb::Product {
        code: String::new(),
        ..product.clone()
    }
}

async fn search(
    client: &mut SearchServiceClient<Channel>,
    products: Vec<pb::Product>,
) -> Result<pb::SearchResponse, tonic::Status> {
    client
        .search(with_token(
            pb::SearchRequest {
                products,
                malls: vec![MALL.into()],
                ..Default::default()
            },
            CLIENT_TOKEN,
        ))
        .await
        .map(tonic::Response::into_inner)
}

struct RawNode {
    tx: mpsc::Sender<pb::NodeMessage>,
    rx: Streaming<pb::CoordinatorMessage>,
    /// The vocabulary revision of MALL's words in the Welcome, as a node reports it.
    revision: String,
}

impl RawNode {
    async fn open(running: &Running) -> Self {
        let mut client = NodeServiceClient::new(channel(running).await);
        let (tx, rx) = mpsc::channel(16);
        tx.send(pb::NodeMessage {
            body: Some(In::Hello(pb::Hello {
                protocol_version: PROTOCOL_VERSION,
                node_id: "n1".into(),
                slots: 1,
                malls: vec![MALL.into()],
                version: "test".into(),
                ..Default::default()
            })),
        })
        .await
        .unwrap();
        let mut request = Request::new(ReceiverStream::new(rx));
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {NODE_TOKEN}").parse().unwrap(),
        );
        let rx = client.connect(request).await.unwrap().into_inner();
        let mut node = Self {
            tx,
            rx,
            revision: String::new(),
        };
        let Out::Welcome(welcome) = node.next().await else {
            panic!("expected welcome")
        };
        let additions = welcome
            .profiles
            .iter()
            .find(|p| p.id == MALL)
            .and_then(|p| p.vocabulary.as_ref());
        node.revision = vocabulary_revision(&welcome.vocabulary.unwrap(), additions);
        node
    }

    async fn next(&mut self) -> Out {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(10), self.rx.message())
                .await
                .expect("no message from the coordinator within 10s")
                .expect("stream failed")
                .expect("stream ended");
            match msg.body.expect("empty message") {
                Out::HeartbeatAck(_) => {}
                other => return other,
            }
        }
    }

    async fn send(&self, body: In) {
        self.tx
            .send(pb::NodeMessage { body: Some(body) })
            .await
            .unwrap();
    }

    /// Takes one job and answers it NOT_FOUND (a page read, no card accepted).
    async fn run_one_not_found(&mut self, seq: u64) -> pb::Assign {
        self.send(In::Credit(pb::Credit { free_slots: 1 })).await;
        let Out::Assign(assign) = self.next().await else {
            panic!("expected assign")
        };
        self.send(In::Result(pb::JobResult {
            report_seq: seq,
            job_id: assign.job_id,
            lease_epoch: assign.lease_epoch,
            outcome: pb::Outcome::NotFound as i32,
            judge_version: JUDGE_VERSION,
            vocabulary_revision: self.revision.clone(),
            ..Default::default()
        }))
        .await;
        let Out::Ack(ack) = self.next().await else {
            panic!("expected ack")
        };
        assert_eq!(ack.status, pb::AckStatus::Applied as i32, "{ack:?}");
        assign
    }
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_bad_hint_is_invalid_argument_naming_its_field_and_nothing_is_stored(pool: PgPool) {
    let running = common::start_with_mall(&pool, MALL, &[]).await;
    let mut client = SearchServiceClient::new(channel(&running).await);
    let cases = [
        (
            product("", "", "8801234567894"),
            "products[1].gtin",
            "check digit",
        ),
        (
            product("", "", "88012345678"),
            "products[1].gtin",
            "8, 12, 13 or 14",
        ),
        (
            product("", "", "88012345678x3"),
            "products[1].gtin",
            "only digits",
        ),
        (
            product(&"오".repeat(65), "", ""),
            "products[1].brand",
            "longer than 64",
        ),
        (
            product("오뚜기\u{1b}", "", ""),
            "products[1].brand",
            "control",
        ),
        (
            product("", &"X".repeat(65), ""),
            "products[1].model_code",
            "longer than 64",
        ),
        (
            product("", "RM\u{7}5", ""),
            "products[1].model_code",
            "control",
        ),
    ];
    for (bad, field, reason) in cases {
        let err = search(&mut client, vec![product("", "", ""), bad])
            .await
            .expect_err(field);
        assert_eq!(err.code(), Code::InvalidArgument, "{err}");
        assert!(
            err.message().starts_with(field),
            "{field}: {}",
            err.message()
        );
        assert!(
            err.message().contains(reason),
            "{reason}: {}",
            err.message()
        );
    }
    let jobs: i64 = sqlx::query_scalar("select count(*) from job")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(jobs, 0, "a refused request stored a job");
    running.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn hints_reach_the_node_and_key_the_job_and_its_caches(pool: PgPool) {
    let running = common::start_with_mall(&pool, MALL, &[]).await;
    let mut client = SearchServiceClient::new(channel(&running).await);
    let mut node = RawNode::open(&running).await;

    // A product with hints: the node's Assign carries them as the caller sent them, but
    // not the caller's code (a crawl is shared by every client naming the same product;
    // the code is the client's identity, DESIGN "Identity per client").
    let hinted = product("오뚜기", "JIN-120", GTIN);
    let first = search(&mut client, vec![hinted.clone()]).await.unwrap();
    let hinted_job = first.items[0].job_id;
    let assign = node.run_one_not_found(1).await;
    assert_eq!(assign.job_id, hinted_job);
    assert_eq!(assign.payload.unwrap().product.unwrap(), crawled(&hinted));

    // GetSearch shows the product with its hints.
    let status = common::wait_final(
        &mut client,
        CLIENT_TOKEN,
        first.search_id,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(status.products[0].product.as_ref(), Some(&hinted));

    // The same hints spelled another way (case, spacing, the barcode's GTIN-14 form) are
    // the same product asked the same way: its not-found answers from the cache.
    let respelled = product(" 오뚜기 ", "jin-120", &format!("0{GTIN}"));
    let again = search(&mut client, vec![respelled]).await.unwrap();
    assert_eq!(
        (again.items[0].job_id, again.items[0].disposition),
        (hinted_job, pb::Disposition::CachedNotFound as i32)
    );

    // The same code with another GTIN, or with none, was judged under other hints: never
    // answered by that not-found, a job of its own.
    let other = search(&mut client, vec![product("오뚜기", "JIN-120", OTHER_GTIN)])
        .await
        .unwrap();
    let plain = search(&mut client, vec![product("", "", "")])
        .await
        .unwrap();
    let other_job = other.items[0].job_id;
    let plain_job = plain.items[0].job_id;
    for item in [&other.items[0], &plain.items[0]] {
        assert_eq!(item.disposition, pb::Disposition::Queued as i32, "{item:?}");
    }
    assert!(other_job != hinted_job && plain_job != hinted_job && other_job != plain_job);

    // Both are crawled with their own hints.
    let mut sent = Vec::new();
    for seq in 2..=3 {
        let assign = node.run_one_not_found(seq).await;
        sent.push((assign.job_id, assign.payload.unwrap().product.unwrap()));
    }
    sent.sort_by_key(|(job, _)| *job);
    let mut want = vec![
        (
            other_job,
            crawled(&product("오뚜기", "JIN-120", OTHER_GTIN)),
        ),
        (plain_job, crawled(&product("", "", ""))),
    ];
    want.sort_by_key(|(job, _)| *job);
    assert_eq!(sent, want);

    // One product all the same: one identity for price history and the operator's tools.
    let keys: Vec<String> =
        sqlx::query_scalar("select distinct product_key from search_product order by 1")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(keys, vec![format!("code:{CODE}")]);
    running.shutdown().await;
}
