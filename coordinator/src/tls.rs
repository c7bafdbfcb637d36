//! TLS on the coordinator's gRPC port: the certificate chain and key it presents
//! (`LPS_TLS_CERT`, `LPS_TLS_KEY`) and the CA bundle node client certificates must chain to
//! (`LPS_TLS_CLIENT_CA`, mTLS for nodes).
//!
//! [`ServerTls::load`] reads the PEM files once, at config time, and builds the rustls
//! configuration the server will use, so an unreadable file, a file without a certificate,
//! a key that does not belong to the certificate or an unusable CA bundle stops startup
//! with an error naming its setting instead of failing each handshake later.
//!
//! With a client CA, client certificates are *optional at the handshake*: SearchService
//! and OpsService callers (internal services, lpsctl) authenticate with their bearer token
//! alone. A certificate that a client does present is verified against the bundle during
//! the handshake (one from another CA fails it), and [`require_client_cert`] makes
//! `NodeService.Connect` refuse a stream whose connection presented none. Bearer tokens
//! stay required on every service; the certificate is an additional factor for nodes.
//!
//! The HTTP port (`/healthz`, `/readyz`, `/metrics`, `/ops`) stays plain unless
//! `LPS_HTTP_TLS=true`: kubelet probes and Prometheus scrape it. When on, [`HttpTlsListener`]
//! serves it with the same certificate, without client authentication (those endpoints
//! carry no credentials on any port).
//!
//! NB: the workspace compiles rustls with two crypto providers (ring, which tonic's
//! `tls-ring` asks for, and aws-lc-rs, which reqwest brings), so rustls cannot choose a
//! process default by itself, and tonic's server builds its rustls config with the
//! process default (it panics when there is none). [`install_crypto_provider`] installs
//! ring before the server is built; our own checks name the provider explicitly.

use std::{
    fmt, io,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use rustls::{
    RootCertStore, ServerConfig,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _},
    server::WebPkiClientVerifier,
};
use tokio::{
    net::{TcpListener, TcpStream},
    task::JoinSet,
};
use tokio_rustls::{TlsAcceptor, server::TlsStream};
use tonic::{
    Request, Status,
    transport::{Certificate, Identity, ServerTlsConfig},
};
use tracing::{Instrument as _, debug, warn};

use crate::settings::ConfigError;

/// A client that opens a TCP connection and never finishes the handshake is dropped
/// after this long.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The checked PEM material of the gRPC server's TLS. `Debug` leaves out the key.
#[derive(Clone)]
pub struct ServerTls {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    key_path: PathBuf,
    /// The client CA bundle and its path.
    client_ca: Option<(Vec<u8>, PathBuf)>,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls")
            .field("key", &"***")
            .field("mtls", &self.client_ca.is_some())
            .finish_non_exhaustive()
    }
}

fn bad(setting: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        setting,
        reason: reason.into(),
    }
}

fn read(setting: &'static str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|e| bad(setting, format!("cannot read {}: {e}", path.display())))
}

