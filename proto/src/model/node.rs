//! Validated node-protocol types: what a crawler node reports and what the queue stores.

use chrono::{DateTime, Utc};
use std::{collections::BTreeMap, time::Duration};

use super::{
    ErrorClass, FieldError, JudgedWith, MallId, NotFoundKind, Outcome, check_len, duration_from_pb,
    timestamp_from_pb, timestamp_to_pb,
};
use crate::pb;

/// Longest offer title, in characters.
pub const MAX_TITLE_CHARS: usize = 500;
/// Longest URL, in characters.
pub const MAX_URL_CHARS: usize = 2048;
/// Longest failure message kept, in characters (longer ones are cut, not rejected).
pub const MAX_ERROR_CHARS: usize = 2000;
/// At most this many offers in one result.
pub const MAX_OFFERS_PER_RESULT: usize = 100;
/// Most browser slots one node may announce.
pub const MAX_SLOTS: u32 = 64;

/// One offer judged to be the requested product.
#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    pub mall: MallId,
    pub title: String,
    /// In the currency's minor unit (KRW: won).
    pub price: i64,
    /// Set only when `shipping` is known ([`ShippingStatus::is_known`]); 0 otherwise.
    pub shipping_fee: i64,
    pub url: String,
    pub seller: String,
    pub match_score: f32,
    pub shipping: ShippingStatus,
    /// The struck-out list price the card shows; 0 = none shown.
    pub list_price: i64,
    /// Card classes the profile includes but flags (overseas, catalog, …).
    pub flags: Vec<CardClass>,
}

impl Offer {
    /// Price plus shipping: what the buyer pays (a lower bound when shipping is unknown).
    pub fn effective_price(&self) -> i64 {
        self.price.saturating_add(self.shipping_fee)
    }

    /// Whether the effective price is what the buyer pays (shipping is known).
    pub fn effective_price_known(&self) -> bool {
        self.shipping.is_known()
    }

    /// The effective price when it is what the buyer pays; `None` when shipping is unknown
    /// (the wire's `Offer.effective_price` is then absent).
    pub fn known_effective_price(&self) -> Option<i64> {
        self.effective_price_known().then(|| self.effective_price())
    }

    /// The order offers are shown in: those with known shipping first, cheapest (effective
    /// price) first, then those whose shipping is unknown, cheapest first; at the same price
    /// lower shipping first. So a client reading the first offer of a mall never gets an
    /// unknown-shipping one while the mall has an offer with known shipping.
    pub fn shown_order(&self) -> (bool, i64, i64) {
        (
            !self.effective_price_known(),
            self.effective_price(),
            self.shipping_fee,
        )
    }
}

/// The answer over a set of offers (a mall's, or a product's over its malls): the lowest
/// effective price over offers whose shipping is known, and beside it (never as it) the
/// cheapest offer whose shipping is unknown when its price alone is below that lowest (or
/// there is no lowest): "possibly lower, shipping unknown".
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Answer<'a> {
    pub lowest: Option<&'a Offer>,
    pub possibly_lower: Option<&'a Offer>,
}

impl<'a> Answer<'a> {
    /// Ties: the lower shipping fee, then the earlier offer.
    pub fn over(offers: impl IntoIterator<Item = &'a Offer>) -> Self {
        let mut lowest: Option<&Offer> = None;
        let mut unknown: Option<&Offer> = None;
        for offer in offers {
            if offer.effective_price_known() {
                let key = |o: &Offer| (o.effective_price(), o.shipping_fee);
                if lowest.is_none_or(|l| key(offer) < key(l)) {
                    lowest = Some(offer);
                }
            } else if unknown.is_none_or(|u| offer.price < u.price) {
                unknown = Some(offer);
            }
        }
        let possibly_lower = match (lowest, unknown) {
            (Some(l), Some(u)) if u.price >= l.effective_price() => None,
            (_, u) => u,
        };
        Self {
            lowest,
            possibly_lower,
        }
    }
}

/// How an offer's shipping was read (DESIGN §5 "Prices and shipping").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShippingStatus {
    /// Free shipping is stated.
    Free,
    /// A fee is stated and applies.
    Paid,
    /// Free because the offer's own price reaches the stated threshold.
    FreeByThreshold,
    /// Not shown, or not readable: never counted as free.
    Unknown,
}

impl ShippingStatus {
    /// Whether the fee is known (so price + fee is what the buyer pays).
    pub fn is_known(self) -> bool {
        !matches!(self, Self::Unknown)
    }

    /// The name stored in PostgreSQL and shown by lpsctl.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Free => "free",
            Self::Paid => "paid",
            Self::FreeByThreshold => "free_by_threshold",
            Self::Unknown => "unknown",
        }
    }

    /// The inverse of [`as_str`](Self::as_str); anything else is `Unknown`.
    pub fn from_name(name: &str) -> Self {
        match name {
            "free" => Self::Free,
            "paid" => Self::Paid,
            "free_by_threshold" => Self::FreeByThreshold,
            _ => Self::Unknown,
        }
    }

    /// From the wire; `UNSPECIFIED` (older nodes) is `Paid` with a fee, else `Unknown`.
    pub fn from_pb(value: i32, shipping_fee: i64) -> Self {
        match pb::ShippingStatus::try_from(value) {
            Ok(pb::ShippingStatus::Free) => Self::Free,
            Ok(pb::ShippingStatus::Paid) => Self::Paid,
            Ok(pb::ShippingStatus::FreeByThreshold) => Self::FreeByThreshold,
            Ok(pb::ShippingStatus::Unknown) => Self::Unknown,
            Ok(pb::ShippingStatus::Unspecified) | Err(_) if shipping_fee > 0 => Self::Paid,
            Ok(pb::ShippingStatus::Unspecified) | Err(_) => Self::Unknown,
        }
    }
}

