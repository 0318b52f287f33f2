//! A key of a user's ConfigMap that a resource's field names (`metricsConfig`'s rules,
//! `logging`'s file): the ConfigMap read ([`data`]), then its text or a refusal saying what is
//! missing ([`key_text`], pure).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kstretch_api::common::ConfigMapKeyRef;

use crate::status::Refusal;

/// The data of ConfigMap `name` in `namespace`; `None` when it does not exist.
pub async fn data(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<BTreeMap<String, String>>, kube::Error> {
    let config_maps: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), namespace);
    let found = config_maps.get_opt(name).await?;
    Ok(found.map(|c| c.data.unwrap_or_default()))
}

/// What `read` makes of the ConfigMap `source` names in `namespace` (its data, `None` when it
/// does not exist); `Ok(None)` when nothing is named.
pub async fn read_named<T>(
    client: &kube::Client,
    namespace: &str,
    source: Option<&ConfigMapKeyRef>,
    read: impl FnOnce(&ConfigMapKeyRef, Option<&BTreeMap<String, String>>) -> Result<T, Refusal>,
) -> Result<Result<Option<T>, Refusal>, kube::Error> {
    let Some(source) = source else {
        return Ok(Ok(None));
    };
    let data = data(client, namespace, &source.name).await?;
    Ok(read(source, data.as_ref()).map(Some))
}

/// The text of `source` in the ConfigMap's `data` (`None`: the ConfigMap does not exist), or
/// `refuse` of what is missing ("ConfigMap x, which does not exist", "key k of ConfigMap x,
/// which it does not have").
pub fn key_text(
    source: &ConfigMapKeyRef,
    data: Option<&BTreeMap<String, String>>,
    refuse: impl Fn(String) -> Refusal,
) -> Result<String, Refusal> {
    let Some(data) = data else {
        return Err(refuse(format!(
            "ConfigMap {}, which does not exist",
            source.name
        )));
    };
    data.get(&source.key).cloned().ok_or_else(|| {
        refuse(format!(
            "key {} of ConfigMap {}, which it does not have",
            source.key, source.name
        ))
    })
}
