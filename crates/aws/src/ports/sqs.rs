//! SQS port: the three calls the interruption controller makes (GetQueueUrl, ReceiveMessage,
//! DeleteMessage). Nothing here sends: EventBridge does.

use async_trait::async_trait;

use super::AwsError;

/// ReceiveMessage request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiveMessageInput {
    pub queue_url: String,
    /// At most this many messages (1–10).
    pub max_number_of_messages: i32,
    /// Seconds a received message stays invisible to other receivers.
    pub visibility_timeout: i32,
    /// Long poll: wait up to this many seconds for a message (0–20).
    pub wait_time_seconds: i32,
}

/// One received message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SqsMessage {
    pub message_id: String,
    /// What DeleteMessage takes to remove this receipt of the message.
    pub receipt_handle: String,
    pub body: String,
}

/// The SQS operations the interruption controller needs.
#[async_trait]
pub trait SqsApi: Send + Sync {
    /// GetQueueUrl; `AWS.SimpleQueueService.NonExistentQueue` (`QueueDoesNotExist`) when there
    /// is no queue of that name.
    async fn get_queue_url(&self, queue_name: &str) -> Result<String, AwsError>;
    /// ReceiveMessage.
    async fn receive_message(
        &self,
        input: ReceiveMessageInput,
    ) -> Result<Vec<SqsMessage>, AwsError>;
    /// DeleteMessage.
    async fn delete_message(&self, queue_url: &str, receipt_handle: &str) -> Result<(), AwsError>;
}
