//! Maps SDK errors to the ports' [`AwsError`]: the service's error code and message, or a
//! synthetic code for failures that never reached the service.

use aws_sdk_ec2::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use driftwood_aws::ports::AwsError;

/// Code for a call that timed out.
pub const CODE_TIMEOUT: &str = "RequestTimeout";
/// Code for a call that could not be sent or whose connection failed.
pub const CODE_NETWORK: &str = "NetworkFailure";
/// Code for a request the SDK could not build.
pub const CODE_INVALID_REQUEST: &str = "InvalidRequest";
/// Code for a response the SDK could not read.
pub const CODE_INVALID_RESPONSE: &str = "InvalidResponse";
/// Code for a service error without a code.
pub const CODE_UNKNOWN: &str = "Unknown";

/// The [`AwsError`] for an SDK error of `operation`.
pub fn aws_error<E, R>(operation: &str, err: SdkError<E, R>) -> AwsError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let detail = DisplayErrorContext(&err).to_string();
    let code = match &err {
        SdkError::ServiceError(service) => service.err().code().unwrap_or(CODE_UNKNOWN).to_string(),
        SdkError::TimeoutError(_) => CODE_TIMEOUT.to_string(),
        SdkError::DispatchFailure(_) => CODE_NETWORK.to_string(),
        SdkError::ConstructionFailure(_) => CODE_INVALID_REQUEST.to_string(),
        SdkError::ResponseError(_) => CODE_INVALID_RESPONSE.to_string(),
        _ => err.code().unwrap_or(CODE_UNKNOWN).to_string(),
    };
    let message = match &err {
        SdkError::ServiceError(service) => service
            .err()
            .message()
            .map(ToString::to_string)
            .unwrap_or(detail),
        _ => detail,
    };
    AwsError::new(code, format!("{operation}: {message}"))
}
