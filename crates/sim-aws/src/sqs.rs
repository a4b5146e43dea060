//! The simulated SQS (the calls the interruption controller makes, with long polling and
//! visibility timeouts on the account's clock) and the EC2 events that reach it: EventBridge
//! rules route the account's events to its event queues, and a spot interruption warning is
//! followed, two minutes later, by EC2 reclaiming the instance.

use std::time::Duration;

use async_trait::async_trait;
use driftwood_aws::interruption::events::EventOrigin;
use driftwood_aws::ports::{
    AwsError, ReceiveMessageInput, SqsApi, SqsMessage, codes, instance_state,
};
use jiff::{SignedDuration, Timestamp};

use crate::gate::Call;
use crate::ids::hex_id;
use crate::state::SimAws;

/// How long EC2 waits between a spot interruption warning and reclaiming the instance.
pub const SPOT_INTERRUPTION_NOTICE: SignedDuration = SignedDuration::from_secs(120);

/// The simulated account's ID, as its queue URLs and events name it.
pub const ACCOUNT_ID: &str = "111122223333";

/// One message on a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedMessage {
    pub message_id: String,
    pub body: String,
    /// Hidden from receivers until then (after a receive, for the visibility timeout).
    pub visible_at: Timestamp,
    /// The receipt handle of its latest receive (only that one deletes it).
    pub receipt_handle: Option<String>,
    pub receive_count: u32,
}

/// A queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimQueue {
    pub url: String,
    pub messages: Vec<QueuedMessage>,
    /// Messages sent so far (ids and receipt handles derive from it).
    pub sent: u64,
    pub receives: u64,
}

fn no_such_queue(what: &str) -> AwsError {
    AwsError::new(
        codes::QUEUE_DOES_NOT_EXIST,
        format!("The specified queue does not exist: {what}"),
    )
}

impl SimAws {
    /// Creates the SQS queue `name` (again: the same queue) and returns its URL.
    pub fn create_queue(&self, name: &str) -> String {
        let url = format!(
            "https://sqs.{}.amazonaws.com/{ACCOUNT_ID}/{name}",
            self.config.region
        );
        self.lock()
            .queues
            .entry(name.to_string())
            .or_insert_with(|| SimQueue {
                url: url.clone(),
                ..SimQueue::default()
            });
        url
    }

    /// Creates the queue `name` and routes the account's EC2 and AWS Health events to it, as
    /// the EventBridge rules of Karpenter's getting-started stack do.
    pub fn create_interruption_queue(&self, name: &str) -> String {
        let url = self.create_queue(name);
        self.lock().event_queues.insert(name.to_string());
        url
    }

    /// Messages on queue `name` (received or not), none if there is no such queue.
    pub fn queue_depth(&self, name: &str) -> usize {
        self.lock().queues.get(name).map_or(0, |q| q.messages.len())
    }

    /// The origin of this account's events.
    pub fn event_origin(&self) -> EventOrigin {
        EventOrigin {
            account: ACCOUNT_ID.to_string(),
            region: self.config.region.clone(),
        }
    }

    /// Sends an EventBridge event (its JSON) to every event queue; returns how many got it.
    pub fn publish_event(&self, body: &str) -> usize {
        let now = self.now();
        let seed = self.config.seed;
        let mut st = self.lock();
        let names: Vec<String> = st.event_queues.iter().cloned().collect();
        for name in &names {
            if let Some(queue) = st.queues.get_mut(name) {
                enqueue(queue, name, seed, body, now);
            }
        }
        drop(st);
        self.queue_arrivals.notify_waiters();
        names.len()
    }

    /// EC2 reclaims a running spot instance: a spot interruption warning now, and the
    /// instance terminated [`SPOT_INTERRUPTION_NOTICE`] later unless it is terminated before.
    /// Returns false for an instance that is not a running spot instance, or already warned.
    pub fn interrupt_spot(&self, instance_id: &str) -> bool {
        let now = self.now();
        {
            let mut st = self.lock();
            let Some(stored) = st.instances.get(instance_id) else {
                return false;
            };
            let spot = stored.instance.instance_lifecycle.as_deref() == Some("spot");
            if !spot
                || stored.reclaim_at.is_some()
                || self.state_at(stored, now) != instance_state::RUNNING
            {
                return false;
            }
            if let Some(stored) = st.instances.get_mut(instance_id) {
                stored.reclaim_at = Some(now + SPOT_INTERRUPTION_NOTICE);
            }
        }
        self.publish_event(&self.event_origin().spot_interruption(instance_id, now));
        true
    }

    /// Whether EC2 reclaimed `instance_id` after its spot interruption warning: the reclaim
    /// is due and no TerminateInstances came before it.
    pub fn reclaimed_by_ec2(&self, instance_id: &str) -> bool {
        let now = self.now();
        self.lock().instances.get(instance_id).is_some_and(|s| {
            s.reclaim_at
                .is_some_and(|at| at <= now && s.terminated_at.is_none_or(|t| t > at))
        })
    }

