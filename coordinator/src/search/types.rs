//! Values the read side hands out: a search's status, a job, price history, a search's
//! summary, a cancel's report. Plain Rust types; the gRPC adapters translate them.

use chrono::{DateTime, Utc};
use lps_proto::{
    model::{
        Answer, CardClass, ErrorClass, JobState, MallId, Offer, Outcome, ProductHints, RoundReport,
        ShippingStatus, timestamp_to_pb,
    },
    pb,
};
use serde::Deserialize;

use crate::queue::{Cancelled, Disposition};
pub use crate::{
    node_session::NodeInfo,
    queue::{MAX_RETRY_IDS, RetryDeadFilter},
};

/// Where a search stands: per product, per mall.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchStatus {
    pub search_id: i64,
    /// The newest change number over the search's jobs; only grows.
    pub version: i64,
    pub created_at: DateTime<Utc>,
    /// Set once CancelSearch was called for this search.
    pub cancelled_at: Option<DateTime<Utc>>,
    /// The client (token name) the search belongs to; '' for searches from before names.
    pub client: String,
    /// The calling service's own label (`x-lps-caller`, else its address).
    pub caller: Option<String>,
    /// In request order.
    pub products: Vec<ProductStatus>,
}

impl SearchStatus {
    /// Every item is done, dead or cancelled.
    pub fn is_final(&self) -> bool {
        self.products.iter().all(ProductStatus::is_final)
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled_at.is_some()
    }
}

/// One product of a search.
#[derive(Debug, Clone, PartialEq)]
pub struct ProductStatus {
    /// Index into the request's products.
    pub index: usize,
    /// The product as this search's client asked for it (`search_product`): a job is
    /// shared by every search of the same query, whatever its code (DESIGN §2 "Identity").
    pub code: Option<String>,
    pub name: String,
    pub hints: ProductHints,
    /// In request order of the malls.
    pub malls: Vec<MallStatus>,
}

impl ProductStatus {
    /// The product's answer: the cheapest offer over its malls by effective price, taken
    /// only over offers whose shipping is known (ties: lower shipping, then the earlier
    /// mall). `None` when no mall has such an offer.
    pub fn lowest(&self) -> Option<&Offer> {
        self.answer().lowest
    }

    /// "Possibly lower, shipping unknown": the cheapest offer whose shipping could not be
    /// read, when its price alone is below [`lowest`](Self::lowest)'s effective price (or
    /// there is no lowest). Shown beside the answer, never as it.
    pub fn possibly_lower(&self) -> Option<&Offer> {
        self.answer().possibly_lower
    }

    /// Both, over every offer shown for the product, mall by mall.
    pub fn answer(&self) -> Answer<'_> {
        Answer::over(self.malls.iter().flat_map(|m| &m.offers))
    }

    /// Every mall of the product is in a final state.
    pub fn is_final(&self) -> bool {
        self.malls.iter().all(|m| m.state.is_final())
    }
}

/// One (product, mall) item of a search and the job that answers it.
#[derive(Debug, Clone, PartialEq)]
pub struct MallStatus {
    pub mall: MallId,
    pub job_id: i64,
    pub disposition: Disposition,
    pub state: JobState,
    /// Set when `state` is done.
    pub outcome: Option<Outcome>,
    /// In [`Offer::shown_order`]: known shipping first, cheapest first; at most
    /// [`super::STATUS_OFFERS_PER_ITEM`], plus the cheapest offer whose shipping is
    /// unknown when it is not among them.
    pub offers: Vec<Offer>,
    /// Set when `state` is dead.
    pub error_class: Option<ErrorClass>,
    pub error: Option<String>,
    pub attempts: u32,
}

impl MallStatus {
    /// This mall's answer alone, by the rules of [`ProductStatus::answer`].
    pub fn answer(&self) -> Answer<'_> {
        Answer::over(&self.offers)
    }
}

