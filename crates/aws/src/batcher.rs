//! Karpenter's EC2 call batching: requests that arrive together (within an idle gap of
//! `idle`, for at most `max` from the first) go out as one call, and each caller gets its own
//! part of the answer. TerminateInstances is batched as Karpenter's provider batches it: one
//! call with every instance, then, for each instance that call did not leave shutting down or
//! terminated (one bad instance can fail the whole call), a call of its own.
//!
//! The windows run on tokio's clock, as every wait of the controllers does.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use tokio::sync::{Notify, oneshot};

use crate::ports::{AwsError, Ec2Api, InstanceStateChange, codes, instance_state};

/// Label sets of the batcher families (`batcher`).
pub type BatcherLabels = Vec<(String, String)>;

/// Karpenter's size buckets for its batch-size histogram.
const SIZE_BUCKETS: [f64; 34] = [
    1.0, 2.0, 4.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0,
    125.0, 150.0, 175.0, 200.0, 225.0, 250.0, 275.0, 300.0, 350.0, 400.0, 450.0, 500.0, 550.0,
    600.0, 700.0, 800.0, 900.0, 1000.0,
];

/// `karpenter_cloudprovider_batcher_batch_time_seconds{batcher}` (the window, first request
/// to the call) and `_batch_size{batcher}` (requests per call).
#[derive(Debug, Clone)]
pub struct BatcherMetrics {
    pub window: Family<BatcherLabels, Histogram, fn() -> Histogram>,
    pub size: Family<BatcherLabels, Histogram, fn() -> Histogram>,
}

impl Default for BatcherMetrics {
    fn default() -> Self {
        Self {
            window: Family::new_with_constructor(|| {
                Histogram::new(driftwood_cloud::buckets::DURATION_BUCKETS)
            }),
            size: Family::new_with_constructor(|| Histogram::new(SIZE_BUCKETS)),
        }
    }
}

/// How long a window stays open and how many requests it takes.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// Closes this long after the last request.
    pub idle: Duration,
    /// Closes this long after the first request at most.
    pub max: Duration,
    /// Closes once it holds this many requests (a few more may join while it closes: the
    /// executor splits its calls to this many).
    pub max_items: usize,
}

/// Karpenter's TerminateInstances window: 100 ms idle, 1 s at most, 500 instances.
pub const TERMINATE_WINDOW: Window = Window {
    idle: Duration::from_millis(100),
    max: Duration::from_secs(1),
    max_items: 500,
};

type Answer<O> = Result<O, AwsError>;
type Executor<I, O> =
    Arc<dyn Fn(Vec<I>) -> Pin<Box<dyn Future<Output = Vec<Answer<O>>> + Send>> + Send + Sync>;

/// The requests of the window open now, and what wakes its closer when one arrives.
struct Open<I, O> {
    requests: Vec<(I, oneshot::Sender<Answer<O>>)>,
    arrived: Arc<Notify>,
}

/// Batches requests of one kind (`name`, Karpenter's batcher name) into calls of `execute`,
/// which answers each input in order.
pub struct Batcher<I, O> {
    name: &'static str,
    window: Window,
    execute: Executor<I, O>,
    open: Mutex<Option<Open<I, O>>>,
    metrics: BatcherMetrics,
}