impl From<ShippingStatus> for pb::ShippingStatus {
    fn from(s: ShippingStatus) -> Self {
        match s {
            ShippingStatus::Free => Self::Free,
            ShippingStatus::Paid => Self::Paid,
            ShippingStatus::FreeByThreshold => Self::FreeByThreshold,
            ShippingStatus::Unknown => Self::Unknown,
        }
    }
}

/// A kind of listing besides a plain seller's offer (mirrors `lps.v1.CardClass`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CardClass {
    Ad,
    OptionListing,
    Overseas,
    Used,
    SoldOut,
    Catalog,
    Rental,
}

impl CardClass {
    pub const ALL: [CardClass; 7] = [
        Self::Ad,
        Self::OptionListing,
        Self::Overseas,
        Self::Used,
        Self::SoldOut,
        Self::Catalog,
        Self::Rental,
    ];

    /// The name used in profiles, metrics labels, round reports and PostgreSQL.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ad => "ad",
            Self::OptionListing => "option_listing",
            Self::Overseas => "overseas",
            Self::Used => "used",
            Self::SoldOut => "sold_out",
            Self::Catalog => "catalog",
            Self::Rental => "rental",
        }
    }

    /// The inverse of [`as_str`](Self::as_str).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// From the wire; `UNSPECIFIED` and unknown values are `None`.
    pub fn from_pb(value: i32) -> Option<Self> {
        match pb::CardClass::try_from(value).ok()? {
            pb::CardClass::Unspecified => None,
            pb::CardClass::Ad => Some(Self::Ad),
            pb::CardClass::OptionListing => Some(Self::OptionListing),
            pb::CardClass::Overseas => Some(Self::Overseas),
            pb::CardClass::Used => Some(Self::Used),
            pb::CardClass::SoldOut => Some(Self::SoldOut),
            pb::CardClass::Catalog => Some(Self::Catalog),
            pb::CardClass::Rental => Some(Self::Rental),
        }
    }
}

impl From<CardClass> for pb::CardClass {
    fn from(c: CardClass) -> Self {
        match c {
            CardClass::Ad => Self::Ad,
            CardClass::OptionListing => Self::OptionListing,
            CardClass::Overseas => Self::Overseas,
            CardClass::Used => Self::Used,
            CardClass::SoldOut => Self::SoldOut,
            CardClass::Catalog => Self::Catalog,
            CardClass::Rental => Self::Rental,
        }
    }
}

impl TryFrom<pb::Offer> for Offer {
    type Error = FieldError;

    fn try_from(o: pb::Offer) -> Result<Self, FieldError> {
        let mall = MallId::new(o.mall)?;
        check_len("title", &o.title, MAX_TITLE_CHARS)?;
        if o.price < 0 {
            return Err(FieldError::new("price", "must not be negative"));
        }
        if o.shipping_fee < 0 {
            return Err(FieldError::new("shipping_fee", "must not be negative"));
        }
        if o.url.chars().count() > MAX_URL_CHARS {
            return Err(FieldError::new(
                "url",
                format!("longer than {MAX_URL_CHARS} characters"),
            ));
        }
        if o.seller.chars().count() > MAX_TITLE_CHARS {
            return Err(FieldError::new(
                "seller",
                format!("longer than {MAX_TITLE_CHARS} characters"),
            ));
        }
        if !(0.0..=1.0).contains(&o.match_score) {
            return Err(FieldError::new("match_score", "must be within 0..=1"));
        }
        if o.list_price < 0 {
            return Err(FieldError::new("list_price", "must not be negative"));
        }
        let shipping = ShippingStatus::from_pb(o.shipping, o.shipping_fee);
        if !shipping.is_known() && o.shipping_fee != 0 {
            return Err(FieldError::new(
                "shipping_fee",
                "must be 0 when shipping is UNKNOWN",
            ));
        }
        let mut flags: Vec<CardClass> = o
            .flags
            .iter()
            .filter_map(|&f| CardClass::from_pb(f))
            .collect();
        flags.sort_unstable();
        flags.dedup();
        Ok(Self {
            mall,
            title: o.title,
            price: o.price,
            shipping_fee: o.shipping_fee,
            url: o.url,
            seller: o.seller,
            match_score: o.match_score,
            shipping,
            list_price: o.list_price,
            flags,
        })
    }
}

impl From<&Offer> for pb::Offer {
    fn from(o: &Offer) -> Self {
        Self {
            mall: o.mall.to_string(),
            title: o.title.clone(),
            price: o.price,
            shipping_fee: o.shipping_fee,
            effective_price: o.known_effective_price(),
            url: o.url.clone(),
            seller: o.seller.clone(),
            match_score: o.match_score,
            shipping: pb::ShippingStatus::from(o.shipping) as i32,
            list_price: o.list_price,
            flags: o
                .flags
                .iter()
                .map(|&f| pb::CardClass::from(f) as i32)
                .collect(),
            currency: super::CURRENCY.to_owned(),
        }
    }
}

/// One query round a job tried.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RoundReport {
    pub kind: String,
    pub query: String,
    pub cards_seen: u32,
    pub matches: u32,
    pub elapsed_ms: u64,
    /// The card source that produced the cards ("" when none did).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// Cards left out, by reason (an excluded card class, or "placeholder").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub excluded: BTreeMap<String, u32>,
    /// Result pages read in the round.
    #[serde(default)]
    pub pages: u32,
}

