//! A schedule as CreateSchedule asks for it, validated once on receive: products and malls
//! by the rules of a search request, exactly one of an interval and a cron pattern, a
//! priority (batch by default), destinations by name and the price-move rules. What needs
//! the coordinator — whether a mall is enabled or a destination configured, the minimum
//! interval, whether a cron pattern parses — is the coordinator's check.

use std::time::Duration;

use super::{
    DestinationName, FieldError, MAX_IDEMPOTENCY_KEY_CHARS, MallId, Priority, ProductSpec,
    SearchRequest, check_len, delivery, duration_from_pb,
};
use crate::pb;

/// Most rules one schedule may have.
pub const MAX_RULES_PER_SCHEDULE: usize = 200;
/// The largest `move_percent` accepted.
pub const MAX_MOVE_PERCENT: f64 = 1000.0;
/// Longest cron pattern accepted.
pub const MAX_CRON_CHARS: usize = 200;

/// When a schedule runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Timing {
    /// One interval after the previous due time.
    Interval(Duration),
    /// A cron pattern in UTC (checked by the coordinator).
    Cron(String),
}

/// One price-move rule: at least one of `below` and `move_percent`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PriceMoveRule {
    /// The product it watches; `None`: every product.
    pub product_index: Option<u32>,
    /// Fires when the lowest effective price crosses below this.
    pub below: Option<i64>,
    /// Fires when the lowest effective price moves by at least this percent.
    pub move_percent: Option<f64>,
}

impl PriceMoveRule {
    /// Whether the rule watches product `index`.
    pub fn watches(&self, index: usize) -> bool {
        self.product_index
            .is_none_or(|i| usize::try_from(i).is_ok_and(|i| i == index))
    }
}

impl From<&PriceMoveRule> for pb::PriceMoveRule {
    fn from(r: &PriceMoveRule) -> Self {
        Self {
            product_index: r.product_index,
            below: r.below,
            move_percent: r.move_percent,
        }
    }
}

/// A validated CreateSchedule request.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleSpec {
    pub products: Vec<ProductSpec>,
    /// Empty: every mall enabled when a run starts.
    pub malls: Vec<MallId>,
    pub timing: Timing,
    pub priority: Priority,
    pub destinations: Vec<DestinationName>,
    pub rules: Vec<PriceMoveRule>,
    pub idempotency_key: Option<String>,
}

fn rule(i: usize, r: pb::PriceMoveRule, products: usize) -> Result<PriceMoveRule, FieldError> {
    let field = |name: &str| format!("rules[{i}].{name}");
    if let Some(index) = r.product_index
        && usize::try_from(index).map_or(true, |index| index >= products)
    {
        return Err(FieldError::new(
            field("product_index"),
            format!("no product {index} (the schedule has {products})"),
        ));
    }
    if let Some(below) = r.below
        && below <= 0
    {
        return Err(FieldError::new(
            field("below"),
            format!("must be a positive price, got {below}"),
        ));
    }
    if let Some(pct) = r.move_percent
        && !(pct.is_finite() && pct > 0.0 && pct <= MAX_MOVE_PERCENT)
    {
        return Err(FieldError::new(
            field("move_percent"),
            format!("must be above 0 and at most {MAX_MOVE_PERCENT}, got {pct}"),
        ));
    }
    if r.below.is_none() && r.move_percent.is_none() {
        return Err(FieldError::new(
            format!("rules[{i}]"),
            "needs `below` or `move_percent`",
        ));
    }
    Ok(PriceMoveRule {
        product_index: r.product_index,
        below: r.below,
        move_percent: r.move_percent,
    })
}

impl TryFrom<pb::CreateScheduleRequest> for ScheduleSpec {
    type Error = FieldError;

