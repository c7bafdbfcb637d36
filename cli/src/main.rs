//! `lpsctl`: the LPS command line for people and scripts. Talks to a coordinator's
//! SearchService and OpsService; tables on stdout by default, JSON with `--json`, CSV with
//! `--csv` (search results and price history, for spreadsheets); progress on stderr; a failure is one line on stderr (`lpsctl: <status code>: <message>`) and a
//! nonzero exit status.
//!
//! ```text
//! lpsctl search "제주 삼다수 2L x 12" --mall naver --wait
//! lpsctl search --file products.csv --wait --csv > prices.csv
//! lpsctl watch 42 ; lpsctl job 1234 ; lpsctl ops ; lpsctl nodes ; lpsctl ports
//! lpsctl retry-dead --mall coupang ; lpsctl drain node-7
//! lpsctl deliveries --dead ; lpsctl delivery retry 17
//! lpsctl schedule add "제주 삼다수 2L x 12" --every 6h --below 9900 --destination pricing
//! lpsctl schedule list ; lpsctl schedule show 3 ; lpsctl schedule pause 3
//! ```
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout)]

use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::{Context as _, anyhow, bail};
use clap::{Parser, Subcommand, ValueEnum};
use lps_cli::{csv, delivery, evidence, json, schedule, text};
use lps_proto::{
    model::timestamp_to_pb,
    pb::{
        self, ops_service_client::OpsServiceClient, schedule_service_client::ScheduleServiceClient,
        search_service_client::SearchServiceClient,
    },
};
use tonic::{
    Request, Status,
    metadata::{AsciiMetadataValue, MetadataValue},
    transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity},
};

/// Watch streams that break (coordinator restart, network) are resumed this many times in a
/// row before giving up.
const WATCH_RESUMES: u32 = 5;

/// The status of a 200-product × 20-mall search is larger than tonic's default 4 MiB.
const MAX_MESSAGE_BYTES: usize = 64 << 20;

#[derive(Debug, Parser)]
#[command(
    name = "lpsctl",
    version,
    about = "LPS command line: searches, jobs and operations"
)]
struct Cli {
    /// Coordinator gRPC address.
    #[arg(
        long,
        env = "LPS_ADDR",
        default_value = "http://127.0.0.1:50051",
        global = true
    )]
    addr: String,
    /// Bearer token (a client token; an admin token for retry-dead and drain).
    #[arg(long, env = "LPS_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// PEM file with the CA that signed the coordinator's certificate (https addresses).
    #[arg(long, env = "LPS_CA_CERT", global = true)]
    ca_cert: Option<PathBuf>,
    /// PEM client certificate to present (https addresses; needs --client-key).
    /// SearchService and OpsService callers need none; one that is presented must chain
    /// to the coordinator's LPS_TLS_CLIENT_CA. Not read from LPS_TLS_CERT: in the
    /// coordinator's container that is the server's own certificate.
    #[arg(long, env = "LPS_CLIENT_CERT", global = true, requires = "client_key")]
    client_cert: Option<PathBuf>,
    /// PEM private key of --client-cert.
    #[arg(long, env = "LPS_CLIENT_KEY", global = true, requires = "client_cert")]
    client_key: Option<PathBuf>,
    /// Time limit of each call (not of waiting for a search), e.g. `30s`.
    #[arg(long, env = "LPS_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration, global = true)]
    timeout: Duration,
    /// Print JSON instead of tables.
    #[arg(long, global = true, conflicts_with = "csv")]
    json: bool,
    /// Print CSV instead of tables (search, status, watch, history): a header row, then
    /// one row per product and mall (per entry and mall for history), UTF-8, CRLF.
    #[arg(long, global = true)]
    csv: bool,
    /// Start CSV output with a UTF-8 byte-order mark (Excel then reads Hangul right when
    /// it opens the file by double-click). Without it none is written.
    #[arg(long, global = true, requires = "csv")]
    bom: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PriorityArg {
    Interactive,
    Batch,
    Backfill,
}

impl PriorityArg {
    fn to_pb(self) -> pb::PriorityClass {
        match self {
            Self::Interactive => pb::PriorityClass::Interactive,
            Self::Batch => pb::PriorityClass::Batch,
            Self::Backfill => pb::PriorityClass::Backfill,
        }
    }
}

#[derive(Debug, Subcommand)]
enum PortsAction {
    /// Suggest the mall's per-IP request budget from where blocks start (the share of IP
    /// sessions blocked at request k), with the numbers it used.
    Advise {
        /// The mall id.
        mall: String,
    },
}

