//! Host figures for heartbeats: the one-minute load average per core and this process's
//! resident memory. Read from Linux `/proc`; elsewhere (or when unreadable) they are 0,
//! which the coordinator shows as "unknown". Cheap, synchronous reads of tiny files.

/// One-minute load average divided by the number of cores.
pub fn load_per_core() -> f32 {
    let Ok(text) = std::fs::read_to_string("/proc/loadavg") else {
        return 0.0;
    };
    let load: f32 = text
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    #[allow(clippy::cast_precision_loss)] // a core count is far below f32's exact range
    let cores = cores as f32;
    load / cores
}

/// Resident set size of this process, in bytes.
pub fn rss_bytes() -> u64 {
    const PAGE_SIZE: u64 = 4096;
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|text| text.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages.saturating_mul(PAGE_SIZE))
}

#[cfg(test)]
mod tests {
    #[test]
    fn figures_are_sane() {
        let load = super::load_per_core();
        assert!(load.is_finite() && load >= 0.0);
        if cfg!(target_os = "linux") {
            assert!(super::rss_bytes() > 0);
        }
    }
}
