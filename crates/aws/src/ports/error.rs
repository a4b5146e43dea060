//! The error every port returns: the AWS error code string plus a message.

/// AWS error codes the provider and the simulation use.
pub mod codes {
    pub const INSUFFICIENT_INSTANCE_CAPACITY: &str = "InsufficientInstanceCapacity";
    pub const UNFULFILLABLE_CAPACITY: &str = "UnfulfillableCapacity";
    pub const MAX_SPOT_INSTANCE_COUNT_EXCEEDED: &str = "MaxSpotInstanceCountExceeded";
    pub const VCPU_LIMIT_EXCEEDED: &str = "VcpuLimitExceeded";
    pub const INSUFFICIENT_FREE_ADDRESSES_IN_SUBNET: &str = "InsufficientFreeAddressesInSubnet";
    pub const LAUNCH_TEMPLATE_NAME_NOT_FOUND: &str = "InvalidLaunchTemplateName.NotFoundException";
    pub const LAUNCH_TEMPLATE_NAME_ALREADY_EXISTS: &str =
        "InvalidLaunchTemplateName.AlreadyExistsException";
    pub const INSTANCE_ID_NOT_FOUND: &str = "InvalidInstanceID.NotFound";
    pub const AMI_ID_NOT_FOUND: &str = "InvalidAMIID.NotFound";
    pub const SUBNET_ID_NOT_FOUND: &str = "InvalidSubnetID.NotFound";
    pub const GROUP_ID_NOT_FOUND: &str = "InvalidGroup.NotFound";
    pub const REQUEST_LIMIT_EXCEEDED: &str = "RequestLimitExceeded";
    pub const THROTTLING: &str = "Throttling";
    /// SSM's and the Pricing API's throttling code.
    pub const THROTTLING_EXCEPTION: &str = "ThrottlingException";
    pub const INTERNAL_ERROR: &str = "InternalError";
    pub const PARAMETER_NOT_FOUND: &str = "ParameterNotFound";
    pub const NO_SUCH_ENTITY: &str = "NoSuchEntity";
    pub const ENTITY_ALREADY_EXISTS: &str = "EntityAlreadyExists";
    pub const LIMIT_EXCEEDED: &str = "LimitExceeded";
    pub const INVALID_PARAMETER_VALUE: &str = "InvalidParameterValue";
    /// SQS: no queue of that name (the JSON protocol's code; the query protocol's is
    /// [`QUEUE_DOES_NOT_EXIST_QUERY`]).
    pub const QUEUE_DOES_NOT_EXIST: &str = "QueueDoesNotExist";
    pub const QUEUE_DOES_NOT_EXIST_QUERY: &str = "AWS.SimpleQueueService.NonExistentQueue";
    /// SQS: a receipt handle that is not (or no longer) valid.
    pub const RECEIPT_HANDLE_IS_INVALID: &str = "ReceiptHandleIsInvalid";
    pub const ACCESS_DENIED: &str = "AccessDenied";
    /// EC2: the caller's IAM policy does not allow the action.
    pub const UNAUTHORIZED_OPERATION: &str = "UnauthorizedOperation";
}

/// An error returned by an AWS API call: the service's error code and its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct AwsError {
    /// The AWS error code, e.g. `InsufficientInstanceCapacity`.
    pub code: String,
    /// The human message AWS returned.
    pub message: String,
}

impl AwsError {
    /// An error with this code and message.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
        }
    }

    /// Whether the code says the named resource does not exist.
    pub fn is_not_found(&self) -> bool {
        is_not_found_code(&self.code)
    }

    /// Whether the code says there is no capacity for the requested offering.
    pub fn is_insufficient_capacity(&self) -> bool {
        is_insufficient_capacity_code(&self.code)
    }

    /// Whether the call was throttled and may be retried after a back-off.
    pub fn is_throttled(&self) -> bool {
        matches!(
            self.code.as_str(),
            codes::REQUEST_LIMIT_EXCEEDED | codes::THROTTLING | codes::THROTTLING_EXCEPTION
        )
    }
}

/// Whether an AWS error code means "not found".
pub fn is_not_found_code(code: &str) -> bool {
    code.ends_with(".NotFound")
        || code.ends_with("NotFoundException")
        || code == codes::PARAMETER_NOT_FOUND
        || code == codes::NO_SUCH_ENTITY
        || code == codes::QUEUE_DOES_NOT_EXIST
        || code == codes::QUEUE_DOES_NOT_EXIST_QUERY
}

/// Whether an AWS error code (fleet or call error) means "no capacity for this offering".
pub fn is_insufficient_capacity_code(code: &str) -> bool {
    matches!(
        code,
        codes::INSUFFICIENT_INSTANCE_CAPACITY
            | codes::UNFULFILLABLE_CAPACITY
            | codes::MAX_SPOT_INSTANCE_COUNT_EXCEEDED
            | codes::VCPU_LIMIT_EXCEEDED
            | codes::INSUFFICIENT_FREE_ADDRESSES_IN_SUBNET
    )
}

/// An AWS call's failure, as the neutral cloud boundary reports it.
impl From<AwsError> for driftwood_cloud::CloudError {
    fn from(error: AwsError) -> Self {
        Self::Api {
            provider: "AWS".to_string(),
            message: error.to_string(),
        }
    }
}