/// Most distinct reasons one round report keeps.
const MAX_EXCLUDED_REASONS: usize = 16;

/// The wire enum of a round kind name (`UNSPECIFIED` for a name it has no value for).
pub fn round_kind_to_pb(kind: &str) -> pb::RoundKind {
    match kind {
        "original" => pb::RoundKind::Original,
        "precise" => pb::RoundKind::Precise,
        "broad" => pb::RoundKind::Broad,
        "llm" => pb::RoundKind::Llm,
        _ => pb::RoundKind::Unspecified,
    }
}

fn round_kind_name(kind: pb::RoundKind) -> Option<&'static str> {
    match kind {
        pb::RoundKind::Original => Some("original"),
        pb::RoundKind::Precise => Some("precise"),
        pb::RoundKind::Broad => Some("broad"),
        pb::RoundKind::Llm => Some("llm"),
        pb::RoundKind::Unspecified => None,
    }
}

impl From<pb::RoundReport> for RoundReport {
    #[allow(deprecated)] // `kind`: what older nodes send
    fn from(r: pb::RoundReport) -> Self {
        let kind = pb::RoundKind::try_from(r.round_kind)
            .ok()
            .and_then(round_kind_name)
            .map_or_else(|| r.kind.chars().take(32).collect(), str::to_owned);
        Self {
            kind,
            query: r
                .query
                .chars()
                .take(super::MAX_PRODUCT_NAME_CHARS * 2)
                .collect(),
            cards_seen: r.cards_seen,
            matches: r.matches,
            elapsed_ms: r
                .elapsed
                .and_then(|d| duration_from_pb("elapsed", d).ok())
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            source: r.source.chars().take(32).collect(),
            excluded: r
                .excluded
                .into_iter()
                .take(MAX_EXCLUDED_REASONS)
                .map(|(reason, n)| (reason.chars().take(32).collect(), n))
                .collect(),
            pages: r.pages,
        }
    }
}

impl From<&RoundReport> for pb::RoundReport {
    #[allow(deprecated)] // `kind`: for older clients
    fn from(r: &RoundReport) -> Self {
        Self {
            kind: r.kind.clone(),
            round_kind: round_kind_to_pb(&r.kind) as i32,
            query: r.query.clone(),
            cards_seen: r.cards_seen,
            matches: r.matches,
            elapsed: Some(super::duration_to_pb(Duration::from_millis(r.elapsed_ms))),
            source: r.source.clone(),
            excluded: r.excluded.clone().into_iter().collect(),
            pages: r.pages,
        }
    }
}

/// What an attempt cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct JobMetrics {
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub elapsed: Duration,
    pub cost_usd: f64,
    pub llm_calls: u32,
    pub pages_loaded: u32,
    pub ports_used: u32,
}

impl JobMetrics {
    pub fn bytes(&self) -> u64 {
        self.bytes_in.saturating_add(self.bytes_out)
    }

    /// Nothing was moved or spent (nothing to record).
    pub fn is_free(&self) -> bool {
        self.bytes() == 0 && self.cost_usd == 0.0
    }
}

/// A report's optional `metrics`, validated (absent: nothing spent).
fn reported_metrics(m: Option<pb::JobMetrics>) -> Result<JobMetrics, FieldError> {
    m.map(JobMetrics::try_from)
        .transpose()
        .map(Option::unwrap_or_default)
}

impl TryFrom<pb::JobMetrics> for JobMetrics {
    type Error = FieldError;

    fn try_from(m: pb::JobMetrics) -> Result<Self, FieldError> {
        if !m.cost_usd.is_finite() || m.cost_usd < 0.0 {
            return Err(FieldError::new(
                "metrics.cost_usd",
                "must be a non-negative number",
            ));
        }
        Ok(Self {
            bytes_in: m.bytes_in,
            bytes_out: m.bytes_out,
            elapsed: m
                .elapsed
                .map(|d| duration_from_pb("metrics.elapsed", d))
                .transpose()?
                .unwrap_or_default(),
            cost_usd: m.cost_usd,
            llm_calls: m.llm_calls,
            pages_loaded: m.pages_loaded,
            ports_used: m.ports_used,
        })
    }
}

impl From<&JobMetrics> for pb::JobMetrics {
    fn from(m: &JobMetrics) -> Self {
        Self {
            bytes_in: m.bytes_in,
            bytes_out: m.bytes_out,
            elapsed: Some(super::duration_to_pb(m.elapsed)),
            cost_usd: m.cost_usd,
            llm_calls: m.llm_calls,
            pages_loaded: m.pages_loaded,
            ports_used: m.ports_used,
        }
    }
}

/// The lease a report speaks for: a job and the epoch of the claim that produced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease {
    pub job_id: i64,
    pub epoch: i64,
}

fn lease(job_id: i64, epoch: i64) -> Result<Lease, FieldError> {
    if job_id <= 0 {
        return Err(FieldError::new("job_id", "must be positive"));
    }
    if epoch <= 0 {
        return Err(FieldError::new("lease_epoch", "must be positive"));
    }
    Ok(Lease { job_id, epoch })
}

/// How a job finished. `Found` always has at least one offer; `NotFound` has none.
#[derive(Debug, Clone, PartialEq)]
pub struct JobResult {
    pub lease: Lease,
    pub outcome: Outcome,
    pub offers: Vec<Offer>,
    pub rounds: Vec<RoundReport>,
    pub metrics: JobMetrics,
    /// What judged the cards (unknown from an older node).
    pub judged_with: JudgedWith,
}

