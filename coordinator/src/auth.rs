//! Bearer-token authentication for the gRPC services.
//!
//! Three token sets, from secrets: clients (SearchService, OpsService reads), admins
//! (OpsService writes; also accepted wherever a client token is) and nodes
//! (NodeService). Tokens are compared in constant time and never logged or echoed.
//!
//! Client and admin tokens have names (`name=token` in the setting): a search belongs to
//! the client that made it ([`Caller`]), its idempotency key is scoped to that client, and a
//! client sees only its own searches while an admin sees all. An unnamed token is named
//! after a fingerprint of itself (`client-3f2a9c1e`), stable across restarts and useless for
//! guessing the token.

use std::{fmt, sync::Arc};

use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;
use tonic::{Code, Status, metadata::MetadataMap};

use crate::error::refused;

/// Who a call must come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Admin,
    Node,
}

/// A secret token and, for client and admin tokens, the name of whoever holds it. `Debug`
/// shows the name, never the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    secret: String,
    name: Option<Arc<str>>,
}

impl Token {
    /// An unnamed token: [`Token::name`] derives a name from it.
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            secret: token.into(),
            name: None,
        }
    }

    /// A token held by `name` (a client or admin name, see [`valid_name`]).
    pub fn named(name: &str, token: impl Into<String>) -> Self {
        Self {
            secret: token.into(),
            name: Some(name.into()),
        }
    }

    /// The holder's name: the configured one, else `{prefix}-` and the first 8 hex digits
    /// of the token's SHA-256.
    pub fn name(&self, prefix: &str) -> Arc<str> {
        match &self.name {
            Some(name) => name.clone(),
            None => {
                let digest = Sha256::digest(self.secret.as_bytes());
                let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
                format!("{prefix}-{hex}").into()
            }
        }
    }

    fn matches(&self, presented: &[u8]) -> bool {
        self.secret.as_bytes().ct_eq(presented).into()
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) => write!(f, "Token({name}: ***)"),
            None => f.write_str("Token(***)"),
        }
    }
}

/// Whether `name` may name a client or admin: 1..=64 ASCII letters, digits, `.`, `_`, `-`,
/// starting with a letter or digit.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Who is calling SearchService: the name of the client (or admin) token presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub name: Arc<str>,
    /// An admin token: sees and cancels every client's searches.
    pub admin: bool,
}

impl Caller {
    /// The client whose searches this caller may see: `None` for an admin (all of them).
    pub fn scope(&self) -> Option<&str> {
        (!self.admin).then_some(&*self.name)
    }
}

/// The configured token sets.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    pub client: Vec<Token>,
    pub admin: Vec<Token>,
    pub node: Vec<Token>,
    /// Per node token (same index), the node ids it may use (`LPS_NODE_TOKEN_NODES`);
    /// absent or `None`: any.
    pub node_ids: Vec<Option<Vec<String>>>,
}

impl Tokens {
    /// The SearchService caller the `authorization: Bearer <token>` metadata names: a
    /// client or an admin token (an admin token is accepted wherever a client's is).
    pub fn caller(&self, metadata: &MetadataMap) -> Result<Caller, Status> {
        let presented = bearer(metadata).ok_or_else(missing_token)?;
        // NB: compare against every token so timing does not reveal which one matched.
        let find = |set: &[Token], prefix: &str| {
            set.iter().fold(None, |found: Option<Arc<str>>, t| {
                let hit = t.matches(presented.as_bytes());
                found.or_else(|| hit.then(|| t.name(prefix)))
            })
        };
        let admin = find(&self.admin, "admin");
        let client = find(&self.client, "client");
        match (admin, client) {
            (Some(name), _) => Ok(Caller { name, admin: true }),
            (None, Some(name)) => Ok(Caller { name, admin: false }),
            (None, None) => Err(refused(
                Code::Unauthenticated,
                "UNKNOWN_TOKEN",
                "unknown bearer token",
            )),
        }
    }

