//! The LLM's turn in a run (DESIGN §5): after every rule-based round gave a healthy page
//! without a match, and only with an endpoint configured.
//!
//! 1. **Keywords** (one call): the endpoint proposes up to three more search strings, given
//!    the product and the strings tried. Each becomes a round of kind `llm`, searched and
//!    judged by the rules like any other; the first with a match ends the search.
//! 2. **Judge** (one call, only when there are candidates): the cards the rules rejected in
//!    all rounds only on their wording — too little of the name, or the brand not written
//!    the way the query writes it ([`judge::Verdict::wording_only`]) — minus repeats, at
//!    most [`MAX_CANDIDATES`], are sent as titles. A card a hard veto rejected (another
//!    size or pack count, another variant, an accessory, an assortment, another model
//!    code) is never sent: a 6-pack is never offered for a 12-pack, nor a cherry cola for
//!    a plain one, whatever the endpoint says;
//!    the ones it names become the offers, and the rounds that showed them count them as
//!    matches.
//!
//! So a job makes at most two calls, both counted into its metrics (and its cost) whether
//! or not they answer. "No answer" from the endpoint (logged by the client) just skips the
//! step: the job ends `NotFound` as it would have without an endpoint. A step is also
//! skipped when the job's deadline leaves no time for it (a call's timeout, plus a page
//! load for a keyword round), so a job near its deadline ends `NotFound` rather than being
//! killed at the deadline and retried. Page failures in the keyword rounds fail the job as
//! in any round. An accepted card keeps the rules' `match_score` (the share of the name it
//! holds, often low: that is why the rules rejected it).

use std::time::Duration;

use lps_profiles::extract::Card;
use lps_proto::model::{CardClass, Offer};
use tokio::time::Instant;
use tracing::{Instrument as _, info, info_span};

use super::{JobError, Run, kind_str};
use crate::{
    chromium::page::wait_timeout,
    executor::browser::{best_first, card_offer, split_price_outliers},
    judge::{self, ProductQuery, Round, RoundKind, normalize},
    llm::{CallFor, MAX_CANDIDATES, Product},
};

/// Time kept for a page load beyond the profile's wait timeout (navigation, reading).
const PAGE_MARGIN: Duration = Duration::from_secs(5);

/// A card a healthy round showed and the rules rejected.
#[derive(Debug)]
pub(super) struct Rejected {
    /// Index of the round's report in `Run::rounds`.
    pub(super) round: usize,
    pub(super) card: Card,
    /// The card's classes the profile flags (carried to the offer if it is accepted).
    pub(super) flags: Vec<CardClass>,
}

impl Run<'_> {
    /// The LLM's turn (see the module docs): the offers it found, best first; empty without
    /// an endpoint or an answer.
    pub(super) async fn ask_llm(
        &mut self,
        query: &ProductQuery,
        tried: &[Round],
    ) -> Result<Vec<Offer>, JobError> {
        let inner = self.inner;
        let job = self.job;
        let Some(llm) = inner.llm.as_ref() else {
            return Ok(Vec::new());
        };
        let product = Product {
            name: query.name(),
            code: job.product.code(),
            brand: query.brand(),
        };
        let call = CallFor {
            job_id: job.job_id(),
            mall: job.mall.as_str(),
        };

        let page = wait_timeout(self.profile) + PAGE_MARGIN;
        let tried_texts: Vec<&str> = tried.iter().map(|r| r.query.as_str()).collect();
        let keywords = if self.time_left() >= llm.timeout() + page {
            self.llm_calls += 1;
            self.progress.llm_call(llm.usd_per_call());
            llm.keywords(call, &product, &tried_texts)
                .await
                .unwrap_or_default()
        } else {
            info!("too close to the deadline to ask the llm for search strings");
            Vec::new()
        };
        for (i, text) in keywords.into_iter().enumerate() {
            if self.time_left() < page {
                info!("too close to the deadline for another llm round");
                break;
            }
            let number = u32::try_from(tried.len() + i + 1).unwrap_or(u32::MAX);
            self.progress.set_round(number);
            let round = Round {
                kind: RoundKind::Llm,
                query: text,
            };
            let span = info_span!(
                "browser.round",
                job.id = job.job_id(),
                mall = %job.mall,
                round = number,
                kind = kind_str(round.kind),
            );
            let offers = self.search_round(&round, query).instrument(span).await?;
            if !offers.is_empty() {
                return Ok(offers);
            }
        }

        let candidates = candidates(query, &self.rejected);
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        if self.time_left() < llm.timeout() {
            info!("too close to the deadline to ask the llm judge");
            return Ok(Vec::new());
        }
        let titles: Vec<&str> = candidates.iter().map(|c| c.title).collect();
        self.llm_calls += 1;
        self.progress.llm_call(llm.usd_per_call());
        let same = llm.judge(call, &product, &titles).await.unwrap_or_default();
        let mut offers = Vec::with_capacity(same.len());
        for index in same {
            let Some(candidate) = candidates.get(index) else {
                continue;
            };
            let score = judge::judge(query, candidate.title).score;
            let offer = card_offer(
                &candidate.rejected.card,
                candidate.rejected.flags.clone(),
                score,
                &job.mall,
                self.profile,
            );
            if let Some(report) = self.rounds.get_mut(candidate.rejected.round) {
                report.matches += 1;
            }
            offers.push((index, offer));
        }
        let accepted = offers.len();
        // The LLM's accepts are held to the page's prices like the rules' (DESIGN §5 "Price
        // outliers"): a far cheaper look-alike among them is not the answer.
        let (offers, dropped) = split_price_outliers(offers, |(_, offer)| offer);
        for ((_, offer), reason) in &dropped {
            info!(title = %offer.title, reason = %reason, "llm judge's card is not the product");
        }
        info!(
            candidates = candidates.len(),
            accepted,
            price_outliers = dropped.len(),
            "llm judge read"
        );
        Ok(best_first(offers))
    }

    /// Time until the job's deadline.
    fn time_left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// A rejected card that may go to the LLM judge.