impl JobResult {
    /// A `found` result; fails when `offers` is empty or too long.
    pub fn found(lease: Lease, offers: Vec<Offer>) -> Result<Self, FieldError> {
        if offers.is_empty() {
            return Err(FieldError::new(
                "offers",
                "a found result needs at least one offer",
            ));
        }
        if offers.len() > MAX_OFFERS_PER_RESULT {
            return Err(FieldError::new(
                "offers",
                format!(
                    "at most {MAX_OFFERS_PER_RESULT} offers, got {}",
                    offers.len()
                ),
            ));
        }
        Ok(Self {
            lease,
            outcome: Outcome::Found,
            offers,
            rounds: Vec::new(),
            metrics: JobMetrics::default(),
            judged_with: JudgedWith::default(),
        })
    }

    /// A verified "not found".
    pub fn not_found(lease: Lease) -> Self {
        Self {
            lease,
            outcome: Outcome::NotFound,
            offers: Vec::new(),
            rounds: Vec::new(),
            metrics: JobMetrics::default(),
            judged_with: JudgedWith::default(),
        }
    }

    /// The same result, decided with `judged_with`.
    #[must_use]
    pub fn judged_with(mut self, judged_with: JudgedWith) -> Self {
        self.judged_with = judged_with;
        self
    }

    /// Why a not-found is one (`None` for a found result).
    pub fn not_found_kind(&self) -> Option<NotFoundKind> {
        (self.outcome == Outcome::NotFound).then(|| NotFoundKind::of(&self.rounds))
    }

    /// The cheapest offer whose effective price is known (ties: lower shipping, then the
    /// earlier one). An offer with unknown shipping is never the best.
    pub fn best_offer(&self) -> Option<&Offer> {
        Answer::over(&self.offers).lowest
    }
}

impl TryFrom<pb::JobResult> for JobResult {
    type Error = FieldError;

    fn try_from(r: pb::JobResult) -> Result<Self, FieldError> {
        let lease = lease(r.job_id, r.lease_epoch)?;
        let offers = r
            .offers
            .into_iter()
            .enumerate()
            .map(|(i, o)| Offer::try_from(o).map_err(|e| e.under(format!("offers[{i}]"))))
            .collect::<Result<Vec<_>, _>>()?;
        let mut result = match pb::Outcome::try_from(r.outcome) {
            Ok(pb::Outcome::Found) => Self::found(lease, offers)?,
            Ok(pb::Outcome::NotFound) if offers.is_empty() => Self::not_found(lease),
            Ok(pb::Outcome::NotFound) => {
                return Err(FieldError::new(
                    "offers",
                    "a not_found result has no offers",
                ));
            }
            Ok(pb::Outcome::Unspecified) | Err(_) => {
                return Err(FieldError::new(
                    "outcome",
                    format!("unknown outcome {}", r.outcome),
                ));
            }
        };
        result.rounds = r
            .rounds
            .into_iter()
            .take(8)
            .map(RoundReport::from)
            .collect();
        result.metrics = r
            .metrics
            .map(JobMetrics::try_from)
            .transpose()?
            .unwrap_or_default();
        if r.vocabulary_revision.chars().count() > MAX_VOCABULARY_REVISION_CHARS {
            return Err(FieldError::new(
                "vocabulary_revision",
                format!("longer than {MAX_VOCABULARY_REVISION_CHARS} characters"),
            ));
        }
        result.judged_with = JudgedWith {
            judge_version: r.judge_version,
            vocabulary_revision: r.vocabulary_revision,
        };
        Ok(result)
    }
}

/// Longest vocabulary revision a result may name (this build's are 16).
const MAX_VOCABULARY_REVISION_CHARS: usize = 64;

/// Most bytes of HTML a page evidence record keeps.
pub const MAX_EVIDENCE_HTML_BYTES: usize = 32 * 1024;
/// The largest screenshot a page evidence record keeps (a larger one is left out).
pub const MAX_EVIDENCE_SCREENSHOT_BYTES: usize = 256 * 1024;

/// What a blocked or unreadable page looked like (see `lps.v1.PageEvidence`), within the
/// size caps: [`PageEvidence::new`] trims the HTML and drops an oversized screenshot.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PageEvidence {
    pub url: String,
    pub title: String,
    pub marker: String,
    pub html: String,
    /// JPEG bytes; empty when none was kept.
    #[serde(with = "evidence_bytes", default)]
    pub screenshot_jpeg: Vec<u8>,
    pub captured_at: DateTime<Utc>,
}

impl PageEvidence {
    pub fn new(
        url: &str,
        title: &str,
        marker: &str,
        html: &str,
        screenshot_jpeg: Vec<u8>,
        captured_at: DateTime<Utc>,
    ) -> Self {
        let cut = |s: &str, max: usize| {
            let mut end = s.len().min(max);
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s[..end].to_owned()
        };
        Self {
            url: cut(url, 2048),
            title: cut(title, 512),
            marker: cut(marker, 128),
            html: cut(html, MAX_EVIDENCE_HTML_BYTES),
            screenshot_jpeg: if screenshot_jpeg.len() <= MAX_EVIDENCE_SCREENSHOT_BYTES {
                screenshot_jpeg
            } else {
                Vec::new()
            },
            captured_at,
        }
    }
}

