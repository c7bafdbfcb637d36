//! The price-outlier guard: a card far cheaper than the rest of a page's accepted cards is
//! not taken as the product (DESIGN §5 "Matching", "Price outliers").
//!
//! The answer of a search is the lowest price over the accepted cards, so one false accept
//! priced below the product decides it; and the look-alikes the word rules miss (an
//! accessory, a refill, one unit of a pack, a smaller size, a lesser model) are mostly
//! cheaper than the product. Without reading a word, the guard drops an accepted card whose
//! item price is under [`PriceGuard::percent`] of the median of the page's accepted item
//! prices, once at least [`PriceGuard::min_cards`] cards are accepted.
//!
//! A cheap card that matches the query better than every card priced at or above the
//! median ([`Verdict::score`](super::Verdict::score): it holds more of the query's words)
//! is kept: then the dearer cards are the likelier look-alikes (a search for a cooker's
//! gasket accepts the cookers that carry its model code but not the word `고무패킹`), and
//! the price says nothing about which is the product.
//!
//! Invariants: it never drops a card priced at or above the median, so never every card;
//! the median is the lower middle of an even count, so fewer than half the accepted cards
//! are ever dropped (a cluster of half the page or more is kept whole); with fewer than
//! `min_cards` accepted cards it drops nothing. Pure: prices in, reasons out.

use super::Reason;

/// When an accepted card's price is too far below its page's to be the product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriceGuard {
    /// Least accepted cards on a page before the guard reads their prices: with two, the
    /// median is the cheaper one and says nothing about which is the product.
    pub min_cards: usize,
    /// A card priced under this share (percent) of the median is dropped.
    pub percent: u64,
}

impl PriceGuard {
    /// The guard the node judges with: three accepted cards, half the median. Half is far
    /// outside the spread of one product's offers across sellers on a result page (coupons
    /// and sales rarely take 30 %), and close to what the look-alikes cost: one unit of a
    /// pair or pack, a refill of a kit, an accessory of a device.
    pub const DEFAULT: Self = Self {
        min_cards: 3,
        percent: 50,
    };
}

impl Default for PriceGuard {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// One accepted card as the guard reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PricedCard {
    /// The card's item price (what the answer's minimum is taken over).
    pub price: u64,
    /// The judge's [`Verdict::score`](super::Verdict::score) of the card.
    pub score: f32,
}

