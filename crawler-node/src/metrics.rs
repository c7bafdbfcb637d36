//! Prometheus metrics of one crawler node, served at `/metrics` on `LPS_HTTP_ADDR`.
//!
//! One [`NodeMetrics`] per node process, shared behind an `Arc` by the link (jobs, slots,
//! reports, reconnects) and the browser executor (page loads, bytes, browsers,
//! chromedriver, blocks, IP sessions): pass the same value to
//! [`Node::with_metrics`](crate::Node::with_metrics) and
//! [`BrowserExecutor::with_metrics`](crate::BrowserExecutor::with_metrics). Everything is an
//! event counter or histogram of this process (a restart starts from zero; use `rate` /
//! `increase`), plus a few gauges of its state now.
//!
//! Labels are bounded: mall ids, outcomes (the coordinator's vocabulary: `found`,
//! `not_found`, an error class, plus `cancelled` and `handed_back`), verdicts, reasons,
//! directions; never tokens, URLs, queries or product names.

use std::time::Duration;

use lps_proto::model::{CardClass, ErrorClass, MallId};
use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

use lps_telemetry::exposition::{self, Format};

use lps_proto::model::SessionEndReason;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MallLabels {
    pub mall: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MallOutcomeLabels {
    pub mall: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PageLoadLabels {
    pub mall: String,
    pub verdict: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BytesLabels {
    pub mall: String,
    /// `in` (to the browser) or `out` (from the browser).
    pub direction: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MallReasonLabels {
    pub mall: String,
    pub reason: String,
}

/// Every verdict a page load ends with (the `verdict` label of `page_load`).
pub const PAGE_VERDICTS: [&str; 7] = [
    "results",
    "no_results",
    "blocked",
    "unreadable",
    "layout",
    "error_page",
    "failed",
];

/// How a job left its slot on this node (the `outcome` label of `jobs_finished`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobEnd {
    Found,
    NotFound,
    /// The attempt failed with this class (a deadline kill is `deadline`).
    Failed(ErrorClass),
    /// Its lease was taken away (no report).
    Cancelled,
    /// Given back to the queue (drain, no free slot, a mall this node does not crawl).
    HandedBack,
}

impl JobEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Found => "found",
            Self::NotFound => "not_found",
            Self::Failed(class) => class.as_str(),
            Self::Cancelled => "cancelled",
            Self::HandedBack => "handed_back",
        }
    }
}

/// Why a browser was killed and replaced (the `reason` label of `browser_restarts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrowserRestart {
    /// It failed mid-job (browser gone, WebDriver errors).
    Failed,
    /// A job was dropped mid-call and the browser did not answer a ping afterwards.
    Unresponsive,
}

impl BrowserRestart {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Failed => "failed",
            Self::Unresponsive => "unresponsive",
        }
    }
}

/// Every metric of a crawler node. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct NodeMetrics {
    registry: Registry,
    /// Jobs that left their slot, by mall and outcome.
    pub jobs_finished: Family<MallOutcomeLabels, Counter>,
    /// Slots taken by jobs now (stopping ones included).
    pub jobs_running: Gauge,
    /// Free slots as announced to the coordinator (0 while draining).
    pub slots_free: Gauge,
    /// Search result page loads: navigation until a verdict (or none), by mall and verdict.
    pub page_load: Family<PageLoadLabels, Histogram>,
    /// Bytes through the proxy relays, by mall and direction.
    pub proxy_bytes: Family<BytesLabels, Counter>,
    pub browser_launches: Counter,
    pub browser_restarts: Family<ReasonLabels, Counter>,
    /// Managed chromedrivers started after one died or failed to start.
    pub chromedriver_restarts: Counter,
    /// 1 while the WebDriver server is up (or not needed yet), 0 while it is down.
    pub chromedriver_up: Gauge,
    /// What the last browser self-check found leaking (0: nothing; -1: not run yet).
    pub browser_leaks: Gauge,
    /// Blocked result pages (each one a `BlockEvent`), by mall.
    pub blocks: Family<MallLabels, Counter>,
    /// IP sessions ended, by mall and end reason.
    pub ip_sessions_ended: Family<MallReasonLabels, Counter>,
    /// Result cards left out, by mall and reason (an excluded card class, `placeholder`).
    pub cards_excluded: Family<MallReasonLabels, Counter>,
    /// Healthy result pages on which no card source found a card, by mall.
    pub layout_pages: Family<MallLabels, Counter>,
    /// Welcomed streams after the first (the coordinator was lost and found again).
    pub reconnects: Counter,
    /// Un-acked reports sent again after a reconnect.
    pub reports_resent: Counter,
}

