//! A Kubernetes client from the caller's own kubeconfig: the CLI acts with the caller's
//! credentials, so Kubernetes' RBAC decides what they may do.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::CliError;

/// Which kubeconfig and context.
#[derive(clap::Args, Debug, Clone)]
pub struct KubeArgs {
    /// Kubeconfig to use (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Context in the kubeconfig (default: its current context).
    #[arg(long)]
    pub context: Option<String>,
}

impl KubeArgs {
    pub async fn client(&self) -> Result<kube::Client, CliError> {
        let kubeconfig = match &self.kubeconfig {
            Some(path) => Kubeconfig::read_from(path),
            None => Kubeconfig::read(),
        }
        .map_err(|e| CliError::Kubeconfig(e.to_string()))?;
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| CliError::Kubeconfig(e.to_string()))?;
        kube::Client::try_from(config).map_err(CliError::Kube)
    }

    /// [`Self::client`] and the namespace to act in: `namespace`, else the context's.
    pub async fn client_in(
        &self,
        namespace: Option<&str>,
    ) -> Result<(kube::Client, String), CliError> {
        let client = self.client().await?;
        let namespace =
            namespace.map_or_else(|| client.default_namespace().to_owned(), str::to_owned);
        Ok((client, namespace))
    }
}

/// The Kafka operated on.
#[derive(clap::Args, Debug, Clone)]
pub struct KafkaArgs {
    /// The Kafka's name.
    #[arg(long)]
    pub kafka: String,
    /// The Kafka's namespace (default: the kubeconfig context's).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// The central cluster's kubeconfig.
    #[command(flatten)]
    pub kube: KubeArgs,
}