/// For each accepted card of one page (in order), `Some(Reason::PriceOutlier)` when the
/// guard drops it, `None` when it stays (rules in the module docs).
#[must_use]
pub fn price_outliers(cards: &[PricedCard], guard: PriceGuard) -> Vec<Option<Reason>> {
    let count = cards.len();
    if count < guard.min_cards.max(1) {
        return vec![None; count];
    }
    let mut sorted: Vec<u64> = cards.iter().map(|c| c.price).collect();
    sorted.sort_unstable();
    let median = sorted[(count - 1) / 2];
    // The best match among the cards priced at or above the median: a cheap card that
    // holds more of the query than any of them is kept (see the module docs).
    let best_above = cards
        .iter()
        .filter(|c| c.price >= median)
        .map(|c| c.score)
        .fold(f32::NEG_INFINITY, f32::max);
    cards
        .iter()
        .map(|card| {
            // price < median × percent / 100, without rounding or overflow.
            let below =
                u128::from(card.price) * 100 < u128::from(median) * u128::from(guard.percent);
            (below && card.score <= best_above).then_some(Reason::PriceOutlier {
                price: card.price,
                median,
                cards: count,
                percent: guard.percent,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{PriceGuard, PricedCard, Reason, price_outliers};

    /// Cards of these prices, all matching the query equally well.
    fn page(prices: &[u64]) -> Vec<PricedCard> {
        prices
            .iter()
            .map(|&price| PricedCard { price, score: 1.0 })
            .collect()
    }

    /// The indices the default guard drops.
    fn dropped(prices: &[u64]) -> Vec<usize> {
        price_outliers(&page(prices), PriceGuard::DEFAULT)
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.as_ref().map(|_| i))
            .collect()
    }

    #[test]
    fn a_card_under_half_the_median_is_dropped_with_its_numbers() {
        // A single refill among a kit's offers.
        let prices = [19_800, 4_900, 21_000, 19_500, 22_900];
        let reasons = price_outliers(&page(&prices), PriceGuard::DEFAULT);
        assert_eq!(
            reasons[1],
            Some(Reason::PriceOutlier {
                price: 4_900,
                median: 19_800,
                cards: 5,
                percent: 50,
            })
        );
        assert_eq!(dropped(&prices), vec![1]);
        let shown = reasons[1].as_ref().unwrap().to_string();
        assert!(shown.contains("4900") && shown.contains("19800") && shown.contains('5'));
        assert_eq!(reasons[1].as_ref().unwrap().as_str(), "price_outlier");
    }

    #[test]
    fn a_legit_spread_is_kept() {
        // Sales, coupons and sellers: 55 % to 160 % of the median, all the product.
        assert!(dropped(&[11_000, 20_000, 18_500, 32_000, 24_900, 19_900]).is_empty());
        // Exactly half the median is kept: the guard drops only what is under it.
        assert!(dropped(&[10_000, 20_000, 20_000]).is_empty());
        assert_eq!(dropped(&[9_999, 20_000, 20_000]), vec![0]);
    }

    #[test]
    fn fewer_than_min_cards_drops_nothing() {
        assert!(dropped(&[]).is_empty());
        assert!(dropped(&[1_000]).is_empty());
        assert!(dropped(&[1_000, 50_000]).is_empty());
        assert_eq!(dropped(&[1_000, 50_000, 50_000]), vec![0]);
        let strict = PriceGuard {
            min_cards: 4,
            ..PriceGuard::DEFAULT
        };
        assert!(
            price_outliers(&page(&[1_000, 50_000, 50_000]), strict)
                .iter()
                .all(Option::is_none)
        );
    }

    #[test]
    fn all_equal_prices_and_free_cards() {
        assert!(dropped(&[15_000; 7]).is_empty());
        // All zero (a mall that shows no price): nothing is under half of nothing.
        assert!(dropped(&[0, 0, 0]).is_empty());
        // One card at 0 among priced ones is no offer of the product.
        assert_eq!(dropped(&[0, 8_000, 8_200]), vec![0]);
    }

    #[test]
    fn two_clusters() {
        // Two clusters of equal size: the lower middle is the median, both are kept (the
        // page does not say which is the product).
        assert!(dropped(&[5_000, 5_200, 20_000, 21_000]).is_empty());
        // The cheap cluster is the larger one: it is the page's product, nothing dropped.
        assert!(dropped(&[5_000, 5_100, 5_200, 20_000, 21_000]).is_empty());
        // The cheap cluster is the smaller one: both its cards go, the rest stay.
        assert_eq!(dropped(&[5_000, 20_000, 5_200, 21_000, 22_000]), vec![0, 2]);
    }

    #[test]
    fn a_cheap_card_matching_better_than_the_dear_ones_is_kept() {
        // A gasket's search: the cookers carry its model code but not `고무패킹`.
        let mut cards = page(&[9_900, 259_000, 249_000, 268_000]);
        for card in &mut cards[1..] {
            card.score = 0.75;
        }
        assert!(
            price_outliers(&cards, PriceGuard::DEFAULT)
                .iter()
                .all(Option::is_none)
        );
        // As good a match as one card at or above the median is enough to drop it.
        cards[3].score = 1.0;
        assert!(price_outliers(&cards, PriceGuard::DEFAULT)[0].is_some());
        // A worse match than the dear cards is dropped.
        let mut cards = page(&[9_900, 259_000, 249_000]);
        cards[0].score = 0.6;
        assert!(price_outliers(&cards, PriceGuard::DEFAULT)[0].is_some());
    }

    #[test]
    fn never_every_card_and_never_half() {
        for prices in [
            vec![1, 2, 4, 8, 16, 32, 64, 128],
            vec![1, 1_000_000, 1_000_000_000],
            vec![u64::MAX, 1, u64::MAX],
            vec![3, 1, 2, 100, 200, 300, 400],
        ] {
            let gone = dropped(&prices).len();
            assert!(gone * 2 < prices.len(), "{prices:?} lost {gone}");
        }
    }
}