#[derive(Debug, Subcommand)]
enum DeliveryAction {
    /// Make a dead delivery pending again, due now, with fresh attempts (admin token).
    Retry {
        /// The delivery's id (`lpsctl deliveries --dead`).
        delivery_id: i64,
    },
}

#[derive(Debug, Subcommand)]
enum NegativeCacheAction {
    /// Forget a product's remembered "not found" answers, on every mall or the ones named
    /// (admin token): the next search for it crawls again. For a not-found known to be
    /// wrong; every set of hints the product was asked with is forgotten.
    Clear {
        /// The product's name (its identity when it has no code).
        #[arg(required_unless_present = "code")]
        name: Option<String>,
        /// The product's code in your catalog (its identity).
        #[arg(long)]
        code: Option<String>,
        /// Only this mall (repeatable); default: every mall.
        #[arg(long = "mall")]
        malls: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
enum ScheduleAction {
    /// Store a schedule: search these products again and again, and notify the
    /// destinations when a product's lowest price moves (see --below, --move-percent).
    Add {
        /// The products, as a person would type them (or use --file).
        #[arg(required_unless_present = "file", conflicts_with = "file")]
        names: Vec<String>,
        /// A CSV file of products, as `lpsctl search --file` reads it.
        #[arg(long)]
        file: Option<PathBuf>,
        /// A mall to search (repeatable); default: every mall enabled when a run starts.
        #[arg(long = "mall")]
        malls: Vec<String>,
        /// Run this often, e.g. `6h` (at least the coordinator's minimum).
        #[arg(long, value_parser = humantime::parse_duration, required_unless_present = "cron", conflicts_with = "cron")]
        every: Option<Duration>,
        /// Run at a cron pattern's times (UTC), e.g. `"0 6 * * *"`.
        #[arg(long)]
        cron: Option<String>,
        #[arg(long, value_enum, default_value_t = PriorityArg::Batch)]
        priority: PriorityArg,
        /// A configured destination of the price-move events (repeatable).
        #[arg(long = "destination")]
        destinations: Vec<String>,
        /// Notify when a lowest effective price falls below this (KRW): `9900` for every
        /// product, `2=9900` for the second product only (repeatable).
        #[arg(long = "below", value_parser = schedule::below_rule)]
        below: Vec<pb::PriceMoveRule>,
        /// Notify when a lowest effective price moves by at least this percent, either way,
        /// against the previous run's: `5` for every product, `1=2.5` for the first only
        /// (repeatable).
        #[arg(long = "move-percent", value_parser = schedule::move_rule)]
        move_percent: Vec<pb::PriceMoveRule>,
        /// Makes a retried `add` return the first schedule.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Your schedules, newest first (an admin token: every client's).
    List {
        /// Only this client's (an admin's filter).
        #[arg(long)]
        client: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// One schedule: its products, rules, next and last run.
    Show { schedule_id: i64 },
    /// No new runs until resumed (a run under way finishes).
    Pause { schedule_id: i64 },
    /// Runs again.
    Resume { schedule_id: i64 },
    /// Remove the schedule (a run under way finishes as an ordinary search).
    Delete { schedule_id: i64 },
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Ask for the lowest price of a product, or of every product in a CSV file.
    Search {
        /// The product as a person would type it into a mall's search box.
        #[arg(required_unless_present = "file", conflicts_with = "file")]
        name: Option<String>,
        /// The product's code in your catalog (its stable identity).
        #[arg(long, conflicts_with = "file")]
        code: Option<String>,
        /// Hint: the product's brand as a buyer reads it ("농심", "Samsung").
        #[arg(long, conflicts_with = "file")]
        brand: Option<String>,
        /// Hint: the manufacturer's model code ("SM-S928N").
        #[arg(long, conflicts_with = "file")]
        model_code: Option<String>,
        /// Hint: the barcode (GTIN-8, UPC-A, EAN-13 or GTIN-14, with its check digit).
        #[arg(long, conflicts_with = "file")]
        gtin: Option<String>,
        /// A CSV file of products, one search for all of them: columns name, code, brand,
        /// model_code, gtin (all but name optional; the brand is also put in front of the
        /// name unless it names it); a first row with a `name` field is a header naming
        /// the columns. UTF-8 with or without a BOM, RFC 4180 quoting. A bad row is an
        /// error naming its line and column, and nothing is searched.
        #[arg(long)]
        file: Option<PathBuf>,
        /// A mall to search (repeatable); default: every enabled mall.
        #[arg(long = "mall")]
        malls: Vec<String>,
        #[arg(long, value_enum, default_value_t = PriorityArg::Interactive)]
        priority: PriorityArg,
        /// Accept a stored result at most this old instead of crawling, e.g. `1h`.
        #[arg(long, value_parser = humantime::parse_duration)]
        max_age: Option<Duration>,
        /// Makes a retried submission return the first search.
        #[arg(long)]
        idempotency_key: Option<String>,
        /// A configured delivery destination to notify when the search is final
        /// (repeatable).
        #[arg(long = "destination")]
        destinations: Vec<String>,
        /// Also notify the destinations as each product becomes final.
        #[arg(long)]
        notify_each_product: bool,
        /// Wait until the search is final and print its result.
        #[arg(long)]
        wait: bool,
    },
    /// Follow a search until it is final.
    Watch {
        search_id: i64,
        /// Only statuses newer than this version.
        #[arg(long, default_value_t = 0)]
        after_version: i64,
    },
    /// Show a search's current status.
    Status { search_id: i64 },
    /// Cancel a search's jobs (jobs shared with other searches keep running).
    Cancel { search_id: i64 },
    /// Show one job: its runs (node, times, how each ended, error, cost), trace id and
    /// next retry.
    Job {
        job_id: i64,
        /// Write each run's page evidence here: `job-<id>-run-<n>.html` (and `.jpg`).
        #[arg(long)]
        evidence: Option<std::path::PathBuf>,
    },
    /// Show a product's price history.
    History {
        /// The product's name (or use --code).
        name: Option<String>,
        #[arg(long)]
        code: Option<String>,
        /// How far back, e.g. `7d`; default 30 days.
        #[arg(long, value_parser = humantime::parse_duration)]
        since: Option<Duration>,
        /// At most this many entries, newest first.
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// Also entries where not every mall answered (one died, or the search was
        /// cancelled).
        #[arg(long)]
        include_incomplete: bool,
        /// Only this client's history (an admin's filter; default: yours, or for an admin
        /// every client's).
        #[arg(long)]
        client: Option<String>,
        /// Only the entry of this search.
        #[arg(long)]
        search: Option<i64>,
    },
    /// Your searches, newest first (an admin token: every client's).
    Searches {
        /// Only this client's (an admin's filter).
        #[arg(long)]
        client: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// The ops snapshot: queue, nodes, proxies, alerts.
    Ops,
    /// Connected crawler nodes.
    Nodes,
    /// Proxy ports and their state; `ports advise <mall>` suggests a per-IP budget.
    Ports {
        #[command(subcommand)]
        action: Option<PortsAction>,
    },
    /// Put dead jobs back in the queue (admin token).
    RetryDead {
        /// Only dead jobs of this mall.
        #[arg(long)]
        mall: Option<String>,
        /// Only these jobs (repeatable).
        #[arg(long = "job")]
        jobs: Vec<i64>,
        /// Only jobs that died within this long, e.g. `2h`.
        #[arg(long, value_parser = humantime::parse_duration)]
        since: Option<Duration>,
    },
    /// Ask a node to drain: finish running jobs, take no new ones, leave (admin token).
    Drain { node_id: String },
    /// End a node's quarantine (`lpsctl nodes`: QUARANTINED UNTIL) now: it is given jobs
    /// again at its next Hello, or within 30 s on a live stream (admin token).
    LiftQuarantine { node_id: String },
    /// Webhook deliveries of searches, newest first: state, attempts, last error, next try
    /// (admin token).
    Deliveries {
        /// Only dead ones (every attempt failed; `lpsctl delivery retry ID` retries one).
        #[arg(long)]
        dead: bool,
        /// Only this search's.
        #[arg(long)]
        search: Option<i64>,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// One delivery: `delivery retry ID` (admin token).
    Delivery {
        #[command(subcommand)]
        action: DeliveryAction,
    },
    /// The negative cache (remembered "not found" answers): `negative-cache clear`.
    NegativeCache {
        #[command(subcommand)]
        action: NegativeCacheAction,
    },
    /// Schedules (watchlists): `schedule add|list|show|pause|resume|delete`.
    Schedule {
        #[command(subcommand)]
        action: ScheduleAction,
    },
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let command = matches.subcommand_name().unwrap_or_default().to_owned();
    let cli =
        <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Traces only when OTEL_* asks for them: one CLIENT span per command, whose context
    // goes with every call (the coordinator's `grpc.search` continues it).
    let telemetry = lps_telemetry::init_cli("lpsctl").ok();
    let span = tracing::info_span!(
        "lpsctl",
        otel.name = format!("lpsctl {command}"),
        otel.kind = "client",
        rpc.system = "grpc",
        lpsctl.command = command.as_str(),
    );
    let result = tracing::Instrument::instrument(run(cli), span.clone()).await;
    let code = match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let message = match e.downcast_ref::<Status>() {
                Some(s) => format!("{:?}: {}", s.code(), s.message()),
                None => format!("{e:#}"),
            };
            lps_telemetry::fail(&span, message.as_str());
            eprintln!("lpsctl: {}", message.replace('\n', " "));
            ExitCode::FAILURE
        }
    };
    drop(span);
    if let Some(telemetry) = telemetry {
        // NB: off the runtime's only thread, which the exporter's channel needs.
        let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    }
    code
}

/// The service clients over one channel, with the token attached to every call.
struct Client {
    search: SearchServiceClient<Channel>,
    ops: OpsServiceClient<Channel>,
    schedule: ScheduleServiceClient<Channel>,
    token: Option<AsciiMetadataValue>,
    timeout: Duration,
}

impl Client {
    async fn connect(cli: &Cli) -> anyhow::Result<Self> {
        let mut endpoint = Endpoint::from_shared(cli.addr.clone())
            .with_context(|| format!("bad address {:?}", cli.addr))?
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true);
        let read = |path: &PathBuf| {
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
        };
        if cli.addr.starts_with("https://") {
            let mut tls = ClientTlsConfig::new();
            if let Some(path) = &cli.ca_cert {
                tls = tls.ca_certificate(Certificate::from_pem(read(path)?));
            }
            if let (Some(cert), Some(key)) = (&cli.client_cert, &cli.client_key) {
                tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
            }
            endpoint = endpoint.tls_config(tls).context("TLS configuration")?;
        } else if cli.client_cert.is_some() {
            bail!(
                "--client-cert needs an https:// address (--addr {})",
                cli.addr
            );
        }
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| anyhow!("cannot connect to {}: {}", cli.addr, source_chain(&e)))?;
        let token = cli
            .token
            .as_deref()
            .filter(|t| !t.is_empty())
            .map(|t| MetadataValue::try_from(format!("Bearer {t}")))
            .transpose()
            .map_err(|_| anyhow!("the token has characters that cannot go in a header"))?;
        Ok(Self {
            search: SearchServiceClient::new(channel.clone())
                .max_decoding_message_size(MAX_MESSAGE_BYTES),
            schedule: ScheduleServiceClient::new(channel.clone())
                .max_decoding_message_size(MAX_MESSAGE_BYTES),
            ops: OpsServiceClient::new(channel).max_decoding_message_size(MAX_MESSAGE_BYTES),
            token,
            timeout: cli.timeout,
        })
    }

    /// A request with the token and caller label; `timeout` for unary calls.
    fn request<T>(&self, msg: T, timeout: bool) -> Request<T> {
        let mut req = Request::new(msg);
        if let Some(token) = &self.token {
            req.metadata_mut().insert("authorization", token.clone());
        }
        req.metadata_mut()
            .insert("x-lps-caller", AsciiMetadataValue::from_static("lpsctl"));
        lps_telemetry::inject_metadata(req.metadata_mut());
        if timeout {
            req.set_timeout(self.timeout);
        }
        req
    }

    fn unary<T>(&self, msg: T) -> Request<T> {
        self.request(msg, true)
    }

    /// Follows a search until its final status, resuming broken streams from the last
    /// version seen. `on_status` gets every status. Returns the final status.
    async fn follow(
        &mut self,
        search_id: i64,
        after_version: i64,
        mut on_status: impl FnMut(&pb::SearchStatus),
    ) -> anyhow::Result<pb::SearchStatus> {
        let mut last: Option<pb::SearchStatus> = None;
        let mut version = after_version;
        let mut resumes = 0;
        loop {
            let req = self.request(
                pb::WatchSearchRequest {
                    search_id,
                    after_version: version,
                },
                false,
            );
            let broken = match self.search.watch_search(req).await {
                Ok(stream) => {
                    let mut stream = stream.into_inner();
                    loop {
                        match stream.message().await {
                            Ok(Some(status)) => {
                                resumes = 0;
                                version = status.version;
                                on_status(&status);
                                let done = status.r#final;
                                last = Some(status);
                                if done {
                                    break None;
                                }
                            }
                            Ok(None) => break None,
                            Err(e) => break Some(e),
                        }
                    }
                }
                Err(e) => Some(e),
            };
            match broken {
                Some(e) if resumable(&e) && resumes < WATCH_RESUMES => {
                    resumes += 1;
                    eprintln!(
                        "lpsctl: watch interrupted ({:?}: {}); resuming after version {version}",
                        e.code(),
                        e.message()
                    );
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Some(e) => return Err(e.into()),
                None => match last {
                    Some(status) if status.r#final => return Ok(status),
                    // The stream ended without a final status newer than `version` (the client
                    // had seen it already): read it once.
                    _ => {
                        let status = self
                            .search
                            .get_search(self.unary(pb::GetSearchRequest { search_id }))
                            .await?
                            .into_inner();
                        if status.r#final {
                            return Ok(status);
                        }
                        last = Some(status);
                    }
                },
            }
        }
    }
}

fn resumable(e: &Status) -> bool {
    matches!(
        e.code(),
        tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Internal
    )
}

fn source_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

fn print_json(value: &serde_json::Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

fn ago(d: Duration) -> anyhow::Result<prost_types::Timestamp> {
    let d = chrono::Duration::from_std(d).context("duration too long")?;
    Ok(timestamp_to_pb(chrono::Utc::now() - d))
}

/// Whether `command` can print `--csv`.
fn has_csv(command: &Command) -> bool {
    matches!(
        command,
        Command::Search { .. }
            | Command::Status { .. }
            | Command::Watch { .. }
            | Command::History { .. }
    )
}

/// The products of `--file`, validated before any call is made.
fn file_products(path: &PathBuf) -> anyhow::Result<Vec<pb::Product>> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(csv::read_products(&path.display().to_string(), &bytes)?)
}

/// The product named on the command line, its hints checked as the coordinator checks
/// them, so a bad one is named by its flag before any call is made (the name and code are
/// left to the coordinator, which names them).
fn named_product(
    name: Option<String>,
    code: Option<String>,
    brand: Option<String>,
    model_code: Option<String>,
    gtin: Option<String>,
) -> anyhow::Result<pb::Product> {
    let (brand, model_code, gtin) = (
        brand.unwrap_or_default(),
        model_code.unwrap_or_default(),
        gtin.unwrap_or_default(),
    );
    if let Err(e) = lps_proto::model::ProductHints::new(&brand, &model_code, &gtin) {
        bail!("--{}: {}", e.field.replace('_', "-"), e.reason);
    }
    Ok(pb::Product {
        code: code.unwrap_or_default(),
        name: name.unwrap_or_default(),
        brand,
        model_code,
        gtin,
    })
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    if cli.csv && !has_csv(&cli.command) {
        bail!("--csv is for search, status, watch and history");
    }
    // NB: the file and the hints are read and checked before connecting, so a bad one
    // starts nothing.
    let file_products = match &cli.command {
        Command::Search {
            file: Some(path), ..
        }
        | Command::Schedule {
            action: ScheduleAction::Add {
                file: Some(path), ..
            },
        } => Some(file_products(path)?),
        Command::Search {
            file: None,
            name,
            code,
            brand,
            model_code,
            gtin,
            ..
        } => Some(vec![named_product(
            name.clone(),
            code.clone(),
            brand.clone(),
            model_code.clone(),
            gtin.clone(),
        )?]),
        _ => None,
    };
    let mut client = Client::connect(&cli).await?;
    let as_json = cli.json;
    let (as_csv, bom) = (cli.csv, cli.bom);
    match cli.command {
        Command::Search {
            name: _,
            code: _,
            brand: _,
            model_code: _,
            gtin: _,
            file: _,
            malls,
            priority,
            max_age,
            idempotency_key,
            destinations,
            notify_each_product,
            wait,
        } => {
            let products = file_products.unwrap_or_default();
            let req = pb::SearchRequest {
                products: products.clone(),
                malls,
                priority_class: priority.to_pb() as i32,
                priority: None,
                max_age: max_age.map(lps_proto::model::duration_to_pb),
                idempotency_key: idempotency_key.unwrap_or_default(),
                destinations,
                notify_each_product,
            };
            let accepted = client.search.search(client.unary(req)).await?.into_inner();
            if !wait {
                if as_json {
                    print_json(&json::search_response(&accepted))?;
                } else if as_csv {
                    print!("{}", csv::search_response(&accepted, &products, bom));
                } else {
                    print!("{}", text::accepted(&accepted));
                }
                return Ok(());
            }
            eprintln!(
                "search {} {}; waiting",
                accepted.search_id,
                if accepted.replayed {
                    "replayed"
                } else {
                    "accepted"
                }
            );
            let status = client
                .follow(accepted.search_id, 0, |s| {
                    eprintln!("{}", text::progress(s))
                })
                .await?;
            if as_json {
                print_json(&json::search_status(&status))?;
            } else if as_csv {
                print!("{}", csv::search_status(&status, bom));
            } else {
                print!("{}", text::search_status(&status));
            }
        }
        Command::Watch {
            search_id,
            after_version,
        } => {
            let status = client
                .follow(search_id, after_version, |s| {
                    if as_json {
                        // One compact JSON document per status (NDJSON).
                        println!("{}", json::search_status(s));
                    } else {
                        eprintln!("{}", text::progress(s));
                    }
                })
                .await?;
            if as_csv {
                print!("{}", csv::search_status(&status, bom));
            } else if !as_json {
                print!("{}", text::search_status(&status));
            }
        }
        Command::Status { search_id } => {
            let status = client
                .search
                .get_search(client.unary(pb::GetSearchRequest { search_id }))
                .await?
                .into_inner();
            if as_json {
                print_json(&json::search_status(&status))?;
            } else if as_csv {
                print!("{}", csv::search_status(&status, bom));
            } else {
                print!("{}", text::search_status(&status));
            }
        }
        Command::Cancel { search_id } => {
            let r = client
                .search
                .cancel_search(client.unary(pb::CancelSearchRequest { search_id }))
                .await?
                .into_inner();
            if as_json {
                print_json(&json::cancel(&r))?;
            } else {
                print!("{}", text::cancel(search_id, &r));
            }
        }
        Command::Job { job_id, evidence } => {
            let job = client
                .search
                .get_job(client.unary(pb::GetJobRequest { job_id }))
                .await?
                .into_inner();
            if let Some(dir) = evidence {
                let written = evidence::write(&dir, &job)
                    .with_context(|| format!("cannot write evidence to {}", dir.display()))?;
                for base in written {
                    eprintln!("evidence written to {}.*", base.display());
                }
            }
            if as_json {
                print_json(&json::job(&job))?;
            } else {
                print!("{}", text::job(&job));
            }
        }
        Command::History {
            name,
            code,
            since,
            limit,
            include_incomplete,
            client: owner,
            search,
        } => {
            if name.is_none() && code.is_none() {
                bail!("name the product, or give --code");
            }
            let mut req = pb::GetPriceHistoryRequest {
                product: Some(pb::Product {
                    code: code.unwrap_or_default(),
                    name: name.unwrap_or_default(),
                    ..Default::default()
                }),
                since: since.map(ago).transpose()?,
                page_size: limit.min(1000),
                include_incomplete,
                client: owner.unwrap_or_default(),
                search_id: search.unwrap_or_default(),
                ..Default::default()
            };
            let mut h = pb::PriceHistory::default();
            loop {
                let page = client
                    .search
                    .get_price_history(client.unary(req.clone()))
                    .await?
                    .into_inner();
                h.product = page.product;
                h.entries.extend(page.entries);
                if page.next_page_token.is_empty() || h.entries.len() >= limit as usize {
                    break;
                }
                req.page_token = page.next_page_token;
            }
            h.entries.truncate(limit as usize);
            if as_json {
                print_json(&json::price_history(&h))?;
            } else if as_csv {
                print!("{}", csv::price_history(&h, bom));
            } else {
                print!("{}", text::price_history(&h));
            }
        }
        Command::Ops => {
            let s = client
                .ops
                .get_ops(client.unary(pb::GetOpsRequest {}))
                .await?
                .into_inner();
            if as_json {
                print_json(&json::ops(&s))?;
            } else {
                print!("{}", text::ops(&s));
            }
        }
        Command::Searches { client: of, limit } => {
            let mut req = pb::ListSearchesRequest {
                client: of.unwrap_or_default(),
                page_size: limit.min(500),
                ..Default::default()
            };
            let mut all = Vec::new();
            loop {
                let page = client
                    .search
                    .list_searches(client.unary(req.clone()))
                    .await?
                    .into_inner();
                all.extend(page.searches);
                if page.next_page_token.is_empty() || all.len() >= limit as usize {
                    break;
                }
                req.page_token = page.next_page_token;
            }
            all.truncate(limit as usize);
            if as_json {
                print_json(&json::searches(&all))?;
            } else {
                print!("{}", text::searches(&all));
            }
        }
        Command::Nodes => {
            let mut r = pb::ListNodesResponse::default();
            let mut req = pb::ListNodesRequest::default();
            loop {
                let page = client
                    .ops
                    .list_nodes(client.unary(req.clone()))
                    .await?
                    .into_inner();
                r.nodes.extend(page.nodes);
                if page.next_page_token.is_empty() {
                    break;
                }
                req.page_token = page.next_page_token;
            }
            if as_json {
                print_json(&json::nodes(&r))?;
            } else {
                print!("{}", text::nodes(&r));
            }
        }
        Command::Ports {
            action: Some(PortsAction::Advise { mall }),
        } => {
            let r = client
                .ops
                .advise_budget(client.unary(pb::AdviseBudgetRequest { mall }))
                .await?
                .into_inner();
            if as_json {
                print_json(&json::advice(&r))?;
            } else {
                print!("{}", text::advice(&r));
            }
        }
        Command::Ports { action: None } => {
            let mut r = pb::ListProxyPortsResponse::default();
            let mut req = pb::ListProxyPortsRequest::default();
            loop {
                let page = client
                    .ops
                    .list_proxy_ports(client.unary(req.clone()))
                    .await?
                    .into_inner();
                r.ports.extend(page.ports);
                if page.next_page_token.is_empty() {
                    break;
                }
                req.page_token = page.next_page_token;
            }
            if as_json {
                print_json(&json::ports(&r))?;
            } else {
                print!("{}", text::ports(&r));
            }
        }
        Command::RetryDead { mall, jobs, since } => {
            let req = pb::RetryDeadRequest {
                job_ids: jobs,
                mall: mall.unwrap_or_default(),
                since: since.map(ago).transpose()?,
            };
            let r = client.ops.retry_dead(client.unary(req)).await?.into_inner();
            if as_json {
                print_json(&serde_json::json!({ "requeued": r.requeued }))?;
            } else {
                println!("{} dead jobs requeued", r.requeued);
            }
        }
        Command::Deliveries {
            dead,
            search,
            limit,
        } => {
            let mut req = pb::ListDeliveriesRequest {
                dead_only: dead,
                search_id: search.unwrap_or_default(),
                page_size: limit.min(1000),
                ..Default::default()
            };
            let mut all = Vec::new();
            loop {
                let page = client
                    .ops
                    .list_deliveries(client.unary(req.clone()))
                    .await?
                    .into_inner();
                all.extend(page.deliveries);
                if page.next_page_token.is_empty() || all.len() >= limit as usize {
                    break;
                }
                req.page_token = page.next_page_token;
            }
            all.truncate(limit as usize);
            if as_json {
                print_json(&delivery::json_list(&all))?;
            } else {
                print!("{}", delivery::text(&all));
            }
        }
        Command::NegativeCache {
            action: NegativeCacheAction::Clear { name, code, malls },
        } => {
            let req = pb::ClearNegativeCacheRequest {
                product: Some(pb::Product {
                    code: code.unwrap_or_default(),
                    name: name.unwrap_or_default(),
                    ..Default::default()
                }),
                malls,
            };
            let r = client
                .ops
                .clear_negative_cache(client.unary(req))
                .await?
                .into_inner();
            if as_json {
                print_json(&serde_json::json!({ "cleared": r.cleared }))?;
            } else {
                println!("{} negative cache entries cleared", r.cleared);
            }
        }
        Command::Delivery {
            action: DeliveryAction::Retry { delivery_id },
        } => {
            let d = client
                .ops
                .retry_delivery(client.unary(pb::RetryDeliveryRequest { delivery_id }))
                .await?
                .into_inner();
            if as_json {
                print_json(&delivery::json(&d))?;
            } else {
                let of = if d.alert_rule.is_empty() {
                    format!("search {}", d.search_id)
                } else {
                    format!("alert {}", d.alert_rule)
                };
                println!(
                    "delivery {} of {of} to {} is pending again",
                    d.delivery_id, d.destination
                );
            }
        }
        Command::Schedule { action } => {
            run_schedule(&mut client, action, file_products, as_json).await?;
        }
        Command::Drain { node_id } => {
            let r = client
                .ops
                .drain_node(client.unary(pb::DrainNodeRequest {
                    node_id: node_id.clone(),
                }))
                .await?
                .into_inner();
            if as_json {
                print_json(&serde_json::json!({ "node_id": node_id, "found": r.found }))?;
            } else if r.found {
                println!("node {node_id} is draining");
            } else {
                bail!("node {node_id} is not connected");
            }
        }
        Command::LiftQuarantine { node_id } => {
            let r = client
                .ops
                .lift_quarantine(client.unary(pb::LiftQuarantineRequest {
                    node_id: node_id.clone(),
                }))
                .await?
                .into_inner();
            if as_json {
                print_json(&serde_json::json!({ "node_id": node_id, "lifted": r.lifted }))?;
            } else if r.lifted {
                println!("node {node_id} is no longer quarantined");
            } else {
                bail!("node {node_id} is not quarantined");
            }
        }
    }
    Ok(())
}

/// `lpsctl schedule …`.
async fn run_schedule(
    client: &mut Client,
    action: ScheduleAction,
    file_products: Option<Vec<pb::Product>>,
    as_json: bool,
) -> anyhow::Result<()> {
    let show = |s: &pb::Schedule| -> anyhow::Result<()> {
        if as_json {
            print_json(&schedule::json(s))
        } else {
            print!("{}", schedule::text(s));
            Ok(())
        }
    };
    match action {
        ScheduleAction::Add {
            names,
            file: _,
            malls,
            every,
            cron,
            priority,
            destinations,
            below,
            move_percent,
            idempotency_key,
        } => {
            let products = match file_products {
                Some(products) => products,
                None => names
                    .into_iter()
                    .map(|name| pb::Product {
                        code: String::new(),
                        name,
                        ..Default::default()
                    })
                    .collect(),
            };
            let req = pb::CreateScheduleRequest {
                products,
                malls,
                interval: every.map(lps_proto::model::duration_to_pb),
                cron: cron.unwrap_or_default(),
                priority_class: priority.to_pb() as i32,
                destinations,
                rules: below.into_iter().chain(move_percent).collect(),
                idempotency_key: idempotency_key.unwrap_or_default(),
            };
            let r = client
                .schedule
                .create_schedule(client.unary(req))
                .await?
                .into_inner();
            let s = r
                .schedule
                .ok_or_else(|| anyhow!("the coordinator sent no schedule"))?;
            eprintln!(
                "schedule {} {}",
                s.schedule_id,
                if r.replayed { "replayed" } else { "stored" }
            );
            show(&s)?;
        }
        ScheduleAction::List { client: of, limit } => {
            let mut req = pb::ListSchedulesRequest {
                client: of.unwrap_or_default(),
                page_size: limit.min(500),
                ..Default::default()
            };
            let mut all = Vec::new();
            loop {
                let page = client
                    .schedule
                    .list_schedules(client.unary(req.clone()))
                    .await?
                    .into_inner();
                all.extend(page.schedules);
                if page.next_page_token.is_empty() || all.len() >= limit as usize {
                    break;
                }
                req.page_token = page.next_page_token;
            }
            all.truncate(limit as usize);
            if as_json {
                print_json(&schedule::json_list(&all))?;
            } else {
                print!("{}", schedule::text_list(&all));
            }
        }
        ScheduleAction::Show { schedule_id } => {
            let s = client
                .schedule
                .get_schedule(client.unary(pb::GetScheduleRequest { schedule_id }))
                .await?
                .into_inner();
            show(&s)?;
        }
        ScheduleAction::Pause { schedule_id } => {
            let s = client
                .schedule
                .pause_schedule(client.unary(pb::PauseScheduleRequest { schedule_id }))
                .await?
                .into_inner();
            show(&s)?;
        }
        ScheduleAction::Resume { schedule_id } => {
            let s = client
                .schedule
                .resume_schedule(client.unary(pb::ResumeScheduleRequest { schedule_id }))
                .await?
                .into_inner();
            show(&s)?;
        }
        ScheduleAction::Delete { schedule_id } => {
            client
                .schedule
                .delete_schedule(client.unary(pb::DeleteScheduleRequest { schedule_id }))
                .await?;
            if as_json {
                print_json(&serde_json::json!({ "schedule_id": schedule_id, "deleted": true }))?;
            } else {
                println!("schedule {schedule_id} deleted");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "lpsctl",
            "search",
            "삼다수",
            "--mall",
            "naver",
            "--mall",
            "coupang",
            "--max-age",
            "1h",
            "--wait",
            "--json",
        ])
        .unwrap();
        match cli.command {
            Command::Search {
                malls,
                max_age,
                wait,
                ..
            } => {
                assert_eq!(malls, ["naver", "coupang"]);
                assert_eq!(max_age, Some(Duration::from_secs(3600)));
                assert!(wait);
            }
            other => panic!("{other:?}"),
        }
        assert!(cli.json);
    }
}
