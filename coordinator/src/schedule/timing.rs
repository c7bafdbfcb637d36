//! When a schedule runs next: pure functions over the stored timing, unit-tested here.
//!
//! - An interval schedule's next run is due one interval after the due time of the run
//!   that starts, or as many intervals as it takes to pass `now`: slots missed while a run
//!   took longer (or no replica was up) are skipped, never made up in a burst.
//! - A cron schedule's next run is the pattern's next time after `now` (UTC).

use std::{str::FromStr as _, time::Duration};

use chrono::{DateTime, Utc};
use croner::Cron;
use lps_proto::model::{FieldError, Timing};

/// How many of a cron pattern's next times the minimum-interval check looks at.
const CRON_CHECKED_TIMES: usize = 16;

/// A cron pattern parsed, or `cron` naming what is wrong with it.
pub fn parse_cron(pattern: &str) -> Result<Cron, FieldError> {
    Cron::from_str(pattern).map_err(|e| FieldError::new("cron", format!("not a cron pattern: {e}")))
}

/// Checks `timing` against the deployment's minimum interval (`interval` or `cron` named).
pub fn check(timing: &Timing, min: Duration, now: DateTime<Utc>) -> Result<(), FieldError> {
    let too_often = |field: &str, gap: Duration| {
        FieldError::new(
            field,
            format!(
                "runs every {}, more often than the minimum {} (LPS_SCHEDULE_MIN_INTERVAL)",
                humantime::format_duration(gap),
                humantime::format_duration(min)
            ),
        )
    };
    match timing {
        Timing::Interval(interval) if *interval < min => Err(too_often("interval", *interval)),
        Timing::Interval(_) => Ok(()),
        Timing::Cron(pattern) => {
            let cron = parse_cron(pattern)?;
            let mut at = next_cron(&cron, now)?;
            for _ in 1..CRON_CHECKED_TIMES {
                let next = next_cron(&cron, at)?;
                let gap = (next - at).to_std().unwrap_or_default();
                if gap < min {
                    return Err(too_often("cron", gap));
                }
                at = next;
            }
            Ok(())
        }
    }
}

fn next_cron(cron: &Cron, after: DateTime<Utc>) -> Result<DateTime<Utc>, FieldError> {
    cron.find_next_occurrence(&after, false)
        .map_err(|e| FieldError::new("cron", format!("has no next time: {e}")))
}

/// When a new schedule's first run is due: at once for an interval, at the pattern's next
/// time for a cron pattern.
pub fn first_run(timing: &Timing, now: DateTime<Utc>) -> Result<DateTime<Utc>, FieldError> {
    match timing {
        Timing::Interval(_) => Ok(now),
        Timing::Cron(pattern) => next_cron(&parse_cron(pattern)?, now),
    }
}

/// When the run after one due at `due` and starting at `now` is due.
pub fn next_run(
    timing: &Timing,
    due: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<DateTime<Utc>, FieldError> {
    match timing {
        Timing::Interval(interval) => {
            let step = i64::try_from(interval.as_millis())
                .unwrap_or(i64::MAX)
                .max(1);
            let late = (now - due).num_milliseconds().max(0);
            let slots = late / step + 1;
            Ok(due + chrono::Duration::milliseconds(step.saturating_mul(slots)))
        }
        Timing::Cron(pattern) => next_cron(&parse_cron(pattern)?, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn an_interval_skips_missed_slots() {
        let every = Timing::Interval(Duration::from_secs(2));
        let due = t("2026-01-01T00:00:00Z");
        assert_eq!(
            next_run(&every, due, t("2026-01-01T00:00:00.100Z")).unwrap(),
            t("2026-01-01T00:00:02Z")
        );
        // A run that could start only 5.1 s late: the next is the first slot after now.
        assert_eq!(
            next_run(&every, due, t("2026-01-01T00:00:05.100Z")).unwrap(),
            t("2026-01-01T00:00:06Z")
        );
        assert_eq!(
            next_run(&every, due, t("2026-01-01T00:00:06Z")).unwrap(),
            t("2026-01-01T00:00:08Z")
        );
    }

    #[test]
    fn cron_runs_at_the_next_time_after_now() {
        let daily = Timing::Cron("0 6 * * *".into());
        let now = t("2026-01-01T07:00:00Z");
        assert_eq!(first_run(&daily, now).unwrap(), t("2026-01-02T06:00:00Z"));
        assert_eq!(
            next_run(&daily, t("2026-01-01T06:00:00Z"), now).unwrap(),
            t("2026-01-02T06:00:00Z")
        );
        assert_eq!(
            first_run(&Timing::Interval(Duration::from_secs(60)), now).unwrap(),
            now
        );
    }

    #[test]
    fn the_minimum_interval_holds_for_both_kinds() {
        let now = t("2026-01-01T00:00:00Z");
        let min = Duration::from_secs(60);
        assert!(check(&Timing::Interval(min), min, now).is_ok());
        let e = check(&Timing::Interval(Duration::from_secs(59)), min, now).unwrap_err();
        assert_eq!(e.field, "interval");
        assert!(check(&Timing::Cron("*/5 * * * *".into()), min, now).is_ok());
        let e = check(&Timing::Cron("*/10 * * * * *".into()), min, now).unwrap_err();
        assert_eq!(e.field, "cron");
        let e = check(&Timing::Cron("not a pattern".into()), min, now).unwrap_err();
        assert_eq!(e.field, "cron");
        let e = check(&Timing::Cron("61 * * * *".into()), min, now).unwrap_err();
        assert_eq!(e.field, "cron");
    }
}