/// Screenshot bytes as base64 text in the stored JSON.
mod evidence_bytes {
    use base64::Engine as _;
    use serde::{Deserialize as _, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

impl From<pb::PageEvidence> for PageEvidence {
    fn from(e: pb::PageEvidence) -> Self {
        let at = e
            .captured_at
            .and_then(|t| super::timestamp_from_pb("captured_at", t).ok())
            .unwrap_or_else(Utc::now);
        Self::new(&e.url, &e.title, &e.marker, &e.html, e.screenshot_jpeg, at)
    }
}

impl From<&PageEvidence> for pb::PageEvidence {
    fn from(e: &PageEvidence) -> Self {
        Self {
            url: e.url.clone(),
            title: e.title.clone(),
            marker: e.marker.clone(),
            html: e.html.clone(),
            screenshot_jpeg: e.screenshot_jpeg.clone(),
            captured_at: Some(super::timestamp_to_pb(e.captured_at)),
        }
    }
}

/// A failed attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct JobFailure {
    pub lease: Lease,
    pub class: ErrorClass,
    pub message: String,
    pub metrics: JobMetrics,
    /// The attempt's last blocked or unreadable page, when the node kept one.
    pub evidence: Option<PageEvidence>,
}

impl JobFailure {
    pub fn new(lease: Lease, class: ErrorClass, message: impl Into<String>) -> Self {
        let message: String = message.into();
        Self {
            lease,
            class,
            message: message.chars().take(MAX_ERROR_CHARS).collect(),
            metrics: JobMetrics::default(),
            evidence: None,
        }
    }
}

impl TryFrom<pb::JobFailure> for JobFailure {
    type Error = FieldError;

    fn try_from(f: pb::JobFailure) -> Result<Self, FieldError> {
        let lease = lease(f.job_id, f.lease_epoch)?;
        let class = ErrorClass::try_from(f.class)?;
        let mut failure = Self::new(lease, class, f.message);
        failure.metrics = reported_metrics(f.metrics)?;
        failure.evidence = f.evidence.map(|e| PageEvidence::from(*e));
        Ok(failure)
    }
}

/// A lease the node gives back unfinished (`JobHandBack`): the job is queued again (at
/// once, or at `not_before`), no attempt counted; `metrics` is what the run spent until then.
#[derive(Debug, Clone, PartialEq)]
pub struct JobHandBack {
    pub lease: Lease,
    pub reason: String,
    pub metrics: JobMetrics,
    /// When the job may run again (no proxy port was free until then); `None`: at once.
    pub not_before: Option<DateTime<Utc>>,
}

impl JobHandBack {
    pub fn new(lease: Lease, reason: impl Into<String>, metrics: JobMetrics) -> Self {
        Self {
            lease,
            reason: reason.into().chars().take(MAX_ERROR_CHARS).collect(),
            metrics,
            not_before: None,
        }
    }

    /// The same hand-back, the job to run again no earlier than `at`.
    #[must_use]
    pub fn until(self, at: Option<DateTime<Utc>>) -> Self {
        Self {
            not_before: at,
            ..self
        }
    }

    /// The wire message carrying this report as `report_seq`.
    pub fn to_pb(&self, report_seq: u64) -> pb::JobHandBack {
        pb::JobHandBack {
            report_seq,
            job_id: self.lease.job_id,
            lease_epoch: self.lease.epoch,
            reason: self.reason.clone(),
            metrics: Some(pb::JobMetrics::from(&self.metrics)),
            not_before: self.not_before.map(timestamp_to_pb),
        }
    }
}

impl TryFrom<pb::JobHandBack> for JobHandBack {
    type Error = FieldError;

    fn try_from(h: pb::JobHandBack) -> Result<Self, FieldError> {
        let lease = lease(h.job_id, h.lease_epoch)?;
        let not_before = h
            .not_before
            .map(|t| timestamp_from_pb("not_before", t))
            .transpose()?;
        Ok(Self::new(lease, h.reason, reported_metrics(h.metrics)?).until(not_before))
    }
}

/// A run the node stopped because the coordinator said its lease is gone (`JobStopped`):
/// only what it spent, recorded against the attempt that ended the lease.
#[derive(Debug, Clone, PartialEq)]
pub struct JobStopped {
    pub lease: Lease,
    pub reason: String,
    pub metrics: JobMetrics,
}

impl JobStopped {
    pub fn new(lease: Lease, reason: impl Into<String>, metrics: JobMetrics) -> Self {
        Self {
            lease,
            reason: reason.into().chars().take(MAX_ERROR_CHARS).collect(),
            metrics,
        }
    }

    /// The wire message carrying this report as `report_seq`.
    pub fn to_pb(&self, report_seq: u64) -> pb::JobStopped {
        pb::JobStopped {
            report_seq,
            job_id: self.lease.job_id,
            lease_epoch: self.lease.epoch,
            reason: self.reason.clone(),
            metrics: Some(pb::JobMetrics::from(&self.metrics)),
        }
    }
}

impl TryFrom<pb::JobStopped> for JobStopped {
    type Error = FieldError;

    fn try_from(s: pb::JobStopped) -> Result<Self, FieldError> {
        let lease = lease(s.job_id, s.lease_epoch)?;
        Ok(Self::new(lease, s.reason, reported_metrics(s.metrics)?))
    }
}

/// Free slots the node offers now (`Credit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credit {
    /// At most [`MAX_SLOTS`]; the coordinator also caps it at the slots of the node's Hello.
    pub free_slots: u32,
}

impl TryFrom<pb::Credit> for Credit {
    type Error = FieldError;

    fn try_from(c: pb::Credit) -> Result<Self, FieldError> {
        Ok(Self {
            free_slots: free_slots(c.free_slots)?,
        })
    }
}

impl From<&Credit> for pb::Credit {
    fn from(c: &Credit) -> Self {
        Self {
            free_slots: c.free_slots,
        }
    }
}

