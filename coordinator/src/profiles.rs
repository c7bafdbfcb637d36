//! Site profiles: malls are data, not code (DESIGN §5).
//!
//! The file format, its validation and the built-in malls are the crate `lps-profiles`
//! (`docs/site-profiles.md`); this module adds what the coordinator does with a profile:
//! the mall's politeness limits for the queue. Built-in profiles are compiled in; a
//! directory (`LPS_PROFILES_DIR`) overrides or adds profiles by id without a rebuild. The
//! coordinator sends them to nodes in `Welcome`.
//!
//! A profile that cannot be used is a start-up error naming the file and the field.

use std::path::Path;

pub use lps_profiles::format::{Profile as SiteProfile, ProfileError, parse};

use crate::queue::MallLimits;

/// The built-in profiles, overridden and extended by the `*.toml` files of `dir`.
pub fn load(dir: Option<&Path>) -> Result<Vec<SiteProfile>, ProfileError> {
    lps_profiles::format::load(dir)
}

/// The queue limits of a mall, enabled or not.
pub fn limits(profile: &SiteProfile, enabled: bool) -> MallLimits {
    MallLimits {
        mall: profile.mall(),
        enabled,
        max_running: profile.max_running,
        min_start_gap: profile.min_start_gap,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_profile_s_politeness_becomes_its_queue_limits() {
        let naver = load(None)
            .unwrap()
            .into_iter()
            .find(|p| p.wire.id == "naver")
            .unwrap();
        let on = limits(&naver, true);
        assert_eq!(
            (
                on.mall.as_str(),
                on.enabled,
                on.max_running,
                on.min_start_gap
            ),
            ("naver", true, Some(4), Duration::from_secs(2))
        );
        assert!(!limits(&naver, false).enabled);
    }
}
