//! The request rate limits of the APIs the simulation implements, and the one table that
//! classifies each of its actions (category, bucket, latency).
//!
//! EC2, from "Request throttling for the Amazon EC2 API"
//! (<https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html>, the current
//! page, tables "Request token bucket sizes and refill rates" and "Resource token bucket sizes
//! and refill rates"):
//! - each API is evaluated on its own ("requests for other API are not affected"), with the
//!   bucket of its category: non-mutating (`Describe*`) 100 tokens refilled 20/s;
//!   unfiltered and unpaginated non-mutating (of ours `DescribeInstances` and
//!   `DescribeSecurityGroups` without a filter) 50 / 10; mutating 50 / 5; uncategorized actions
//!   have their own figures (`TerminateInstances` 100 / 5, `CreateTags` 100 / 10).
//!   Older versions of the page gave mutating actions 200 / 5; the current table says 50 / 5.
//!   The resource-intensive category (50 / 5) lists none of the actions simulated here
//!   (RunInstances is uncategorized, 5 / 2; CreateFleet is not listed, so it is mutating).
//! - resource token buckets: RunInstances 1,000 instances refilled 2/s, TerminateInstances
//!   1,000 / 20. The page names RunInstances only; an instant fleet's instances are charged
//!   to the same bucket here (an assumption: EC2 Fleet launches them as RunInstances does).
//! - over a limit EC2 answers `RequestLimitExceeded`.
//!
//! A port call is one request: the ports carry no `MaxResults` (and the SDK adapter's
//! paginators send none), so every call is unpaginated, and it is unfiltered when it has no
//! `Filter` (instance ids are not a filter).
//!
//! SSM: Parameter Store's default throughput is 40 transactions per second, shared by
//! GetParameter, GetParameters and GetParametersByPath ("AWS Systems Manager endpoints and
//! quotas", <https://docs.aws.amazon.com/general/latest/gr/ssm.html>, and "Changing Parameter
//! Store throughput"); modelled as a 40-token bucket refilled 40/s. Over it SSM answers
//! `ThrottlingException: Rate exceeded`.
//!
//! Price List Query API: GetProducts has a token bucket of 10 refilled 5/s ("Using the AWS
//! Price List Query API", <https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-pelong.html>,
//! section Quotas); one `on_demand_prices` call counts as one GetProducts request.
//!
//! IAM documents no request rate for these actions; a conservative 20-token bucket refilled
//! 10/s shared by every IAM action stands in (IAM is one global service per account). Over it
//! IAM answers `Throttling: Rate exceeded` (IAM's query protocol code is `Throttling`).
//!
//! Buckets start full and refill continuously on the injected clock (over whole seconds the
//! same as EC2's "a set number of tokens is added back to it every second").

use std::collections::BTreeMap;
use std::time::Duration;

use driftwood_aws::fnv::fnv1a64;
use driftwood_aws::ports::{AwsError, codes};
use jiff::Timestamp;

pub use driftwood_aws::ports::codes::THROTTLING_EXCEPTION;

/// A token bucket's size and refill rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Bucket maximum capacity (the burst).
    pub capacity: u32,
    /// Tokens added back per second.
    pub refill_per_second: u32,
}

impl Limit {
    pub const fn new(capacity: u32, refill_per_second: u32) -> Self {
        Self {
            capacity,
            refill_per_second,
        }
    }
}

/// The throttling category of an action; it sizes the action's request bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// EC2 `Describe*`, `Get*`, `List*`: 100 / 20 per second, one bucket per action.
    Ec2NonMutating,
    /// EC2 unfiltered and unpaginated non-mutating calls: 50 / 10, one bucket per action.
    Ec2UnfilteredNonMutating,
    /// EC2 mutating actions: 50 / 5, one bucket per action.
    Ec2Mutating,
    /// An EC2 action with its own figures.
    Ec2Uncategorized(Limit),
    /// Parameter Store's throughput: 40 / 40, one bucket shared by its Get actions.
    SsmParameterThroughput,
    /// IAM (undocumented; conservative): 20 / 10, one bucket shared by every IAM action.
    Iam,
    /// The Price List Query API: 10 / 5, one bucket per action.
    PriceListQuery,
}

impl Category {
    /// The request bucket's figures.
    pub const fn limit(self) -> Limit {
        match self {
            Self::Ec2NonMutating => Limit::new(100, 20),
            Self::Ec2UnfilteredNonMutating => Limit::new(50, 10),
            Self::Ec2Mutating => Limit::new(50, 5),
            Self::Ec2Uncategorized(limit) => limit,
            Self::SsmParameterThroughput => Limit::new(40, 40),
            Self::Iam => Limit::new(20, 10),
            Self::PriceListQuery => Limit::new(10, 5),
        }
    }

