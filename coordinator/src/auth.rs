//! Bearer-token authentication for the gRPC services.
//!
//! Three token sets, from secrets: clients (SearchService, OpsService reads), admins
//! (OpsService writes; also accepted wherever a client token is) and nodes
//! (NodeService). Tokens are compared in constant time and never logged or echoed.

use std::fmt;

use subtle::ConstantTimeEq as _;
use tonic::{Status, metadata::MetadataMap};

/// Who a call must come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Admin,
    Node,
}

/// A secret token. `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    fn matches(&self, presented: &[u8]) -> bool {
        self.0.as_bytes().ct_eq(presented).into()
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(***)")
    }
}

/// The configured token sets.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    pub client: Vec<Token>,
    pub admin: Vec<Token>,
    pub node: Vec<Token>,
}

impl Tokens {
    /// Checks the `authorization: Bearer <token>` metadata for `role`.
    pub fn check(&self, metadata: &MetadataMap, role: Role) -> Result<(), Status> {
        let presented = bearer(metadata).ok_or_else(|| {
            Status::unauthenticated("missing `authorization: Bearer <token>` metadata")
        })?;
        let any = |set: &[Token]| {
            // NB: compare against every token so timing does not reveal which one matched.
            set.iter()
                .fold(false, |found, t| t.matches(presented.as_bytes()) | found)
        };
        let ok = match role {
            Role::Client => any(&self.client) | any(&self.admin),
            Role::Admin => any(&self.admin),
            Role::Node => any(&self.node),
        };
        if ok {
            Ok(())
        } else if role == Role::Admin && any(&self.client) {
            Err(Status::permission_denied("this call needs an admin token"))
        } else {
            Err(Status::unauthenticated("unknown bearer token"))
        }
    }
}

fn bearer(metadata: &MetadataMap) -> Option<&str> {
    let value = metadata.get("authorization")?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(value: &str) -> MetadataMap {
        let mut md = MetadataMap::new();
        md.insert("authorization", value.parse().unwrap());
        md
    }

    #[test]
    fn roles_are_separate() {
        let tokens = Tokens {
            client: vec![Token::new("c1")],
            admin: vec![Token::new("a1")],
            node: vec![Token::new("n1")],
        };
        assert!(tokens.check(&md("Bearer c1"), Role::Client).is_ok());
        assert!(tokens.check(&md("bearer a1"), Role::Client).is_ok());
        assert!(tokens.check(&md("Bearer a1"), Role::Admin).is_ok());
        assert_eq!(
            tokens
                .check(&md("Bearer c1"), Role::Admin)
                .unwrap_err()
                .code(),
            tonic::Code::PermissionDenied
        );
        assert_eq!(
            tokens
                .check(&md("Bearer n1"), Role::Client)
                .unwrap_err()
                .code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            tokens
                .check(&MetadataMap::new(), Role::Node)
                .unwrap_err()
                .code(),
            tonic::Code::Unauthenticated
        );
        assert!(!format!("{:?}", tokens).contains("c1"));
    }
}
