//! Picking the best offer among judged cards.
//!
//! Only cards judged the same product count. The best is the lowest
//! *effective* price (price + shipping, in KRW); ties go to the lower shipping
//! (the price a buyer sees first is more often the honest one), then to the
//! earlier card (malls rank their own results; stable output keeps retries
//! and tests deterministic). Sums saturate instead of overflowing.

use super::Verdict;

/// A card's price in whole KRW.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Price {
    /// Item price.
    pub price_krw: u64,
    /// Shipping fee; 0 for free shipping.
    pub shipping_krw: u64,
}

impl Price {
    /// Price plus shipping (saturating).
    #[must_use]
    pub fn effective_krw(self) -> u64 {
        self.price_krw.saturating_add(self.shipping_krw)
    }
}

/// A result card after judging, with its price.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgedCard {
    /// The judge's verdict on the card's title.
    pub verdict: Verdict,
    /// The card's price.
    pub price: Price,
}

/// Index of the best matching card (see the module docs), or `None` when no
/// card is the same product.
#[must_use]
pub fn best_offer(cards: &[JudgedCard]) -> Option<usize> {
    cards
        .iter()
        .enumerate()
        .filter(|(_, card)| card.verdict.same)
        .min_by_key(|&(index, card)| (card.price.effective_krw(), card.price.shipping_krw, index))
        .map(|(index, _)| index)
}

#[cfg(test)]
mod tests {
    use super::super::{Reason, Verdict};
    use super::{JudgedCard, Price, best_offer};

    fn card(same: bool, price_krw: u64, shipping_krw: u64) -> JudgedCard {
        JudgedCard {
            verdict: Verdict {
                same,
                score: 1.0,
                reason: if same {
                    Reason::Match
                } else {
                    Reason::LowTokenOverlap
                },
            },
            price: Price {
                price_krw,
                shipping_krw,
            },
        }
    }

    #[test]
    fn picks_lowest_effective_price() {
        let cases: [(&str, Vec<JudgedCard>, Option<usize>); 8] = [
            ("empty", vec![], None),
            ("no match", vec![card(false, 100, 0)], None),
            (
                "lowest effective wins",
                vec![
                    card(true, 10_000, 3_000),
                    card(true, 12_000, 0),
                    card(true, 11_000, 500),
                ],
                Some(2),
            ),
            (
                "non-matching cheaper card ignored",
                vec![card(false, 1_000, 0), card(true, 9_000, 0)],
                Some(1),
            ),
            (
                "tie on effective → lower shipping",
                vec![card(true, 10_000, 2_500), card(true, 12_500, 0)],
                Some(1),
            ),
            (
                "full tie → input order",
                vec![
                    card(true, 10_000, 0),
                    card(true, 10_000, 0),
                    card(true, 10_000, 0),
                ],
                Some(0),
            ),
            (
                "tie after a non-match → first matching",
                vec![
                    card(false, 5_000, 0),
                    card(true, 9_000, 1_000),
                    card(true, 9_000, 1_000),
                ],
                Some(1),
            ),
            (
                "saturating sum does not wrap",
                vec![card(true, u64::MAX, 10), card(true, u64::MAX - 1, 0)],
                Some(1),
            ),
        ];
        for (name, cards, want) in cases {
            assert_eq!(best_offer(&cards), want, "{name}");
        }
    }

    #[test]
    fn effective_price_adds_shipping() {
        let price = Price {
            price_krw: 12_900,
            shipping_krw: 3_000,
        };
        assert_eq!(price.effective_krw(), 15_900);
        assert_eq!(Price::default().effective_krw(), 0);
    }
}
