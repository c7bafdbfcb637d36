//! Validated model types: what the rest of LPS works with once a message has been received.
//!
//! Every constructor validates; a value of these types is always within the documented
//! limits, so queue and ledger code never re-checks them. A failure is a [`FieldError`] that
//! names the field the way a caller wrote it (`products[3].name`), which gRPC adapters turn
//! into `InvalidArgument`.
//!
//! No `pb::` type leaves this module's conversions: adapters call `TryFrom` on receive and
//! `From` on send.

use std::{fmt, time::Duration};

use crate::pb;

pub mod budget;
pub mod delivery;
pub mod judge;
pub mod node;
pub mod product;
pub mod proxy;
pub mod schedule;
pub use delivery::*;
pub use judge::*;
pub use node::*;
pub use product::*;
pub use proxy::*;
pub use schedule::*;

/// At most this many products in one search request.
pub const MAX_PRODUCTS_PER_SEARCH: usize = 200;
/// ISO 4217 code of every price LPS reads: the malls it has profiles for sell in won.
pub const CURRENCY: &str = "KRW";
/// At most this many malls in one search request.
pub const MAX_MALLS_PER_SEARCH: usize = 20;
/// Longest product name, in characters.
pub const MAX_PRODUCT_NAME_CHARS: usize = 200;
/// Longest product code, in characters.
pub const MAX_PRODUCT_CODE_CHARS: usize = 64;
/// Longest mall id, in characters.
pub const MAX_MALL_ID_CHARS: usize = 64;
/// Longest idempotency key, in characters.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 128;
/// The longest `max_age` that means anything: older than this, every stored answer is
/// "fresh enough" already, so a longer age (up to `i64::MAX` seconds) is read as this.
pub const MAX_MAX_AGE: Duration = Duration::from_secs(10 * 366 * 24 * 3600);
/// Highest (least urgent) numeric priority.
pub const MAX_PRIORITY: u8 = 99;

/// A value that broke a rule, named by the field that carried it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct FieldError {
    pub field: String,
    pub reason: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The same error, one level deeper: `name` under `products[3]` is `products[3].name`.
    #[must_use]
    pub fn under(self, parent: impl fmt::Display) -> Self {
        Self {
            field: format!("{parent}.{}", self.field),
            reason: self.reason,
        }
    }
}

fn check_len(field: &str, value: &str, max_chars: usize) -> Result<(), FieldError> {
    if value.is_empty() {
        return Err(FieldError::new(field, "must not be empty"));
    }
    let chars = value.chars().count();
    if chars > max_chars {
        return Err(FieldError::new(
            field,
            format!("longer than {max_chars} characters ({chars})"),
        ));
    }
    Ok(())
}

/// A mall id: the id of its site profile (`naver`, `coupang`, `testmall-alpha`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MallId(String);

impl MallId {
    /// 1..=64 characters of `[a-z0-9_-]`.
    pub fn new(id: impl Into<String>) -> Result<Self, FieldError> {
        let id = id.into();
        check_len("mall", &id, MAX_MALL_ID_CHARS)?;
        if !id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(FieldError::new(
                "mall",
                "only lowercase letters, digits, '-' and '_' are allowed",
            ));
        }
        Ok(Self(id))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A queue priority: lower runs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Priority(u8);

impl Priority {
    /// Someone is waiting for the answer.
    pub const INTERACTIVE: Self = Self(10);
    /// Scheduled refreshes.
    pub const BATCH: Self = Self(50);
    /// Backfills.
    pub const BACKFILL: Self = Self(90);

    /// 0..=99.
    pub fn new(value: u32) -> Result<Self, FieldError> {
        match u8::try_from(value) {
            Ok(v) if v <= MAX_PRIORITY => Ok(Self(v)),
            _ => Err(FieldError::new(
                "priority",
                format!("must be 0..={MAX_PRIORITY}, got {value}"),
            )),
        }
    }

