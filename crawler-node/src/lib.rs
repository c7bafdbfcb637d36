//! LPS crawler node.
#![forbid(unsafe_code)]

pub mod judge;
