//! Site profiles: malls are data, not code (DESIGN §5).
//!
//! A profile (one TOML file per mall) says how to search a mall and read its result page:
//! the search URL template, what to wait for, the card/title/price/shipping/link/seller
//! selectors, the no-results marker, block markers, an optional warm-up URL, the per-IP
//! budget, and the mall's politeness limits. Built-in profiles (`coordinator/profiles/`) are
//! compiled in; a directory (`LPS_PROFILES_DIR`) overrides or adds profiles by id without a
//! rebuild. The coordinator sends them to nodes in `Welcome`.
//!
//! A profile that fails to parse is a startup error naming the file and the field.

use std::{collections::BTreeMap, path::Path, time::Duration};

use lps_proto::{
    model::{self, MallId},
    pb,
};
use serde::Deserialize;

use crate::queue::MallLimits;

/// The built-in profiles: (file name, contents).
const BUILTIN: &[(&str, &str)] = &[
    ("naver.toml", include_str!("../profiles/naver.toml")),
    ("coupang.toml", include_str!("../profiles/coupang.toml")),
    (
        "testmall-alpha.toml",
        include_str!("../profiles/testmall-alpha.toml"),
    ),
    (
        "testmall-beta.toml",
        include_str!("../profiles/testmall-beta.toml"),
    ),
];

/// A loaded profile: what nodes get, and the mall's limits for the queue.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteProfile {
    pub wire: pb::SiteProfile,
    pub max_running: Option<u32>,
    pub min_start_gap: Duration,
}

impl SiteProfile {
    pub fn mall(&self) -> MallId {
        // NB: ids are validated when the profile is loaded.
        MallId::new(self.wire.id.clone()).unwrap_or_else(|_| unreachable!("validated on load"))
    }

    /// The queue limits of this mall, enabled or not.
    pub fn limits(&self, enabled: bool) -> MallLimits {
        MallLimits {
            mall: self.mall(),
            enabled,
            max_running: self.max_running,
            min_start_gap: self.min_start_gap,
        }
    }
}