    /// Sends `body` to the queue at `queue_url` (what a producer other than EventBridge
    /// would send); returns the message ID.
    pub fn send_message(&self, queue_url: &str, body: &str) -> Result<String, AwsError> {
        let now = self.now();
        let seed = self.config.seed;
        let id = {
            let mut st = self.lock();
            let (name, queue) = Self::queue_by_url(&mut st, queue_url)?;
            enqueue(queue, &name, seed, body, now)
        };
        self.queue_arrivals.notify_waiters();
        Ok(id)
    }

    fn queue_by_url<'a>(
        st: &'a mut crate::state::SimState,
        url: &str,
    ) -> Result<(String, &'a mut SimQueue), AwsError> {
        st.queues
            .iter_mut()
            .find(|(_, q)| q.url == url)
            .map(|(name, q)| (name.clone(), q))
            .ok_or_else(|| no_such_queue(url))
    }

    /// Takes up to `max` visible messages off `url`, hiding each for `visibility` seconds.
    fn take_visible(
        &self,
        url: &str,
        max: usize,
        visibility: i64,
    ) -> Result<Vec<SqsMessage>, AwsError> {
        let now = self.now();
        let seed = self.config.seed;
        let mut st = self.lock();
        let (name, queue) = Self::queue_by_url(&mut st, url)?;
        let mut out = Vec::new();
        for message in queue
            .messages
            .iter_mut()
            .filter(|m| m.visible_at <= now)
            .take(max)
        {
            queue.receives += 1;
            message.receive_count += 1;
            let handle = format!(
                "{}-{}",
                message.message_id,
                hex_id(seed, &format!("{name}/receipt/{}", queue.receives), 24)
            );
            message.receipt_handle = Some(handle.clone());
            message.visible_at = now + SignedDuration::from_secs(visibility);
            out.push(SqsMessage {
                message_id: message.message_id.clone(),
                receipt_handle: handle,
                body: message.body.clone(),
            });
        }
        Ok(out)
    }
}

fn enqueue(queue: &mut SimQueue, name: &str, seed: u64, body: &str, now: Timestamp) -> String {
    queue.sent += 1;
    let raw = hex_id(seed, &format!("{name}/message/{}", queue.sent), 32);
    let message_id = format!(
        "{}-{}-{}-{}-{}",
        &raw[0..8],
        &raw[8..12],
        &raw[12..16],
        &raw[16..20],
        &raw[20..32]
    );
    queue.messages.push(QueuedMessage {
        message_id: message_id.clone(),
        body: body.to_string(),
        visible_at: now,
        receipt_handle: None,
        receive_count: 0,
    });
    message_id
}

#[async_trait]
impl SqsApi for SimAws {
    async fn get_queue_url(&self, queue_name: &str) -> Result<String, AwsError> {
        self.enter(Call::new("GetQueueUrl")).await?;
        self.lock()
            .queues
            .get(queue_name)
            .map(|q| q.url.clone())
            .ok_or_else(|| no_such_queue(queue_name))
    }

    async fn receive_message(
        &self,
        input: ReceiveMessageInput,
    ) -> Result<Vec<SqsMessage>, AwsError> {
        self.enter(Call::new("ReceiveMessage")).await?;
        if !(1..=10).contains(&input.max_number_of_messages)
            || !(0..=20).contains(&input.wait_time_seconds)
        {
            return Err(AwsError::new(
                codes::INVALID_PARAMETER_VALUE,
                format!(
                    "MaxNumberOfMessages must be 1-10 and WaitTimeSeconds 0-20 (got {} and {})",
                    input.max_number_of_messages, input.wait_time_seconds
                ),
            ));
        }
        let max = usize::try_from(input.max_number_of_messages).unwrap_or(1);
        let visibility = i64::from(input.visibility_timeout.max(0));
        let deadline = tokio::time::Instant::now()
            + Duration::from_secs(u64::try_from(input.wait_time_seconds).unwrap_or(0));
        loop {
            // Registered before looking, so a message sent in between is not missed.
            let arrival = self.queue_arrivals.notified();
            tokio::pin!(arrival);
            arrival.as_mut().enable();
            let messages = self.take_visible(&input.queue_url, max, visibility)?;
            if !messages.is_empty() || tokio::time::Instant::now() >= deadline {
                return Ok(messages);
            }
            if tokio::time::timeout_at(deadline, arrival).await.is_err() {
                return self.take_visible(&input.queue_url, max, visibility);
            }
        }
    }

    async fn delete_message(&self, queue_url: &str, receipt_handle: &str) -> Result<(), AwsError> {
        self.enter(Call::new("DeleteMessage")).await?;
        let mut st = self.lock();
        let (_, queue) = Self::queue_by_url(&mut st, queue_url)?;
        // A stale handle (of a message deleted or received again since) is accepted, and
        // deletes nothing, as SQS does.
        queue
            .messages
            .retain(|m| m.receipt_handle.as_deref() != Some(receipt_handle));
        Ok(())
    }
}