/// One job, for GetJob.
#[derive(Debug, Clone, PartialEq)]
pub struct JobInfo {
    pub job_id: i64,
    pub product_code: Option<String>,
    pub product_name: String,
    pub hints: ProductHints,
    pub mall: MallId,
    pub state: JobState,
    pub priority: u8,
    pub attempts: u32,
    pub max_attempts: u32,
    pub reclaims: u32,
    pub lease_epoch: i64,
    pub node_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub run_after: DateTime<Utc>,
    pub run_started_at: Option<DateTime<Utc>>,
    pub deadline_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub outcome: Option<Outcome>,
    /// In [`Offer::shown_order`].
    pub offers: Vec<Offer>,
    pub error_class: Option<ErrorClass>,
    pub last_error: Option<String>,
    pub rounds: Vec<RoundReport>,
    pub bytes: u64,
    pub cost_usd: f64,
    /// Every run (lease) so far, oldest first.
    pub runs: Vec<AttemptInfo>,
    /// The W3C `traceparent` of the search that made the job.
    pub traceparent: Option<String>,
}

impl JobInfo {
    /// The trace id of [`JobInfo::traceparent`] (`version-traceid-parent-flags`).
    pub fn trace_id(&self) -> Option<&str> {
        self.traceparent.as_deref()?.split('-').nth(1)
    }

    /// When a queued job that failed before runs again.
    pub fn next_retry_at(&self) -> Option<DateTime<Utc>> {
        (self.state == JobState::Queued && self.attempts > 0).then_some(self.run_after)
    }
}

/// One run of a job (a `job_attempt` row, read back through JSON, see `job.sql`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AttemptInfo {
    pub lease_epoch: i64,
    pub node_id: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub ended_at: DateTime<Utc>,
    /// `attempt_end`: done, failed, lease_expired, deadline, reclaimed, handed_back,
    /// cancelled.
    pub ended: String,
    /// `error_class` by name.
    pub error_class: Option<String>,
    pub error: Option<String>,
    pub bytes: i64,
    pub cost_usd: f64,
    pub evidence: Option<lps_proto::model::PageEvidence>,
}

/// An offer as stored in `offer`, read back through JSON (see `status.sql`).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct OfferRow {
    pub title: String,
    pub price: i64,
    pub shipping_fee: i64,
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub seller: String,
    #[serde(default)]
    pub match_score: f32,
    /// `offer.shipping_status` (a [`ShippingStatus::as_str`] name).
    #[serde(default)]
    pub shipping: String,
    #[serde(default)]
    pub list_price: i64,
    /// `offer.flags` ([`CardClass::as_str`] names).
    #[serde(default)]
    pub flags: Vec<String>,
}

impl OfferRow {
    pub(crate) fn into_offer(self, mall: &MallId) -> Offer {
        let shipping = ShippingStatus::from_name(&self.shipping);
        Offer {
            mall: mall.clone(),
            title: self.title,
            price: self.price,
            // NB: 0 when shipping is unknown (check offer_unknown_shipping_has_no_fee).
            shipping_fee: self.shipping_fee,
            url: self.url,
            seller: self.seller,
            match_score: self.match_score,
            shipping,
            list_price: self.list_price,
            flags: self
                .flags
                .iter()
                .filter_map(|f| CardClass::from_name(f))
                .collect(),
        }
    }
}

/// One observation of a product's price by a search: written with the product's last
/// result (see migrations/0013), never for an answer made of stored results alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriceHistoryEntry {
    /// Orders the entries (with `observed_at`) for paging.
    pub id: i64,
    /// The search that observed it (`None` once that search was deleted).
    pub search_id: Option<i64>,
    /// When the newest of the malls crawled for the search answered.
    pub observed_at: DateTime<Utc>,
    pub lowest_effective_price: i64,
    pub lowest_mall: String,
    /// The lowest offer with known shipping per mall that found the product.
    pub malls: Vec<MallPrice>,
    /// Every mall that answered (found or not found), sorted.
    pub covered_malls: Vec<String>,
    /// Every mall of the product answered; false when one died or the search was
    /// cancelled first.
    pub complete: bool,
    /// The client whose search observed it ('' for entries from before clients owned
    /// their history, which every client sees).
    pub client: String,
    /// The schedule whose run the search was.
    pub schedule_id: Option<i64>,
    /// The code and name the search asked for (`None` for old entries whose search was
    /// gone when names were first kept).
    pub product_code: Option<String>,
    pub product_name: Option<String>,
}

