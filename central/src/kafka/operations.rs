//! The `KafkaOperation`s of one `Kafka` (those labelled with it), listed once per pass: the
//! quorum recovery, the drains of moving pools and the forgets of lost clusters that the
//! pipeline reads are found among them, by pure functions next to what they concern.

use kstretch_api::{Kafka, KafkaOperation, names};
use kube::api::ListParams;
use kube::{Api, ResourceExt};

/// Every operation labelled with `kafka`.
pub async fn list(
    client: &kube::Client,
    kafka: &Kafka,
) -> Result<Vec<KafkaOperation>, kube::Error> {
    let api: Api<KafkaOperation> =
        Api::namespaced(client.clone(), &kafka.namespace().unwrap_or_default());
    let of_kafka =
        ListParams::default().labels(&format!("{}={}", names::CLUSTER, kafka.name_any()));
    Ok(api.list(&of_kafka).await?.items)
}
