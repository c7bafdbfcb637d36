//! The `/metrics` exposition both services serve: content negotiation, the process and
//! build-info families, and the Prometheus text format 0.0.4.
//!
//! Both registries (`prometheus_client`) encode OpenMetrics 1.0 only. A scraper that asks
//! for it (`Accept: application/openmetrics-text`, as Prometheus does by default) gets that;
//! everything else — `promtool`, `curl`, `text/plain;version=0.0.4` — gets the Prometheus
//! text format 0.0.4, converted here: a counter family is named after its samples
//! (`x_total`, so HELP and TYPE describe them), `# UNIT` and `# EOF` go, `info` becomes a
//! gauge. Every family has HELP and TYPE in both formats.
//!
//! Process metrics (`process_*`, the names the Prometheus client libraries use) are read
//! from `/proc/self` at each scrape; on another OS they are left out.

use std::fmt::Write as _;

/// What a scraper gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    /// The Prometheus text format 0.0.4.
    Text,
}

impl Format {
    /// From the request's `Accept` header: OpenMetrics only when asked for.
    pub fn negotiate(accept: Option<&str>) -> Self {
        match accept {
            Some(a)
                if a.to_ascii_lowercase()
                    .contains("application/openmetrics-text") =>
            {
                Self::OpenMetrics
            }
            _ => Self::Text,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Self::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Self::Text => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// The whole exposition: `openmetrics` (a registry's encoding, ending in `# EOF`) plus the
/// process families and `lps_build_info{component,version} 1`, in `format`.
pub fn render(openmetrics: &str, component: &str, version: &str, format: Format) -> String {
    let body = openmetrics
        .trim_end()
        .strip_suffix("# EOF")
        .unwrap_or(openmetrics);
    let mut out = String::with_capacity(body.len() + 1024);
    out.push_str(body);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&process_families());
    // NB: label values here are crate constants (no escaping needed).
    let _ = write!(
        out,
        "# HELP lps_build_info The running build (always 1).\n# TYPE lps_build_info gauge\n\
         lps_build_info{{component=\"{component}\",version=\"{version}\"}} 1\n"
    );
    match format {
        Format::OpenMetrics => {
            out.push_str("# EOF\n");
            out
        }
        Format::Text => to_text(&out),
    }
}

/// OpenMetrics text (without `# EOF`) as the Prometheus text format 0.0.4.
pub fn to_text(openmetrics: &str) -> String {
    let types: std::collections::HashMap<&str, &str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        let meta = line
            .strip_prefix("# HELP ")
            .map(|r| ("HELP", r))
            .or_else(|| line.strip_prefix("# TYPE ").map(|r| ("TYPE", r)));
        if let Some((kind, rest)) = meta {
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            let (name, text) = match (types.get(name).copied(), kind) {
                (Some("counter"), "TYPE") => (format!("{name}_total"), "counter"),
                (Some("counter"), _) => (format!("{name}_total"), text),
                (Some("info"), "TYPE") => (format!("{name}_info"), "gauge"),
                (Some("info"), _) => (format!("{name}_info"), text),
                (Some("unknown"), "TYPE") => (name.to_owned(), "untyped"),
                _ => (name.to_owned(), text),
            };
            let _ = writeln!(out, "# {kind} {name} {text}");
        } else if !(line.starts_with("# UNIT ") || line == "# EOF") {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The process families in OpenMetrics form; empty where `/proc/self` cannot be read.
fn process_families() -> String {
    let Some(p) = ProcessStats::read() else {
        return String::new();
    };
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, sample: &str, value: f64| {
        let _ = write!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{sample} {value}\n"
        );
    };
    family(
        "process_cpu_seconds",
        "counter",
        "User and system CPU time spent.",
        "_total",
        p.cpu_seconds,
    );
    family(
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size.",
        "",
        p.resident_bytes,
    );
    family(
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size.",
        "",
        p.virtual_bytes,
    );
    family(
        "process_open_fds",
        "gauge",
        "Open file descriptors.",
        "",
        p.open_fds,
    );
    if let Some(max) = p.max_fds {
        family(
            "process_max_fds",
            "gauge",
            "Limit on open file descriptors.",
            "",
            max,
        );
    }
    family(
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since the Unix epoch.",
        "",
        p.start_time_seconds,
    );
    out
}

/// What `/proc/self` says about this process.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: f64,
    pub resident_bytes: f64,
    pub virtual_bytes: f64,
    pub open_fds: f64,
    pub max_fds: Option<f64>,
    pub start_time_seconds: f64,
}

/// NB: `/proc/<pid>/stat` counts in clock ticks (`sysconf(_SC_CLK_TCK)`), which is 100 on
/// every Linux architecture Kubernetes runs on; reading it would need `unsafe` libc.
const CLOCK_TICKS: f64 = 100.0;

impl ProcessStats {
    /// `None` when `/proc/self` is not there (not Linux) or unreadable.
    pub fn read() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let boot = std::fs::read_to_string("/proc/stat").ok()?;
        // Fields after the command (which may hold spaces and parentheses): state is
        // field 3, utime 14, stime 15, starttime 22.
        let after = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = after.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3)?.parse::<f64>().ok();
        let kb = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))?
                .split_whitespace()
                .next()?
                .parse::<f64>()
                .ok()
                .map(|v| v * 1024.0)
        };
        let btime: f64 = boot
            .lines()
            .find_map(|l| l.strip_prefix("btime "))?
            .trim()
            .parse()
            .ok()?;
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as f64;
        let max_fds = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|l| {
                l.lines()
                    .find_map(|l| l.strip_prefix("Max open files"))?
                    .split_whitespace()
                    .next()?
                    .parse::<f64>()
                    .ok()
            });
        Some(Self {
            cpu_seconds: (field(14)? + field(15)?) / CLOCK_TICKS,
            resident_bytes: kb("VmRSS:")?,
            virtual_bytes: kb("VmSize:")?,
            open_fds,
            max_fds,
            start_time_seconds: btime + field(22)? / CLOCK_TICKS,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiates_openmetrics_only_when_asked() {
        assert_eq!(Format::negotiate(None), Format::Text);
        assert_eq!(
            Format::negotiate(Some("text/plain;version=0.0.4")),
            Format::Text
        );
        assert_eq!(Format::negotiate(Some("*/*")), Format::Text);
        assert_eq!(
            Format::negotiate(Some(
                "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
            )),
            Format::OpenMetrics
        );
    }

    #[test]
    fn counters_are_named_after_their_samples_in_the_text_format() {
        let om = "# HELP lps_claims Jobs claimed.\n# TYPE lps_claims counter\nlps_claims_total 3\n\
                  # HELP lps_age Age.\n# TYPE lps_age gauge\n# UNIT lps_age seconds\nlps_age 1.5\n# EOF\n";
        let text = render(om, "coordinator", "1.2.3", Format::Text);
        assert!(
            text.starts_with(
                "# HELP lps_claims_total Jobs claimed.\n# TYPE lps_claims_total counter\nlps_claims_total 3\n\
                 # HELP lps_age Age.\n# TYPE lps_age gauge\nlps_age 1.5\n"
            ),
            "{text}"
        );
        assert!(
            !text.contains("# EOF") && !text.contains("# UNIT"),
            "{text}"
        );
        assert!(
            text.contains("lps_build_info{component=\"coordinator\",version=\"1.2.3\"} 1"),
            "{text}"
        );
        let om_out = render(om, "coordinator", "1.2.3", Format::OpenMetrics);
        assert!(om_out.ends_with("# EOF\n") && om_out.matches("# EOF").count() == 1);
    }

    #[test]
    fn reads_this_process_from_proc() {
        if !std::path::Path::new("/proc/self/stat").exists() {
            return;
        }
        let p = ProcessStats::read().expect("readable /proc/self");
        assert!(p.resident_bytes > 0.0 && p.open_fds >= 3.0, "{p:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(p.start_time_seconds <= now + 1.0 && p.start_time_seconds > now - 86400.0 * 365.0);
    }
}
