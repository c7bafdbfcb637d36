//! The node protocol's own documents name the version this build speaks.
//!
//! `PROTOCOL_VERSION` is the one home of the number; the documents that repeat it for
//! their readers (node.proto's header and field comments, its grpcurl example, the README
//! and DESIGN) are read here and every version number they state is compared with it, so a
//! bump that forgets one of them fails. Each version since 1 must also be described in
//! node.proto's version history ("Version N: …"), so a bump comes with what changed.

use std::path::{Path, PathBuf};

use lps_proto::PROTOCOL_VERSION;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the proto crate sits in the workspace")
        .to_path_buf()
}

fn read(relative: &str) -> String {
    let path = repo_root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every number that follows one of `markers` in `text` (spaces, quotes and colons between
/// them skipped), with the line it was found on.
fn numbers_after(text: &str, markers: &[&str]) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for line in text.lines() {
        for marker in markers {
            let mut rest = line;
            while let Some(at) = rest.find(marker) {
                rest = &rest[at + marker.len()..];
                let tail = rest.trim_start_matches([' ', '"', ':', '=']);
                let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
                if let Ok(n) = digits.parse() {
                    found.push((n, line.trim().to_owned()));
                }
            }
        }
    }
    found
}

/// The phrases by which the documents state the version the coordinator and node speak.
/// `protocol_version 7 not supported` (an example of a refused version) is not among them.
const MARKERS: &[&str] = &[
    "\"protocol_version\"",
    "want ",
    "speaks ",
    "protocol version ",
    "version of the node protocol is ",
];

#[test]
fn every_stated_protocol_version_is_the_one_this_build_speaks() {
    let mut wrong = Vec::new();
    for doc in ["proto/lps/v1/node.proto", "README.md", "docs/DESIGN.md"] {
        let text = read(doc);
        for (n, line) in numbers_after(&text, MARKERS) {
            // The version history names every version; only its entries may be older.
            if line.starts_with("// Version ") || line.starts_with("- Version ") {
                continue;
            }
            if n != PROTOCOL_VERSION {
                wrong.push(format!("{doc}: says {n} in `{line}`"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the protocol is version {PROTOCOL_VERSION}, but:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_grpcurl_example_and_the_header_state_the_version() {
    let proto = read("proto/lps/v1/node.proto");
    let example = numbers_after(&proto, &["\"protocol_version\""]);
    assert!(
        !example.is_empty(),
        "node.proto's grpcurl example sends no protocol_version"
    );
    let refusal = numbers_after(&proto, &["want "]);
    assert!(
        refusal.iter().any(|(n, _)| *n == PROTOCOL_VERSION),
        "node.proto's header does not show the refusal naming version {PROTOCOL_VERSION}"
    );
    let design = read("docs/DESIGN.md");
    assert!(
        design.contains(&format!("protocol version {PROTOCOL_VERSION}")),
        "DESIGN §3 does not name protocol version {PROTOCOL_VERSION}"
    );
}

#[test]
fn every_version_since_1_says_what_changed() {
    let proto = read("proto/lps/v1/node.proto");
    for version in 1..=PROTOCOL_VERSION {
        let entry = format!("// Version {version}: ");
        let line = proto
            .lines()
            .find(|line| line.trim_start().starts_with(&entry))
            .unwrap_or_else(|| panic!("node.proto's version history has no entry `{entry}…`"));
        assert!(
            line.trim().len() > entry.len() + 20,
            "node.proto's entry for version {version} does not say what changed: `{line}`"
        );
    }
}