    /// Checks the `authorization: Bearer <token>` metadata for `role`.
    pub fn check(&self, metadata: &MetadataMap, role: Role) -> Result<(), Status> {
        let presented = bearer(metadata).ok_or_else(missing_token)?;
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
            Err(refused(
                Code::PermissionDenied,
                "ADMIN_TOKEN_REQUIRED",
                "this call needs an admin token",
            ))
        } else {
            Err(refused(
                Code::Unauthenticated,
                "UNKNOWN_TOKEN",
                "unknown bearer token",
            ))
        }
    }
}

impl Tokens {
    /// Whether the node token presented may use `node_id` (the token itself was checked
    /// already): `PermissionDenied` naming the id when the token is limited to others.
    /// Patterns are node ids, or a prefix ending in `*` (`crawler-node-*`).
    pub fn check_node_id(&self, metadata: &MetadataMap, node_id: &str) -> Result<(), Status> {
        let Some(presented) = bearer(metadata) else {
            return Err(missing_token());
        };
        let allowed = self
            .node
            .iter()
            .zip(self.node_ids.iter().chain(std::iter::repeat(&None)))
            .filter(|(t, _)| t.matches(presented.as_bytes()))
            .any(|(_, ids)| match ids {
                None => true,
                Some(ids) => ids.iter().any(|p| match p.strip_suffix('*') {
                    Some(prefix) => node_id.starts_with(prefix),
                    None => p == node_id,
                }),
            });
        if allowed {
            Ok(())
        } else {
            Err(refused(
                Code::PermissionDenied,
                "NODE_ID_NOT_ALLOWED",
                format!("this node token may not use node id {node_id:?} (LPS_NODE_TOKEN_NODES)"),
            ))
        }
    }
}

fn missing_token() -> Status {
    refused(
        Code::Unauthenticated,
        "MISSING_TOKEN",
        "missing `authorization: Bearer <token>` metadata",
    )
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
            node_ids: Vec::new(),
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

    #[test]
    fn a_caller_is_named_by_its_token() {
        let tokens = Tokens {
            client: vec![
                Token::named("team-a", "secret-a"),
                Token::new("secret-unnamed"),
            ],
            admin: vec![Token::named("ops", "secret-ops")],
            ..Tokens::default()
        };
        let a = tokens.caller(&md("Bearer secret-a")).unwrap();
        assert_eq!(
            (&*a.name, a.admin, a.scope()),
            ("team-a", false, Some("team-a"))
        );
        let ops = tokens.caller(&md("Bearer secret-ops")).unwrap();
        assert_eq!((&*ops.name, ops.admin, ops.scope()), ("ops", true, None));
        let unnamed = tokens.caller(&md("Bearer secret-unnamed")).unwrap();
        assert!(unnamed.name.starts_with("client-"), "{unnamed:?}");
        assert_eq!(unnamed.name.len(), "client-".len() + 8);
        assert!(!unnamed.name.contains("secret"));
        assert_eq!(
            tokens.caller(&md("Bearer nope")).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        assert!(!format!("{tokens:?}").contains("secret"));
        assert!(valid_name("team-a.v2_x") && !valid_name("-x") && !valid_name("a b"));
    }

    #[test]
    fn a_node_token_may_be_limited_to_node_ids() {
        let tokens = Tokens {
            node: vec![Token::new("n1"), Token::new("n2")],
            node_ids: vec![Some(vec!["crawler-node-*".into(), "edge".into()]), None],
            ..Tokens::default()
        };
        assert!(
            tokens
                .check_node_id(&md("Bearer n1"), "crawler-node-7")
                .is_ok()
        );
        assert!(tokens.check_node_id(&md("Bearer n1"), "edge").is_ok());
        let e = tokens.check_node_id(&md("Bearer n1"), "other").unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
        assert!(e.message().contains("\"other\""), "{e:?}");
        assert!(tokens.check_node_id(&md("Bearer n2"), "other").is_ok());
    }
}
