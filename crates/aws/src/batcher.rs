//! Karpenter's EC2 call batching: requests of one kind that arrive together (within an idle gap
//! of `idle`, for at most `max` from the first) and hash alike go out as one call, and each
//! caller gets its own part of the answer. TerminateInstances is batched as Karpenter's provider
//! batches it: one call with every instance, then, for each instance that call did not leave
//! shutting down or terminated (one bad instance can fail the whole call), a call of its own.
//! CreateFleet too: identical single-instance requests are one fleet of as many instances (see
//! [`create_fleet`]); and DescribeInstances by id (see [`describe_instances`]).
//!
//! The windows run on tokio's clock, as every wait of the controllers does.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use tokio::sync::{Notify, oneshot};

use crate::fnv::fnv1a64;
use crate::ports::{
    AwsError, CreateFleetError, CreateFleetInput, CreateFleetInstance, CreateFleetOutput,
    DescribeInstancesInput, Ec2Api, Filter, Instance, InstanceStateChange, codes, instance_state,
};

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

/// Karpenter's CreateFleet window: 35 ms idle, 1 s at most, 1,000 instances.
pub const CREATE_FLEET_WINDOW: Window = Window {
    idle: Duration::from_millis(35),
    max: Duration::from_secs(1),
    max_items: 1_000,
};

type Answer<O> = Result<O, AwsError>;
type Executor<I, O> =
    Arc<dyn Fn(Vec<I>) -> Pin<Box<dyn Future<Output = Vec<Answer<O>>> + Send>> + Send + Sync>;

/// The requests of the window open now, and what wakes its closer when one arrives.
struct Open<I, O> {
    requests: Vec<(I, oneshot::Sender<Answer<O>>)>,
    arrived: Arc<Notify>,
}

/// Which window a request joins: requests that hash alike are batched together (Karpenter's
/// `RequestHasher`).
pub type RequestHasher<I> = fn(&I) -> u64;

/// Every request in one window (Karpenter's `OneBucketHasher`).
pub fn one_bucket<I>(_: &I) -> u64 {
    0
}

/// Batches requests of one kind (`name`, Karpenter's batcher name) into calls of `execute`,
/// which answers each input in order; a window per request hash.
pub struct Batcher<I, O> {
    name: &'static str,
    window: Window,
    hasher: RequestHasher<I>,
    execute: Executor<I, O>,
    open: Mutex<HashMap<u64, Open<I, O>>>,
    metrics: BatcherMetrics,
}

