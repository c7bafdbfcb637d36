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
    fn builtin_profiles_load_with_their_limits() {
        let all = load(None).unwrap();
        let ids: Vec<&str> = all.iter().map(|p| p.wire.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "coupang",
                "naver",
                "testmall-alpha",
                "testmall-beta",
                "testmall-gamma"
            ]
        );
        let naver = all.iter().find(|p| p.wire.id == "naver").unwrap();
        let limits = limits(naver, true);
        assert_eq!(limits.max_running, Some(4));
        assert_eq!(limits.min_start_gap, Duration::from_secs(2));
        assert!(limits.enabled);
    }
}
