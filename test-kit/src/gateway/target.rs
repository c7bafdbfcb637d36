//! Where the gateway may connect: the allow-list, parsed and checked once at start.
//!
//! Invariant: every address the gateway ever connects to is an element of
//! [`AllowList`], and every element is a loopback socket address. Names are never
//! resolved through DNS; only IP literals and `localhost` (= 127.0.0.1) are understood,
//! in the allow-list and in requests alike. Anything else is refused.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::gateway::GatewayError;

/// A request's target as written by the client (`host`, `port`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// The validated allow-list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AllowList {
    addrs: Vec<SocketAddr>,
}

impl AllowList {
    /// Parses `host:port` entries; every one must be a loopback address.
    pub(crate) fn parse<S: AsRef<str>>(entries: &[S]) -> Result<AllowList, GatewayError> {
        let mut addrs = Vec::with_capacity(entries.len());
        for entry in entries {
            let entry = entry.as_ref().trim();
            let target = split_host_port(entry)
                .ok_or_else(|| GatewayError::BadAllowEntry(entry.to_owned()))?;
            let addr = literal_addr(&target)
                .ok_or_else(|| GatewayError::BadAllowEntry(entry.to_owned()))?;
            if !addr.ip().is_loopback() {
                return Err(GatewayError::NotLoopback(entry.to_owned()));
            }
            addrs.push(addr);
        }
        Ok(AllowList { addrs })
    }

    /// The address to connect to for `target`, if it is allowed.
    pub(crate) fn resolve(&self, target: &Target) -> Option<SocketAddr> {
        let addr = literal_addr(target)?;
        self.addrs.contains(&addr).then_some(addr)
    }

    /// The allowed addresses.
    pub(crate) fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }
}

/// Splits `host:port` or `[v6]:port`.
pub(crate) fn split_host_port(text: &str) -> Option<Target> {
    let (host, port) = text.rsplit_once(':')?;
    let port = port.parse::<u16>().ok()?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() || (host.contains(':') && !text.starts_with('[')) {
        return None;
    }
    Some(Target {
        host: host.to_ascii_lowercase(),
        port,
    })
}

/// The socket address of a target whose host is an IP literal or `localhost`.
fn literal_addr(target: &Target) -> Option<SocketAddr> {
    let host = target.host.trim_start_matches('[').trim_end_matches(']');
    let ip = if host.eq_ignore_ascii_case("localhost") {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        host.parse::<IpAddr>().ok()?
    };
    Some(SocketAddr::new(ip, target.port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_checks_loopback() {
        let list =
            AllowList::parse(&["127.0.0.1:8080", "localhost:9090", "[::1]:7070"]).expect("valid");
        assert_eq!(list.addrs().len(), 3);
        assert!(matches!(
            AllowList::parse(&["10.0.0.1:80"]),
            Err(GatewayError::NotLoopback(_))
        ));
        assert!(matches!(
            AllowList::parse(&["example.com:80"]),
            Err(GatewayError::BadAllowEntry(_))
        ));
        assert!(matches!(
            AllowList::parse(&["127.0.0.1"]),
            Err(GatewayError::BadAllowEntry(_))
        ));
    }

    #[test]
    fn resolves_only_listed_addresses() {
        let list = AllowList::parse(&["127.0.0.1:8080"]).expect("valid");
        let ok = split_host_port("localhost:8080").expect("target");
        assert_eq!(
            list.resolve(&ok),
            Some(SocketAddr::from(([127, 0, 0, 1], 8080)))
        );
        let other_port = split_host_port("127.0.0.1:8081").expect("target");
        assert_eq!(list.resolve(&other_port), None);
        let google = split_host_port("www.google.com:443").expect("target");
        assert_eq!(list.resolve(&google), None);
    }

    #[test]
    fn splits_v6() {
        let t = split_host_port("[::1]:80").expect("target");
        assert_eq!(t.host, "::1");
        assert_eq!(t.to_string(), "[::1]:80");
        assert!(split_host_port("::1:80").is_none());
    }
}
