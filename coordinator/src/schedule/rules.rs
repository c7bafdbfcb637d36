//! Price-move rules: whether a product's lowest effective price in a run fired any of the
//! schedule's rules, against the schedule's previous observation of that product. Pure;
//! the evaluation transaction (`Schedules::evaluate`) stores what it says.
//!
//! - `below`: fires when the price is below the target and the previous observation was
//!   not (or there was none) — once when it crosses, not on every run while it stays
//!   below; a price that went back up and falls again fires again.
//! - `move_percent`: fires when `|now - previous| × 100 ≥ percent × previous` (up or down);
//!   never on a first observation.

use chrono::{DateTime, Utc};
use lps_proto::model::PriceMoveRule;

/// One stored observation of a product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    pub price: i64,
    pub at: DateTime<Utc>,
}

/// Why a move fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    BelowTarget,
    Moved,
}

impl Reason {
    /// Every reason, for the metric's labels.
    pub const ALL: [Self; 2] = [Self::BelowTarget, Self::Moved];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::BelowTarget => "below_target",
            Self::Moved => "moved",
        }
    }
}

/// What fired for one product.
#[derive(Debug, Clone, PartialEq)]
pub struct Fired {
    /// Each reason once, in [`Reason::ALL`] order.
    pub reasons: Vec<Reason>,
    /// The lowest `below` target crossed.
    pub target: Option<i64>,
    /// `(now - previous) / previous × 100`, when there is a previous observation.
    pub change_percent: Option<f64>,
}

/// The rules of `rules` that watch product `index` and fire for `price` after `previous`;
/// `None` when none fires.
pub fn evaluate(
    rules: &[PriceMoveRule],
    index: usize,
    price: i64,
    previous: Option<Observed>,
) -> Option<Fired> {
    let change_percent = previous
        .filter(|p| p.price > 0)
        .map(|p| (price - p.price) as f64 * 100.0 / p.price as f64);
    let mut target: Option<i64> = None;
    let mut moved = false;
    for rule in rules.iter().filter(|r| r.watches(index)) {
        if let Some(below) = rule.below {
            let crossed = price < below && previous.is_none_or(|p| p.price >= below);
            if crossed {
                target = Some(target.map_or(below, |t| t.min(below)));
            }
        }
        if let (Some(pct), Some(p)) = (rule.move_percent, previous) {
            let diff = (price - p.price).unsigned_abs() as f64;
            if p.price > 0 && diff * 100.0 >= pct * p.price as f64 {
                moved = true;
            }
        }
    }
    let mut reasons = Vec::new();
    if target.is_some() {
        reasons.push(Reason::BelowTarget);
    }
    if moved {
        reasons.push(Reason::Moved);
    }
    (!reasons.is_empty()).then_some(Fired {
        reasons,
        target,
        change_percent,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_the_metric_labels() {
        let names: Vec<&str> = Reason::ALL.into_iter().map(Reason::as_str).collect();
        assert_eq!(names, crate::metrics::PRICE_MOVE_REASONS);
    }

    fn below(t: i64) -> PriceMoveRule {
        PriceMoveRule {
            product_index: None,
            below: Some(t),
            move_percent: None,
        }
    }

    fn moved(pct: f64) -> PriceMoveRule {
        PriceMoveRule {
            product_index: None,
            below: None,
            move_percent: Some(pct),
        }
    }

    fn seen(price: i64) -> Option<Observed> {
        Some(Observed {
            price,
            at: Utc::now(),
        })
    }

    #[test]
    fn a_target_fires_when_crossed_not_while_below() {
        let rules = [below(10_000)];
        assert_eq!(evaluate(&rules, 0, 12_000, None), None);
        let fired = evaluate(&rules, 0, 9_000, seen(12_000)).unwrap();
        assert_eq!(fired.reasons, vec![Reason::BelowTarget]);
        assert_eq!(fired.target, Some(10_000));
        assert_eq!(fired.change_percent, Some(-25.0));
        assert_eq!(evaluate(&rules, 0, 8_000, seen(9_000)), None);
        // Up again and down again: a new crossing.
        assert_eq!(evaluate(&rules, 0, 10_000, seen(9_000)), None);
        assert!(evaluate(&rules, 0, 9_999, seen(10_000)).is_some());
        // The first observation below a target is a crossing.
        assert!(evaluate(&rules, 0, 9_000, None).is_some());
    }

    #[test]
    fn a_move_fires_both_ways_at_the_percent() {
        let rules = [moved(10.0)];
        assert_eq!(evaluate(&rules, 0, 9_000, None), None);
        assert_eq!(evaluate(&rules, 0, 10_999, seen(10_000)), None);
        assert_eq!(
            evaluate(&rules, 0, 11_000, seen(10_000)).unwrap().reasons,
            vec![Reason::Moved]
        );
        assert!(evaluate(&rules, 0, 9_000, seen(10_000)).is_some());
        assert_eq!(evaluate(&rules, 0, 9_001, seen(10_000)), None);
    }

    #[test]
    fn rules_watch_their_product_and_combine() {
        let rules = [
            PriceMoveRule {
                product_index: Some(1),
                ..below(10_000)
            },
            below(5_000),
            moved(5.0),
        ];
        assert_eq!(evaluate(&rules, 0, 9_000, seen(9_200)), None);
        let fired = evaluate(&rules, 1, 4_000, seen(12_000)).unwrap();
        assert_eq!(fired.reasons, vec![Reason::BelowTarget, Reason::Moved]);
        assert_eq!(fired.target, Some(5_000));
    }
}