/// Where a price-history page starts: after this entry (newest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryCursor {
    pub observed_at: DateTime<Utc>,
    pub id: i64,
}

/// What a price-history call asks for.
#[derive(Debug, Clone)]
pub struct HistoryQuery {
    /// Oldest observation returned.
    pub since: Option<DateTime<Utc>>,
    /// 1..=[`super::MAX_HISTORY_LIMIT`] entries.
    pub limit: u32,
    pub include_incomplete: bool,
    pub after: Option<HistoryCursor>,
    /// Whose entries: a client's own (and those of no client), or `None`: every client's.
    pub client: Option<String>,
    /// Only the entry of this search.
    pub search_id: Option<i64>,
}

/// One page of a list, and whether more follow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub more: bool,
}

impl<T> Page<T> {
    /// The first `limit` of `rows` (read with one row more than a page), mapped.
    pub fn of<R>(rows: Vec<R>, limit: u32, map: impl FnMut(R) -> T) -> Self {
        let more = rows.len() > limit as usize;
        Self {
            items: rows.into_iter().take(limit as usize).map(map).collect(),
            more,
        }
    }
}

/// A search in a listing: who made it and how far it got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchSummary {
    pub search_id: i64,
    pub client: String,
    pub caller: Option<String>,
    pub created_at: DateTime<Utc>,
    pub cancelled_at: Option<DateTime<Utc>>,
    pub products: u32,
    pub items: u32,
    pub final_items: u32,
    pub version: i64,
}

impl SearchSummary {
    pub fn is_final(&self) -> bool {
        self.final_items == self.items
    }
}

/// An element of `price_history.malls`. Every field defaults, so an entry written by an
/// older or newer coordinator still reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct MallPrice {
    pub mall: String,
    pub price: i64,
    pub shipping_fee: i64,
    pub effective_price: i64,
    pub url: String,
    pub title: String,
    /// `ShippingStatus::as_str` of the offer ('' in entries from before it was kept).
    pub shipping: String,
    /// When the mall's job finished (absent in entries from before migration 0013).
    pub observed_at: Option<DateTime<Utc>>,
    /// The mall's answer was a stored result, not crawled for this search.
    pub cached: bool,
}

/// What CancelSearch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CancelReport {
    /// Queued jobs cancelled in place.
    pub cancelled_queued: u32,
    /// Running jobs cancelled; their nodes are told to stop.
    pub cancelling_running: u32,
    /// Active jobs left alone because another active search shares them.
    pub kept_shared: u32,
    /// Every job this call cancelled.
    pub cancelled: Vec<Cancelled>,
}

// The wire forms of the read side's types, beside the types.

impl From<Disposition> for pb::Disposition {
    fn from(d: Disposition) -> Self {
        match d {
            Disposition::Queued => Self::Queued,
            Disposition::Joined => Self::Joined,
            Disposition::CachedResult => Self::CachedResult,
            Disposition::CachedNotFound => Self::CachedNotFound,
        }
    }
}

/// A search's status on the wire.
impl From<&SearchStatus> for pb::SearchStatus {
    fn from(s: &SearchStatus) -> Self {
        Self {
            search_id: s.search_id,
            version: s.version,
            created_at: Some(timestamp_to_pb(s.created_at)),
            products: s.products.iter().map(pb::ProductStatus::from).collect(),
            r#final: s.is_final(),
            cancelled: s.is_cancelled(),
            client: s.client.clone(),
            caller: s.caller.clone().unwrap_or_default(),
            deliveries: Vec::new(),
        }
    }
}

impl From<&ProductStatus> for pb::ProductStatus {
    fn from(p: &ProductStatus) -> Self {
        Self {
            product: Some(
                p.hints
                    .to_pb(p.code.as_deref().unwrap_or_default(), &p.name),
            ),
            malls: p.malls.iter().map(pb::MallStatus::from).collect(),
            lowest: p.lowest().map(pb::Offer::from),
            r#final: p.is_final(),
            possibly_lower: p.possibly_lower().map(pb::Offer::from),
        }
    }
}