    pub fn get(self) -> u8 {
        self.0
    }
}

/// Job states, mirrored by the PostgreSQL enum `job_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type))]
#[cfg_attr(
    feature = "sqlx",
    sqlx(type_name = "job_state", rename_all = "snake_case")
)]
pub enum JobState {
    Queued,
    Running,
    Done,
    Dead,
    Cancelled,
}

impl JobState {
    /// Done, dead and cancelled jobs never change again (unless an operator retries a dead
    /// one).
    pub fn is_final(self) -> bool {
        matches!(self, Self::Done | Self::Dead | Self::Cancelled)
    }
}

/// How a `done` job ended, mirrored by the PostgreSQL enum `job_outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type))]
#[cfg_attr(
    feature = "sqlx",
    sqlx(type_name = "job_outcome", rename_all = "snake_case")
)]
pub enum Outcome {
    Found,
    NotFound,
}

/// Why an attempt failed, mirrored by the PostgreSQL enum `error_class`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type))]
#[cfg_attr(
    feature = "sqlx",
    sqlx(type_name = "error_class", rename_all = "snake_case")
)]
pub enum ErrorClass {
    Network,
    Blocked,
    PageBlocked,
    Proxy,
    Browser,
    Parse,
    Deadline,
    LeaseExpired,
    Poison,
    Permanent,
    Internal,
    Layout,
    /// The deployment's configuration stops the job (the proxy gateway refuses the mall's
    /// host): dead at once, for an operator to fix.
    Config,
}

impl ErrorClass {
    /// Whether another attempt can help. Exhaustive on purpose: a new class must decide.
    pub fn is_retryable(self) -> bool {
        match self {
            Self::Network
            | Self::Blocked
            | Self::Proxy
            | Self::Browser
            | Self::Parse
            | Self::Deadline
            | Self::LeaseExpired
            | Self::Internal => true,
            Self::PageBlocked | Self::Poison | Self::Permanent | Self::Layout | Self::Config => {
                false
            }
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Network => "network",
            Self::Blocked => "blocked",
            Self::PageBlocked => "page_blocked",
            Self::Proxy => "proxy",
            Self::Browser => "browser",
            Self::Parse => "parse",
            Self::Deadline => "deadline",
            Self::LeaseExpired => "lease_expired",
            Self::Poison => "poison",
            Self::Permanent => "permanent",
            Self::Internal => "internal",
            Self::Layout => "layout",
            Self::Config => "config",
        }
    }
}

impl TryFrom<i32> for ErrorClass {
    type Error = FieldError;

    fn try_from(value: i32) -> Result<Self, FieldError> {
        use pb::ErrorClass as P;
        Ok(match P::try_from(value) {
            Ok(P::Network) => Self::Network,
            Ok(P::Blocked) => Self::Blocked,
            Ok(P::PageBlocked) => Self::PageBlocked,
            Ok(P::Proxy) => Self::Proxy,
            Ok(P::Browser) => Self::Browser,
            Ok(P::Parse) => Self::Parse,
            Ok(P::Deadline) => Self::Deadline,
            Ok(P::LeaseExpired) => Self::LeaseExpired,
            Ok(P::Poison) => Self::Poison,
            Ok(P::Permanent) => Self::Permanent,
            Ok(P::Internal) => Self::Internal,
            Ok(P::Layout) => Self::Layout,
            Ok(P::Config) => Self::Config,
            Ok(P::Unspecified) | Err(_) => {
                return Err(FieldError::new(
                    "class",
                    format!("unknown error class {value}"),
                ));
            }
        })
    }
}

