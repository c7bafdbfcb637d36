//! Per-IP request budget advice from recorded IP sessions (pure logic; the ledger feeds it
//! the histogram of `advise.sql`).
//!
//! For each request number k: `reached(k)` IP sessions made at least k requests, and
//! `blocked_at(k)` of them ended in a block at request k (their last one). The block rate
//! at k is `blocked_at(k) / reached(k)`; the cumulative block share is the chance that an
//! IP session is blocked at or before request k, `1 - Π_{j≤k} (1 - rate(j))` (Kaplan–Meier:
//! IP sessions that rotated at their budget without a block count for the requests they
//! made and no further, so a low budget does not look like a safe high one). The advice is
//! the largest k whose cumulative share stays under the threshold, among the request
//! numbers with at least `min_sessions` IP sessions behind them.
//!
//! NB: the data cannot speak past the budget in force: if every IP session rotates at 3,
//! none reached 4 and the advice is at most 3. To learn whether a higher budget is safe,
//! raise it for one mall (LPS_IP_REQUEST_BUDGETS) and ask again later.

use std::time::Duration;

use lps_proto::model::MallId;

/// How advice is computed.
#[derive(Debug, Clone, PartialEq)]
pub struct AdviceParams {
    /// The highest acceptable chance that an IP session is blocked (0.05 = 5 %).
    pub threshold: f64,
    /// A request number needs at least this many IP sessions behind it to count.
    pub min_sessions: u64,
    /// IP sessions that ended this long ago or less.
    pub lookback: Duration,
}

impl Default for AdviceParams {
    fn default() -> Self {
        Self {
            threshold: 0.05,
            min_sessions: 30,
            lookback: Duration::from_secs(7 * 86_400),
        }
    }
}

/// The figures at one request number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdviceStep {
    /// 1-based request number on the IP.
    pub request_no: u32,
    /// IP sessions that made at least this many requests.
    pub reached: u64,
    /// Of those, IP sessions blocked at exactly this request.
    pub blocked_at: u64,
    /// `blocked_at / reached`.
    pub block_rate: f64,
    /// Chance of a block at or before this request.
    pub cumulative_block_share: f64,
}

/// A suggested per-IP request budget for one mall, with the numbers behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Advice {
    pub mall: MallId,
    pub params: AdviceParams,
    /// The budget in force for the mall.
    pub current_budget: u32,
    /// IP sessions considered, and how many of them ended in a block.
    pub sessions: u64,
    pub blocked_sessions: u64,
    /// `None`: not enough IP sessions at the first request, or even the first request is
    /// blocked more often than the threshold (no budget helps then; see `steps[0]`).
    pub suggested_budget: Option<u32>,
    /// One step per request number up to the largest one recorded.
    pub steps: Vec<AdviceStep>,
}

/// Histogram rows: (requests made in an IP session, IP sessions, of them block-ended).
pub(crate) fn advise(
    mall: MallId,
    params: AdviceParams,
    current_budget: u32,
    histogram: &[(u32, u64, u64)],
) -> Advice {
    let sessions: u64 = histogram.iter().map(|h| h.1).sum();
    let blocked_sessions: u64 = histogram.iter().map(|h| h.2).sum();
    let max_k = histogram.iter().map(|h| h.0).max().unwrap_or(0);
    let mut steps = Vec::with_capacity(usize::try_from(max_k).unwrap_or(0));
    let mut survival = 1.0_f64;
    let mut suggested = None;
    let mut trusted = true;
    for k in 1..=max_k {
        let reached: u64 = histogram.iter().filter(|h| h.0 >= k).map(|h| h.1).sum();
        let blocked_at: u64 = histogram.iter().filter(|h| h.0 == k).map(|h| h.2).sum();
        let block_rate = if reached == 0 {
            0.0
        } else {
            blocked_at as f64 / reached as f64
        };
        survival *= 1.0 - block_rate;
        let cumulative_block_share = 1.0 - survival;
        trusted &= reached >= params.min_sessions && cumulative_block_share < params.threshold;
        if trusted {
            suggested = Some(k);
        }
        steps.push(AdviceStep {
            request_no: k,
            reached,
            blocked_at,
            block_rate,
            cumulative_block_share,
        });
    }
    Advice {
        mall,
        params,
        current_budget,
        sessions,
        blocked_sessions,
        suggested_budget: suggested,
        steps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(histogram: &[(u32, u64, u64)]) -> Advice {
        let params = AdviceParams {
            threshold: 0.05,
            min_sessions: 10,
            ..AdviceParams::default()
        };
        advise(MallId::new("naver").unwrap(), params, 3, histogram)
    }

    #[test]
    fn suggests_the_last_request_under_the_threshold() {
        // 100 IP sessions: none blocked at 1 or 2, 2 of 100 at 3, 6 of 60 at 4 (10 %).
        let a = run(&[(3, 38, 2), (4, 6, 6), (5, 56, 0)]);
        assert_eq!(a.sessions, 100);
        assert_eq!(a.blocked_sessions, 8);
        assert_eq!(a.steps[2].reached, 100);
        assert_eq!(a.steps[2].blocked_at, 2);
        assert!((a.steps[2].cumulative_block_share - 0.02).abs() < 1e-9);
        assert_eq!(a.steps[3].reached, 62);
        assert!((a.steps[3].block_rate - 6.0 / 62.0).abs() < 1e-9);
        assert_eq!(a.suggested_budget, Some(3));
    }

    #[test]
    fn rotation_is_not_mistaken_for_safety() {
        // Every IP session rotated at 3 without a block: nothing is known about request 4.
        let a = run(&[(3, 200, 0)]);
        assert_eq!(a.suggested_budget, Some(3));
        assert_eq!(a.steps.len(), 3);
    }

    #[test]
    fn thin_data_stops_the_advice() {
        // Only 5 IP sessions reached request 3: the advice stays at 2.
        let a = run(&[(2, 50, 0), (3, 5, 0)]);
        assert_eq!(a.suggested_budget, Some(2));
        assert!(run(&[(1, 3, 0)]).suggested_budget.is_none());
        assert!(run(&[]).suggested_budget.is_none());
    }

    #[test]
    fn blocks_at_the_first_request_give_no_budget() {
        let a = run(&[(1, 20, 20), (3, 80, 0)]);
        assert!((a.steps[0].block_rate - 0.2).abs() < 1e-9);
        assert_eq!(a.suggested_budget, None);
    }
}