struct Candidate<'r> {
    rejected: &'r Rejected,
    title: &'r str,
}

/// The cards worth asking about, in the order seen: rejected by the rules only on their
/// wording (name overlap or brand: [`judge::Verdict::wording_only`]), never by a hard
/// veto (quantity, variant, accessory, assortment, model code), and not a repeat of an
/// earlier card; at most [`MAX_CANDIDATES`].
fn candidates<'r>(query: &ProductQuery, rejected: &'r [Rejected]) -> Vec<Candidate<'r>> {
    let mut seen: Vec<(String, u64, Option<&str>)> = Vec::new();
    let mut out = Vec::new();
    for r in rejected {
        if out.len() == MAX_CANDIDATES {
            break;
        }
        let (title, price) = (r.card.title.as_str(), r.card.price);
        if !judge::judge(query, title).wording_only {
            continue;
        }
        let key = (normalize(title), price, Some(r.card.link.as_str()));
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        out.push(Candidate { rejected: r, title });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(round: usize, title: &str, price: u64, link: &str) -> Rejected {
        Rejected {
            round,
            card: Card {
                title: title.into(),
                price,
                link: link.into(),
                seller: None,
                classes: Vec::new(),
                text: title.into(),
                ..Card::default()
            },
            flags: Vec::new(),
        }
    }

    #[test]
    fn candidates_keep_the_vetoes_and_skip_repeats() {
        let query = ProductQuery::new("Jeju Spring 2L x 12", judge::Lexicon::builtin()).unwrap();
        let cards = [
            rejected(0, "제주 삼다수 2L x 12병", 12_900, "/goods/a101"),
            rejected(0, "제주 삼다수 2L x 6병", 7_200, "/goods/a106"),
            rejected(0, "제주 삼다수 500ml x 20병", 9_900, "/goods/a105"),
            rejected(0, "[골라담기] 제주 삼다수 2L x 12병", 12_000, "/goods/a107"),
            rejected(0, "제주 삼다수 2L x 12병 공병", 1_000, "/goods/a108"),
            rejected(1, "제주 삼다수 2L x 12병", 12_900, "/goods/a101"),
            rejected(2, "제주삼다수 2L 12개", 11_500, "/goods/a109"),
        ];
        let found: Vec<(usize, &str)> = candidates(&query, &cards)
            .iter()
            .map(|c| (c.rejected.round, c.title))
            .collect();
        assert_eq!(
            found,
            [(0, "제주 삼다수 2L x 12병"), (2, "제주삼다수 2L 12개")]
        );
        let many: Vec<Rejected> = (0..MAX_CANDIDATES + 5)
            .map(|i| rejected(0, "삼다수 2L 12병", 1_000, &format!("/goods/{i}")))
            .collect();
        assert_eq!(candidates(&query, &many).len(), MAX_CANDIDATES);
    }
}