impl From<ErrorClass> for pb::ErrorClass {
    fn from(value: ErrorClass) -> Self {
        match value {
            ErrorClass::Network => Self::Network,
            ErrorClass::Blocked => Self::Blocked,
            ErrorClass::PageBlocked => Self::PageBlocked,
            ErrorClass::Proxy => Self::Proxy,
            ErrorClass::Browser => Self::Browser,
            ErrorClass::Parse => Self::Parse,
            ErrorClass::Deadline => Self::Deadline,
            ErrorClass::LeaseExpired => Self::LeaseExpired,
            ErrorClass::Poison => Self::Poison,
            ErrorClass::Permanent => Self::Permanent,
            ErrorClass::Internal => Self::Internal,
            ErrorClass::Layout => Self::Layout,
            ErrorClass::Config => Self::Config,
        }
    }
}

impl From<JobState> for pb::JobState {
    fn from(value: JobState) -> Self {
        match value {
            JobState::Queued => Self::Queued,
            JobState::Running => Self::Running,
            JobState::Done => Self::Done,
            JobState::Dead => Self::Dead,
            JobState::Cancelled => Self::Cancelled,
        }
    }
}

impl From<Outcome> for pb::Outcome {
    fn from(value: Outcome) -> Self {
        match value {
            Outcome::Found => Self::Found,
            Outcome::NotFound => Self::NotFound,
        }
    }
}

/// A validated search request: products × malls, a priority and a cache policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchRequest {
    pub products: Vec<ProductSpec>,
    /// Empty means every enabled mall.
    pub malls: Vec<MallId>,
    pub priority: Priority,
    /// Accept a stored `found` result at most this old instead of crawling.
    pub max_age: Option<Duration>,
    pub idempotency_key: Option<String>,
    /// Destinations to notify when the search is final (names; whether each is configured
    /// is the coordinator's check).
    pub destinations: Vec<DestinationName>,
    /// Also an event per product as it becomes final (only with destinations).
    pub notify_each_product: bool,
}

impl SearchRequest {
    /// Checks the request-level rules (counts, duplicate malls, key length). The parts are
    /// already valid by construction.
    pub fn new(
        products: Vec<ProductSpec>,
        malls: Vec<MallId>,
        priority: Priority,
        max_age: Option<Duration>,
        idempotency_key: Option<String>,
    ) -> Result<Self, FieldError> {
        if products.is_empty() {
            return Err(FieldError::new(
                "products",
                "must name at least one product",
            ));
        }
        if products.len() > MAX_PRODUCTS_PER_SEARCH {
            return Err(FieldError::new(
                "products",
                format!(
                    "at most {MAX_PRODUCTS_PER_SEARCH} products per request, got {}",
                    products.len()
                ),
            ));
        }
        if malls.len() > MAX_MALLS_PER_SEARCH {
            return Err(FieldError::new(
                "malls",
                format!(
                    "at most {MAX_MALLS_PER_SEARCH} malls per request, got {}",
                    malls.len()
                ),
            ));
        }
        for (i, mall) in malls.iter().enumerate() {
            if malls[..i].contains(mall) {
                return Err(FieldError::new(
                    format!("malls[{i}]"),
                    format!("{mall} is listed twice"),
                ));
            }
        }
        let idempotency_key = match idempotency_key {
            Some(key) if !key.is_empty() => {
                check_len("idempotency_key", &key, MAX_IDEMPOTENCY_KEY_CHARS)?;
                Some(key)
            }
            _ => None,
        };
        Ok(Self {
            products,
            malls,
            priority,
            max_age: max_age
                .filter(|age| !age.is_zero())
                .map(|age| age.min(MAX_MAX_AGE)),
            idempotency_key,
            destinations: Vec::new(),
            notify_each_product: false,
        })
    }

    /// The same request notifying `destinations` when final (and each product, when
    /// `notify_each_product`); the rules of `SearchRequest.destinations`.
    pub fn with_destinations(
        mut self,
        destinations: Vec<String>,
        notify_each_product: bool,
    ) -> Result<Self, FieldError> {
        self.destinations = delivery::destinations(destinations, notify_each_product)?;
        self.notify_each_product = notify_each_product;
        Ok(self)
    }
}

