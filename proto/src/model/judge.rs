//! What a "not found" was decided with, so that a wrong one does not stick (DESIGN §2,
//! "Negative cache").
//!
//! A node judges cards with its build's rules ([`JUDGE_VERSION`]) and the vocabulary of
//! the job's mall: Welcome's base vocabulary with the profile's additions, named by
//! [`vocabulary_revision`]. The node reports both with every result ([`JudgedWith`]),
//! because only it knows what judged the cards: a result may be resent to another
//! replica, or after a restart, than the one whose Welcome it ran under, and its build may
//! not be the coordinator's. The coordinator stores them with a negative-cache entry and
//! reuses the entry only while it runs the same judge version and vocabulary revision.
//!
//! Pure; no I/O.

use prost::Message as _;
use sha2::{Digest as _, Sha256};

use super::RoundReport;
use crate::pb;

/// The version of the judge's rules (`crawler-node/src/judge/`), compiled into both
/// binaries. NB: bump it with every change of the judge that can change a verdict: a
/// not-found decided by another version is then never reused. The judge's test
/// `the_judge_version_follows_the_rules` holds a digest of its sources and fails on any
/// change until it is updated, so the bump is not forgotten.
pub const JUDGE_VERSION: u32 = 21;

/// The revision of the vocabulary a mall's cards are judged with: SHA-256 (the first 16
/// hex digits) of the base vocabulary's and the mall profile's additions' protobuf
/// encodings (deterministic: the messages hold no maps). Nodes and coordinators compute it
/// from the same messages, so they agree.
pub fn vocabulary_revision(base: &pb::Vocabulary, additions: Option<&pb::Vocabulary>) -> String {
    let mut hash = Sha256::new();
    hash.update(base.encode_to_vec());
    // NB: a length prefix apart, so no base and additions could hash as another pair.
    hash.update(
        u64::try_from(base.encoded_len())
            .unwrap_or(u64::MAX)
            .to_be_bytes(),
    );
    if let Some(additions) = additions {
        hash.update(additions.encode_to_vec());
    }
    hash.finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The judge and vocabulary a result was decided with.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct JudgedWith {
    /// The node's [`JUDGE_VERSION`]; 0 from a node too old to say.
    pub judge_version: u32,
    /// [`vocabulary_revision`] of the job's mall; empty from a node too old to say.
    pub vocabulary_revision: String,
}

impl JudgedWith {
    /// This build's judge with the vocabulary revision `vocabulary_revision`.
    pub fn current(vocabulary_revision: impl Into<String>) -> Self {
        Self {
            judge_version: JUDGE_VERSION,
            vocabulary_revision: vocabulary_revision.into(),
        }
    }

    /// Whether the node said what judged the cards.
    pub fn is_known(&self) -> bool {
        self.judge_version != 0 && !self.vocabulary_revision.is_empty()
    }
}

/// Why a job's answer is "not found"; each is remembered for its own time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotFoundKind {
    /// The mall said so: every round's page showed its no-results marker and no card.
    NoResults,
    /// The judge said so: cards were read and none was accepted (or the rounds do not
    /// say, as from an older node). Rules and vocabularies change, so it is kept shorter.
    Judged,
}

impl NotFoundKind {
    /// The kind the rounds of a not-found show.
    pub fn of(rounds: &[RoundReport]) -> Self {
        let read_none = |r: &RoundReport| r.cards_seen == 0 && r.excluded.values().all(|&n| n == 0);
        if !rounds.is_empty() && rounds.iter().all(read_none) {
            Self::NoResults
        } else {
            Self::Judged
        }
    }

    /// The name stored with a negative-cache entry.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoResults => "no_results",
            Self::Judged => "judged",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(cards_seen: u32, excluded: &[(&str, u32)]) -> RoundReport {
        RoundReport {
            kind: "original".into(),
            query: "q".into(),
            cards_seen,
            matches: 0,
            elapsed_ms: 1,
            source: String::new(),
            excluded: excluded
                .iter()
                .map(|(k, n)| ((*k).to_owned(), *n))
                .collect(),
            pages: 1,
        }
    }

    #[test]
    fn a_not_found_is_the_malls_only_when_no_round_read_a_card() {
        assert_eq!(
            NotFoundKind::of(&[round(0, &[]), round(0, &[])]),
            NotFoundKind::NoResults
        );
        for rounds in [
            vec![round(0, &[]), round(3, &[])],
            // Every card left out by its class is still a page of cards, not the mall's word.
            vec![round(0, &[("ad", 2)])],
            // Rounds unknown (an older node): the shorter time.
            vec![],
        ] {
            assert_eq!(
                NotFoundKind::of(&rounds),
                NotFoundKind::Judged,
                "{rounds:?}"
            );
        }
    }

    #[test]
    fn the_revision_follows_the_words_and_the_additions() {
        let base = pb::Vocabulary {
            stopwords: vec!["무료배송".into()],
            ..Default::default()
        };
        let other = pb::Vocabulary {
            stopwords: vec!["무료배송".into(), "정품".into()],
            ..Default::default()
        };
        let r = vocabulary_revision(&base, None);
        assert_eq!(r.len(), 16);
        assert_eq!(r, vocabulary_revision(&base.clone(), None), "stable");
        assert_ne!(r, vocabulary_revision(&other, None));
        assert_ne!(r, vocabulary_revision(&base, Some(&other)));
        assert_ne!(
            vocabulary_revision(&base, Some(&other)),
            vocabulary_revision(&other, Some(&base))
        );
    }
}