fn free_slots(n: u32) -> Result<u32, FieldError> {
    if n > MAX_SLOTS {
        return Err(FieldError::new(
            "free_slots",
            format!("must be at most {MAX_SLOTS}, got {n}"),
        ));
    }
    Ok(n)
}

/// How far one of the node's running jobs has got (`JobProgress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobProgress {
    pub lease: Lease,
    /// 1-based query round in progress (0: not started).
    pub round: u32,
    pub pages_loaded: u32,
    pub bytes: u64,
}

impl TryFrom<pb::JobProgress> for JobProgress {
    type Error = FieldError;

    fn try_from(p: pb::JobProgress) -> Result<Self, FieldError> {
        Ok(Self {
            lease: lease(p.job_id, p.lease_epoch)?,
            round: p.round,
            pages_loaded: p.pages_loaded,
            bytes: p.bytes,
        })
    }
}

impl From<&JobProgress> for pb::JobProgress {
    fn from(p: &JobProgress) -> Self {
        Self {
            job_id: p.lease.job_id,
            lease_epoch: p.lease.epoch,
            round: p.round,
            pages_loaded: p.pages_loaded,
            bytes: p.bytes,
        }
    }
}

/// The node's periodic report (`Heartbeat`): the leases it runs, to be renewed, and its
/// free slots.
#[derive(Debug, Clone, PartialEq)]
pub struct Heartbeat {
    pub running: Vec<JobProgress>,
    /// At most [`MAX_SLOTS`].
    pub free_slots: u32,
    /// Load average over one minute divided by cores, as the node measured it.
    pub load: f32,
    pub rss_bytes: u64,
}

impl Heartbeat {
    /// The leases the node says it runs, in its order.
    pub fn leases(&self) -> Vec<Lease> {
        self.running.iter().map(|p| p.lease).collect()
    }
}

impl TryFrom<pb::Heartbeat> for Heartbeat {
    type Error = FieldError;

    fn try_from(h: pb::Heartbeat) -> Result<Self, FieldError> {
        let running = h
            .running
            .into_iter()
            .enumerate()
            .map(|(i, p)| JobProgress::try_from(p).map_err(|e| e.under(format!("running[{i}]"))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            running,
            free_slots: free_slots(h.free_slots)?,
            load: h.load,
            rss_bytes: h.rss_bytes,
        })
    }
}

impl From<&Heartbeat> for pb::Heartbeat {
    fn from(h: &Heartbeat) -> Self {
        Self {
            running: h.running.iter().map(pb::JobProgress::from).collect(),
            free_slots: h.free_slots,
            load: h.load,
            rss_bytes: h.rss_bytes,
        }
    }
}

/// A node's greeting, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub node_id: String,
    pub slots: u32,
    /// Empty means every mall.
    pub malls: Vec<MallId>,
    pub version: String,
    pub running: Vec<Lease>,
    pub held_ports: Vec<u16>,
    /// The node process (`None`: an older node that does not say).
    pub instance: Option<String>,
}

impl TryFrom<pb::Hello> for Hello {
    type Error = FieldError;

