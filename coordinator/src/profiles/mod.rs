//! Site profiles and the judge's vocabulary: malls and words are data, not code (DESIGN §5).
//!
//! The file formats, their validation and the built-in malls and words are the crate
//! `lps-profiles` (`docs/site-profiles.md`, `docs/vocabulary.md`); this module adds what the
//! coordinator does with them: the mall's politeness limits for the queue, and the one
//! vocabulary this coordinator runs with. Built-in profiles are compiled in; a directory
//! (`LPS_PROFILES_DIR`) overrides or adds profiles by id without a rebuild. The vocabulary
//! is the built-in one or the file of `LPS_VOCABULARY_FILE` instead. The coordinator sends
//! both to nodes in `Welcome`.
//!
//! A profile or vocabulary that cannot be used is a start-up error naming the file and the
//! field — including a profile's `[vocabulary]` additions that the coordinator's vocabulary
//! cannot take (they were checked against the built-in words when the profile was read).
//!
//! [`watch`] keeps the profiles current while the coordinator runs: it reads the directory
//! every `LPS_PROFILES_POLL`, and an edit that validates replaces the set the node streams
//! send; each set is named by its [`revision`].

pub mod watch;

use std::path::Path;

use sha2::{Digest as _, Sha256};

use lps_profiles::vocabulary::Lexicon;
pub use lps_profiles::{
    format::{Profile as SiteProfile, ProfileError, parse},
    vocabulary::VocabularyError,
};
use lps_proto::pb;

use crate::queue::MallLimits;

/// The built-in profiles, overridden and extended by the `*.toml` files of `dir`.
pub fn load(dir: Option<&Path>) -> Result<Vec<SiteProfile>, ProfileError> {
    lps_profiles::format::load(dir)
}

/// [`load`] with the [`revision`] of what it read.
pub fn load_with_revision(dir: Option<&Path>) -> Result<(Vec<SiteProfile>, String), ProfileError> {
    let files = match dir {
        Some(dir) => lps_profiles::format::read_dir(dir)?,
        None => Vec::new(),
    };
    Ok((lps_profiles::format::load_files(&files)?, revision(&files)))
}

/// The revision of a profile set: 16 hex digits of a SHA-256 over the built-in profiles
/// and the directory's files ((path, contents), as `read_dir` returns them) by file name
/// and contents. The same files give the same revision on every replica, wherever each
/// mounts them; any edit gives another.
pub fn revision(files: &[(String, String)]) -> String {
    let mut hash = Sha256::new();
    let builtin = lps_profiles::format::BUILTIN
        .iter()
        .map(|(name, text)| ((*name).to_owned(), *text));
    let dir = files.iter().map(|(path, text)| {
        let name = Path::new(path)
            .file_name()
            .map_or_else(|| path.clone(), |n| n.to_string_lossy().into_owned());
        (name, text.as_str())
    });
    for (name, text) in builtin.chain(dir) {
        // NB: length-prefixed, so that no two file lists hash alike by moving a boundary.
        for part in [name.as_bytes(), text.as_bytes()] {
            hash.update(u64::try_from(part.len()).unwrap_or(u64::MAX).to_be_bytes());
            hash.update(part);
        }
    }
    hash.finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A vocabulary this coordinator cannot run with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VocabularyLoadError {
    /// The vocabulary file itself (`LPS_VOCABULARY_FILE`, or the built-in one).
    #[error(transparent)]
    File(#[from] VocabularyError),
    /// A profile's `[vocabulary]` additions that this vocabulary refuses (a new kind
    /// without `when_silent`, a rule that differs from the kind's in the file, ...).
    #[error(
        "site profile {file} (mall {mall}): {field}: {reason} (with the vocabulary {vocabulary})"
    )]
    Additions {
        file: String,
        mall: String,
        field: String,
        reason: String,
        /// The vocabulary file the additions were compiled with (`built-in`, or a path).
        vocabulary: String,
    },
}

/// The judge's vocabulary: the built-in one, or the file at `file` instead; compiled with
/// every profile's additions, so that each mall's word lists are usable on a node.
pub fn vocabulary(
    file: Option<&Path>,
    profiles: &[SiteProfile],
) -> Result<pb::Vocabulary, VocabularyLoadError> {
    let vocabulary = lps_profiles::vocabulary::load(file)?;
    for profile in profiles {
        let Some(additions) = &profile.wire.vocabulary else {
            continue;
        };
        Lexicon::compile(&vocabulary, Some(additions)).map_err(|e| {
            VocabularyLoadError::Additions {
                file: profile.file.clone(),
                mall: profile.wire.id.clone(),
                field: e.field,
                reason: e.reason,
                vocabulary: file.map_or_else(|| "built-in".to_owned(), |p| p.display().to_string()),
            }
        })?;
    }
    Ok(vocabulary)
}