/// A profile that cannot be used, named by file and field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("site profile {file}: {field}: {reason}")]
pub struct ProfileError {
    pub file: String,
    pub field: String,
    pub reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    id: String,
    display_name: String,
    search_url_template: String,
    wait_for: String,
    #[serde(default = "default_wait")]
    wait_timeout: String,
    card_selector: String,
    title_selector: String,
    price_selector: String,
    #[serde(default)]
    shipping_selector: String,
    link_selector: String,
    #[serde(default)]
    seller_selector: String,
    #[serde(default)]
    no_results_selector: String,
    #[serde(default)]
    no_results_text: String,
    #[serde(default)]
    free_shipping_texts: Vec<String>,
    #[serde(default)]
    blocked_url_patterns: Vec<String>,
    #[serde(default)]
    warmup_url: String,
    #[serde(default)]
    ip_request_budget: u32,
    #[serde(default = "default_max_cards")]
    max_cards: u32,
    #[serde(default)]
    block: BlockFile,
    #[serde(default)]
    limits: LimitsFile,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockFile {
    #[serde(default)]
    texts: Vec<String>,
    #[serde(default)]
    selectors: Vec<String>,
    #[serde(default)]
    statuses: Vec<u32>,
    #[serde(default)]
    min_html_bytes: u32,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    max_running: Option<u32>,
    #[serde(default)]
    min_start_gap: Option<String>,
}

fn default_wait() -> String {
    "15s".into()
}

fn default_max_cards() -> u32 {
    40
}

/// Parses one profile file's contents.
pub fn parse(file: &str, text: &str) -> Result<SiteProfile, ProfileError> {
    let err = |field: &str, reason: String| ProfileError {
        file: file.to_owned(),
        field: field.to_owned(),
        reason,
    };
    let raw: ProfileFile = toml::from_str(text).map_err(|e| {
        // toml names the key in its message; keep it on one line.
        let msg = e.message().to_owned();
        let field = msg
            .split('`')
            .nth(1)
            .filter(|f| !f.is_empty())
            .unwrap_or("(syntax)")
            .to_owned();
        err(&field, msg)
    })?;
    MallId::new(raw.id.clone()).map_err(|e| err("id", e.reason))?;
    let template = &raw.search_url_template;
    if !(template.starts_with("http://") || template.starts_with("https://")) {
        return Err(err(
            "search_url_template",
            "must start with http:// or https://".into(),
        ));
    }
    if !template.contains("{query}") {
        return Err(err("search_url_template", "must contain {query}".into()));
    }
    for (field, value) in [
        ("wait_for", &raw.wait_for),
        ("card_selector", &raw.card_selector),
        ("title_selector", &raw.title_selector),
        ("price_selector", &raw.price_selector),
        ("link_selector", &raw.link_selector),
    ] {
        if value.trim().is_empty() {
            return Err(err(field, "must not be empty".into()));
        }
    }
    if raw.no_results_selector.is_empty() && raw.no_results_text.is_empty() {
        return Err(err(
            "no_results_selector",
            "a profile needs a no-results marker (selector or text): without one a healthy empty page cannot be told from a broken one".into(),
        ));
    }
    let wait_timeout = humantime::parse_duration(&raw.wait_timeout)
        .map_err(|e| err("wait_timeout", e.to_string()))?;
    let min_start_gap = match &raw.limits.min_start_gap {
        Some(gap) => humantime::parse_duration(gap)
            .map_err(|e| err("limits.min_start_gap", e.to_string()))?,
        None => Duration::ZERO,
    };
    if raw.limits.max_running == Some(0) {
        return Err(err(
            "limits.max_running",
            "must be at least 1 (omit it for no cap)".into(),
        ));
    }
    if raw.max_cards == 0 || raw.max_cards > 500 {
        return Err(err("max_cards", "must be 1..=500".into()));
    }
    Ok(SiteProfile {
        wire: pb::SiteProfile {
            id: raw.id,
            display_name: raw.display_name,
            search_url_template: raw.search_url_template,
            wait_for: raw.wait_for,
            wait_timeout: Some(model::duration_to_pb(wait_timeout)),
            card_selector: raw.card_selector,
            title_selector: raw.title_selector,
            price_selector: raw.price_selector,
            shipping_selector: raw.shipping_selector,
            link_selector: raw.link_selector,
            seller_selector: raw.seller_selector,
            no_results_selector: raw.no_results_selector,
            no_results_text: raw.no_results_text,
            block: Some(pb::BlockMarkers {
                texts: raw.block.texts,
                selectors: raw.block.selectors,
                statuses: raw.block.statuses,
                min_html_bytes: raw.block.min_html_bytes,
            }),
            warmup_url: raw.warmup_url,
            ip_request_budget: raw.ip_request_budget,
            free_shipping_texts: raw.free_shipping_texts,
            blocked_url_patterns: raw.blocked_url_patterns,
            max_cards: raw.max_cards,
        },
        max_running: raw.limits.max_running,
        min_start_gap,
    })
}

/// The built-in profiles, overridden and extended by the `*.toml` files of `dir`.
pub fn load(dir: Option<&Path>) -> Result<Vec<SiteProfile>, ProfileError> {
    let mut by_id = BTreeMap::new();
    for (file, text) in BUILTIN {
        let p = parse(&format!("(built-in) {file}"), text)?;
        by_id.insert(p.wire.id.clone(), p);
    }
    if let Some(dir) = dir {
        let io = |reason: String| ProfileError {
            file: dir.display().to_string(),
            field: "(directory)".into(),
            reason,
        };
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| io(e.to_string()))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        for path in files {
            let name = path.display().to_string();
            let text = std::fs::read_to_string(&path).map_err(|e| ProfileError {
                file: name.clone(),
                field: "(file)".into(),
                reason: e.to_string(),
            })?;
            let p = parse(&name, &text)?;
            by_id.insert(p.wire.id.clone(), p);
        }
    }
    Ok(by_id.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_profiles_parse() {
        let all = load(None).unwrap();
        let ids: Vec<&str> = all.iter().map(|p| p.wire.id.as_str()).collect();
        assert_eq!(ids, ["coupang", "naver", "testmall-alpha", "testmall-beta"]);
        let naver = all.iter().find(|p| p.wire.id == "naver").unwrap();
        assert_eq!(naver.max_running, Some(4));
        assert_eq!(naver.min_start_gap, Duration::from_secs(2));
    }

    #[test]
    fn errors_name_file_and_field() {
        let good = include_str!("../profiles/testmall-alpha.toml");
        let cases = [
            (
                good.replace(
                    "card_selector = \"li.product-item\"",
                    "card_selector = \"\"",
                ),
                "card_selector",
            ),
            (good.replace("?q={query}", "?q=x"), "search_url_template"),
            (
                good.replace("wait_timeout = \"10s\"", "wait_timeout = \"soon\""),
                "wait_timeout",
            ),
            (
                good.replace("max_cards = 40", "max_cards = 40\ncolour = \"red\""),
                "colour",
            ),
            (
                good.replace("id = \"testmall-alpha\"", "id = \"Test Mall\""),
                "id",
            ),
            (
                good.replace("max_running = 8", "max_running = 0"),
                "limits.max_running",
            ),
        ];
        for (text, field) in cases {
            let e = parse("alpha.toml", &text).unwrap_err();
            assert_eq!(
                (e.file.as_str(), e.field.as_str()),
                ("alpha.toml", field),
                "{e}"
            );
        }
    }

    #[test]
    fn a_directory_overrides_by_id() {
        let dir = std::env::temp_dir().join(format!("lps-profiles-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let alpha = include_str!("../profiles/testmall-alpha.toml").replace("18081", "40001");
        std::fs::write(dir.join("alpha.toml"), alpha).unwrap();
        std::fs::write(dir.join("notes.txt"), "ignored").unwrap();
        let all = load(Some(&dir)).unwrap();
        let alpha = all.iter().find(|p| p.wire.id == "testmall-alpha").unwrap();
        assert!(alpha.wire.search_url_template.contains("40001"));
        std::fs::write(dir.join("broken.toml"), "id = ").unwrap();
        let e = load(Some(&dir)).unwrap_err();
        assert!(e.file.ends_with("broken.toml"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
