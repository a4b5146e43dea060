//! Interruption handling's AWS half: the EventBridge messages an SQS interruption queue carries
//! (spot interruption warnings, rebalance recommendations, scheduled maintenance, instance state
//! changes) parsed into what they mean ([`message`]), the events as EC2 and AWS Health send them
//! ([`events`], for the simulated account and tests), and the queue itself polled as Karpenter
//! polls it ([`queue`]); and the instances EC2's own status checks and scheduled events report
//! unhealthy ([`instance_status`]), read with or without a queue.

pub mod events;
pub mod instance_status;
pub mod message;
pub mod queue;

pub use message::{Action, Kind, Message, ParseError, parse};
pub use queue::{InterruptionQueue, Received};
