//! The SSM port over aws-sdk-ssm.

use async_trait::async_trait;
use aws_sdk_ssm::Client;
use driftwood_aws::ports::{AwsError, GetParameterInput, Parameter, SsmApi};

use crate::error::aws_error;

/// The SSM port over the SDK client.
#[derive(Debug, Clone)]
pub struct SdkSsm {
    client: Client,
}

impl SdkSsm {
    /// The port over `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

#[async_trait]
impl SsmApi for SdkSsm {
    async fn get_parameter(&self, input: GetParameterInput) -> Result<Parameter, AwsError> {
        let out = self
            .client
            .get_parameter()
            .name(&input.name)
            .with_decryption(input.with_decryption)
            .send()
            .await
            .map_err(|e| aws_error("GetParameter", e))?;
        let p = out.parameter().ok_or_else(|| {
            AwsError::new(
                "InvalidResponse",
                format!("GetParameter {}: no parameter in the response", input.name),
            )
        })?;
        Ok(Parameter {
            name: p.name().unwrap_or(&input.name).to_string(),
            type_: p
                .r#type()
                .map(|t| t.as_str().to_string())
                .unwrap_or_default(),
            value: p.value().unwrap_or_default().to_string(),
            version: p.version(),
        })
    }
}
