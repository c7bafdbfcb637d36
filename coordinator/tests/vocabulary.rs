//! The judge's vocabulary against the real coordinator (127.0.0.1:0, real PostgreSQL):
//! `LPS_VOCABULARY_FILE` replaces the built-in word lists, a file or profile additions it
//! cannot use stop start-up naming the entry, and the vocabulary reaches every node in
//! `Welcome` (spoken at the protocol level by the test itself).

use std::{path::Path, time::Duration};

use clap::Parser as _;
use lps_coordinator::{app, config::Cli};
use lps_profiles::vocabulary::Lexicon;
use lps_proto::{
    PROTOCOL_VERSION,
    pb::{
        self, coordinator_message::Body as Out, node_message::Body as In,
        node_service_client::NodeServiceClient,
    },
};
use sqlx::{PgPool, postgres::PgPoolOptions};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

mod common;

use common::{CLIENT_TOKEN, NODE_TOKEN, TempDir};

const MALL: &str = "testmall-alpha";

/// [`app::start_with_pool`] with `extra` flags, its error kept.
async fn try_start(pool: &PgPool, extra: &[&str]) -> anyhow::Result<app::Running> {
    let mut args = vec![
        "coordinator",
        "--database-url",
        "postgres://unused",
        "--grpc-addr",
        "127.0.0.1:0",
        "--http-addr",
        "127.0.0.1:0",
        "--client-tokens",
        CLIENT_TOKEN,
        "--node-tokens",
        NODE_TOKEN,
        "--malls",
        MALL,
    ];
    args.extend_from_slice(extra);
    let config = Cli::try_parse_from(args).unwrap().serve.validate().unwrap();
    let own = PgPoolOptions::new()
        .max_connections(5)
        .connect_with(pool.connect_options().as_ref().clone())
        .await
        .unwrap();
    app::start_with_pool(config, own).await
}

fn path_arg(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temporary path")
}