impl<I: Send + 'static, O: Send + 'static> Batcher<I, O> {
    /// A batcher whose calls are made by `execute`.
    pub fn new(
        name: &'static str,
        window: Window,
        hasher: RequestHasher<I>,
        metrics: BatcherMetrics,
        execute: Executor<I, O>,
    ) -> Arc<Self> {
        Arc::new(Self {
            name,
            window,
            hasher,
            execute,
            open: Mutex::new(HashMap::new()),
            metrics,
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Open<I, O>>> {
        // Every change is one push or take: a panic elsewhere leaves the window usable.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `input` to the open window of its hash (opening one if none is) and waits for its
    /// answer.
    pub async fn add(self: &Arc<Self>, input: I) -> Answer<O> {
        let key = (self.hasher)(&input);
        let (answer, answered) = oneshot::channel();
        let opened = {
            let mut open = self.lock();
            match open.get_mut(&key) {
                Some(window) => {
                    window.requests.push((input, answer));
                    window.arrived.notify_one();
                    None
                }
                None => {
                    let arrived = Arc::new(Notify::new());
                    open.insert(
                        key,
                        Open {
                            requests: vec![(input, answer)],
                            arrived: arrived.clone(),
                        },
                    );
                    Some(arrived)
                }
            }
        };
        if let Some(arrived) = opened {
            // The guard goes into the task's future at once: dropped, even before it first
            // runs, it takes the window.
            let guard = CloseGuard {
                batcher: self.clone(),
                key,
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
        let key = guard.key;
        let opened = tokio::time::Instant::now();
        let deadline = opened + this.window.max;
        loop {
            let held = this.lock().get(&key).map_or(0, |w| w.requests.len());
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
        let taken = this.lock().remove(&key);
        guard.disarm();
        let Some(window) = taken else {
            return;
        };
        // A caller that stopped waiting before the call (its controller stopped: a leader that
        // lost its lease) is not acted for: its launch or termination is left to whoever acts
        // next, instead of an instance no one records.
        let (inputs, answers): (Vec<I>, Vec<_>) = window
            .requests
            .into_iter()
            .filter(|(_, answer)| !answer.is_closed())
            .unzip();
        if inputs.is_empty() {
            tracing::debug!(
                batcher = this.name,
                "every caller of a batch left before its call"
            );
            return;
        }
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
    key: u64,
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
                .remove(&self.key);
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
        one_bucket,
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

/// Karpenter's DescribeInstances window: 100 ms idle, 1 s at most, 500 instances.
pub const DESCRIBE_INSTANCES_WINDOW: Window = Window {
    idle: Duration::from_millis(100),
    max: Duration::from_secs(1),
    max_items: 500,
};

/// The DescribeInstances batcher over `ec2` (Karpenter's `describe_instances`): instances
/// described by id together go out as one call naming them in an `instance-id` filter, so an
/// id not found (gone, or launched too recently to be described) is left out of the answer
/// instead of failing the call for all (Karpenter's batcher names them as ids and, after a
/// failed call, describes each alone). Each caller gets its instance, in any state, or
/// `InvalidInstanceID.NotFound`.
pub fn describe_instances(
    ec2: Arc<dyn Ec2Api>,
    metrics: BatcherMetrics,
) -> Arc<Batcher<String, Instance>> {
    let max_items = DESCRIBE_INSTANCES_WINDOW.max_items;
    Batcher::new(
        "describe_instances",
        DESCRIBE_INSTANCES_WINDOW,
        one_bucket,
        metrics,
        Arc::new(move |ids: Vec<String>| {
            let ec2 = ec2.clone();
            Box::pin(async move { describe_batch(&*ec2, ids, max_items).await })
        }),
    )
}

/// One batch of DescribeInstances: every distinct id in calls of at most `max_items`; a failed
/// call answers each of its ids with its error.
async fn describe_batch(
    ec2: &dyn Ec2Api,
    ids: Vec<String>,
    max_items: usize,
) -> Vec<Answer<Instance>> {
    let distinct: Vec<&String> = ids.iter().collect::<BTreeSet<_>>().into_iter().collect();
    let mut found: BTreeMap<String, Instance> = BTreeMap::new();
    let mut failed: BTreeMap<&String, AwsError> = BTreeMap::new();
    for chunk in distinct.chunks(max_items.max(1)) {
        let input = DescribeInstancesInput {
            instance_ids: Vec::new(),
            filters: vec![Filter::new(
                "instance-id",
                chunk.iter().map(|id| id.as_str()),
            )],
        };
        match ec2.describe_instances(input).await {
            Ok(instances) => {
                found.extend(instances.into_iter().map(|i| (i.instance_id.clone(), i)));
            }
            Err(error) => failed.extend(chunk.iter().map(|id| (*id, error.clone()))),
        }
    }
    ids.iter()
        .map(|id| match (found.get(id), failed.get(id)) {
            (Some(instance), _) => Ok(instance.clone()),
            (None, Some(error)) => Err(error.clone()),
            (None, None) => Err(AwsError::new(
                codes::INSTANCE_ID_NOT_FOUND,
                format!("The instance ID '{id}' does not exist"),
            )),
        })
        .collect()
}

/// One caller's part of a batched CreateFleet: the fleet's answer with at most the one instance
/// that is this caller's, and every error of the call (each caller reads the capacity errors to
/// mark offerings unavailable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetShare {
    pub output: CreateFleetOutput,
    /// Whether this caller counts the call's errors in the failure metrics: one caller per
    /// call, so an error refused once is counted once however many shared the call.
    pub counts_errors: bool,
}

/// What no other request but an identical one may share a fleet with: the whole input.
fn fleet_request_text(input: &CreateFleetInput) -> String {
    format!("{input:?}")
}

/// The CreateFleet batcher over `ec2` (Karpenter's `create_fleet`): single-instance requests
/// that are identical in every field (the same launch templates, overrides, capacity type and
/// tags — the NodeClaim's own name is not among the launch tags, see
/// [`crate::claim_view::instance_tags`]) and arrive together are one instant fleet of as many
/// instances; each caller gets one of its instances, or, when the fleet launched fewer, none
/// and the fleet's errors.
pub fn create_fleet(
    ec2: Arc<dyn Ec2Api>,
    metrics: BatcherMetrics,
) -> Arc<Batcher<CreateFleetInput, FleetShare>> {
    Batcher::new(
        "create_fleet",
        CREATE_FLEET_WINDOW,
        |input| fnv1a64(fleet_request_text(input).as_bytes()),
        metrics,
        Arc::new(move |inputs: Vec<CreateFleetInput>| {
            let ec2 = ec2.clone();
            Box::pin(
                async move { create_fleet_batch(|input| ec2.create_fleet(input), inputs).await },
            )
        }),
    )
}

/// One batch of CreateFleet: a call per distinct request (a hash shared by two different
/// requests does not merge them), each for as many instances as it has callers, of at most
/// one instance each (anything else is refused, as Karpenter's batcher refuses it).
async fn create_fleet_batch<Call, Fleet>(
    call: Call,
    inputs: Vec<CreateFleetInput>,
) -> Vec<Answer<FleetShare>>
where
    Call: Fn(CreateFleetInput) -> Fleet,
    Fleet: Future<Output = Answer<CreateFleetOutput>>,
{
    let mut answers: Vec<Option<Answer<FleetShare>>> = vec![None; inputs.len()];
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, input) in inputs.iter().enumerate() {
        if input.total_target_capacity == 1 {
            groups.entry(fleet_request_text(input)).or_default().push(i);
        } else {
            answers[i] = Some(Err(AwsError::new(
                codes::INVALID_PARAMETER_VALUE,
                format!(
                    "a batched CreateFleet takes a single instance, not {}",
                    input.total_target_capacity
                ),
            )));
        }
    }
    let calls = groups.into_values().map(|callers| {
        let mut input = inputs[callers[0]].clone();
        input.total_target_capacity = i64::try_from(callers.len()).unwrap_or(i64::MAX);
        let fleet = call(input);
        async move { (callers, fleet.await) }
    });
    for (callers, answered) in futures::future::join_all(calls).await {
        let shares = match answered {
            Ok(output) => split_fleet(output, callers.len())
                .into_iter()
                .map(Ok)
                .collect(),
            Err(error) => vec![Err(error); callers.len()],
        };
        for (caller, share) in callers.into_iter().zip(shares) {
            answers[caller] = Some(share);
        }
    }
    answers
        .into_iter()
        .map(|answer| {
            answer.unwrap_or_else(|| {
                Err(AwsError::new(
                    codes::INTERNAL_ERROR,
                    "no answer for a CreateFleet request",
                ))
            })
        })
        .collect()
}

/// Splits a fleet of `callers` instances among its callers in order: one instance each while
/// they last (more than asked for are left to garbage collection, logged), then none and the
/// fleet's errors (a "too few instances" error when EC2 gave none).
fn split_fleet(output: CreateFleetOutput, callers: usize) -> Vec<FleetShare> {
    let mut shares = Vec::with_capacity(callers);
    for reservation in &output.instances {
        for id in &reservation.instance_ids {
            if shares.len() == callers {
                tracing::error!(instance_id = %id, fleet_id = %output.fleet_id, "received more instances than requested, ignoring instance");
                continue;
            }
            shares.push(FleetShare {
                output: CreateFleetOutput {
                    fleet_id: output.fleet_id.clone(),
                    instances: vec![CreateFleetInstance {
                        instance_ids: vec![id.clone()],
                        ..reservation.clone()
                    }],
                    errors: output.errors.clone(),
                },
                counts_errors: shares.is_empty(),
            });
        }
    }
    if shares.len() < callers {
        let mut errors = output.errors.clone();
        if errors.is_empty() {
            errors.push(CreateFleetError {
                error_code: "too few instances returned".to_string(),
                error_message: "too few instances returned".to_string(),
                ..CreateFleetError::default()
            });
        }
        while shares.len() < callers {
            shares.push(FleetShare {
                output: CreateFleetOutput {
                    fleet_id: output.fleet_id.clone(),
                    instances: Vec::new(),
                    errors: errors.clone(),
                },
                counts_errors: shares.is_empty(),
            });
        }
    }
    shares
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
            |i: &u32| u64::from(*i % 2),
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

    /// Karpenter's batcher: requests made together that hash alike are one call, each
    /// answered with its own; requests that hash apart are a call each.
    #[test]
    fn requests_made_together_are_one_call_per_hash() {
        let (batcher, calls) = echo(QUICK);
        let answers = runtime().block_on(futures::future::join_all(
            [1, 3, 5, 2].into_iter().map(|i| batcher.add(i)),
        ));
        assert_eq!(answers, [Ok(1), Ok(3), Ok(5), Ok(2)]);
        let mut sizes = calls.lock().unwrap().clone();
        sizes.sort_unstable();
        assert_eq!(sizes, [1, 3]);
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
            batcher.lock().contains_key(&1),
            "the first request waits in a window"
        );
        drop(first);
        assert!(
            batcher.lock().is_empty(),
            "the guard took the orphaned window"
        );
        assert_eq!(runtime().block_on(batcher.add(2)), Ok(2));
        assert_eq!(*calls.lock().unwrap(), [1]);
    }

    fn reservation(ids: &[&str], instance_type: &str) -> CreateFleetInstance {
        CreateFleetInstance {
            instance_ids: ids.iter().map(|i| (*i).to_string()).collect(),
            instance_type: instance_type.to_string(),
            lifecycle: "on-demand".to_string(),
            ..CreateFleetInstance::default()
        }
    }

    fn ice(instance_type: &str) -> CreateFleetError {
        CreateFleetError {
            error_code: codes::INSUFFICIENT_INSTANCE_CAPACITY.to_string(),
            error_message: format!("no {instance_type}"),
            ..CreateFleetError::default()
        }
    }

    fn ids(share: &FleetShare) -> Vec<String> {
        share
            .output
            .instances
            .iter()
            .flat_map(|i| i.instance_ids.clone())
            .collect()
    }

    /// Karpenter's CreateFleet batcher suite, "should batch the same inputs into a single
    /// call" and "should return any errors to callers": each caller gets one instance of the
    /// fleet (with its reservation's type), and every caller sees the call's errors; the errors
    /// are counted by one caller only.
    #[test]
    fn a_fleet_is_split_one_instance_per_caller() {
        let output = CreateFleetOutput {
            fleet_id: "fleet-1".to_string(),
            instances: vec![
                reservation(&["i-1", "i-2"], "m5.large"),
                reservation(&["i-3"], "m5a.large"),
            ],
            errors: vec![ice("c5.large")],
        };
        let shares = split_fleet(output, 3);
        let got: Vec<_> = shares.iter().map(ids).collect();
        assert_eq!(got, [vec!["i-1"], vec!["i-2"], vec!["i-3"]]);
        assert_eq!(shares[2].output.instances[0].instance_type, "m5a.large");
        assert!(shares.iter().all(|s| s.output.errors == [ice("c5.large")]));
        let counting: Vec<bool> = shares.iter().map(|s| s.counts_errors).collect();
        assert_eq!(counting, [true, false, false]);
    }

    /// "should handle partial fulfillment": 3 instances for 5 callers — the last two get none
    /// and the fleet's errors; with no error from EC2, "too few instances returned". More
    /// instances than callers: the extra one is given to no one.
    #[test]
    fn a_partial_fleet_leaves_the_last_callers_with_its_errors() {
        let partial = CreateFleetOutput {
            fleet_id: "fleet-2".to_string(),
            instances: vec![reservation(&["i-1", "i-2", "i-3"], "m5.large")],
            errors: vec![ice("m5.large")],
        };
        let shares = split_fleet(partial, 5);
        assert_eq!(shares.len(), 5);
        assert_eq!(shares.iter().filter(|s| ids(s).len() == 1).count(), 3);
        assert!(
            shares[3..]
                .iter()
                .all(|s| s.output.instances.is_empty() && s.output.errors == [ice("m5.large")])
        );

        let silent = CreateFleetOutput {
            instances: vec![reservation(&["i-1"], "m5.large")],
            ..CreateFleetOutput::default()
        };
        let shares = split_fleet(silent, 2);
        assert_eq!(
            shares[1].output.errors[0].error_code,
            "too few instances returned"
        );
        assert!(shares[0].output.errors.is_empty());

        let extra = CreateFleetOutput {
            instances: vec![reservation(&["i-1", "i-2"], "m5.large")],
            ..CreateFleetOutput::default()
        };
        let shares = split_fleet(extra, 1);
        assert_eq!(shares.len(), 1);
        assert_eq!(ids(&shares[0]), ["i-1"]);
    }

    /// Identical requests are one call of as many instances; a request for more than one
    /// instance is refused (Karpenter: "expected to receive a single instance only"); requests
    /// that differ are calls of their own even when their hashes agree.
    #[test]
    fn identical_requests_are_one_fleet_and_others_their_own() {
        use crate::ports::FleetLaunchTemplateConfig;
        let calls: Arc<Mutex<Vec<CreateFleetInput>>> = Arc::default();
        let recorded = calls.clone();
        let fleet = move |input: CreateFleetInput| {
            recorded.lock().unwrap().push(input.clone());
            let template = input.launch_template_configs[0]
                .launch_template_name
                .clone();
            let n = usize::try_from(input.total_target_capacity).unwrap();
            async move {
                let ids: Vec<String> = (0..n).map(|i| format!("i-{template}-{i}")).collect();
                let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                Ok(CreateFleetOutput {
                    fleet_id: "fleet".to_string(),
                    instances: vec![reservation(&ids, "m5.large")],
                    errors: Vec::new(),
                })
            }
        };
        let request = |template: &str, count: i64| CreateFleetInput {
            type_: "instant".to_string(),
            total_target_capacity: count,
            launch_template_configs: vec![FleetLaunchTemplateConfig {
                launch_template_name: template.to_string(),
                ..FleetLaunchTemplateConfig::default()
            }],
            ..CreateFleetInput::default()
        };
        let answers = runtime().block_on(create_fleet_batch(
            fleet,
            vec![
                request("a", 1),
                request("b", 1),
                request("a", 1),
                request("a", 2),
                request("a", 1),
            ],
        ));
        let calls = calls.lock().unwrap().clone();
        let sizes: Vec<(String, i64)> = calls
            .iter()
            .map(|c| {
                (
                    c.launch_template_configs[0].launch_template_name.clone(),
                    c.total_target_capacity,
                )
            })
            .collect();
        assert_eq!(sizes, [("a".to_string(), 3), ("b".to_string(), 1)]);
        let got: Vec<Result<Vec<String>, String>> = answers
            .iter()
            .map(|a| a.as_ref().map(ids).map_err(|e| e.code.clone()))
            .collect();
        assert_eq!(
            got,
            [
                Ok(vec!["i-a-0".to_string()]),
                Ok(vec!["i-b-0".to_string()]),
                Ok(vec!["i-a-1".to_string()]),
                Err(codes::INVALID_PARAMETER_VALUE.to_string()),
                Ok(vec!["i-a-2".to_string()]),
            ]
        );
    }

    /// A caller that stops waiting before its window closes (its controller stopped) is left
    /// out of the call; the others are answered as usual.
    #[test]
    fn a_caller_that_left_before_the_call_is_left_out_of_it() {
        let seen: Arc<Mutex<Vec<Vec<u32>>>> = Arc::default();
        let record = seen.clone();
        let batcher = Batcher::new(
            "echo",
            QUICK,
            one_bucket,
            BatcherMetrics::default(),
            Arc::new(move |inputs: Vec<u32>| {
                record.lock().unwrap().push(inputs.clone());
                Box::pin(async move { inputs.into_iter().map(Ok).collect() })
            }),
        );
        let answer = runtime().block_on(async {
            let leaving = tokio::spawn({
                let batcher = batcher.clone();
                async move { batcher.add(1).await }
            });
            tokio::task::yield_now().await;
            leaving.abort();
            batcher.add(2).await
        });
        assert_eq!(answer, Ok(2));
        assert_eq!(*seen.lock().unwrap(), [vec![2]]);
    }
}
