//! Checks both services' tests run on what they expose: their `/metrics` text through
//! `promtool`, and their command lines' flag names; and the one way a test gets an outside
//! checker (`promtool`, `node`, …): [`tool`].
//!
//! A check never passes by skipping in CI: a checker that is not on PATH fails the test
//! under `CI=true` (or `CI=1`), and is skipped with a loud message only elsewhere.
//! `scripts/test.sh` installs the checkers first (`scripts/lib/checkers.sh`).

use std::{
    ffi::OsStr,
    io::Write as _,
    path::PathBuf,
    process::{Command, Stdio},
};

/// Whether this run is CI's (`CI=true` or `CI=1`): a missing checker then fails.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The outside checker `name` on PATH, for a test that checks `what` with it.
///
/// # Panics
/// Under CI ([`in_ci`]) when `name` is not on PATH: the test fails instead of passing
/// without its check. Elsewhere it returns `None` after a loud message naming `what`.
pub fn tool(name: &str, what: &str) -> Option<PathBuf> {
    match find_tool(name, what, std::env::var_os("PATH").as_deref(), in_ci()) {
        Ok(found) => found,
        Err(message) => panic!("{message}"),
    }
}

/// [`tool`]'s decision over an explicit `path` (a PATH value) and `ci`, for a check of `what`: `Ok(Some)` when
/// `name` is an executable file in one of its directories, `Err` naming the checker when it
/// is not and `ci` holds, else `Ok(None)` (after a loud message on stderr).
///
/// # Errors
/// `name` is not found and `ci` holds.
pub fn find_tool(
    name: &str,
    what: &str,
    path: Option<&OsStr>,
    ci: bool,
) -> Result<Option<PathBuf>, String> {
    let found = path.and_then(|path| {
        std::env::split_paths(path)
            .map(|dir| dir.join(name))
            .find(|p| is_executable(p))
    });
    if found.is_some() {
        return Ok(found);
    }
    let package = package_of(name);
    if ci {
        return Err(format!(
            "{name} is not on PATH and CI=true: {what} cannot pass by skipping \
             (apt-get install {package}; scripts/test.sh installs it)"
        ));
    }
    eprintln!("!!!!! {name} not on PATH (apt-get install {package}): {what} NOT checked !!!!!");
    Ok(None)
}

fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The Debian package a checker comes from (as `scripts/lib/checkers.sh` installs it).
fn package_of(name: &str) -> &str {
    match name {
        "promtool" => "prometheus",
        "node" => "nodejs",
        other => other,
    }
}

/// `promtool check metrics` on `text`: `Some("")` when it passes, `Some(complaints)` when
/// it does not, `None` when promtool is not installed outside CI (under CI that fails the
/// test, see [`tool`]; `scripts/test.sh` installs it).
pub fn promtool_check_metrics(what: &str, text: &str) -> Option<String> {
    let promtool = tool("promtool", what)?;
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool starts");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(text.as_bytes())
        .expect("promtool reads its input");
    let out = child.wait_with_output().expect("promtool ran");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(if out.status.success() && said.trim().is_empty() {
        String::new()
    } else {
        said
    })
}

/// Flags of `cmd` (and its subcommands) not named as their `LPS_*` variable
/// (`--node-slots` for LPS_NODE_SLOTS), as `--flag vs LPS_VAR`.
pub fn misnamed_flags(cmd: &clap::Command) -> Vec<String> {
    let mut wrong = Vec::new();
    for arg in cmd.get_arguments() {
        let (Some(long), Some(env)) = (arg.get_long(), arg.get_env()) else {
            continue;
        };
        let env = env.to_string_lossy();
        if let Some(name) = env.strip_prefix("LPS_")
            && name.to_lowercase().replace('_', "-") != long
        {
            wrong.push(format!("--{long} vs {env}"));
        }
    }
    for sub in cmd.get_subcommands() {
        wrong.extend(misnamed_flags(sub));
    }
    wrong
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory holding an executable `name` (and a non-executable `plain`).
    fn bin_dir(name: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("lps-tk-tool-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join(name);
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.join("plain"), "").unwrap();
        dir
    }

    #[test]
    fn a_missing_checker_fails_under_ci_and_is_skipped_elsewhere() {
        let empty = std::env::temp_dir().join(format!("lps-tk-empty-{}", std::process::id()));
        std::fs::create_dir_all(&empty).unwrap();
        let err = find_tool("promtool", "the frobs", Some(empty.as_os_str()), true).unwrap_err();
        assert!(err.contains("promtool") && err.contains("CI=true"), "{err}");
        assert!(err.contains("the frobs"), "{err}");
        assert!(err.contains("apt-get install prometheus"), "{err}");
        assert_eq!(
            find_tool("promtool", "the frobs", Some(empty.as_os_str()), false),
            Ok(None)
        );
        // No PATH at all is as missing.
        assert!(find_tool("node", "x", None, true).is_err());
    }

    #[test]
    fn a_checker_on_path_is_found_and_a_non_executable_file_is_not() {
        let dir = bin_dir("promtool");
        let path = std::env::join_paths(["/nonexistent-lps".into(), dir.clone()]).unwrap();
        assert_eq!(
            find_tool("promtool", "x", Some(&path), true),
            Ok(Some(dir.join("promtool")))
        );
        assert!(find_tool("plain", "x", Some(&path), true).is_err());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_flag_named_otherwise_than_its_variable_is_found() {
        let cmd = clap::Command::new("x")
            .arg(clap::Arg::new("a").long("node-slots").env("LPS_NODE_SLOTS"))
            .arg(clap::Arg::new("b").long("slots").env("LPS_NODE_WORKERS"))
            .arg(clap::Arg::new("c").long("database-url").env("DATABASE_URL"))
            .subcommand(clap::Command::new("y").arg(clap::Arg::new("d").long("y").env("LPS_Z")));
        assert_eq!(
            misnamed_flags(&cmd),
            ["--slots vs LPS_NODE_WORKERS", "--y vs LPS_Z"]
        );
    }
}
