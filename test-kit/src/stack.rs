//! The whole fake internet in one call: an `alpha`, a `beta` and a `gamma` mall and a
//! gateway whose allow-list is exactly those three malls. This is what `lps-test-kit serve`
//! runs and what end-to-end tests of other crates can start in-process.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, MallStyle};
use crate::gateway::{Gateway, GatewayConfig, GatewayError, GatewayHandle};
use crate::mall::{GAMMA_API_KEY, MallConfig, MallError, MallHandle, MallServer};

/// Errors starting the stack.
#[derive(Debug, thiserror::Error)]
pub enum StackError {
    /// A mall failed to start.
    #[error(transparent)]
    Mall(#[from] MallError),
    /// The gateway failed to start.
    #[error(transparent)]
    Gateway(#[from] GatewayError),
}

/// What to start.
#[derive(Debug, Clone)]
pub struct StackConfig {
    /// Catalog of all malls.
    pub catalog: Arc<Catalog>,
    /// Listen address of the alpha mall (port 0 = free port).
    pub alpha_listen: SocketAddr,
    /// Listen address of the beta mall (port 0 = free port).
    pub beta_listen: SocketAddr,
    /// Listen address of the gamma mall (port 0 = free port).
    pub gamma_listen: SocketAddr,
    /// The key of gamma's JSON API.
    pub gamma_api_key: String,
    /// Per-exit-IP search budget of every mall.
    pub block_after: Option<u32>,
    /// Gateway settings; its allow-list is extended with the malls.
    pub gateway: GatewayConfig,
}

impl StackConfig {
    /// The three malls and a gateway of `ports` ports on free loopback ports, builtin
    /// catalog, no blocking, no proxy authentication, gamma's default API key.
    pub fn new(ports: usize) -> StackConfig {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        StackConfig {
            catalog: Arc::new(Catalog::builtin()),
            alpha_listen: any,
            beta_listen: any,
            gamma_listen: any,
            gamma_api_key: GAMMA_API_KEY.to_owned(),
            block_after: None,
            gateway: GatewayConfig::new(ports),
        }
    }
}

/// Addresses of a running stack (the JSON line `lps-test-kit serve` prints).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackAddresses {
    /// Base URL per mall style, e.g. `{"alpha": "http://127.0.0.1:40001", …}`.
    pub malls: std::collections::BTreeMap<MallStyle, String>,
    /// Gateway ports in label order.
    pub gateway: Vec<GatewayPortAddress>,
    /// Whether the gateway requires proxy credentials.
    pub gateway_auth: bool,
    /// The proxy user name, when authentication is on (the password is never printed).
    pub gateway_user: Option<String>,
}

/// One gateway port in [`StackAddresses`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayPortAddress {
    /// Exit IP label.
    pub label: String,
    /// `127.0.0.1:PORT`.
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT`.
    pub proxy_url: String,
}

/// Entry point: `Stack::start(config)`.
#[derive(Debug, Clone, Copy)]
pub struct Stack;

impl Stack {
    /// Starts the three malls, then the gateway allowing them.
    pub async fn start(config: StackConfig) -> Result<StackHandle, StackError> {
        let alpha = start_mall(&config, MallStyle::Alpha, config.alpha_listen).await?;
        let beta = start_mall(&config, MallStyle::Beta, config.beta_listen).await?;
        let gamma = start_mall(&config, MallStyle::Gamma, config.gamma_listen).await?;
        let gateway_config = config
            .gateway
            .clone()
            .allow(alpha.addr())
            .allow(beta.addr())
            .allow(gamma.addr());
        let gateway_user = gateway_config.username.clone();
        let gateway = Gateway::start(gateway_config).await?;
        Ok(StackHandle {
            alpha,
            beta,
            gamma,
            gateway,
            gateway_user,
        })
    }
}

async fn start_mall(
    config: &StackConfig,
    style: MallStyle,
    listen: SocketAddr,
) -> Result<MallHandle, MallError> {
    let mall = MallConfig::new(style)
        .with_catalog(Arc::clone(&config.catalog))
        .with_listen(listen)
        .with_block_after(config.block_after)
        .with_api_key(config.gamma_api_key.clone());
    MallServer::start(mall).await
}

/// A running stack.
#[derive(Debug)]
pub struct StackHandle {
    /// The alpha mall.
    pub alpha: MallHandle,
    /// The beta mall.
    pub beta: MallHandle,
    /// The gamma mall.
    pub gamma: MallHandle,
    /// The gateway.
    pub gateway: GatewayHandle,
    gateway_user: Option<String>,
}

impl StackHandle {
    /// The mall of a style.
    pub fn mall(&self, style: MallStyle) -> &MallHandle {
        match style {
            MallStyle::Alpha => &self.alpha,
            MallStyle::Beta => &self.beta,
            MallStyle::Gamma => &self.gamma,
        }
    }

    /// Where everything listens.
    pub fn addresses(&self) -> StackAddresses {
        StackAddresses {
            malls: MallStyle::ALL
                .into_iter()
                .map(|style| (style, self.mall(style).base_url()))
                .collect(),
            gateway: self
                .gateway
                .ports()
                .into_iter()
                .map(|p| GatewayPortAddress {
                    proxy_url: p.proxy_url(),
                    label: p.label,
                    addr: p.addr,
                })
                .collect(),
            gateway_auth: self.gateway_user.is_some(),
            gateway_user: self.gateway_user.clone(),
        }
    }

    /// Writes the built-in test-mall site profiles (`profiles/builtin/testmall-*.toml`)
    /// into `dir`, their base URLs (the ports `scripts/demo.sh` serves the malls on)
    /// pointed at this stack's malls. For end-to-end tests and benchmarks that start the
    /// stack in process.
    pub fn write_site_profiles(&self, dir: &Path) -> std::io::Result<()> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles/builtin");
        for (file, fixed, mall) in [
            ("testmall-alpha.toml", "http://127.0.0.1:18081", &self.alpha),
            ("testmall-beta.toml", "http://127.0.0.1:18082", &self.beta),
            ("testmall-gamma.toml", "http://127.0.0.1:18083", &self.gamma),
        ] {
            let text = std::fs::read_to_string(root.join(file))?;
            let base = mall.base_url();
            std::fs::write(
                dir.join(file),
                text.replace(fixed, base.trim_end_matches('/')),
            )?;
        }
        Ok(())
    }

    /// Stops the gateway first (no new traffic), then the malls.
    pub async fn shutdown(self) -> Result<(), MallError> {
        self.gateway.shutdown().await;
        let alpha = self.alpha.shutdown().await;
        let beta = self.beta.shutdown().await;
        let gamma = self.gamma.shutdown().await;
        alpha.and(beta).and(gamma)
    }
}
