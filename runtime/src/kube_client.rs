//! Building the Kubernetes client from flags: a kubeconfig file and context, or the in-cluster
//! service account when run in a pod.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};

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
        Ok(kube::Client::try_from(config)?)
    }
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
