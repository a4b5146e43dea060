//! The SQS port over aws-sdk-sqs.

use async_trait::async_trait;
use aws_sdk_sqs::Client;
use driftwood_aws::ports::{AwsError, ReceiveMessageInput, SqsApi, SqsMessage};

use crate::error::aws_error;

/// The SQS port over the SDK client.
#[derive(Debug, Clone)]
pub struct SdkSqs {
    client: Client,
}

impl SdkSqs {
    /// The port over `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

#[async_trait]
impl SqsApi for SdkSqs {
    async fn get_queue_url(&self, queue_name: &str) -> Result<String, AwsError> {
        let out = self
            .client
            .get_queue_url()
            .queue_name(queue_name)
            .send()
            .await
            .map_err(|e| aws_error("GetQueueUrl", e))?;
        out.queue_url().map(ToString::to_string).ok_or_else(|| {
            AwsError::new(
                "InvalidResponse",
                format!("GetQueueUrl {queue_name}: no queue URL in the response"),
            )
        })
    }

    async fn receive_message(
        &self,
        input: ReceiveMessageInput,
    ) -> Result<Vec<SqsMessage>, AwsError> {
        let out = self
            .client
            .receive_message()
            .queue_url(&input.queue_url)
            .max_number_of_messages(input.max_number_of_messages)
            .visibility_timeout(input.visibility_timeout)
            .wait_time_seconds(input.wait_time_seconds)
            .message_system_attribute_names(
                aws_sdk_sqs::types::MessageSystemAttributeName::SentTimestamp,
            )
            .message_attribute_names("All")
            .send()
            .await
            .map_err(|e| aws_error("ReceiveMessage", e))?;
        Ok(out
            .messages()
            .iter()
            .map(|m| SqsMessage {
                message_id: m.message_id().unwrap_or_default().to_string(),
                receipt_handle: m.receipt_handle().unwrap_or_default().to_string(),
                body: m.body().unwrap_or_default().to_string(),
            })
            .collect())
    }

    async fn delete_message(&self, queue_url: &str, receipt_handle: &str) -> Result<(), AwsError> {
        self.client
            .delete_message()
            .queue_url(queue_url)
            .receipt_handle(receipt_handle)
            .send()
            .await
            .map_err(|e| aws_error("DeleteMessage", e))?;
        Ok(())
    }
}
