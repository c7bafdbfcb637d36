//! CI cannot pass vacuously: a check that needs an outside checker (promtool, node, …)
//! fails under `CI=true` when the checker is missing, in the scripts and in the tests.
//!
//! - `scripts/lib/checkers.sh` is run for real: a checker that is not there (and may not
//!   be installed) is exit status 1 under `CI=true`, a warning (2) elsewhere;
//! - the scripts and the tests are read: they look an outside checker up only through
//!   that script (`lps_checker_ensure`) or `lps_test_kit::checks::tool`, so no private
//!   lookup can turn a missing checker into a silent pass again.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Runs `script` in bash with `scripts/lib/checkers.sh` sourced, PATH limited to the
/// basics, nothing installed, and `CI` as given; returns the exit status and stderr.
fn checkers(script: &str, ci: Option<&str>) -> (i32, String) {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!(
            "source '{}'; {script}",
            repo().join("scripts/lib/checkers.sh").display()
        ))
        .env("PATH", "/usr/bin:/bin")
        .env("LPS_CHECKERS_NO_INSTALL", "1")
        .env_remove("CI");
    if let Some(ci) = ci {
        cmd.env("CI", ci);
    }
    let out = cmd.output().expect("run bash");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_missing_checker_fails_the_scripts_under_ci_and_warns_elsewhere() {
    let one = "lps_checker_ensure lps-no-such-checker lps-no-such-package 'the frobs'";
    let (status, said) = checkers(one, Some("true"));
    assert_eq!(status, 1, "CI=true: {said}");
    assert!(
        said.contains("lps-no-such-checker") && said.contains("the frobs"),
        "{said}"
    );
    assert_eq!(checkers(one, Some("1")).0, 1);
    let (status, said) = checkers(one, None);
    assert_eq!(status, 2, "outside CI: {said}");
    assert!(said.contains("NOT checked"), "{said}");
    // The list the suite ensures, with one checker missing.
    let all = "LPS_CHECKERS='sh:dash:the shell
lps-no-such-checker:nopkg:the frobs'; lps_checkers_ensure";
    assert_eq!(checkers(all, Some("true")).0, 1);
    assert_eq!(checkers(all, None).0, 0);
    // A checker that is there is fine either way.
    assert_eq!(
        checkers("lps_checker_ensure sh dash 'the shell'", Some("true")).0,
        0
    );
}

/// `*.sh` and `*.rs` files under `dir`, recursively (build output and tools left out).
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !matches!(name.as_ref(), "target" | ".tools" | ".git" | "node_modules") {
                files(&path, out);
            }
        } else if name.ends_with(".sh") || name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// The checkers `scripts/lib/checkers.sh` installs.
const CHECKERS: &[&str] = &["promtool", "node"];

#[test]
fn checkers_are_looked_up_only_through_the_one_rule() {
    let root = repo();
    let mut all = Vec::new();
    for dir in [
        "scripts",
        "examples",
        "coordinator",
        "crawler-node",
        "cli",
        "test-kit",
        "proto",
        "bench",
    ] {
        files(&root.join(dir), &mut all);
    }
    let mut wrong = Vec::new();
    for path in &all {
        let rel = path.strip_prefix(&root).unwrap().display().to_string();
        if rel == "scripts/lib/checkers.sh"
            || rel == "test-kit/src/checks.rs"
            || rel == "test-kit/tests/no_vacuous_skips.rs"
        {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        for (no, line) in text.lines().enumerate() {
            let at = format!("{rel}:{}", no + 1);
            for checker in CHECKERS {
                if line.contains(&format!("command -v {checker}"))
                    || line.contains(&format!("which {checker}"))
                    || line.contains(&format!("Command::new(\"{checker}\")"))
                {
                    wrong.push(format!(
                        "{at}: looks up {checker} itself: `{}`",
                        line.trim()
                    ));
                }
            }
            // A walk over PATH is a private checker lookup.
            if rel.ends_with(".rs") && line.contains("split_paths(") {
                wrong.push(format!("{at}: walks PATH itself: `{}`", line.trim()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "use lps_checker_ensure (scripts/lib/checkers.sh) or lps_test_kit::checks::tool, \
         which fail under CI=true:\n{}",
        wrong.join("\n")
    );
}
