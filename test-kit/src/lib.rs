//! LPS test kit.
#![forbid(unsafe_code)]
