//! `lpsctl job ID --evidence DIR`: each run's page evidence written out as
//! `job-<id>-run-<n>.html` (and `.jpg` when the node took a screenshot).

use std::{
    io,
    path::{Path, PathBuf},
};

use lps_proto::pb;

/// Writes the evidence of every run of `job` that has some into `dir` (created when
/// missing); returns the path of each run's files without extension, in run order.
pub fn write(dir: &Path, job: &pb::Job) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for run in &job.runs {
        let Some(e) = &run.evidence else { continue };
        let base = dir.join(format!("job-{}-run-{}", job.job_id, run.lease_epoch));
        std::fs::write(base.with_extension("html"), &e.html)?;
        if !e.screenshot_jpeg.is_empty() {
            std::fs::write(base.with_extension("jpg"), &e.screenshot_jpeg)?;
        }
        written.push(base);
    }
    Ok(written)
}
