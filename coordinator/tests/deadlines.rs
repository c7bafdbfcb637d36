//! A call whose deadline passes on the server ends DEADLINE_EXCEEDED (client retry policies
//! retry that, not CANCELLED), through the real coordinator; and a Search that timed out
//! may have been stored, so a retry with its idempotency key finds exactly one search.

use std::time::Duration;

use lps_proto::pb::{self, search_service_client::SearchServiceClient};
use sqlx::PgPool;
use tonic::Code;

mod common;

use common::{CLIENT_TOKEN, with_token};

const MALL: &str = "testmall-alpha";

fn search(key: &str) -> pb::SearchRequest {
    pb::SearchRequest {
        products: vec![pb::Product {
            code: String::new(),
            name: "제주 삼다수 2L x 12".into(),
            ..Default::default()
        }],
        malls: vec![MALL.into()],
        idempotency_key: key.into(),
        ..Default::default()
    }
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_deadline_that_passes_on_the_server_is_deadline_exceeded(pool: PgPool) {
    let c = common::start_with_mall(&pool, MALL, &["--malls", MALL]).await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", c.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = SearchServiceClient::new(channel);
    // The store is held up: the Search cannot finish within its 300 ms.
    let mut lock = pool.begin().await.unwrap();
    sqlx::query("lock table search_request in access exclusive mode")
        .execute(&mut *lock)
        .await
        .unwrap();
    let mut request = with_token(search("retry-me"), CLIENT_TOKEN);
    request.set_timeout(Duration::from_millis(300));
    let started = std::time::Instant::now();
    let status = client.search(request).await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered at the deadline, not when the store came back"
    );
    lock.commit().await.unwrap();

    // The retry with the same key finds the one search (stored late or stored now).
    let again = client
        .search(with_token(search("retry-me"), CLIENT_TOKEN))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.items.len(), 1);
    let stored: i64 = sqlx::query_scalar("select count(*) from search_request")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        stored, 1,
        "a retry with the idempotency key made a second search"
    );
    c.shutdown().await;
}

/// Reflection answers in both versions: v1, and v1alpha that grpcurl and the official Python
/// reflection client still speak.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn reflection_lists_the_services_in_v1_and_v1alpha(pool: PgPool) {
    use tonic_reflection::pb::{v1, v1alpha};
    let c = common::start_with_mall(&pool, MALL, &["--malls", MALL]).await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", c.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let want = [
        "lps.v1.SearchService",
        "lps.v1.OpsService",
        "lps.v1.NodeService",
        "lps.v1.ScheduleService",
    ];

    let mut alpha = v1alpha::server_reflection_client::ServerReflectionClient::new(channel.clone());
    let request = v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            v1alpha::server_reflection_request::MessageRequest::ListServices(String::new()),
        ),
    };
    let mut answers = alpha
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("v1alpha reflection is served")
        .into_inner();
    let answer = answers.message().await.unwrap().unwrap();
    let Some(v1alpha::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        answer.message_response
    else {
        panic!("expected a service list, got {answer:?}")
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for name in want {
        assert!(
            names.iter().any(|n| n == name),
            "v1alpha: {name} missing from {names:?}"
        );
    }

    let mut v1 = v1::server_reflection_client::ServerReflectionClient::new(channel);
    let request = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1::server_reflection_request::MessageRequest::ListServices(
            String::new(),
        )),
    };
    let mut answers = v1
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("v1 reflection is served")
        .into_inner();
    let answer = answers.message().await.unwrap().unwrap();
    let Some(v1::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        answer.message_response
    else {
        panic!("expected a service list, got {answer:?}")
    };
    assert!(
        list.service
            .iter()
            .any(|s| s.name == "lps.v1.SearchService")
    );
    c.shutdown().await;
}
