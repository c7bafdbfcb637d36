//! Certificates made at test time (rcgen) for the TLS tests: a CA, a server certificate
//! for 127.0.0.1/localhost, node client certificates from that CA and from another one; and
//! a coordinator serving TLS with them.

use std::path::PathBuf;

use lps_coordinator::app::Running;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use sqlx::PgPool;

/// The mall the TLS coordinator serves.
pub const MALL: &str = "testmall-alpha";

/// PEM files in a directory of their own, removed on drop.
pub struct Pki {
    pub dir: PathBuf,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Pki {
    /// `ca.crt` (the CA of the server and of good nodes), `server.{crt,key}` for
    /// 127.0.0.1 and localhost, `node.{crt,key}` from that CA, `rogue.{crt,key}` for a node
    /// from another CA (`rogue-ca.crt`), and `other.key` (belongs to no certificate here).
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("lps-tls-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pki = Self { dir };
        let ca = new_ca("LPS test CA");
        let rogue_ca = new_ca("another CA");
        pki.write("ca.crt", &ca.pem());
        pki.write("rogue-ca.crt", &rogue_ca.pem());
        pki.leaf(
            "server",
            &ca,
            &["127.0.0.1", "localhost"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        pki.leaf(
            "node",
            &ca,
            &["node-1"],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        pki.leaf(
            "rogue",
            &rogue_ca,
            &["node-1"],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        pki.write("other.key", &KeyPair::generate().unwrap().serialize_pem());
        pki
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    pub fn arg(&self, file: &str) -> String {
        self.path(file).to_str().unwrap().to_owned()
    }

    fn write(&self, file: &str, pem: &str) {
        std::fs::write(self.path(file), pem).unwrap();
    }

    pub fn read(&self, file: &str) -> Vec<u8> {
        std::fs::read(self.path(file)).unwrap()
    }

    fn leaf(
        &self,
        name: &str,
        ca: &CertifiedIssuer<'static, KeyPair>,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
    ) {
        let mut params =
            CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name.push(DnType::CommonName, names[0]);
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, ca).unwrap();
        self.write(&format!("{name}.crt"), &cert.pem());
        self.write(&format!("{name}.key"), &key.serialize_pem());
    }
}

fn new_ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// A coordinator serving TLS with `server.{crt,key}`; `mtls` adds `ca.crt` as the client CA.
pub async fn coordinator(pool: &PgPool, pki: &Pki, mtls: bool) -> Running {
    let (cert, key, ca) = (
        pki.arg("server.crt"),
        pki.arg("server.key"),
        pki.arg("ca.crt"),
    );
    let mut flags = vec![
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--heartbeat-interval",
        "200ms",
        "--claim-poll",
        "500ms",
        "--shutdown-timeout",
        "5s",
        "--malls",
        MALL,
    ];
    if mtls {
        flags.extend(["--tls-client-ca", &ca]);
    }
    super::start_with_mall(pool, MALL, &flags).await
}
