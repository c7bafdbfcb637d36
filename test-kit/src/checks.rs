//! Checks both services' tests run on what they expose: their `/metrics` text through
//! `promtool`, and their command lines' flag names.

use std::{
    io::Write as _,
    process::{Command, Stdio},
};

/// `promtool check metrics` on `text`: `Some("")` when it passes, `Some(complaints)` when
/// it does not, `None` (with a loud message naming `what`) when promtool is not installed
/// (`scripts/test.sh` installs it).
pub fn promtool_check_metrics(what: &str, text: &str) -> Option<String> {
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!(
            "!!!!! promtool not found: {what} NOT checked (apt-get install prometheus) !!!!!"
        );
        return None;
    };
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
