//! `crawler-node profile check DIR` and `profile convert FILE`, run as the built binary on
//! a temporary folder of profiles.

use std::process::Command;

fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_crawler-node")
}

const V1: &str = r#"id = "oldmall"
display_name = "옛날몰"
search_url_template = "https://old.example/search?q={query}"
wait_for = "li.item, div.none"
card_selector = "li.item"
title_selector = "div.title"
price_selector = "div.price"
link_selector = "a.link"
no_results_selector = "div.none"
"#;

#[test]
fn check_names_every_files_verdict_and_convert_rewrites_format_one() {
    let dir = std::env::temp_dir().join(format!("lps-profile-tool-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let alpha = lps_profiles::format::builtin_text("testmall-alpha.toml").unwrap();
    std::fs::write(dir.join("alpha.toml"), alpha).unwrap();
    std::fs::write(dir.join("old.toml"), V1).unwrap();
    std::fs::write(
        dir.join("bad.toml"),
        alpha.replace("cards = \"li.product-item\"", "cards = \"li:hover-x\""),
    )
    .unwrap();

    let out = Command::new(binary())
        .args(["profile", "check"])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let line = |name: &str| {
        text.lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no line for {name}:\n{text}"))
            .to_owned()
    };
    assert!(line("alpha.toml").starts_with("ok"), "{text}");
    let bad = line("bad.toml");
    assert!(
        bad.starts_with("FAIL") && bad.contains("sources[0].cards"),
        "{bad}"
    );
    assert!(!bad.contains("developer"), "{bad}");
    let old = line("old.toml");
    assert!(
        old.starts_with("FAIL") && old.contains("profile convert"),
        "{old}"
    );
    assert!(text.contains("1 of 3 profiles load"), "{text}");

    let out = Command::new(binary())
        .args(["profile", "convert"])
        .arg(dir.join("old.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(dir.join("old.toml"), &out.stdout).unwrap();
    std::fs::remove_file(dir.join("bad.toml")).unwrap();
    let out = Command::new(binary())
        .args(["profile", "check"])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("2 of 2 profiles load"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}