    /// Does not check `protocol_version`: that decides a different status.
    fn try_from(h: pb::Hello) -> Result<Self, FieldError> {
        check_len("node_id", &h.node_id, 128)?;
        if h.instance.len() > 64
            || !h
                .instance
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        {
            return Err(FieldError::new(
                "instance",
                "at most 64 letters, digits, '.', '_' and '-'",
            ));
        }
        if !h
            .node_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        {
            return Err(FieldError::new(
                "node_id",
                "only letters, digits, '.', '_' and '-' are allowed",
            ));
        }
        if h.slots == 0 || h.slots > MAX_SLOTS {
            return Err(FieldError::new(
                "slots",
                format!("must be 1..={MAX_SLOTS}, got {}", h.slots),
            ));
        }
        let malls = h
            .malls
            .into_iter()
            .enumerate()
            .map(|(i, m)| {
                MallId::new(m).map_err(|e| FieldError::new(format!("malls[{i}]"), e.reason))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let running = h
            .running
            .iter()
            .enumerate()
            .map(|(i, j)| {
                lease(j.job_id, j.lease_epoch).map_err(|e| e.under(format!("running[{i}]")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let held_ports =
            h.held_ports
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    u16::try_from(*p).ok().filter(|p| *p > 0).ok_or_else(|| {
                        FieldError::new(format!("held_ports[{i}]"), "not a port number")
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            instance: Some(h.instance).filter(|i| !i.is_empty()),
            node_id: h.node_id,
            slots: h.slots,
            malls,
            version: h.version.chars().take(64).collect(),
            running,
            held_ports,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(price: i64, shipping: i64) -> pb::Offer {
        pb::Offer {
            mall: "testmall-alpha".into(),
            title: "삼다수 2L x 12".into(),
            price,
            shipping_fee: shipping,
            effective_price: None,
            url: "http://127.0.0.1/p/1".into(),
            seller: "s".into(),
            match_score: 0.9,
            shipping: if shipping > 0 {
                pb::ShippingStatus::Paid
            } else {
                pb::ShippingStatus::Free
            } as i32,
            list_price: 0,
            currency: "KRW".into(),
            flags: vec![
                pb::CardClass::Overseas as i32,
                0,
                pb::CardClass::Overseas as i32,
            ],
        }
    }

    #[test]
    fn hand_backs_and_stops_carry_their_spend() {
        let spent = pb::JobMetrics {
            bytes_in: 2_000,
            bytes_out: 500,
            cost_usd: 0.02,
            ..Default::default()
        };
        let h = JobHandBack::try_from(pb::JobHandBack {
            report_seq: 3,
            job_id: 7,
            lease_epoch: 2,
            reason: "draining".into(),
            metrics: Some(spent),
            not_before: None,
        })
        .unwrap();
        assert_eq!((h.metrics.bytes(), h.metrics.cost_usd), (2_500, 0.02));
        assert_eq!(JobHandBack::try_from(h.to_pb(3)).unwrap(), h);
        assert_eq!(h.not_before, None, "a drain's hand-back runs again at once");
        // A job handed back for want of a proxy port names when it may run again.
        let at = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let deferred = h.clone().until(Some(at));
        assert_eq!(JobHandBack::try_from(deferred.to_pb(3)).unwrap(), deferred);
        let bad = pb::JobHandBack {
            job_id: 7,
            lease_epoch: 2,
            not_before: Some(prost_types::Timestamp {
                seconds: 0,
                nanos: -1,
            }),
            ..Default::default()
        };
        assert_eq!(JobHandBack::try_from(bad).unwrap_err().field, "not_before");
        // An older node sends no metrics: nothing was spent.
        let old = JobHandBack::try_from(pb::JobHandBack {
            job_id: 7,
            lease_epoch: 2,
            ..Default::default()
        })
        .unwrap();
        assert!(old.metrics.is_free());
        let s = JobStopped::try_from(pb::JobStopped {
            report_seq: 4,
            job_id: 7,
            lease_epoch: 2,
            reason: "cancelled".into(),
            metrics: Some(spent),
        })
        .unwrap();
        assert_eq!(JobStopped::try_from(s.to_pb(4)).unwrap(), s);
        let negative = pb::JobStopped {
            job_id: 7,
            lease_epoch: 2,
            metrics: Some(pb::JobMetrics {
                cost_usd: -1.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            JobStopped::try_from(negative).unwrap_err().field,
            "metrics.cost_usd"
        );
        let no_lease = pb::JobStopped::default();
        assert_eq!(JobStopped::try_from(no_lease).unwrap_err().field, "job_id");
    }

    #[test]
    fn credits_and_heartbeats_are_checked() {
        let credit = Credit::try_from(pb::Credit { free_slots: 3 }).unwrap();
        assert_eq!(credit.free_slots, 3);
        assert_eq!(Credit::try_from(pb::Credit::from(&credit)).unwrap(), credit);
        let e = Credit::try_from(pb::Credit {
            free_slots: MAX_SLOTS + 1,
        })
        .unwrap_err();
        assert_eq!(e.field, "free_slots");

        let wire = pb::Heartbeat {
            running: vec![
                pb::JobProgress {
                    job_id: 5,
                    lease_epoch: 2,
                    round: 1,
                    pages_loaded: 3,
                    bytes: 40_000,
                },
                pb::JobProgress {
                    job_id: 6,
                    lease_epoch: 1,
                    ..Default::default()
                },
            ],
            free_slots: 1,
            load: 0.5,
            rss_bytes: 1 << 30,
        };
        let hb = Heartbeat::try_from(wire.clone()).unwrap();
        assert_eq!(
            hb.leases(),
            [
                Lease {
                    job_id: 5,
                    epoch: 2
                },
                Lease {
                    job_id: 6,
                    epoch: 1
                }
            ]
        );
        assert_eq!(pb::Heartbeat::from(&hb), wire);
        // An idle node's heartbeat lists nothing.
        assert!(
            Heartbeat::try_from(pb::Heartbeat::default())
                .unwrap()
                .running
                .is_empty()
        );

        let cases = [
            (
                pb::Heartbeat {
                    free_slots: MAX_SLOTS + 1,
                    ..wire.clone()
                },
                "free_slots",
            ),
            (
                pb::Heartbeat {
                    running: vec![wire.running[0], pb::JobProgress::default()],
                    ..wire.clone()
                },
                "running[1].job_id",
            ),
            (
                pb::Heartbeat {
                    running: vec![pb::JobProgress {
                        lease_epoch: 0,
                        ..wire.running[0]
                    }],
                    ..wire
                },
                "running[0].lease_epoch",
            ),
        ];
        for (msg, field) in cases {
            assert_eq!(Heartbeat::try_from(msg).unwrap_err().field, field);
        }
    }

    #[test]
    fn results_are_checked() {
        let ok = JobResult::try_from(pb::JobResult {
            job_id: 1,
            lease_epoch: 1,
            outcome: pb::Outcome::Found as i32,
            offers: vec![offer(12_000, 3_000), offer(13_000, 0)],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(ok.best_offer().unwrap().effective_price(), 13_000);
        // Unknown flags are dropped, repeats folded.
        assert_eq!(ok.offers[0].flags, [CardClass::Overseas]);
        // A cheaper offer whose shipping is unknown is never the best; older nodes' offers
        // (no status) with a fee are paid, without one unknown.
        let unknown = pb::Offer {
            shipping: pb::ShippingStatus::Unknown as i32,
            ..offer(9_000, 0)
        };
        let legacy = pb::Offer {
            shipping: 0,
            ..offer(10_000, 0)
        };
        let legacy_paid = pb::Offer {
            shipping: 0,
            ..offer(10_000, 2_000)
        };
        let mixed = JobResult::try_from(pb::JobResult {
            job_id: 1,
            lease_epoch: 1,
            outcome: pb::Outcome::Found as i32,
            offers: vec![unknown, legacy, legacy_paid, offer(13_000, 0)],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(mixed.offers[0].shipping, ShippingStatus::Unknown);
        assert_eq!(mixed.offers[1].shipping, ShippingStatus::Unknown);
        assert_eq!(mixed.offers[2].shipping, ShippingStatus::Paid);
        assert_eq!(mixed.best_offer().unwrap().effective_price(), 12_000);

        let cases = [
            (
                pb::JobResult {
                    job_id: 1,
                    lease_epoch: 1,
                    outcome: pb::Outcome::Found as i32,
                    ..Default::default()
                },
                "offers",
            ),
            (
                pb::JobResult {
                    job_id: 1,
                    lease_epoch: 0,
                    outcome: pb::Outcome::NotFound as i32,
                    ..Default::default()
                },
                "lease_epoch",
            ),
            (
                pb::JobResult {
                    job_id: 1,
                    lease_epoch: 1,
                    outcome: pb::Outcome::Found as i32,
                    offers: vec![offer(-1, 0)],
                    ..Default::default()
                },
                "offers[0].price",
            ),
            (
                pb::JobResult {
                    job_id: 1,
                    lease_epoch: 1,
                    outcome: pb::Outcome::Found as i32,
                    offers: vec![pb::Offer {
                        shipping: pb::ShippingStatus::Unknown as i32,
                        ..offer(1_000, 3_000)
                    }],
                    ..Default::default()
                },
                "offers[0].shipping_fee",
            ),
            (
                pb::JobResult {
                    job_id: 1,
                    lease_epoch: 1,
                    outcome: 0,
                    ..Default::default()
                },
                "outcome",
            ),
        ];
        for (msg, field) in cases {
            assert_eq!(JobResult::try_from(msg).unwrap_err().field, field);
        }
    }

    #[test]
    fn hello_is_checked() {
        let good = pb::Hello {
            protocol_version: 1,
            node_id: "node-1".into(),
            slots: 2,
            malls: vec!["naver".into()],
            version: "0.1.0".into(),
            running: vec![pb::HeldJob {
                job_id: 5,
                lease_epoch: 2,
            }],
            held_ports: vec![10_001],
            instance: "4242-00ab".into(),
        };
        let hello = Hello::try_from(good.clone()).unwrap();
        assert_eq!(hello.instance.as_deref(), Some("4242-00ab"));
        let bad_instance = pb::Hello {
            instance: "no spaces".into(),
            ..good.clone()
        };
        assert_eq!(Hello::try_from(bad_instance).unwrap_err().field, "instance");
        assert_eq!(
            hello.running,
            vec![Lease {
                job_id: 5,
                epoch: 2
            }]
        );
        let bad_slots = pb::Hello {
            slots: 0,
            ..good.clone()
        };
        assert_eq!(Hello::try_from(bad_slots).unwrap_err().field, "slots");
        let bad_id = pb::Hello {
            node_id: "a b".into(),
            ..good
        };
        assert_eq!(Hello::try_from(bad_id).unwrap_err().field, "node_id");
    }

    fn model_offer(price: i64, fee: i64, shipping: ShippingStatus) -> Offer {
        Offer {
            mall: MallId::new("m").unwrap(),
            title: format!("{price}+{fee}"),
            price,
            shipping_fee: fee,
            url: String::new(),
            seller: String::new(),
            match_score: 1.0,
            shipping,
            list_price: 0,
            flags: Vec::new(),
        }
    }

    #[test]
    fn the_answer_is_the_lowest_over_known_shipping_and_a_cheaper_unknown_beside_it() {
        use ShippingStatus::{Free, Paid, Unknown};
        // In any order: the rule does not depend on how the offers are sorted.
        let offers = [
            model_offer(10_000, 2_500, Paid),
            model_offer(12_900, 0, Free),
            model_offer(9_000, 0, Unknown),
        ];
        let Answer {
            lowest,
            possibly_lower: maybe,
        } = Answer::over(&offers);
        assert_eq!(lowest.map(Offer::effective_price), Some(12_500));
        assert_eq!(maybe.map(|o| o.price), Some(9_000));
        // An unknown offer priced at or above the lowest is not shown.
        let offers = [
            model_offer(10_000, 0, Free),
            model_offer(10_000, 0, Unknown),
        ];
        assert_eq!(Answer::over(&offers).possibly_lower, None);
        // Only unknown shipping: no lowest, the cheapest unknown beside the answer.
        let offers = [
            model_offer(8_000, 0, Unknown),
            model_offer(7_000, 0, Unknown),
        ];
        let Answer {
            lowest,
            possibly_lower: maybe,
        } = Answer::over(&offers);
        assert!(lowest.is_none());
        assert_eq!(maybe.map(|o| o.price), Some(7_000));
        assert_eq!(Answer::over(&[]), Answer::default());
    }

    #[test]
    fn an_unknown_shipping_offer_has_no_effective_price_on_the_wire_and_shows_last() {
        use ShippingStatus::{Free, Paid, Unknown};
        let unknown = pb::Offer::from(&model_offer(9_000, 0, Unknown));
        assert_eq!(unknown.effective_price, None);
        let paid = pb::Offer::from(&model_offer(10_000, 2_500, Paid));
        assert_eq!(paid.effective_price, Some(12_500));
        let mut offers = [
            model_offer(9_000, 0, Unknown),
            model_offer(12_900, 0, Free),
            model_offer(10_000, 2_500, Paid),
            model_offer(8_000, 0, Unknown),
        ];
        offers.sort_by_key(Offer::shown_order);
        let shown: Vec<(i64, bool)> = offers
            .iter()
            .map(|o| (o.price, o.effective_price_known()))
            .collect();
        assert_eq!(
            shown,
            [
                (10_000, true),
                (12_900, true),
                (8_000, false),
                (9_000, false)
            ]
        );
    }
}
