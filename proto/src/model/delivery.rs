//! Delivery destinations as a search names them: a name the operator configured
//! (`LPS_DESTINATIONS`), never a URL, so no caller can make the coordinator send a request
//! to an address of its choosing. Whether a name is configured is the coordinator's check.

use std::fmt;

use super::FieldError;

/// Most destinations one search may name (the `search_request.destinations` check).
pub const MAX_DESTINATIONS_PER_SEARCH: usize = 8;
/// Longest destination name.
pub const MAX_DESTINATION_NAME_CHARS: usize = 64;

/// A destination's name: 1..=64 of `[A-Za-z0-9._-]`, starting with a letter or a digit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DestinationName(String);

impl DestinationName {
    pub fn new(name: impl Into<String>) -> Result<Self, FieldError> {
        let name = name.into();
        if name.is_empty() || name.len() > MAX_DESTINATION_NAME_CHARS {
            return Err(FieldError::new(
                "destination",
                format!("must be 1..={MAX_DESTINATION_NAME_CHARS} characters"),
            ));
        }
        let valid = name
            .bytes()
            .enumerate()
            .all(|(i, b)| b.is_ascii_alphanumeric() || (i > 0 && matches!(b, b'.' | b'_' | b'-')));
        if !valid {
            return Err(FieldError::new(
                "destination",
                "only letters, digits, '.', '_' and '-' are allowed, starting with a letter or digit",
            ));
        }
        Ok(Self(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DestinationName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `SearchRequest.destinations`: each a valid name (`destinations[i]` otherwise), listed
/// once, at most [`MAX_DESTINATIONS_PER_SEARCH`]; `notify_each_product` needs one.
pub(super) fn destinations(
    raw: Vec<String>,
    notify_each_product: bool,
) -> Result<Vec<DestinationName>, FieldError> {
    if raw.len() > MAX_DESTINATIONS_PER_SEARCH {
        return Err(FieldError::new(
            "destinations",
            format!(
                "at most {MAX_DESTINATIONS_PER_SEARCH} destinations per request, got {}",
                raw.len()
            ),
        ));
    }
    let mut out: Vec<DestinationName> = Vec::with_capacity(raw.len());
    for (i, name) in raw.into_iter().enumerate() {
        let name = DestinationName::new(name)
            .map_err(|e| FieldError::new(format!("destinations[{i}]"), e.reason))?;
        if out.contains(&name) {
            return Err(FieldError::new(
                format!("destinations[{i}]"),
                format!("{name} is listed twice"),
            ));
        }
        out.push(name);
    }
    if notify_each_product && out.is_empty() {
        return Err(FieldError::new(
            "notify_each_product",
            "needs at least one destination",
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_fields_named() {
        assert!(DestinationName::new("orders-prod.v2").is_ok());
        assert!(DestinationName::new("").is_err());
        assert!(DestinationName::new("-x").is_err());
        assert!(DestinationName::new("https://evil.example/").is_err());
        assert_eq!(
            destinations(vec!["a".into(), "b c".into()], false)
                .unwrap_err()
                .field,
            "destinations[1]"
        );
        assert_eq!(
            destinations(vec!["a".into(), "a".into()], false)
                .unwrap_err()
                .field,
            "destinations[1]"
        );
        assert_eq!(
            destinations(vec![], true).unwrap_err().field,
            "notify_each_product"
        );
        assert_eq!(
            destinations(vec!["x".into(); 9], false).unwrap_err().field,
            "destinations"
        );
    }
}