/// The queue limits of a mall, enabled or not.
pub fn limits(profile: &SiteProfile, enabled: bool) -> MallLimits {
    MallLimits {
        mall: profile.mall(),
        enabled,
        max_running: profile.max_running,
        min_start_gap: profile.min_start_gap,
        spend_cap_hourly_usd: profile.spend_cap_hourly_usd,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_profile_s_politeness_becomes_its_queue_limits() {
        let naver = load(None)
            .unwrap()
            .into_iter()
            .find(|p| p.wire.id == "naver")
            .unwrap();
        let on = limits(&naver, true);
        assert_eq!(
            (
                on.mall.as_str(),
                on.enabled,
                on.max_running,
                on.min_start_gap
            ),
            ("naver", true, Some(4), Duration::from_secs(2))
        );
        assert!(!limits(&naver, false).enabled);
    }

    /// A temporary directory, removed on drop.
    struct TempDir(std::path::PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "lps-coordinator-{tag}-{}-{}",
                std::process::id(),
                fastrand::u32(..)
            ));
            std::fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// The built-in testmall-alpha with `table` appended.
    fn alpha_with(table: &str) -> SiteProfile {
        let text = lps_profiles::format::builtin_text("testmall-alpha.toml").unwrap();
        parse("/p/alpha.toml", &format!("{text}\n{table}")).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_revision_names_the_file_names_and_contents_wherever_they_are_mounted() {
        let a = revision(&[("/etc/lps/profiles/shop.toml".into(), "format = 2".into())]);
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(
            a,
            revision(&[("/elsewhere/shop.toml".into(), "format = 2".into())]),
            "the same files on another replica"
        );
        assert_ne!(
            a,
            revision(&[("/p/shop.toml".into(), "format = 2 ".into())])
        );
        assert_ne!(
            a,
            revision(&[("/p/shop2.toml".into(), "format = 2".into())])
        );
        assert_ne!(a, revision(&[]), "the built-in profiles alone");
        // Length-prefixed: moving the boundary between name and contents changes it.
        assert_ne!(
            revision(&[("/p/ab".into(), "c".into())]),
            revision(&[("/p/a".into(), "bc".into())])
        );
    }

    #[test]
    fn the_built_in_vocabulary_takes_the_built_in_profiles() {
        let profiles = load(None).unwrap();
        assert_eq!(
            vocabulary(None, &profiles).unwrap(),
            Lexicon::builtin_wire()
        );
    }

    #[test]
    fn a_vocabulary_file_replaces_the_built_in_one() {
        let dir = TempDir::new("vocabulary");
        let path = dir.0.join("vocabulary.toml");
        std::fs::write(
            &path,
            "format = 1\nstopwords = [\"우리몰특가\"]\n[units]\nvolume = { ml = 1 }\n",
        )
        .unwrap();
        let v = vocabulary(Some(&path), &load(None).unwrap()).unwrap();
        assert_eq!(v.stopwords, ["우리몰특가"]);
        assert!(v.aliases.is_empty(), "replaced, not added to");
    }

    #[test]
    fn a_malformed_vocabulary_file_is_named_with_its_entry() {
        let dir = TempDir::new("vocabulary");
        let path = dir.0.join("vocabulary.toml");
        std::fs::write(&path, "format = 1\nstopwords = [\"정품\", \"--\"]\n").unwrap();
        let e = vocabulary(Some(&path), &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "vocabulary {}: stopwords[1]: is empty after normalisation",
                path.display()
            )
        );
        let missing = dir.0.join("missing.toml");
        let e = vocabulary(Some(&missing), &[]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("vocabulary {}: (file): ", missing.display())),
            "{e}"
        );
    }

    #[test]
    fn profile_additions_are_checked_against_the_coordinator_s_vocabulary() {
        // Fine with the built-in words (flavour is a kind there) ...
        let alpha = alpha_with(
            "[[vocabulary.variants]]\nname = \"flavour\"\nvalues = [[\"흑임자\", \"black sesame\"]]\n",
        );
        vocabulary(None, std::slice::from_ref(&alpha)).unwrap();
        // ... but a vocabulary without that kind needs its rule.
        let dir = TempDir::new("vocabulary");
        let path = dir.0.join("vocabulary.toml");
        std::fs::write(
            &path,
            "format = 1\nstopwords = [\"정품\"]\n[units]\nvolume = { ml = 1 }\n",
        )
        .unwrap();
        let e = vocabulary(Some(&path), &[alpha]).unwrap_err();
        assert!(
            matches!(&e, VocabularyLoadError::Additions { file, mall, field, .. }
                if file == "/p/alpha.toml"
                    && mall == "testmall-alpha"
                    && field == "vocabulary.variants[0].when_silent"),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(
            text.starts_with(
                "site profile /p/alpha.toml (mall testmall-alpha): vocabulary.variants[0].when_silent: "
            ) && text.ends_with(&format!("(with the vocabulary {})", path.display())),
            "{text}"
        );
    }
}