/// Every certificate in a PEM file; at least one.
fn certificates(
    setting: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(setting, format!("{}: bad PEM: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(bad(
            setting,
            format!("{}: no PEM certificate in the file", path.display()),
        ));
    }
    Ok(certs)
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Makes ring the process's rustls crypto provider unless one is installed already (see
/// the module doc). Idempotent.
pub fn install_crypto_provider() {
    // NB: Err only means a provider is installed already, which is just as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl ServerTls {
    /// Reads and checks the files: `cert` and `key` go together (neither: no TLS), and
    /// `client_ca` needs them. Errors name the setting at fault.
    pub fn load(
        cert: Option<&Path>,
        key: Option<&Path>,
        client_ca: Option<&Path>,
    ) -> Result<Option<Self>, ConfigError> {
        let (cert_path, key_path) = match (cert, key) {
            (Some(cert), Some(key)) => (cert, key),
            (Some(_), None) => {
                return Err(bad("LPS_TLS_KEY", "is required with LPS_TLS_CERT"));
            }
            (None, Some(_)) => {
                return Err(bad("LPS_TLS_CERT", "is required with LPS_TLS_KEY"));
            }
            (None, None) if client_ca.is_some() => {
                return Err(bad(
                    "LPS_TLS_CLIENT_CA",
                    "needs TLS: set LPS_TLS_CERT and LPS_TLS_KEY as well",
                ));
            }
            (None, None) => return Ok(None),
        };
        let cert_pem = read("LPS_TLS_CERT", cert_path)?;
        certificates("LPS_TLS_CERT", cert_path, &cert_pem)?;
        let key_pem = read("LPS_TLS_KEY", key_path)?;
        let client_ca = match client_ca {
            Some(path) => Some((read("LPS_TLS_CLIENT_CA", path)?, path.to_owned())),
            None => None,
        };
        let tls = Self {
            cert_pem,
            key_pem,
            key_path: key_path.to_owned(),
            client_ca,
        };
        // Builds what a handshake will use, so every remaining fault shows up now.
        tls.rustls_config(true)?;
        Ok(Some(tls))
    }

    /// Whether node streams must come with a verified client certificate.
    pub fn requires_client_cert(&self) -> bool {
        self.client_ca.is_some()
    }

    /// The rustls server configuration of these files: with `client_auth`, the one tonic
    /// builds from [`Self::grpc`] (with the provider named explicitly).
    fn rustls_config(&self, client_auth: bool) -> Result<ServerConfig, ConfigError> {
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad("LPS_TLS_CERT", format!("TLS protocol versions: {e}")))?;
        let builder = match self.client_ca.as_ref().filter(|_| client_auth) {
            Some((pem, path)) => {
                let mut roots = RootCertStore::empty();
                for cert in certificates("LPS_TLS_CLIENT_CA", path, pem)? {
                    roots.add(cert).map_err(|e| {
                        bad("LPS_TLS_CLIENT_CA", format!("{}: {e}", path.display()))
                    })?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(roots.into(), provider())
                        .allow_unauthenticated()
                        .build()
                        .map_err(|e| {
                            bad("LPS_TLS_CLIENT_CA", format!("{}: {e}", path.display()))
                        })?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let chain = CertificateDer::pem_slice_iter(&self.cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad("LPS_TLS_CERT", format!("bad PEM: {e}")))?;
        let key = PrivateKeyDer::from_pem_slice(&self.key_pem).map_err(|e| {
            bad(
                "LPS_TLS_KEY",
                format!("{}: no PEM private key: {e}", self.key_path.display()),
            )
        })?;
        builder.with_single_cert(chain, key).map_err(|e| {
            bad(
                "LPS_TLS_KEY",
                format!(
                    "{}: not usable with LPS_TLS_CERT: {e}",
                    self.key_path.display()
                ),
            )
        })
    }

    /// tonic's configuration for the gRPC server: client certificates optional, verified
    /// against the client CA when one is set.
    pub fn grpc(&self) -> ServerTlsConfig {
        let mut tls = ServerTlsConfig::new()
            .identity(Identity::from_pem(&self.cert_pem, &self.key_pem))
            .timeout(HANDSHAKE_TIMEOUT);
        if let Some((ca, _)) = &self.client_ca {
            tls = tls
                .client_ca_root(Certificate::from_pem(ca))
                .client_auth_optional(true);
        }
        tls
    }

    /// The acceptor of the HTTP port (`LPS_HTTP_TLS`): the same certificate, HTTP/2 or
    /// HTTP/1.1, no client certificates.
    pub fn http(&self) -> Result<TlsAcceptor, ConfigError> {
        let mut config = self.rustls_config(false)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

/// An axum listener that hands out TLS streams. Handshakes run in tasks of their own, each
/// under `HANDSHAKE_TIMEOUT`, so a client that connects and stays silent holds up no
/// one; a failed handshake is logged at debug and dropped. `accept` is cancellation-safe
/// (a handshake finished while nobody waited is returned by the next call).
pub struct HttpTlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    handshakes: JoinSet<Option<(TlsStream<TcpStream>, SocketAddr)>>,
}

impl fmt::Debug for HttpTlsListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpTlsListener")
            .field("tcp", &self.tcp)
            .field("handshakes", &self.handshakes.len())
            .finish_non_exhaustive()
    }
}

impl HttpTlsListener {
    pub fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> Self {
        Self {
            tcp,
            acceptor,
            handshakes: JoinSet::new(),
        }
    }
}

impl axum::serve::Listener for HttpTlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                accepted = self.tcp.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let acceptor = self.acceptor.clone();
                        self.handshakes.spawn(
                            async move {
                                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                                    Ok(Ok(tls)) => Some((tls, peer)),
                                    Ok(Err(error)) => {
                                        debug!(%peer, %error, "tls handshake failed");
                                        None
                                    }
                                    Err(_) => {
                                        debug!(%peer, "tls handshake timed out");
                                        None
                                    }
                                }
                            }
                            .in_current_span(),
                        );
                    }
                    Err(error) if is_connection_error(&error) => {}
                    Err(error) => {
                        // NB: as axum's own listener: out of file descriptors is worth a
                        // pause rather than a busy loop.
                        warn!(%error, "http accept failed");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                },
                Some(done) = self.handshakes.join_next(), if !self.handshakes.is_empty() => {
                    if let Ok(Some(ready)) = done {
                        return ready;
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Whether a node's verified client certificate names `node_id`: one of its subject
/// alternative DNS names is the id, or a prefix of it ending where the id has a `-` (a
/// certificate for host `edge-3` covers `edge-3-4711`, the default `<host>-<pid>` id; one
/// for a Deployment's name covers its pods). With mTLS a node token alone cannot use
/// another node's id. `PERMISSION_DENIED` names the id and the certificate's names.
pub fn check_node_id(chain: &[CertificateDer<'_>], node_id: &str) -> Result<(), Status> {
    let Some(leaf) = chain.first() else {
        return Err(crate::error::refused(
            tonic::Code::Unauthenticated,
            "CLIENT_CERTIFICATE_REQUIRED",
            "no client certificate",
        ));
    };
    let cert = webpki::EndEntityCert::try_from(leaf).map_err(|e| {
        crate::error::refused(
            tonic::Code::Unauthenticated,
            "CLIENT_CERTIFICATE_UNREADABLE",
            format!("unreadable client certificate: {e}"),
        )
    })?;
    let names: Vec<&str> = cert.valid_dns_names().collect();
    if names.iter().any(|name| covers(name, node_id)) {
        return Ok(());
    }
    Err(crate::error::refused(
        tonic::Code::PermissionDenied,
        "NODE_ID_NOT_IN_CERTIFICATE",
        format!(
            "node id {node_id:?} is not named by the client certificate (DNS names {names:?}): with mTLS a node's id must be one of its certificate's names, or start with one followed by '-'"
        ),
    ))
}

/// `name` (a certificate's DNS name, compared case-insensitively) covers node id `id`.
fn covers(name: &str, id: &str) -> bool {
    let (name, id) = (name.to_ascii_lowercase(), id.to_ascii_lowercase());
    id == name
        || id
            .strip_prefix(&name)
            .is_some_and(|rest| rest.starts_with('-'))
}

/// Refuses a request whose connection presented no client certificate. rustls verified
/// any certificate that was presented during the handshake, so presence is enough here.
pub fn require_client_cert<T>(request: &Request<T>) -> Result<(), Status> {
    match request.peer_certs() {
        Some(chain) if !chain.is_empty() => Ok(()),
        _ => Err(crate::error::refused(
            tonic::Code::Unauthenticated,
            "CLIENT_CERTIFICATE_REQUIRED",
            "this coordinator requires nodes to present a client certificate (mTLS); \
             set LPS_TLS_CERT and LPS_TLS_KEY on the node",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_name_covers_its_id_and_the_ids_it_prefixes() {
        assert!(covers("node-1", "node-1"));
        assert!(
            covers("edge-3", "edge-3-4711"),
            "the default <host>-<pid> id"
        );
        assert!(covers("LPS-Crawler-Node", "lps-crawler-node-7d9f-x2"));
        assert!(!covers("edge-3", "edge-30"), "a prefix must end at a '-'");
        assert!(!covers("edge-3", "edge"));
        assert!(!covers("node-1", "node-2"));
    }
}