impl TryFrom<pb::SearchRequest> for SearchRequest {
    type Error = FieldError;

    fn try_from(req: pb::SearchRequest) -> Result<Self, FieldError> {
        let products = req
            .products
            .iter()
            .enumerate()
            .map(|(i, p)| ProductSpec::try_from(p).map_err(|e| e.under(format!("products[{i}]"))))
            .collect::<Result<Vec<_>, _>>()?;
        let malls = req
            .malls
            .into_iter()
            .enumerate()
            .map(|(i, m)| {
                MallId::new(m).map_err(|e| FieldError::new(format!("malls[{i}]"), e.reason))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let priority = match req.priority {
            Some(p) => Priority::new(p)?,
            None => match pb::PriorityClass::try_from(req.priority_class) {
                Ok(pb::PriorityClass::Unspecified | pb::PriorityClass::Interactive) => {
                    Priority::INTERACTIVE
                }
                Ok(pb::PriorityClass::Batch) => Priority::BATCH,
                Ok(pb::PriorityClass::Backfill) => Priority::BACKFILL,
                Err(_) => {
                    return Err(FieldError::new(
                        "priority_class",
                        format!("unknown priority class {}", req.priority_class),
                    ));
                }
            },
        };
        let max_age = req
            .max_age
            .map(|d| duration_from_pb("max_age", d))
            .transpose()?;
        let key = Some(req.idempotency_key).filter(|k| !k.is_empty());
        Self::new(products, malls, priority, max_age, key)?
            .with_destinations(req.destinations, req.notify_each_product)
    }
}

/// A non-negative protobuf duration as a std one.
pub fn duration_from_pb(field: &str, d: prost_types::Duration) -> Result<Duration, FieldError> {
    if d.seconds < 0 || d.nanos < 0 {
        return Err(FieldError::new(field, "must not be negative"));
    }
    if d.nanos >= 1_000_000_000 {
        return Err(FieldError::new(
            field,
            format!("nanos must be below 1,000,000,000, got {}", d.nanos),
        ));
    }
    let secs = u64::try_from(d.seconds).map_err(|_| FieldError::new(field, "out of range"))?;
    let nanos = u32::try_from(d.nanos).map_err(|_| FieldError::new(field, "out of range"))?;
    Ok(Duration::new(secs, nanos))
}

/// A std duration as a protobuf one (saturating).
pub fn duration_to_pb(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// A timestamp as a protobuf one.
pub fn timestamp_to_pb(t: chrono::DateTime<chrono::Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

/// A protobuf timestamp as a chrono one.
pub fn timestamp_from_pb(
    field: &str,
    t: prost_types::Timestamp,
) -> Result<chrono::DateTime<chrono::Utc>, FieldError> {
    let nanos = u32::try_from(t.nanos).map_err(|_| FieldError::new(field, "bad nanos"))?;
    chrono::DateTime::from_timestamp(t.seconds, nanos)
        .ok_or_else(|| FieldError::new(field, "out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn product(name: &str) -> pb::Product {
        pb::Product {
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn an_age_beyond_ten_years_means_any_stored_answer() {
        for seconds in [10_000 * 366 * 24 * 3600, i64::MAX] {
            let req = SearchRequest::try_from(pb::SearchRequest {
                products: vec![product("삼다수 2L")],
                max_age: Some(prost_types::Duration { seconds, nanos: 0 }),
                ..Default::default()
            })
            .unwrap();
            assert_eq!(req.max_age, Some(MAX_MAX_AGE), "{seconds}");
        }
        // A name with a letter among invisible characters is a name.
        assert!(ProductSpec::new(None, "\u{200b}삼다수").is_ok());
    }

    #[test]
    fn bad_fields_are_named() {
        let long = "가".repeat(MAX_PRODUCT_NAME_CHARS + 1);
        let cases: Vec<(pb::SearchRequest, &str)> = vec![
            (pb::SearchRequest::default(), "products"),
            (
                pb::SearchRequest {
                    products: vec![product("ok"), product(&long)],
                    ..Default::default()
                },
                "products[1].name",
            ),
            (
                pb::SearchRequest {
                    products: vec![product("  ")],
                    ..Default::default()
                },
                "products[0].name",
            ),
            (
                pb::SearchRequest {
                    products: vec![product("ok"), product("\u{200b}")],
                    ..Default::default()
                },
                "products[1].name",
            ),
            (
                pb::SearchRequest {
                    products: vec![product("\u{200d}\u{feff}")],
                    ..Default::default()
                },
                "products[0].name",
            ),
            (
                pb::SearchRequest {
                    products: vec![product(" \u{200f}\u{202e} ")],
                    ..Default::default()
                },
                "products[0].name",
            ),
            (
                pb::SearchRequest {
                    products: vec![product("?!…")],
                    ..Default::default()
                },
                "products[0].name",
            ),
            (
                pb::SearchRequest {
                    products: vec![product("x")],
                    max_age: Some(prost_types::Duration {
                        seconds: 60,
                        nanos: 1_000_000_000,
                    }),
                    ..Default::default()
                },
                "max_age",
            ),
            (
                pb::SearchRequest {
                    products: vec![pb::Product {
                        code: "bad code!".into(),
                        name: "x".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                "products[0].code",
            ),
            (
                pb::SearchRequest {
                    products: vec![product("x")],
                    malls: vec!["Naver".into()],
                    ..Default::default()
                },
                "malls[0]",
            ),
            (
                pb::SearchRequest {
                    products: vec![product("x")],
                    malls: vec!["naver".into(), "naver".into()],
                    ..Default::default()
                },
                "malls[1]",
            ),
            (
                pb::SearchRequest {
                    products: vec![product("x")],
                    priority: Some(100),
                    ..Default::default()
                },
                "priority",
            ),
            (
                pb::SearchRequest {
                    products: vec![product("x")],
                    priority_class: 42,
                    ..Default::default()
                },
                "priority_class",
            ),
            (
                pb::SearchRequest {
                    products: vec![product("x")],
                    max_age: Some(prost_types::Duration {
                        seconds: -1,
                        nanos: 0,
                    }),
                    ..Default::default()
                },
                "max_age",
            ),
            (
                pb::SearchRequest {
                    products: (0..=MAX_PRODUCTS_PER_SEARCH)
                        .map(|_| product("x"))
                        .collect(),
                    ..Default::default()
                },
                "products",
            ),
        ];
        for (req, field) in cases {
            let err = SearchRequest::try_from(req).unwrap_err();
            assert_eq!(err.field, field, "{err}");
        }
    }

    #[test]
    fn priority_class_maps_to_numbers() {
        let req = SearchRequest::try_from(pb::SearchRequest {
            products: vec![product("x")],
            priority_class: pb::PriorityClass::Batch as i32,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(req.priority, Priority::BATCH);
        let req = SearchRequest::try_from(pb::SearchRequest {
            products: vec![product("x")],
            priority_class: pb::PriorityClass::Batch as i32,
            priority: Some(3),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(req.priority.get(), 3);
    }

    #[test]
    fn every_error_class_round_trips() {
        for class in [
            ErrorClass::Network,
            ErrorClass::Blocked,
            ErrorClass::PageBlocked,
            ErrorClass::Proxy,
            ErrorClass::Browser,
            ErrorClass::Parse,
            ErrorClass::Deadline,
            ErrorClass::LeaseExpired,
            ErrorClass::Poison,
            ErrorClass::Permanent,
            ErrorClass::Internal,
            ErrorClass::Layout,
            ErrorClass::Config,
        ] {
            let wire = pb::ErrorClass::from(class) as i32;
            assert_eq!(ErrorClass::try_from(wire).unwrap(), class);
        }
        assert!(ErrorClass::try_from(0).is_err());
    }
}