    /// The request bucket `action` draws from.
    pub fn bucket(self, action: &str) -> String {
        match self {
            Self::Ec2UnfilteredNonMutating => format!("ec2:{action}:unfiltered"),
            Self::Ec2NonMutating | Self::Ec2Mutating | Self::Ec2Uncategorized(_) => {
                format!("ec2:{action}")
            }
            Self::SsmParameterThroughput => "ssm:parameter-throughput".to_string(),
            Self::Iam => "iam".to_string(),
            Self::PriceListQuery => format!("pricing:{action}"),
        }
    }

    /// The error a call over this category's limit fails with, as the SDK surfaces it.
    pub fn throttling_error(self) -> AwsError {
        match self {
            Self::Ec2NonMutating
            | Self::Ec2UnfilteredNonMutating
            | Self::Ec2Mutating
            | Self::Ec2Uncategorized(_) => {
                AwsError::new(codes::REQUEST_LIMIT_EXCEEDED, "Request limit exceeded.")
            }
            Self::SsmParameterThroughput | Self::PriceListQuery => {
                AwsError::new(THROTTLING_EXCEPTION, "Rate exceeded")
            }
            Self::Iam => AwsError::new(codes::THROTTLING, "Rate exceeded"),
        }
    }
}

/// EC2's RunInstances resource bucket: instances launched (CreateFleet's are charged to it).
pub const RUN_INSTANCES_RESOURCE: (&str, Limit) =
    ("ec2-resources:RunInstances", Limit::new(1000, 2));
/// EC2's TerminateInstances resource bucket: instances terminated.
pub const TERMINATE_INSTANCES_RESOURCE: (&str, Limit) =
    ("ec2-resources:TerminateInstances", Limit::new(1000, 20));

/// How the simulation treats one action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActionClass {
    /// The AWS action name (also the fault knobs' and the call counters' key).
    pub action: &'static str,
    /// Its category.
    pub category: Category,
    /// Its category when called without a filter, for the actions EC2 lists as
    /// "unfiltered and unpaginated".
    pub unfiltered: Option<Category>,
    /// The resource bucket its resources (instances) are charged to.
    pub resource: Option<(&'static str, Limit)>,
    /// The shortest and longest latency of a call, in milliseconds.
    pub latency_ms: (u64, u64),
}

const fn class(action: &'static str, category: Category, latency_ms: (u64, u64)) -> ActionClass {
    ActionClass {
        action,
        category,
        unfiltered: None,
        resource: None,
        latency_ms,
    }
}

/// Latency of a small Describe answer (one page).
const DESCRIBE_MS: (u64, u64) = (20, 80);
/// Latency of a large listing (the instance type catalog, offerings, spot prices).
const LISTING_MS: (u64, u64) = (100, 400);
/// Latency of a small mutation (launch templates, tags, IAM).
const MUTATION_MS: (u64, u64) = (50, 150);

/// Every action the simulation implements (ec2_api.rs and other_apis.rs), classified.
pub const ACTIONS: &[ActionClass] = &[
    class("DescribeImages", Category::Ec2NonMutating, DESCRIBE_MS),
    class("DescribeSubnets", Category::Ec2NonMutating, DESCRIBE_MS),
    ActionClass {
        unfiltered: Some(Category::Ec2UnfilteredNonMutating),
        ..class(
            "DescribeSecurityGroups",
            Category::Ec2NonMutating,
            DESCRIBE_MS,
        )
    },
    class(
        "DescribeInstanceTypes",
        Category::Ec2NonMutating,
        LISTING_MS,
    ),
    class(
        "DescribeInstanceTypeOfferings",
        Category::Ec2NonMutating,
        LISTING_MS,
    ),
    class(
        "DescribeSpotPriceHistory",
        Category::Ec2NonMutating,
        LISTING_MS,
    ),
    class(
        "DescribeLaunchTemplates",
        Category::Ec2NonMutating,
        DESCRIBE_MS,
    ),
    ActionClass {
        unfiltered: Some(Category::Ec2UnfilteredNonMutating),
        ..class("DescribeInstances", Category::Ec2NonMutating, DESCRIBE_MS)
    },
    ActionClass {
        unfiltered: Some(Category::Ec2UnfilteredNonMutating),
        ..class(
            "DescribeInstanceStatus",
            Category::Ec2NonMutating,
            DESCRIBE_MS,
        )
    },
    class("CreateLaunchTemplate", Category::Ec2Mutating, MUTATION_MS),
    class("DeleteLaunchTemplate", Category::Ec2Mutating, MUTATION_MS),
    // An instant fleet answers once its instances are requested: a few hundred milliseconds.
    ActionClass {
        resource: Some(RUN_INSTANCES_RESOURCE),
        ..class("CreateFleet", Category::Ec2Mutating, (300, 800))
    },
    ActionClass {
        resource: Some(TERMINATE_INSTANCES_RESOURCE),
        ..class(
            "TerminateInstances",
            Category::Ec2Uncategorized(Limit::new(100, 5)),
            (100, 300),
        )
    },
    class(
        "CreateTags",
        Category::Ec2Uncategorized(Limit::new(100, 10)),
        MUTATION_MS,
    ),
    class("GetParameter", Category::SsmParameterThroughput, (10, 40)),
    class("GetInstanceProfile", Category::Iam, MUTATION_MS),
    class("CreateInstanceProfile", Category::Iam, MUTATION_MS),
    class("AddRoleToInstanceProfile", Category::Iam, MUTATION_MS),
    class("RemoveRoleFromInstanceProfile", Category::Iam, MUTATION_MS),
    class("DeleteInstanceProfile", Category::Iam, MUTATION_MS),
    class("GetProducts", Category::PriceListQuery, (100, 300)),
];