impl<I: Send + 'static, O: Send + 'static> Batcher<I, O> {
    /// A batcher whose calls are made by `execute`.
    pub fn new(
        name: &'static str,
        window: Window,
        metrics: BatcherMetrics,
        execute: Executor<I, O>,
    ) -> Arc<Self> {
        Arc::new(Self {
            name,
            window,
            execute,
            open: Mutex::new(None),
            metrics,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Option<Open<I, O>>> {
        // Every change is one push or take: a panic elsewhere leaves the window usable.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `input` to the open window (opening one if none is) and waits for its answer.
    pub async fn add(self: &Arc<Self>, input: I) -> Answer<O> {
        let (answer, answered) = oneshot::channel();
        let opened = {
            let mut open = self.lock();
            match open.as_mut() {
                Some(window) => {
                    window.requests.push((input, answer));
                    window.arrived.notify_one();
                    None
                }
                None => {
                    let arrived = Arc::new(Notify::new());
                    *open = Some(Open {
                        requests: vec![(input, answer)],
                        arrived: arrived.clone(),
                    });
                    Some(arrived)
                }
            }
        };
        if let Some(arrived) = opened {
            // The guard goes into the task's future at once: dropped, even before it first
            // runs, it takes the window.
            let guard = CloseGuard {
                batcher: self.clone(),
                armed: true,
            };
            tokio::spawn(Self::close_and_call(guard, arrived));
        }
        answered.await.unwrap_or_else(|_| {
            Err(AwsError::new(
                codes::INTERNAL_ERROR,
                format!("the {} batch ended without an answer", self.name),
            ))
        })
    }

    /// Waits for the window to close, then makes its calls and hands out the answers. Should
    /// this task be dropped before it takes the window (the runtime shutting down), `guard`
    /// takes it, so its callers are told and the next request opens a window of its own.
    async fn close_and_call(guard: CloseGuard<I, O>, arrived: Arc<Notify>) {
        let this = guard.batcher.clone();
        let opened = tokio::time::Instant::now();
        let deadline = opened + this.window.max;
        loop {
            let held = this.lock().as_ref().map_or(0, |w| w.requests.len());
            if held >= this.window.max_items {
                break;
            }
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => break,
                () = tokio::time::sleep(this.window.idle) => break,
                () = arrived.notified() => {}
            }
        }
        let labels = vec![("batcher".to_string(), this.name.to_string())];
        this.metrics
            .window
            .get_or_create(&labels)
            .observe(opened.elapsed().as_secs_f64());
        let taken = this.lock().take();
        guard.disarm();
        let Some(window) = taken else {
            return;
        };
        let (inputs, answers): (Vec<I>, Vec<_>) = window.requests.into_iter().unzip();
        #[allow(clippy::cast_precision_loss)]
        this.metrics
            .size
            .get_or_create(&labels)
            .observe(inputs.len() as f64);
        let mut results = (this.execute)(inputs).await.into_iter();
        for answer in answers {
            let result = results.next().unwrap_or_else(|| {
                Err(AwsError::new(
                    codes::INTERNAL_ERROR,
                    format!("the {} batch gave no answer for a request", this.name),
                ))
            });
            // A caller that stopped waiting (its task cancelled) needs no answer.
            if answer.send(result).is_err() {
                tracing::debug!(
                    batcher = this.name,
                    "a batched caller left before its answer"
                );
            }
        }
    }
}

/// Takes a batcher's open window when its closer ends without taking it: the callers' answer
/// channels close, and they are told the batch ended without an answer.
struct CloseGuard<I, O> {
    batcher: Arc<Batcher<I, O>>,
    armed: bool,
}

impl<I, O> CloseGuard<I, O> {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl<I, O> Drop for CloseGuard<I, O> {
    fn drop(&mut self) {
        if self.armed {
            let orphaned = self
                .batcher
                .open
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if let Some(window) = orphaned {
                tracing::warn!(
                    batcher = self.batcher.name,
                    requests = window.requests.len(),
                    "a batch window closed without its calls being made"
                );
            }
        }
    }
}

/// The TerminateInstances batcher over `ec2`: each request is one instance ID; its answer is
/// that instance's state change, as a call of its own would give it.
pub fn terminate_instances(
    ec2: Arc<dyn Ec2Api>,
    metrics: BatcherMetrics,
) -> Arc<Batcher<String, Vec<InstanceStateChange>>> {
    let max_items = TERMINATE_WINDOW.max_items;
    Batcher::new(
        "terminate_instances",
        TERMINATE_WINDOW,
        metrics,
        Arc::new(move |ids: Vec<String>| {
            let ec2 = ec2.clone();
            Box::pin(async move { terminate_batch(&*ec2, ids, max_items).await })
        }),
    )
}

/// One batch of TerminateInstances: every distinct instance in calls of at most `max_items`,
/// then a call of its own for each one not left shutting down or terminated.
async fn terminate_batch(
    ec2: &dyn Ec2Api,
    ids: Vec<String>,
    max_items: usize,
) -> Vec<Answer<Vec<InstanceStateChange>>> {
    let distinct: Vec<String> = ids
        .iter()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut answered: BTreeMap<String, Answer<Vec<InstanceStateChange>>> = BTreeMap::new();
    for chunk in distinct.chunks(max_items.max(1)) {
        match ec2.terminate_instances(chunk.to_vec()).await {
            Ok(changes) => {
                for change in changes {
                    let going = change.current_state == instance_state::SHUTTING_DOWN
                        || change.current_state == instance_state::TERMINATED;
                    if going && chunk.contains(&change.instance_id) {
                        answered.insert(change.instance_id.clone(), Ok(vec![change]));
                    }
                }
            }
            // Each is tried on its own below, which says whose error it was.
            Err(error) => {
                tracing::debug!(%error, instances = chunk.len(), "batched TerminateInstances failed; terminating one by one")
            }
        }
    }
    let alone: Vec<String> = distinct
        .into_iter()
        .filter(|id| !answered.contains_key(id))
        .collect();
    let retried = futures::future::join_all(
        alone
            .iter()
            .map(|id| ec2.terminate_instances(vec![id.clone()])),
    )
    .await;
    answered.extend(alone.into_iter().zip(retried));
    ids.iter()
        .map(|id| {
            answered.get(id).cloned().unwrap_or_else(|| {
                Err(AwsError::new(
                    codes::INTERNAL_ERROR,
                    format!("no answer for instance {id}"),
                ))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes of the calls an executor was asked to make.
    type Calls = Arc<Mutex<Vec<usize>>>;

    fn echo(window: Window) -> (Arc<Batcher<u32, u32>>, Calls) {
        let calls: Calls = Arc::default();
        let seen = calls.clone();
        let batcher = Batcher::new(
            "echo",
            window,
            BatcherMetrics::default(),
            Arc::new(move |inputs: Vec<u32>| {
                seen.lock().unwrap().push(inputs.len());
                Box::pin(async move { inputs.into_iter().map(Ok).collect() })
            }),
        );
        (batcher, calls)
    }

    const QUICK: Window = Window {
        idle: Duration::from_millis(1),
        max: Duration::from_millis(10),
        max_items: 500,
    };

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    /// Karpenter's batcher: requests made together are one call, each answered with its own.
    #[test]
    fn requests_made_together_are_one_call() {
        let (batcher, calls) = echo(QUICK);
        let answers =
            runtime().block_on(futures::future::join_all((1..=3).map(|i| batcher.add(i))));
        assert_eq!(answers, [Ok(1), Ok(2), Ok(3)]);
        assert_eq!(*calls.lock().unwrap(), [3]);
    }

    /// A window whose closer never ran (its runtime shut down) is not left open: its caller
    /// is told, and the next request opens a window of its own and is answered.
    #[test]
    fn a_window_whose_closer_is_dropped_is_not_left_open() {
        let (batcher, calls) = echo(QUICK);
        let first = runtime();
        let waiting = batcher.clone();
        first.block_on(async move {
            tokio::spawn(async move { waiting.add(1).await });
            tokio::task::yield_now().await;
        });
        assert!(
            batcher.lock().is_some(),
            "the first request waits in a window"
        );
        drop(first);
        assert!(
            batcher.lock().is_none(),
            "the guard took the orphaned window"
        );
        assert_eq!(runtime().block_on(batcher.add(2)), Ok(2));
        assert_eq!(*calls.lock().unwrap(), [1]);
    }
}
