//! SSM port: GetParameter, used to resolve the EKS-optimized AMI public parameters.

use async_trait::async_trait;

use super::AwsError;

/// GetParameter request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GetParameterInput {
    pub name: String,
    pub with_decryption: bool,
}

/// One SSM parameter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parameter {
    pub name: String,
    /// `String`, `StringList` or `SecureString`.
    pub type_: String,
    pub value: String,
    pub version: i64,
}

/// The SSM operations the provider needs.
#[async_trait]
pub trait SsmApi: Send + Sync {
    /// GetParameter; `ParameterNotFound` when the name does not exist.
    async fn get_parameter(&self, input: GetParameterInput) -> Result<Parameter, AwsError>;
}
