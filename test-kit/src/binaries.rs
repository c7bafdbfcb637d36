//! Binaries of other workspace packages for tests that run them as processes:
//! `CARGO_BIN_EXE_*` only names the binaries of a test's own package, so a coordinator
//! test that runs `crawler-node` or `lpsctl` builds it here first.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Command,
    sync::Mutex,
};

/// The binary `bin` of workspace package `package`, built now (once per test process; a
/// no-op when it is up to date) by the cargo that runs the test, into the target
/// directory and with the profile the test itself was built with. Panics with cargo's
/// output when the build fails.
pub fn workspace_binary(package: &str, bin: &str) -> PathBuf {
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let built = built.get_or_insert_with(HashMap::new);
    if let Some(path) = built.get(bin) {
        return path.clone();
    }
    // NB: a test runs as <target>/<profile>/deps/<test>-<hash>.
    let exe = std::env::current_exe().expect("the test's own path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("<target>/<profile>/deps/<test>")
        .to_path_buf();
    let target_dir = profile_dir.parent().expect("<target>/<profile>");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["build", "-q", "-p", package, "--bin", bin])
        .arg("--target-dir")
        .arg(target_dir);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    let out = build.output().expect("cannot run cargo");
    assert!(
        out.status.success(),
        "building {bin} of {package} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let binary = profile_dir.join(bin);
    assert!(binary.is_file(), "no binary at {}", binary.display());
    built.insert(bin.to_owned(), binary.clone());
    binary
}
