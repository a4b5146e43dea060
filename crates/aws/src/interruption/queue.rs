//! The interruption queue, polled as Karpenter polls it: the queue named by
//! `--interruption-queue` is looked up once (GetQueueUrl, retried on each poll until it
//! resolves), then long-polled for up to 10 messages at a time, each hidden from other
//! receivers for 20 seconds while it is handled and deleted once it has been.

use std::sync::{Arc, Mutex};

use super::message::{Message, ParseError, parse};
use crate::ports::{AwsError, ReceiveMessageInput, SqsApi};

/// Messages per ReceiveMessage (SQS's maximum).
pub const MAX_MESSAGES: i32 = 10;
/// Seconds a received message stays hidden: if it is not deleted by then (its handling failed,
/// or this replica lost its lease mid-way), it is received again.
pub const VISIBILITY_TIMEOUT_SECONDS: i32 = 20;
/// The long poll (SQS's maximum).
pub const WAIT_TIME_SECONDS: i32 = 20;

/// One received message: what it says (or why it could not be read) and how to delete it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub message_id: String,
    pub receipt_handle: String,
    pub parsed: Result<Message, ParseError>,
}

/// An interruption queue by name.
pub struct InterruptionQueue {
    sqs: Arc<dyn SqsApi>,
    name: String,
    url: Mutex<Option<String>>,
}

impl InterruptionQueue {
    /// The queue named `name` (not yet looked up).
    pub fn new(sqs: Arc<dyn SqsApi>, name: &str) -> Self {
        Self {
            sqs,
            name: name.to_string(),
            url: Mutex::new(None),
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The queue's URL, looked up once it is first needed.
    pub async fn url(&self) -> Result<String, AwsError> {
        if let Some(url) = self.cached_url() {
            return Ok(url);
        }
        let url = self.sqs.get_queue_url(&self.name).await?;
        *self
            .url
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(url.clone());
        Ok(url)
    }

    fn cached_url(&self) -> Option<String> {
        self.url
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// One long poll: up to [`MAX_MESSAGES`] messages, each parsed.
    pub async fn receive(&self) -> Result<Vec<Received>, AwsError> {
        let queue_url = self.url().await?;
        let messages = self
            .sqs
            .receive_message(ReceiveMessageInput {
                queue_url,
                max_number_of_messages: MAX_MESSAGES,
                visibility_timeout: VISIBILITY_TIMEOUT_SECONDS,
                wait_time_seconds: WAIT_TIME_SECONDS,
            })
            .await?;
        Ok(messages
            .into_iter()
            .map(|m| Received {
                parsed: parse(&m.body),
                message_id: m.message_id,
                receipt_handle: m.receipt_handle,
            })
            .collect())
    }

    /// Deletes a received message.
    pub async fn delete(&self, receipt_handle: &str) -> Result<(), AwsError> {
        let queue_url = self.url().await?;
        self.sqs.delete_message(&queue_url, receipt_handle).await
    }
}