/// The class of `action`, if the simulation implements it.
pub fn classify(action: &str) -> Option<&'static ActionClass> {
    ACTIONS.iter().find(|c| c.action == action)
}

impl ActionClass {
    /// The category of a call, `unfiltered` when it carries no filter.
    pub fn category_of(&self, unfiltered: bool) -> Category {
        match self.unfiltered {
            Some(category) if unfiltered => category,
            _ => self.category,
        }
    }

    /// The latency of call number `n` of this action in account `seed`: deterministic, in
    /// `latency_ms`.
    pub fn latency(&self, seed: u64, n: u64) -> Duration {
        let (low, high) = self.latency_ms;
        let span = high.saturating_sub(low) + 1;
        let draw = fnv1a64(format!("{seed}:latency:{}:{n}", self.action).as_bytes()) % span;
        Duration::from_millis(low + draw)
    }
}

/// One token bucket.
#[derive(Debug, Clone, PartialEq)]
struct Bucket {
    tokens: f64,
    updated: Timestamp,
}

/// Every bucket of an account, created full on first use.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RateLimiter {
    buckets: BTreeMap<String, Bucket>,
}

impl RateLimiter {
    /// The bucket `key` refilled up to `now`.
    fn refilled(&mut self, key: &str, limit: Limit, now: Timestamp) -> &mut Bucket {
        let capacity = f64::from(limit.capacity);
        let bucket = self.buckets.entry(key.to_string()).or_insert(Bucket {
            tokens: capacity,
            updated: now,
        });
        let elapsed = now.duration_since(bucket.updated).as_secs_f64();
        if elapsed > 0.0 {
            bucket.tokens =
                (bucket.tokens + elapsed * f64::from(limit.refill_per_second)).min(capacity);
            bucket.updated = now;
        }
        bucket
    }

    /// Takes `cost` tokens from every bucket of `draws` (key, figures, cost) at `now` when each
    /// holds enough, else takes none. Returns whether it took them.
    pub fn admit(&mut self, draws: &[(&str, Limit, u32)], now: Timestamp) -> bool {
        let enough = draws
            .iter()
            .all(|(key, limit, cost)| self.refilled(key, *limit, now).tokens >= f64::from(*cost));
        if enough {
            for (key, limit, cost) in draws {
                self.refilled(key, *limit, now).tokens -= f64::from(*cost);
            }
        }
        enough
    }

