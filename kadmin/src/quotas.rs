//! Client quotas of a user: DescribeClientQuotas and AlterClientQuotas on the `user` entity.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{AlterClientQuotasRequest, ApiKey, DescribeClientQuotasRequest};
use kafka_protocol::protocol::StrBytes;

use crate::client::{AdminClient, Retry, Target};
use crate::error::{Error, KafkaError};

const USER_ENTITY: &str = "user";
/// DescribeClientQuotas match type: the entity name given.
const MATCH_EXACT: i8 = 0;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

impl AdminClient {
    /// The quotas set for `user` (`producer_byte_rate`, ...), by key.
    ///
    /// Retry: a read, retried on every transient failure.
    pub async fn user_quotas(&self, user: &str) -> Result<BTreeMap<String, f64>, Error> {
        let request = DescribeClientQuotasRequest::default()
            .with_components(vec![
                ComponentData::default()
                    .with_entity_type(text(USER_ENTITY))
                    .with_match_type(MATCH_EXACT)
                    .with_match(Some(text(user))),
            ])
            .with_strict(true);
        let response = self.call(Target::Any, Retry::Always, 0, &request).await?;
        if let Some(kafka) =
            KafkaError::from_code(response.error_code, response.error_message.as_ref())
        {
            return Err(Error::from_kafka(ApiKey::DescribeClientQuotas, kafka));
        }
        Ok(response
            .entries
            .into_iter()
            .flatten()
            .flat_map(|e| e.values)
            .map(|v| (v.key.to_string(), v.value))
            .collect())
    }

    /// Sets `user`'s quotas to `set` and removes those in `remove`.
    ///
    /// Retry: every transient failure (setting the same values again lands in the same state).
    pub async fn alter_user_quotas(
        &self,
        user: &str,
        set: &BTreeMap<String, f64>,
        remove: &[String],
    ) -> Result<(), Error> {
        let ops: Vec<OpData> = set
            .iter()
            .map(|(k, v)| OpData::default().with_key(text(k)).with_value(*v))
            .chain(
                remove
                    .iter()
                    .map(|k| OpData::default().with_key(text(k)).with_remove(true)),
            )
            .collect();
        if ops.is_empty() {
            return Ok(());
        }
        let entry = EntryData::default()
            .with_entity(vec![
                EntityData::default()
                    .with_entity_type(text(USER_ENTITY))
                    .with_entity_name(Some(text(user))),
            ])
            .with_ops(ops);
        let request = AlterClientQuotasRequest::default().with_entries(vec![entry]);
        let response = self.call(Target::Any, Retry::Always, 0, &request).await?;
        for entry in &response.entries {
            if let Some(kafka) =
                KafkaError::from_code(entry.error_code, entry.error_message.as_ref())
            {
                return Err(Error::from_kafka(ApiKey::AlterClientQuotas, kafka));
            }
        }
        Ok(())
    }
}