impl Default for NodeMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl NodeMetrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("lps_node");
        let jobs_finished = Family::<MallOutcomeLabels, Counter>::default();
        registry.register(
            "jobs_finished",
            "Jobs that left their slot on this node, by mall and outcome",
            jobs_finished.clone(),
        );
        let jobs_running = Gauge::default();
        registry.register(
            "jobs_running",
            "Slots taken by jobs now (stopping ones included)",
            jobs_running.clone(),
        );
        let slots_free = Gauge::default();
        registry.register(
            "slots_free",
            "Free slots as announced to the coordinator (0 while draining)",
            slots_free.clone(),
        );
        let page_load = Family::<PageLoadLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0])
        });
        registry.register(
            "page_load_seconds",
            "Search result page loads, navigation until a verdict, by mall and verdict",
            page_load.clone(),
        );
        let proxy_bytes = Family::<BytesLabels, Counter>::default();
        registry.register(
            "proxy_bytes",
            "Bytes through the proxy relays, by mall and direction (in: to the browser)",
            proxy_bytes.clone(),
        );
        let browser_launches = Counter::default();
        registry.register(
            "browser_launches",
            "Chromium browsers started (replacements included)",
            browser_launches.clone(),
        );
        let browser_restarts = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "browser_restarts",
            "Browsers killed to be replaced, by reason",
            browser_restarts.clone(),
        );
        let chromedriver_restarts = Counter::default();
        registry.register(
            "chromedriver_restarts",
            "Managed chromedrivers started after one died or failed to start",
            chromedriver_restarts.clone(),
        );
        let chromedriver_up = Gauge::default();
        chromedriver_up.set(1);
        registry.register(
            "chromedriver_up",
            "1 while the WebDriver server is up or not needed yet, 0 while it is down",
            chromedriver_up.clone(),
        );
        let browser_leaks = Gauge::default();
        browser_leaks.set(-1);
        registry.register(
            "browser_leaks",
            "Surfaces on which the start-up self-check saw the browser reveal automation (0: none; -1: not run yet)",
            browser_leaks.clone(),
        );
        let blocks = Family::<MallLabels, Counter>::default();
        registry.register(
            "blocks",
            "Blocked result pages (block events), by mall",
            blocks.clone(),
        );
        let ip_sessions_ended = Family::<MallReasonLabels, Counter>::default();
        registry.register(
            "ip_sessions_ended",
            "IP sessions ended, by mall and end reason",
            ip_sessions_ended.clone(),
        );
        let cards_excluded = Family::<MallReasonLabels, Counter>::default();
        registry.register(
            "cards_excluded",
            "Result cards left out, by mall and reason (an excluded card class, or placeholder)",
            cards_excluded.clone(),
        );
        let layout_pages = Family::<MallLabels, Counter>::default();
        registry.register(
            "layout_pages",
            "Healthy result pages on which no card source found a card (the layout changed), by mall",
            layout_pages.clone(),
        );
        let reconnects = Counter::default();
        registry.register(
            "reconnects",
            "Coordinator streams welcomed after the first",
            reconnects.clone(),
        );
        let reports_resent = Counter::default();
        registry.register(
            "reports_resent",
            "Unacknowledged reports sent again after a reconnect",
            reports_resent.clone(),
        );
        Self {
            registry,
            jobs_finished,
            jobs_running,
            slots_free,
            page_load,
            proxy_bytes,
            browser_launches,
            browser_restarts,
            chromedriver_restarts,
            chromedriver_up,
            browser_leaks,
            blocks,
            ip_sessions_ended,
            cards_excluded,
            layout_pages,
            reconnects,
            reports_resent,
        }
    }

    /// Creates every counter and histogram of `malls` at 0, for each outcome, verdict,
    /// direction and reason the node reports, so that the first event shows as an increase
    /// (a series born at 1 has none for `rate` and `increase`).
    pub fn init_malls<'a>(&self, malls: impl IntoIterator<Item = &'a str>) {
        let classes: Vec<&str> = (1..64)
            .filter_map(|n| ErrorClass::try_from(n).ok())
            .map(ErrorClass::as_str)
            .collect();
        let ends = [
            JobEnd::Found,
            JobEnd::NotFound,
            JobEnd::Cancelled,
            JobEnd::HandedBack,
        ];
        let outcomes: Vec<&str> = ends.iter().map(|e| e.as_str()).chain(classes).collect();
        for mall in malls {
            let labels = |outcome: &str| MallOutcomeLabels {
                mall: mall.to_owned(),
                outcome: outcome.to_owned(),
            };
            for outcome in &outcomes {
                let _ = self.jobs_finished.get_or_create(&labels(outcome));
            }
            for verdict in PAGE_VERDICTS {
                let _ = self.page_load.get_or_create(&PageLoadLabels {
                    mall: mall.to_owned(),
                    verdict: verdict.to_owned(),
                });
            }
            for direction in ["in", "out"] {
                let _ = self.proxy_bytes.get_or_create(&BytesLabels {
                    mall: mall.to_owned(),
                    direction: direction.to_owned(),
                });
            }
            let _ = self.blocks.get_or_create(&MallLabels {
                mall: mall.to_owned(),
            });
            let _ = self.layout_pages.get_or_create(&MallLabels {
                mall: mall.to_owned(),
            });
            // Every class may be excluded (a profile sets the policy), `rental` included.
            let excluded = CardClass::ALL.iter().map(|c| c.as_str());
            for reason in excluded.chain(["placeholder"]) {
                let _ = self.cards_excluded.get_or_create(&MallReasonLabels {
                    mall: mall.to_owned(),
                    reason: reason.to_owned(),
                });
            }
            for reason in SessionEndReason::ALL {
                let _ = self.ip_sessions_ended.get_or_create(&MallReasonLabels {
                    mall: mall.to_owned(),
                    reason: reason.as_str().to_owned(),
                });
            }
        }
        for reason in [BrowserRestart::Failed, BrowserRestart::Unresponsive] {
            let _ = self.browser_restarts.get_or_create(&ReasonLabels {
                reason: reason.as_str().to_owned(),
            });
        }
    }

    /// A job left its slot.
    pub fn job_finished(&self, mall: &MallId, end: JobEnd) {
        self.jobs_finished
            .get_or_create(&MallOutcomeLabels {
                mall: mall.to_string(),
                outcome: end.as_str().to_owned(),
            })
            .inc();
    }

    /// A search page load took `elapsed` and ended with `verdict` (one of
    /// [`PAGE_VERDICTS`]).
    pub fn page_loaded(&self, mall: &MallId, verdict: &'static str, elapsed: Duration) {
        self.page_load
            .get_or_create(&PageLoadLabels {
                mall: mall.to_string(),
                verdict: verdict.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Bytes a job moved through its relay.
    pub fn proxy_bytes(&self, mall: &MallId, to_browser: u64, from_browser: u64) {
        for (direction, n) in [("in", to_browser), ("out", from_browser)] {
            self.proxy_bytes
                .get_or_create(&BytesLabels {
                    mall: mall.to_string(),
                    direction: direction.to_owned(),
                })
                .inc_by(n);
        }
    }

    pub fn browser_restarted(&self, reason: BrowserRestart) {
        self.browser_restarts
            .get_or_create(&ReasonLabels {
                reason: reason.as_str().to_owned(),
            })
            .inc();
    }

    pub fn blocked(&self, mall: &MallId) {
        self.blocks
            .get_or_create(&MallLabels {
                mall: mall.to_string(),
            })
            .inc();
    }

    pub fn ip_session_ended(&self, mall: &MallId, reason: SessionEndReason) {
        self.ip_sessions_ended
            .get_or_create(&MallReasonLabels {
                mall: mall.to_string(),
                reason: reason.as_str().to_owned(),
            })
            .inc();
    }

    /// `n` cards of `mall` were left out for `reason`.
    pub fn cards_excluded(&self, mall: &MallId, reason: &str, n: u32) {
        self.cards_excluded
            .get_or_create(&MallReasonLabels {
                mall: mall.to_string(),
                reason: reason.to_owned(),
            })
            .inc_by(u64::from(n));
    }

    /// A healthy page of `mall` had no card a source recognises.
    pub fn layout_page(&self, mall: &MallId) {
        self.layout_pages
            .get_or_create(&MallLabels {
                mall: mall.to_string(),
            })
            .inc();
    }

    /// The exposition in `format`, with the process and build-info families
    /// (`lps_build_info{component="crawler-node"}`).
    pub fn encode_as(&self, format: Format) -> String {
        let mut out = String::new();
        // NB: encoding into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        exposition::render(&out, "crawler-node", env!("CARGO_PKG_VERSION"), format)
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        self.encode_as(Format::OpenMetrics)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mall() -> MallId {
        MallId::new("testmall-alpha").unwrap()
    }

    #[test]
    fn exposition_has_the_documented_names_and_labels() {
        let m = NodeMetrics::new();
        m.job_finished(&mall(), JobEnd::Found);
        m.job_finished(&mall(), JobEnd::Failed(ErrorClass::PageBlocked));
        m.job_finished(&mall(), JobEnd::HandedBack);
        m.jobs_running.set(2);
        m.slots_free.set(1);
        m.page_loaded(&mall(), "results", Duration::from_millis(300));
        m.proxy_bytes(&mall(), 2_000, 300);
        m.browser_launches.inc();
        m.browser_restarted(BrowserRestart::Unresponsive);
        m.chromedriver_restarts.inc();
        m.blocked(&mall());
        m.ip_session_ended(&mall(), SessionEndReason::Budget);
        m.reconnects.inc();
        m.reports_resent.inc_by(3);
        let text = m.encode();
        for line in [
            "lps_node_jobs_finished_total{mall=\"testmall-alpha\",outcome=\"found\"} 1",
            "lps_node_jobs_finished_total{mall=\"testmall-alpha\",outcome=\"page_blocked\"} 1",
            "lps_node_jobs_finished_total{mall=\"testmall-alpha\",outcome=\"handed_back\"} 1",
            "lps_node_jobs_running 2",
            "lps_node_slots_free 1",
            "lps_node_page_load_seconds_count{mall=\"testmall-alpha\",verdict=\"results\"} 1",
            "lps_node_page_load_seconds_bucket{le=\"0.5\",mall=\"testmall-alpha\",verdict=\"results\"} 1",
            "lps_node_page_load_seconds_bucket{le=\"0.25\",mall=\"testmall-alpha\",verdict=\"results\"} 0",
            "lps_node_proxy_bytes_total{mall=\"testmall-alpha\",direction=\"in\"} 2000",
            "lps_node_proxy_bytes_total{mall=\"testmall-alpha\",direction=\"out\"} 300",
            "lps_node_browser_launches_total 1",
            "lps_node_browser_restarts_total{reason=\"unresponsive\"} 1",
            "lps_node_chromedriver_restarts_total 1",
            "lps_node_chromedriver_up 1",
            "lps_node_blocks_total{mall=\"testmall-alpha\"} 1",
            "lps_node_ip_sessions_ended_total{mall=\"testmall-alpha\",reason=\"budget\"} 1",
            "lps_node_reconnects_total 1",
            "lps_node_reports_resent_total 3",
            "# TYPE lps_node_page_load_seconds histogram",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    /// What `/metrics` serves without an OpenMetrics `Accept` passes `promtool check
    /// metrics` (skipped, loudly, where promtool is not installed; `scripts/test.sh`
    /// installs it).
    #[test]
    fn text_format_passes_promtool() {
        let m = NodeMetrics::new();
        m.job_finished(&mall(), JobEnd::Found);
        m.page_loaded(&mall(), "results", Duration::from_millis(300));
        m.proxy_bytes(&mall(), 2_000, 300);
        m.browser_restarted(BrowserRestart::Failed);
        m.blocked(&mall());
        m.ip_session_ended(&mall(), SessionEndReason::Budget);
        let text = m.encode_as(Format::Text);
        assert!(
            text.contains("# TYPE lps_node_blocks_total counter"),
            "{text}"
        );
        assert!(
            text.contains("lps_build_info{component=\"crawler-node\""),
            "{text}"
        );
        if let Some(said) = lps_test_kit::checks::promtool_check_metrics("node /metrics", &text) {
            assert!(
                said.is_empty(),
                "promtool check metrics:\n{said}\non\n{text}"
            );
        }
    }

    #[test]
    fn unused_families_have_no_series() {
        let text = NodeMetrics::new().encode();
        assert!(!text.contains("lps_node_jobs_finished_total"), "{text}");
        assert!(!text.contains("lps_node_page_load_seconds_count"), "{text}");
        assert!(text.contains("lps_node_jobs_running 0"), "{text}");
    }

    #[test]
    fn a_known_mall_s_series_start_at_zero() {
        let m = NodeMetrics::new();
        m.init_malls(["testmall-alpha"]);
        let text = m.encode();
        for line in [
            "lps_node_jobs_finished_total{mall=\"testmall-alpha\",outcome=\"found\"} 0",
            "lps_node_jobs_finished_total{mall=\"testmall-alpha\",outcome=\"handed_back\"} 0",
            "lps_node_jobs_finished_total{mall=\"testmall-alpha\",outcome=\"page_blocked\"} 0",
            "lps_node_page_load_seconds_count{mall=\"testmall-alpha\",verdict=\"failed\"} 0",
            "lps_node_proxy_bytes_total{mall=\"testmall-alpha\",direction=\"out\"} 0",
            "lps_node_blocks_total{mall=\"testmall-alpha\"} 0",
            "lps_node_layout_pages_total{mall=\"testmall-alpha\"} 0",
            "lps_node_ip_sessions_ended_total{mall=\"testmall-alpha\",reason=\"rotate\"} 0",
            "lps_node_browser_restarts_total{reason=\"failed\"} 0",
            "lps_node_cards_excluded_total{mall=\"testmall-alpha\",reason=\"rental\"} 0",
            "lps_node_cards_excluded_total{mall=\"testmall-alpha\",reason=\"placeholder\"} 0",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        // The first event counts from there.
        m.blocked(&mall());
        assert!(
            m.encode()
                .contains("lps_node_blocks_total{mall=\"testmall-alpha\"} 1")
        );
    }

    #[test]
    fn outcomes_use_the_coordinators_vocabulary() {
        assert_eq!(JobEnd::Found.as_str(), "found");
        assert_eq!(JobEnd::NotFound.as_str(), "not_found");
        assert_eq!(JobEnd::Failed(ErrorClass::Deadline).as_str(), "deadline");
        assert_eq!(JobEnd::Cancelled.as_str(), "cancelled");
    }
}