    fn try_from(req: pb::CreateScheduleRequest) -> Result<Self, FieldError> {
        // NB: products, malls and the key follow a search request's rules: each run is one.
        let priority_class = match pb::PriorityClass::try_from(req.priority_class) {
            Ok(pb::PriorityClass::Unspecified) => pb::PriorityClass::Batch,
            Ok(class) => class,
            Err(_) => {
                return Err(FieldError::new(
                    "priority_class",
                    format!("unknown priority class {}", req.priority_class),
                ));
            }
        };
        let search = SearchRequest::try_from(pb::SearchRequest {
            products: req.products,
            malls: req.malls,
            priority_class: priority_class as i32,
            ..Default::default()
        })?;
        let timing = match (req.interval, req.cron.trim()) {
            (Some(_), cron) if !cron.is_empty() => {
                return Err(FieldError::new(
                    "cron",
                    "give `interval` or `cron`, not both",
                ));
            }
            (Some(interval), _) => {
                let interval = duration_from_pb("interval", interval)?;
                if interval.is_zero() {
                    return Err(FieldError::new("interval", "must be positive"));
                }
                Timing::Interval(interval)
            }
            (None, "") => {
                return Err(FieldError::new(
                    "interval",
                    "give `interval` or `cron` (how often the schedule runs)",
                ));
            }
            (None, cron) => {
                check_len("cron", cron, MAX_CRON_CHARS)?;
                Timing::Cron(cron.to_owned())
            }
        };
        let destinations = delivery::destinations(req.destinations, false)?;
        if req.rules.len() > MAX_RULES_PER_SCHEDULE {
            return Err(FieldError::new(
                "rules",
                format!(
                    "at most {MAX_RULES_PER_SCHEDULE} rules per schedule, got {}",
                    req.rules.len()
                ),
            ));
        }
        let products = search.products.len();
        let rules = req
            .rules
            .into_iter()
            .enumerate()
            .map(|(i, r)| rule(i, r, products))
            .collect::<Result<Vec<_>, _>>()?;
        if !rules.is_empty() && destinations.is_empty() {
            return Err(FieldError::new(
                "destinations",
                "rules need a destination to tell",
            ));
        }
        let idempotency_key = Some(req.idempotency_key).filter(|k| !k.is_empty());
        if let Some(key) = &idempotency_key {
            check_len("idempotency_key", key, MAX_IDEMPOTENCY_KEY_CHARS)?;
        }
        Ok(Self {
            products: search.products,
            malls: search.malls,
            timing,
            priority: search.priority,
            destinations,
            rules,
            idempotency_key,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> pb::CreateScheduleRequest {
        pb::CreateScheduleRequest {
            products: vec![pb::Product {
                code: String::new(),
                name: "제주 삼다수 2L x 12".into(),
                ..Default::default()
            }],
            interval: Some(prost_types::Duration {
                seconds: 60,
                nanos: 0,
            }),
            destinations: vec!["pricing".into()],
            rules: vec![pb::PriceMoveRule {
                below: Some(9900),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn field(r: pb::CreateScheduleRequest) -> String {
        ScheduleSpec::try_from(r).unwrap_err().field
    }

    #[test]
    fn a_schedule_is_batch_by_default() {
        let s = ScheduleSpec::try_from(req()).unwrap();
        assert_eq!(s.priority, Priority::BATCH);
        assert_eq!(s.timing, Timing::Interval(Duration::from_secs(60)));
        assert!(s.rules[0].watches(0));
    }

    #[test]
    fn bad_input_names_its_field() {
        let mut r = req();
        r.products.clear();
        assert_eq!(field(r), "products");
        let mut r = req();
        r.cron = "0 * * * *".into();
        assert_eq!(field(r), "cron");
        let mut r = req();
        r.interval = None;
        assert_eq!(field(r), "interval");
        let mut r = req();
        r.rules[0].below = Some(-5);
        assert_eq!(field(r), "rules[0].below");
        let mut r = req();
        r.rules[0].move_percent = Some(f64::NAN);
        assert_eq!(field(r), "rules[0].move_percent");
        let mut r = req();
        r.rules[0].product_index = Some(1);
        assert_eq!(field(r), "rules[0].product_index");
        let mut r = req();
        r.rules[0] = pb::PriceMoveRule::default();
        assert_eq!(field(r), "rules[0]");
        let mut r = req();
        r.destinations = vec!["no/such".into()];
        assert_eq!(field(r), "destinations[0]");
        let mut r = req();
        r.destinations.clear();
        assert_eq!(field(r), "destinations");
    }
}