    /// Whole tokens left in bucket `key` at `now`.
    pub fn available(&mut self, key: &str, limit: Limit, now: Timestamp) -> u32 {
        let tokens = self.refilled(key, limit, now).tokens.floor();
        // Between 0 and a u32 capacity: the cast keeps the value.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let whole = tokens.max(0.0) as u32;
        whole
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;

    /// Every action the port implementations name is classified, and every classified action is
    /// one they name.
    #[test]
    fn every_implemented_action_is_in_the_table_once() {
        let sources = [include_str!("ec2_api.rs"), include_str!("other_apis.rs")];
        let named: Vec<&str> = sources
            .iter()
            .flat_map(|s| s.split("Call::new(\"").skip(1))
            .filter_map(|rest| rest.split('"').next())
            .collect();
        assert_eq!(named.len(), 21, "{named:?}");
        for action in &named {
            assert!(classify(action).is_some(), "{action} is not classified");
        }
        for class in ACTIONS {
            assert!(
                named.contains(&class.action),
                "{} is classified but not implemented",
                class.action
            );
            assert_eq!(
                ACTIONS.iter().filter(|c| c.action == class.action).count(),
                1,
                "{} twice",
                class.action
            );
        }
    }

    #[test]
    fn categories_carry_the_documented_figures() {
        let limit = |a: &str, unfiltered: bool| {
            classify(a)
                .map(|c| c.category_of(unfiltered).limit())
                .unwrap_or(Limit::new(0, 0))
        };
        assert_eq!(limit("DescribeImages", true), Limit::new(100, 20));
        assert_eq!(limit("DescribeInstances", false), Limit::new(100, 20));
        assert_eq!(limit("DescribeInstances", true), Limit::new(50, 10));
        assert_eq!(limit("DescribeSecurityGroups", true), Limit::new(50, 10));
        assert_eq!(limit("CreateFleet", false), Limit::new(50, 5));
        assert_eq!(limit("CreateLaunchTemplate", false), Limit::new(50, 5));
        assert_eq!(limit("TerminateInstances", false), Limit::new(100, 5));
        assert_eq!(limit("CreateTags", false), Limit::new(100, 10));
        assert_eq!(limit("GetParameter", false), Limit::new(40, 40));
        assert_eq!(limit("GetProducts", false), Limit::new(10, 5));
        assert_eq!(
            classify("CreateFleet").and_then(|c| c.resource),
            Some(("ec2-resources:RunInstances", Limit::new(1000, 2)))
        );
        assert_eq!(
            classify("TerminateInstances").and_then(|c| c.resource),
            Some(("ec2-resources:TerminateInstances", Limit::new(1000, 20)))
        );
        // EC2 buckets are per action; SSM's and IAM's are shared.
        let bucket = |a: &str| {
            classify(a)
                .map(|c| c.category.bucket(a))
                .unwrap_or_default()
        };
        assert_ne!(bucket("DescribeImages"), bucket("DescribeSubnets"));
        assert_ne!(
            Category::Ec2UnfilteredNonMutating.bucket("DescribeInstances"),
            bucket("DescribeInstances")
        );
        assert_eq!(
            bucket("GetInstanceProfile"),
            bucket("CreateInstanceProfile")
        );
        assert_eq!(
            Category::Ec2Mutating.throttling_error().code,
            codes::REQUEST_LIMIT_EXCEEDED
        );
        assert_eq!(
            Category::SsmParameterThroughput.throttling_error().code,
            THROTTLING_EXCEPTION
        );
        assert_eq!(Category::Iam.throttling_error().code, codes::THROTTLING);
    }

    #[test]
    fn a_bucket_bursts_then_refills_at_its_rate_up_to_its_capacity() {
        let limit = Limit::new(100, 20);
        let t0 = Timestamp::UNIX_EPOCH;
        let mut r = RateLimiter::default();
        for _ in 0..100 {
            assert!(r.admit(&[("k", limit, 1)], t0));
        }
        assert!(!r.admit(&[("k", limit, 1)], t0));
        let t1 = t0 + SignedDuration::from_secs(1);
        assert_eq!(r.available("k", limit, t1), 20);
        let t2 = t0 + SignedDuration::from_secs(60);
        assert_eq!(r.available("k", limit, t2), 100, "capped at capacity");
        assert_eq!(r.available("other", limit, t0), 100, "buckets are separate");
    }

    #[test]
    fn a_call_drawing_on_two_buckets_takes_from_neither_when_one_is_short() {
        let t = Timestamp::UNIX_EPOCH;
        let mut r = RateLimiter::default();
        let request = ("req", Limit::new(50, 5), 1);
        let resource = ("res", Limit::new(1000, 2), 600);
        assert!(r.admit(&[request, resource], t));
        assert!(!r.admit(&[request, resource], t), "400 instances left");
        assert_eq!(r.available("req", Limit::new(50, 5), t), 49);
        assert_eq!(r.available("res", Limit::new(1000, 2), t), 400);
    }

    #[test]
    fn latency_is_in_range_and_deterministic() {
        let fleet = classify("CreateFleet").copied().unwrap_or(ACTIONS[0]);
        let draws: Vec<Duration> = (0..100).map(|n| fleet.latency(3, n)).collect();
        assert!(
            draws
                .iter()
                .all(|d| *d >= Duration::from_millis(300) && *d <= Duration::from_millis(800))
        );
        assert_eq!(draws[5], fleet.latency(3, 5));
        assert_ne!(draws.iter().min(), draws.iter().max());
    }
}
