//! SCRAM credentials of users: DescribeUserScramCredentials, and AlterUserScramCredentials
//! with the salted password computed here, as Kafka's own admin client does (the password
//! never travels).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, ApiKey, DescribeUserScramCredentialsRequest,
};
use kafka_protocol::protocol::StrBytes;

use crate::client::{AdminClient, Retry, Target};
use crate::error::{Error, KafkaError};

/// Kafka's code of the SCRAM-SHA-512 mechanism.
const SCRAM_SHA_512: i8 = 2;
/// Iterations of new credentials: Kafka's minimum for SCRAM-SHA-512, and what its tools use.
pub const SCRAM_ITERATIONS: u32 = 4096;

/// The SCRAM salted password (RFC 5802 `Hi`): PBKDF2 with HMAC-SHA-512.
fn salted_password(password: &str, salt: &[u8], iterations: u32) -> [u8; 64] {
    let mut out = [0u8; 64];
    let rounds = std::num::NonZeroU32::new(iterations).unwrap_or(std::num::NonZeroU32::MIN);
    ring::pbkdf2::derive(
        ring::pbkdf2::PBKDF2_HMAC_SHA512,
        rounds,
        salt,
        password.as_bytes(),
        &mut out,
    );
    out
}

impl AdminClient {
    /// Whether `user` has a SCRAM-SHA-512 credential.
    ///
    /// Retry: a read, retried on every transient failure.
    pub async fn has_scram_sha512(&self, user: &str) -> Result<bool, Error> {
        let request = DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
            UserName::default().with_name(StrBytes::from_string(user.to_owned())),
        ]));
        let response = self.call(Target::Any, Retry::Always, 0, &request).await?;
        if let Some(kafka) =
            KafkaError::from_code(response.error_code, response.error_message.as_ref())
        {
            return Err(Error::from_kafka(
                ApiKey::DescribeUserScramCredentials,
                kafka,
            ));
        }
        let Some(result) = response
            .results
            .into_iter()
            .find(|r| r.user.as_str() == user)
        else {
            return Ok(false);
        };
        match KafkaError::from_code(result.error_code, result.error_message.as_ref()) {
            None => Ok(result
                .credential_infos
                .iter()
                .any(|c| c.mechanism == SCRAM_SHA_512)),
            Some(kafka) if kafka.error == ResponseError::ResourceNotFound => Ok(false),
            Some(kafka) => Err(Error::from_kafka(
                ApiKey::DescribeUserScramCredentials,
                kafka,
            )),
        }
    }

    /// Sets `user`'s SCRAM-SHA-512 password, with a new random salt.
    ///
    /// Retry: every transient failure (setting the password again lands in the same state).
    pub async fn set_scram_sha512(&self, user: &str, password: &str) -> Result<(), Error> {
        let mut salt = [0u8; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut salt)
            .map_err(|_| Error::Config("no system randomness for a SCRAM salt".to_owned()))?;
        let salted = salted_password(password, &salt, SCRAM_ITERATIONS);
        let upsertion = ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_string(user.to_owned()))
            .with_mechanism(SCRAM_SHA_512)
            .with_iterations(SCRAM_ITERATIONS as i32)
            .with_salt(bytes::Bytes::copy_from_slice(&salt))
            .with_salted_password(bytes::Bytes::copy_from_slice(&salted));
        let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion]);
        self.alter_scram(request).await
    }

    /// Removes `user`'s SCRAM-SHA-512 credential; one that does not exist is fine.
    ///
    /// Retry: every transient failure.
    pub async fn delete_scram_sha512(&self, user: &str) -> Result<(), Error> {
        let deletion = ScramCredentialDeletion::default()
            .with_name(StrBytes::from_string(user.to_owned()))
            .with_mechanism(SCRAM_SHA_512);
        let request = AlterUserScramCredentialsRequest::default().with_deletions(vec![deletion]);
        match self.alter_scram(request).await {
            Err(Error::Kafka { kafka, .. }) if kafka.error == ResponseError::ResourceNotFound => {
                Ok(())
            }
            other => other,
        }
    }

    async fn alter_scram(&self, request: AlterUserScramCredentialsRequest) -> Result<(), Error> {
        let response = self.call(Target::Any, Retry::Always, 0, &request).await?;
        for result in &response.results {
            if let Some(kafka) =
                KafkaError::from_code(result.error_code, result.error_message.as_ref())
            {
                return Err(Error::from_kafka(ApiKey::AlterUserScramCredentials, kafka));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PBKDF2-HMAC-SHA512 of "password" / "salt", 1 iteration: RFC 6070's inputs with the
    /// SHA-512 output every implementation agrees on.
    #[test]
    fn the_salted_password_is_pbkdf2_hmac_sha512() {
        let out = salted_password("password", b"salt", 1);
        let hex: String = out[..8].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "867f70cf1ade02cf");
    }
}
