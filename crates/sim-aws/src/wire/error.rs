//! Why a request could not be answered: it could not be read ([`WireError`], the caller's
//! fault, status 400) or the simulated API refused it (an [`AwsError`] from a port).

use driftwood_aws::ports::AwsError;

/// A request the wire layer could not read or route.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The form body or query string is not valid percent-encoded UTF-8.
    #[error("the query string is malformed: {0}")]
    MalformedQueryString(String),
    /// A query request without `Action`.
    #[error("the request must contain the parameter Action")]
    MissingAction,
    /// An action this service does not have (or the simulation does not serve).
    #[error("the action {0} is not valid for this web service")]
    InvalidAction(String),
    /// A `Version` no simulated service has.
    #[error("the requested version ({0}) does not exist")]
    NoSuchVersion(String),
    /// A required parameter is absent.
    #[error("the request must contain the parameter {0}")]
    MissingParameter(String),
    /// A parameter whose value cannot be read.
    #[error("invalid value {value:?} for parameter {name}: {reason}")]
    InvalidParameterValue {
        name: String,
        value: String,
        reason: String,
    },
    /// A pagination token this endpoint did not hand out.
    #[error("the pagination token {0:?} is not valid")]
    InvalidNextToken(String),
    /// A JSON body that does not parse, or has a field of the wrong type.
    #[error("the request body cannot be read: {0}")]
    Serialization(String),
    /// An `X-Amz-Target` naming no simulated operation.
    #[error("unknown operation {0}")]
    UnknownOperation(String),
}

impl WireError {
    /// An invalid value for `name`.
    pub(crate) fn invalid(name: &str, value: &str, reason: impl Into<String>) -> Self {
        Self::InvalidParameterValue {
            name: name.to_string(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

/// Why a call failed: a bad request or the simulated service's own error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    Request(WireError),
    Service(AwsError),
}

impl From<WireError> for Failure {
    fn from(error: WireError) -> Self {
        Self::Request(error)
    }
}

impl From<AwsError> for Failure {
    fn from(error: AwsError) -> Self {
        Self::Service(error)
    }
}

/// Whether a service error code is a server-side failure (HTTP 500; the SDKs retry it).
pub(crate) fn is_internal(code: &str) -> bool {
    matches!(
        code,
        "InternalError"
            | "InternalFailure"
            | "InternalServerError"
            | "InternalErrorException"
            | "ServiceFailure"
    )
}

/// Whether a service error code says the service is unavailable (HTTP 503).
pub(crate) fn is_unavailable(code: &str) -> bool {
    matches!(code, "Unavailable" | "ServiceUnavailable")
}