/// The Welcome a node with `node_id` gets from the coordinator at `addr`.
async fn welcome(addr: std::net::SocketAddr, node_id: &str) -> pb::Welcome {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(4);
    tx.send(pb::NodeMessage {
        body: Some(In::Hello(pb::Hello {
            protocol_version: PROTOCOL_VERSION,
            node_id: node_id.into(),
            slots: 1,
            malls: vec![MALL.into()],
            version: "test".into(),
            running: vec![],
            held_ports: vec![],
            instance: String::new(),
        })),
    })
    .await
    .unwrap();
    let request = common::with_token(ReceiverStream::new(rx), NODE_TOKEN);
    let mut inbound = NodeServiceClient::new(channel)
        .connect(request)
        .await
        .unwrap()
        .into_inner();
    let msg = tokio::time::timeout(Duration::from_secs(10), inbound.message())
        .await
        .expect("no Welcome within 10s")
        .unwrap()
        .expect("stream ended before Welcome");
    let Some(Out::Welcome(welcome)) = msg.body else {
        panic!("expected Welcome first, got {msg:?}")
    };
    // Leave cleanly: the coordinator then keeps nothing for this node.
    let _ = tx
        .send(pb::NodeMessage {
            body: Some(In::Goodbye(pb::Goodbye::default())),
        })
        .await;
    welcome
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_malformed_vocabulary_file_stops_start_up_naming_the_entry(pool: PgPool) {
    let dir = TempDir::new("vocabulary");
    let file = dir.0.join("vocabulary.toml");
    std::fs::write(
        &file,
        "format = 1\nstopwords = [\"무료배송\", \"--\"]\naliases = [[\"펩시\", \"pepsi\"]]\n",
    )
    .unwrap();
    let err = try_start(&pool, &["--vocabulary-file", path_arg(&file)])
        .await
        .expect_err("a coordinator started with a malformed vocabulary");
    assert_eq!(
        format!("{err:#}"),
        format!(
            "vocabulary {}: stopwords[1]: is empty after normalisation",
            file.display()
        )
    );

    // A profile's additions are checked against the file the coordinator runs with: this
    // vocabulary has no `flavour` kind, so a profile extending it must give its rule.
    std::fs::write(
        &file,
        "format = 1\nstopwords = [\"무료배송\"]\n[units]\nvolume = { ml = 1 }\n",
    )
    .unwrap();
    let profiles = TempDir::new("vocabulary-profiles");
    let alpha = lps_profiles::format::builtin_text("testmall-alpha.toml").unwrap();
    let alpha_file = profiles.0.join("alpha.toml");
    std::fs::write(
        &alpha_file,
        format!(
            "{alpha}\n[[vocabulary.variants]]\nname = \"flavour\"\nvalues = [[\"흑임자\", \"black sesame\"]]\n"
        ),
    )
    .unwrap();
    let err = try_start(
        &pool,
        &[
            "--vocabulary-file",
            path_arg(&file),
            "--profiles-dir",
            path_arg(&profiles.0),
        ],
    )
    .await
    .expect_err("a coordinator started with profile additions its vocabulary refuses");
    let text = format!("{err:#}");
    assert!(
        text.starts_with(&format!(
            "site profile {} (mall {MALL}): vocabulary.variants[0].when_silent: ",
            alpha_file.display()
        )) && text.ends_with(&format!("(with the vocabulary {})", file.display())),
        "{text}"
    );
    let malls: i64 = sqlx::query_scalar("select count(*) from mall")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        malls, 0,
        "no mall registered by a coordinator that did not start"
    );
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn welcome_carries_the_vocabulary_and_the_profile_additions(pool: PgPool) {
    // The built-in vocabulary by default.
    let running = try_start(&pool, &[]).await.unwrap();
    let got = welcome(running.grpc_addr, "n-builtin").await;
    assert_eq!(got.vocabulary, Some(Lexicon::builtin_wire()));
    running.shutdown().await;

    // LPS_VOCABULARY_FILE replaces it; a profile's additions travel with the profile.
    let dir = TempDir::new("vocabulary");
    let file = dir.0.join("vocabulary.toml");
    std::fs::write(
        &file,
        "format = 1\nstopwords = [\"우리몰특가\"]\n\
         [units]\nvolume = { ml = 1, l = 1000 }\ncount = [\"개\"]\n\
         [[variants]]\nname = \"flavour\"\nwhen_silent = \"plain\"\nvalues = [[\"매운맛\", \"hot\"]]\n",
    )
    .unwrap();
    let profiles = TempDir::new("vocabulary-profiles");
    let alpha = lps_profiles::format::builtin_text("testmall-alpha.toml").unwrap();
    std::fs::write(
        profiles.0.join("alpha.toml"),
        format!(
            "{alpha}\n[vocabulary]\ngifts = [\"알파증정\"]\n\
             [[vocabulary.variants]]\nname = \"flavour\"\nvalues = [[\"흑임자\", \"black sesame\"]]\n"
        ),
    )
    .unwrap();
    let running = try_start(
        &pool,
        &[
            "--vocabulary-file",
            path_arg(&file),
            "--profiles-dir",
            path_arg(&profiles.0),
        ],
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    let got = welcome(running.grpc_addr, "n-file").await;
    let vocabulary = got.vocabulary.expect("Welcome without a vocabulary");
    assert_eq!(
        vocabulary,
        lps_profiles::vocabulary::load(Some(&file)).unwrap()
    );
    assert_eq!(vocabulary.stopwords, ["우리몰특가"]);
    assert!(vocabulary.aliases.is_empty(), "replaced, not added to");
    let alpha = got
        .profiles
        .iter()
        .find(|p| p.id == MALL)
        .expect("testmall-alpha in Welcome");
    let additions = alpha.vocabulary.as_ref().expect("the profile's additions");
    assert_eq!(additions.gifts, ["알파증정"]);
    assert_eq!(additions.variants[0].values[0].name, "흑임자");
    running.shutdown().await;
}
