//! The proto3 JSON mapping of LPS messages (camelCase field names, enums by name, 64-bit
//! integers as strings, `Timestamp` as RFC 3339, default values left out), as gRPC's
//! JSON transcoding and `grpcurl` write it. It is read off [`crate::FILE_DESCRIPTOR_SET`]
//! (prost-reflect), so it follows the `.proto` files with no hand-written mapping:
//! delivery payloads use it, and receivers written in Rust read them with [`from_json`].

use std::sync::OnceLock;

use prost_reflect::{DescriptorPool, DeserializeOptions, DynamicMessage, SerializeOptions};

/// What went wrong turning a message into JSON or back.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error("no message type {0} in the LPS descriptors")]
    UnknownType(String),
    #[error("message does not decode as {0}: {1}")]
    Decode(String, prost::DecodeError),
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
}

fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        // NB: the set is built by build.rs from the same files as the generated code; one
        // that did not decode would fail every test that serialises a message.
        DescriptorPool::decode(crate::FILE_DESCRIPTOR_SET).expect("LPS file descriptor set")
    })
}

fn descriptor(full_name: &str) -> Result<prost_reflect::MessageDescriptor, JsonError> {
    pool()
        .get_message_by_name(full_name)
        .ok_or_else(|| JsonError::UnknownType(full_name.to_owned()))
}

/// `message` (of the proto type `full_name`, e.g. `lps.v1.DeliveryEvent`) in the proto3
/// JSON mapping.
pub fn to_json<M: prost::Message>(message: &M, full_name: &str) -> Result<String, JsonError> {
    let desc = descriptor(full_name)?;
    let dynamic = DynamicMessage::decode(desc, message.encode_to_vec().as_slice())
        .map_err(|e| JsonError::Decode(full_name.to_owned(), e))?;
    let mut out = serde_json::Serializer::new(Vec::new());
    dynamic.serialize_with_options(&mut out, &SerializeOptions::new())?;
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8_lossy(&out.into_inner()).into_owned())
}

/// A message of the proto type `full_name` from its proto3 JSON mapping. Fields this build
/// does not know are ignored, so a newer sender's additions do not break an older reader.
pub fn from_json<M: prost::Message + Default>(json: &str, full_name: &str) -> Result<M, JsonError> {
    let desc = descriptor(full_name)?;
    let mut de = serde_json::Deserializer::from_str(json);
    let dynamic = DynamicMessage::deserialize_with_options(
        desc,
        &mut de,
        &DeserializeOptions::new().deny_unknown_fields(false),
    )?;
    de.end()?;
    dynamic
        .transcode_to::<M>()
        .map_err(|e| JsonError::Decode(full_name.to_owned(), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb;

    #[test]
    fn the_mapping_is_proto3_json_and_reads_back() {
        let event = pb::DeliveryEvent {
            event_id: "8d0b0c6e-8a43-4c43-9c8e-3c7d4d2a4f11".into(),
            kind: pb::DeliveryEventKind::SearchFinal as i32,
            occurred_at: Some(prost_types::Timestamp {
                seconds: 1_764_619_200,
                nanos: 0,
            }),
            destination: "orders".into(),
            search_id: 42,
            product_index: None,
            search: Some(pb::SearchStatus {
                search_id: 42,
                version: 7,
                r#final: true,
                ..Default::default()
            }),
            price_move: None,
        };
        let json = to_json(&event, "lps.v1.DeliveryEvent").unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["eventId"], "8d0b0c6e-8a43-4c43-9c8e-3c7d4d2a4f11");
        assert_eq!(v["kind"], "DELIVERY_EVENT_KIND_SEARCH_FINAL");
        assert_eq!(v["occurredAt"], "2025-12-01T20:00:00Z");
        assert_eq!(v["searchId"], "42", "int64 is a string");
        assert_eq!(v["search"]["final"], true);
        assert!(v.get("productIndex").is_none(), "unset optional left out");
        let back: pb::DeliveryEvent = from_json(&json, "lps.v1.DeliveryEvent").unwrap();
        assert_eq!(back, event);
        let newer = json.replacen('{', r#"{"fieldFromANewerSender":1,"#, 1);
        assert_eq!(
            from_json::<pb::DeliveryEvent>(&newer, "lps.v1.DeliveryEvent").unwrap(),
            event
        );
        assert!(matches!(
            to_json(&event, "lps.v1.NoSuchMessage"),
            Err(JsonError::UnknownType(_))
        ));
    }
}
