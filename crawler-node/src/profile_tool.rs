//! `crawler-node profile …`: tools for people who already have site profiles
//! (`docs/site-profiles.md`), with the compiler the coordinator loads them with.
//!
//! - `profile check DIR`: every `*.toml` file of DIR, each file's verdict on a line of its
//!   own (`ok  FILE  mall ID` or `FAIL  FILE  field: reason`); false when any fails.
//! - `profile convert FILE`: a format-1 profile rewritten as format 2, on stdout (checked:
//!   what it prints loads).

use std::{io::Write, path::Path};

use anyhow::Context as _;

/// Checks every `*.toml` file in `dir`; `Ok(true)` when all load.
pub fn check(dir: &Path, out: &mut impl Write) -> anyhow::Result<bool> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("{}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    if files.is_empty() {
        anyhow::bail!("{}: no *.toml profile files", dir.display());
    }
    let mut failed = 0;
    for path in &files {
        match lps_profiles::format::parse_file(path) {
            Ok(p) => writeln!(out, "ok    {}  mall {}", path.display(), p.wire.id)?,
            Err(e) => {
                failed += 1;
                writeln!(out, "FAIL  {}  {}: {}", path.display(), e.field, e.reason)?;
            }
        }
    }
    writeln!(
        out,
        "{} of {} profiles load",
        files.len() - failed,
        files.len()
    )?;
    Ok(failed == 0)
}

/// Rewrites the format-1 profile `file` as format 2 and writes it to `out`.
pub fn convert(file: &Path, out: &mut impl Write) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(file).with_context(|| format!("{}", file.display()))?;
    let converted = lps_profiles::format::convert_format1(&file.display().to_string(), &text)?;
    out.write_all(converted.as_bytes())?;
    Ok(())
}
