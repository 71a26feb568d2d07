//! The Kubernetes client of the commands that talk to a cluster (`ferry agent`, `ferry restore`, the
//! coordinator's Lease), from a kubeconfig and context as kubectl takes them.

use anyhow::Context;

/// A kube client from an explicit kubeconfig, or inferred (KUBECONFIG, ~/.kube/config, in-cluster), with
/// `context` instead of the kubeconfig's current-context when given.
pub async fn kube_client(kubeconfig: Option<&std::path::Path>, context: Option<&str>) -> anyhow::Result<kube::Client> {
    let options = kube::config::KubeConfigOptions { context: context.map(str::to_string), ..Default::default() };
    let config = match (kubeconfig, context) {
        (Some(path), _) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .with_context(|| format!("kubeconfig {}", path.display()))?
        }
        // A context only exists in a kubeconfig: no in-cluster fallback, which would silently ignore it.
        (None, Some(context)) => kube::Config::from_kubeconfig(&options)
            .await
            .with_context(|| format!("kubeconfig context {context:?} (KUBECONFIG or ~/.kube/config)"))?,
        (None, None) => kube::Config::infer().await.context("no kubeconfig and not in a cluster")?,
    };
    Ok(kube::Client::try_from(config)?)
}
