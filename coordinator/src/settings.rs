//! What every module's settings share, and nothing else: the [`ConfigError`] a bad setting
//! fails with (naming it), and the duration helpers the flags and the library defaults
//! parse with. A leaf: it imports no other module of the crate, so each module's own
//! `…Args`/`…Config` can use it without reaching up to `config.rs`, which composes them.

use std::time::Duration;

/// A setting that is missing or out of range.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting {setting}: {reason}")]
pub struct ConfigError {
    pub setting: &'static str,
    pub reason: String,
}

impl ConfigError {
    /// The error for `setting` (its `LPS_…` name) with why it is refused.
    pub fn new(setting: &'static str, reason: impl Into<String>) -> Self {
        Self {
            setting,
            reason: reason.into(),
        }
    }
}

/// A duration default (a module's `DEFAULT_*` text) as a [`Duration`]; each module's tests
/// check that its defaults parse.
pub fn default_duration(text: &'static str) -> Duration {
    humantime::parse_duration(text)
        .unwrap_or_else(|e| panic!("the default {text:?} is not a duration: {e}"))
}

/// The flags' duration parser: `30s`, `5m`, `1h30m`.
pub fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (write e.g. 30s, 5m)"))
}

#[cfg(test)]
mod tests {
    use super::{ConfigError, default_duration, duration};

    #[test]
    fn durations_parse_and_errors_name_the_setting() {
        assert_eq!(default_duration("45s").as_secs(), 45);
        assert!(duration("5 parsecs").is_err_and(|e| e.contains("write e.g. 30s")));
        let e = ConfigError::new("LPS_LEASE_TTL", "must be positive");
        assert_eq!(
            e.to_string(),
            "invalid setting LPS_LEASE_TTL: must be positive"
        );
    }
}
