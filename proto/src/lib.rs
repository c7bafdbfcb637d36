//! LPS wire protocol and the validated model built from it.
//!
//! - [`pb`]: the code generated from `proto/lps/v1/*.proto` (messages, tonic clients and
//!   servers). Only gRPC adapters use these types.
//! - [`model`]: the validated types the rest of LPS works with. Validation happens once, in
//!   `TryFrom<pb::X>` on receive; a [`model::FieldError`] names the offending field.
//! - [`json`]: the proto3 JSON mapping of any message (delivery payloads).
//! - [`FILE_DESCRIPTOR_SET`]: the encoded descriptors, for gRPC reflection and [`json`].
#![forbid(unsafe_code)]

pub mod json;
pub mod model;

/// Generated protobuf and gRPC code for package `lps.v1`.
#[allow(clippy::all, missing_debug_implementations)]
pub mod pb {
    tonic::include_proto!("lps.v1");
}

/// The version of the node protocol this build speaks (`Hello.protocol_version`).
pub const PROTOCOL_VERSION: u32 = 2;

/// Encoded `FileDescriptorSet` of every LPS proto file, for `tonic-reflection`.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/lps_descriptor.bin"));
