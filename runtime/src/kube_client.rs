//! Building the Kubernetes client from flags: a kubeconfig file and context, or the in-cluster
//! service account when run in a pod.

use std::path::PathBuf;
use std::time::Duration;

use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::ConfigExt;
use kube::client::retry::RetryPolicy;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tower::retry::RetryLayer;
use tower::{BoxError, ServiceBuilder};

/// Which Kubernetes cluster a process talks to.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct KubeArgs {
    /// Kubeconfig file. Unset: `KUBECONFIG`, then `~/.kube/config`, then the in-cluster
    /// service account.
    #[arg(long, env = "KSTRETCH_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Context in the kubeconfig; unset: its current context.
    #[arg(long, env = "KSTRETCH_KUBE_CONTEXT")]
    pub context: Option<String>,
}

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum KubeClientError {
    #[error("cannot read kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[error("no usable Kubernetes configuration (set --kubeconfig or KUBECONFIG): {0}")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("invalid Kubernetes configuration: {0}")]
    Config(#[from] kube::config::KubeconfigError),
    #[error("cannot build the Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

impl KubeArgs {
    pub async fn client(&self) -> Result<kube::Client, KubeClientError> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match &self.kubeconfig {
            Some(path) => {
                let file =
                    Kubeconfig::read_from(path).map_err(|source| KubeClientError::Kubeconfig {
                        path: path.clone(),
                        source,
                    })?;
                kube::Config::from_custom_kubeconfig(file, &options).await?
            }
            None if self.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
            None => kube::Config::infer().await?,
        };
        Ok(client(config)?)
    }
}

/// At most this many idle connections to the apiserver are kept after a burst of requests.
const IDLE_CONNECTIONS: usize = 4;
/// An idle connection to the apiserver is closed after this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// kube's client stack (TLS, timeouts, base URI, retries, authentication, extra headers) over a
/// connection pool that keeps few idle connections: kube's own keeps every connection a burst
/// opened (no cap, and no timer to enforce its idle timeout), which at 1,000 pods held about 80
/// connections and 4 MB in the agent at idle (docs/benchmarks.md). A proxy or an exec plugin
/// (whose client certificate expiry kube tracks) takes kube's own builder.
fn client(config: kube::Config) -> Result<kube::Client, kube::Error> {
    if config.proxy_url.is_some() || config.auth_info.exec.is_some() {
        return kube::Client::try_from(config);
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let https = config.rustls_https_connector_with_connector(http)?;
    let mut connector = hyper_timeout::TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let pool: HyperClient<_, kube::client::Body> = HyperClient::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(IDLE_TIMEOUT)
        .pool_max_idle_per_host(IDLE_CONNECTIONS)
        .build(connector);
    let retry = config
        .default_retry
        .then(|| RetryLayer::new(RetryPolicy::server_retry()));
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(pool);
    Ok(kube::Client::new(service, config.default_namespace))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn missing_kubeconfig_names_the_file() {
        let args = KubeArgs {
            kubeconfig: Some(PathBuf::from("/nonexistent/kubeconfig")),
            context: None,
        };
        let err = args.client().await.err().unwrap();
        assert!(err.to_string().contains("/nonexistent/kubeconfig"), "{err}");
    }

    #[tokio::test]
    async fn unknown_context_is_refused() {
        let dir = std::env::temp_dir().join(format!("kstretch-kc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: a\n  context:\n    cluster: a\n    user: a\nusers:\n- name: a\n  user:\n    token: t\ncurrent-context: a\n",
        )
        .unwrap();
        let args = KubeArgs {
            kubeconfig: Some(path),
            context: Some("missing".into()),
        };
        let err = args.client().await.err().unwrap();
        assert!(err.to_string().contains("missing"), "{err}");
    }
}
