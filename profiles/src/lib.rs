//! LPS site profiles: malls as data (DESIGN §5).
//!
//! - [`format`](mod@format): the TOML file format (version 2), its validation and the built-in malls;
//! - [`compiled`]: a profile's selectors, regexes and JSON paths parsed once (validation is
//!   compiling: a profile that does not compile names the field);
//! - [`extract`]: reading result cards out of what a page holds (card elements, inline JSON,
//!   captured responses, an API answer) with a profile, classes and all;
//! - [`price`]: amounts, shipping texts and their semantics;
//! - [`jsonpath`]: the JSON path subset profiles use;
//! - [`normalize`](mod@normalize): title normalisation shared by extraction and the judge;
//! - [`vocabulary`]: the same-product judge's word lists as data, and their compiled form.
#![forbid(unsafe_code)]

pub mod compiled;
pub mod extract;
pub mod format;
pub mod jsonpath;
pub mod normalize;
pub mod price;
pub mod vocabulary;

pub use jsonpath::JsonPath;