impl From<&MallStatus> for pb::MallStatus {
    fn from(m: &MallStatus) -> Self {
        Self {
            mall: m.mall.to_string(),
            job_id: m.job_id,
            disposition: pb::Disposition::from(m.disposition) as i32,
            state: pb::JobState::from(m.state) as i32,
            outcome: m.outcome.map_or(0, |o| pb::Outcome::from(o) as i32),
            offers: m.offers.iter().map(pb::Offer::from).collect(),
            error_class: m.error_class.map_or(0, |c| pb::ErrorClass::from(c) as i32),
            error: m.error.clone().unwrap_or_default(),
            attempts: m.attempts,
            lowest: m.answer().lowest.map(pb::Offer::from),
            possibly_lower: m.answer().possibly_lower.map(pb::Offer::from),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(mall: &str, price: i64, fee: i64, shipping: ShippingStatus) -> Offer {
        Offer {
            mall: MallId::new(mall).unwrap(),
            title: format!("{mall} {price}"),
            price,
            shipping_fee: fee,
            url: String::new(),
            seller: String::new(),
            match_score: 0.9,
            shipping,
            list_price: 0,
            flags: Vec::new(),
        }
    }

    fn product(malls: Vec<Vec<Offer>>) -> ProductStatus {
        ProductStatus {
            index: 0,
            code: None,
            name: "p".into(),
            hints: ProductHints::default(),
            malls: malls
                .into_iter()
                .enumerate()
                .map(|(i, offers)| MallStatus {
                    mall: offers
                        .first()
                        .map_or_else(|| MallId::new(format!("m{i}")).unwrap(), |o| o.mall.clone()),
                    job_id: i64::try_from(i).unwrap() + 1,
                    disposition: Disposition::Queued,
                    state: JobState::Done,
                    outcome: Some(Outcome::Found),
                    offers,
                    error_class: None,
                    error: None,
                    attempts: 0,
                })
                .collect(),
        }
    }

    use ShippingStatus::{Free, FreeByThreshold, Paid, Unknown};

    #[test]
    fn lowest_is_over_known_shipping_and_a_cheaper_unknown_is_beside_it() {
        // Each mall's offers come cheapest first, an unknown one at its price alone.
        let p = product(vec![
            vec![offer("a", 9_000, 0, Unknown), offer("a", 12_000, 0, Free)],
            vec![
                offer("b", 10_000, 2_500, Paid),
                offer("b", 12_600, 0, FreeByThreshold),
            ],
        ]);
        let lowest = p.lowest().unwrap();
        assert_eq!(
            (lowest.mall.as_str(), lowest.effective_price()),
            ("a", 12_000)
        );
        let maybe = p.possibly_lower().unwrap();
        assert_eq!((maybe.mall.as_str(), maybe.price), ("a", 9_000));

        // Not lower: an unknown offer at the lowest's effective price or above is not shown.
        let p = product(vec![
            vec![offer("a", 12_000, 0, Unknown)],
            vec![offer("b", 12_000, 0, Free)],
        ]);
        assert_eq!(p.lowest().unwrap().mall.as_str(), "b");
        assert!(p.possibly_lower().is_none());

        // Only unknown shipping: no answer, the cheapest is "possibly lower".
        let p = product(vec![
            vec![offer("a", 8_000, 0, Unknown)],
            vec![offer("b", 7_000, 0, Unknown)],
        ]);
        assert!(p.lowest().is_none());
        assert_eq!(p.possibly_lower().unwrap().mall.as_str(), "b");

        // Ties: lower shipping, then the earlier mall.
        let p = product(vec![
            vec![offer("a", 9_000, 1_000, Paid)],
            vec![offer("b", 10_000, 0, Free)],
            vec![offer("c", 10_000, 0, FreeByThreshold)],
        ]);
        assert_eq!(p.lowest().unwrap().mall.as_str(), "b");
        assert!(product(vec![vec![]]).lowest().is_none());
        assert!(product(vec![vec![]]).possibly_lower().is_none());
    }
}
