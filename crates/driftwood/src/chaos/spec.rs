//! Faults as data: the kinds of fault a chaos run injects, how often (expected injections per
//! virtual hour, drawn second by second from a seeded generator), explicit faults at fixed
//! times, and how long the faults last. Written as a scenario's `faults:` section or as
//! `--faults SPEC` on the command line.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::demo::duration::{DurationError, parse_duration};

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    // cloud
    /// An offering (type, zone, capacity type) the fleet runs on has no capacity for a while.
    InsufficientCapacity,
    /// A CreateFleet call finds no capacity in its cheaper half of offerings.
    FleetPartialFailure,
    /// EC2 calls are throttled (RequestLimitExceeded).
    CloudThrottling,
    /// An EC2 call fails with a 5xx (InternalError / Unavailable).
    CloudServerError,
    /// A launch template the provider cached is deleted behind its back.
    LaunchTemplateNotFound,
    /// The next instance launched never leaves `pending`.
    InstanceNeverRunning,
    /// A running instance is terminated from outside (an operator, a failed host), and EC2
    /// sends the state change to the interruption queue.
    InstanceTerminated,
    /// A running spot instance gets EC2's spot interruption warning on the interruption queue
    /// and is reclaimed two minutes later.
    SpotInterruption,
    /// EC2's status checks report a running instance unhealthy: its system check fails (the
    /// host: its kubelet stops reporting too), its instance check fails, or an event
    /// (retirement, maintenance, reboot, stop) is scheduled for it; DescribeInstanceStatus
    /// says so until the instance is gone (a failed host stays failed).
    ImpairedInstance,
    // API server
    /// The controllers' next writes get 409 Conflict.
    ApiConflict,
    /// The controllers' next writes get 429 Too Many Requests.
    ApiThrottling,
    /// The controllers' next writes get 500/503.
    ApiServerError,
    /// Every open watch is closed (clients resume).
    WatchClosed,
    /// Every open watch ends with 410 Expired (clients relist).
    WatchExpired,
    /// The controllers' next requests are slow.
    ApiSlow,
    // controller
    /// The controller process that makes a random upcoming write dies right after it, and a
    /// new one starts.
    ControllerCrash,
    /// The leading replica is killed at a random moment; the standby takes the lease.
    LeaderFailover,
    // nodes and pods
    /// The next replacement node a disruption launches registers but never becomes Ready.
    ReplacementNeverReady,
    /// The next machine's kubelet never registers a Node.
    NodeNeverRegisters,
    /// A Ready node's kubelet stops posting status for a while (NotReady).
    NodeNotReady,
    /// Pods ignore SIGTERM and take their whole grace period.
    PodSlowTermination,
    /// A pod never finishes terminating (a finalizer nobody removes).
    PodStuckTerminating,
    /// A PDB allows no disruption for a while: one of its pods fails readiness, or, on a
    /// cluster without a PDB, a temporary `maxUnavailable: 0` PDB covers one workload.
    PdbBlocking,
    /// The next machine's kubelet registers late.
    KubeletSlowRegistration,
}

impl FaultKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [FaultKind; 24] = [
        Self::InsufficientCapacity,
        Self::FleetPartialFailure,
        Self::CloudThrottling,
        Self::CloudServerError,
        Self::LaunchTemplateNotFound,
        Self::InstanceNeverRunning,
        Self::InstanceTerminated,
        Self::SpotInterruption,
        Self::ImpairedInstance,
        Self::ApiConflict,
        Self::ApiThrottling,
        Self::ApiServerError,
        Self::WatchClosed,
        Self::WatchExpired,
        Self::ApiSlow,
        Self::ControllerCrash,
        Self::LeaderFailover,
        Self::ReplacementNeverReady,
        Self::NodeNeverRegisters,
        Self::NodeNotReady,
        Self::PodSlowTermination,
        Self::PodStuckTerminating,
        Self::PdbBlocking,
        Self::KubeletSlowRegistration,
    ];

    /// The kind's name as written in specs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::InsufficientCapacity => "insufficient-capacity",
            Self::FleetPartialFailure => "fleet-partial-failure",
            Self::CloudThrottling => "cloud-throttling",
            Self::CloudServerError => "cloud-server-error",
            Self::LaunchTemplateNotFound => "launch-template-not-found",
            Self::InstanceNeverRunning => "instance-never-running",
            Self::InstanceTerminated => "instance-terminated",
            Self::SpotInterruption => "spot-interruption",
            Self::ImpairedInstance => "impaired-instance",
            Self::ApiConflict => "api-conflict",
            Self::ApiThrottling => "api-throttling",
            Self::ApiServerError => "api-server-error",
            Self::WatchClosed => "watch-closed",
            Self::WatchExpired => "watch-expired",
            Self::ApiSlow => "api-slow",
            Self::ControllerCrash => "controller-crash",
            Self::LeaderFailover => "leader-failover",
            Self::ReplacementNeverReady => "replacement-never-ready",
            Self::NodeNeverRegisters => "node-never-registers",
            Self::NodeNotReady => "node-not-ready",
            Self::PodSlowTermination => "pod-slow-termination",
            Self::PodStuckTerminating => "pod-stuck-terminating",
            Self::PdbBlocking => "pdb-blocking",
            Self::KubeletSlowRegistration => "kubelet-slow-registration",
        }
    }

    /// The kind called `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// How many of these a run expects per virtual hour by default.
    pub fn default_rate(self) -> f64 {
        match self {
            // Those that make a node or an instance useless cost a replacement each.
            Self::InstanceTerminated
            | Self::SpotInterruption
            | Self::ImpairedInstance
            | Self::ReplacementNeverReady
            | Self::NodeNeverRegisters
            | Self::InstanceNeverRunning => 6.0,
            _ => 12.0,
        }
    }
}

/// A fault at a fixed time.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimedFault {
    /// When, from the start of the scenario (e.g. `5m`).
    #[serde(deserialize_with = "de_duration")]
    pub after: Duration,
    pub fault: FaultKind,
}

/// The faults of a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FaultSpec {
    /// Expected injections per virtual hour, by kind (absent: never at random).
    pub rates: BTreeMap<FaultKind, f64>,
    /// Explicit faults.
    pub at: Vec<TimedFault>,
    /// How long from the scenario's start faults are injected (then every fault is lifted and
    /// the rollout must complete: liveness).
    pub window: Duration,
    /// How long after the window the end state (every workload ready, nothing orphaned or
    /// leaked) must be reached.
    pub settle: Duration,
}

/// The default faults window (from the scenario's start: its first manifests on).
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(15 * 60);
/// The default liveness bound after the window.
pub const DEFAULT_SETTLE: Duration = Duration::from_secs(30 * 60);

/// Why a fault spec could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpecError {
    #[error(
        "faults: unknown fault kind {0:?} (known: all, none, {known})",
        known = FaultKind::ALL.map(FaultKind::name).join(", ")
    )]
    UnknownKind(String),
    #[error("faults: {key}={value:?}: {rule}")]
    BadValue {
        key: String,
        value: String,
        rule: &'static str,
    },
}

/// The `faults:` section of a scenario file as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultsSection {
    /// `kind: rate` (injections per virtual hour); the key `all` sets every kind.
    #[serde(default)]
    pub rates: BTreeMap<String, f64>,
    #[serde(default)]
    pub at: Vec<TimedFault>,
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub window: Option<Duration>,
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub settle: Option<Duration>,
}

fn de_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    parse_duration(&text).map_err(|e: DurationError| serde::de::Error::custom(e.to_string()))
}

fn de_opt_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    de_duration(d).map(Some)
}

fn check_rate(key: &str, rate: f64) -> Result<f64, SpecError> {
    if rate.is_finite() && rate >= 0.0 {
        Ok(rate)
    } else {
        Err(SpecError::BadValue {
            key: key.to_string(),
            value: rate.to_string(),
            rule: "a rate is a number of injections per virtual hour, 0 or more",
        })
    }
}

impl FaultSpec {
    /// Every kind at its default rate.
    pub fn all() -> Self {
        Self {
            rates: FaultKind::ALL
                .into_iter()
                .map(|k| (k, k.default_rate()))
                .collect(),
            at: Vec::new(),
            window: DEFAULT_WINDOW,
            settle: DEFAULT_SETTLE,
        }
    }

    /// No fault at all.
    pub fn none() -> Self {
        Self {
            rates: BTreeMap::new(),
            at: Vec::new(),
            window: DEFAULT_WINDOW,
            settle: DEFAULT_SETTLE,
        }
    }

    /// Whether nothing is ever injected.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty() && self.rates.values().all(|r| *r <= 0.0)
    }

    /// Reads a scenario's `faults:` section.
    pub fn from_section(section: &FaultsSection) -> Result<Self, SpecError> {
        let mut spec = Self::none();
        if let Some(rate) = section.rates.get("all") {
            let rate = check_rate("all", *rate)?;
            for kind in FaultKind::ALL {
                spec.rates.insert(kind, rate);
            }
        }
        for (key, rate) in &section.rates {
            let rate = check_rate(key, *rate)?;
            if key != "all" {
                let kind =
                    FaultKind::parse(key).ok_or_else(|| SpecError::UnknownKind(key.clone()))?;
                spec.rates.insert(kind, rate);
            }
        }
        spec.at.clone_from(&section.at);
        spec.window = section.window.unwrap_or(DEFAULT_WINDOW);
        spec.settle = section.settle.unwrap_or(DEFAULT_SETTLE);
        Ok(spec)
    }

    /// Reads `--faults SPEC`: comma-separated items, each `all`, `none`, `KIND`, `KIND=RATE`
    /// (`all=RATE` sets every kind), `window=DURATION`, `settle=DURATION`; later items win.
    /// `KIND` alone means its default rate.
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        let mut spec = Self::none();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (item, None),
            };
            let rate = |kind: FaultKind| -> Result<f64, SpecError> {
                match value {
                    None => Ok(kind.default_rate()),
                    Some(v) => v
                        .parse::<f64>()
                        .map_err(|_| SpecError::BadValue {
                            key: key.to_string(),
                            value: v.to_string(),
                            rule: "a rate is a number of injections per virtual hour",
                        })
                        .and_then(|r| check_rate(key, r)),
                }
            };
            let duration = || -> Result<Duration, SpecError> {
                let v = value.unwrap_or_default();
                parse_duration(v).map_err(|_| SpecError::BadValue {
                    key: key.to_string(),
                    value: v.to_string(),
                    rule: "a duration such as 30m or 1h",
                })
            };
            match key {
                "none" => spec.rates.clear(),
                "all" => {
                    for kind in FaultKind::ALL {
                        spec.rates.insert(kind, rate(kind)?);
                    }
                }
                "window" => spec.window = duration()?,
                "settle" => spec.settle = duration()?,
                other => {
                    let kind = FaultKind::parse(other)
                        .ok_or_else(|| SpecError::UnknownKind(other.to_string()))?;
                    spec.rates.insert(kind, rate(kind)?);
                }
            }
        }
        Ok(spec)
    }

    /// The spec in `--faults` form (what replays it).
    pub fn to_arg(&self) -> String {
        let mut items: Vec<String> = self
            .rates
            .iter()
            .filter(|(_, r)| **r > 0.0)
            .map(|(k, r)| format!("{}={r}", k.name()))
            .collect();
        if items.is_empty() {
            items.push("none".into());
        }
        items.push(format!("window={}s", self.window.as_secs()));
        items.push(format!("settle={}s", self.settle.as_secs()));
        items.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in FaultKind::ALL {
            assert_eq!(FaultKind::parse(kind.name()), Some(kind));
        }
    }

    #[test]
    fn command_line_spec() {
        let spec = FaultSpec::parse("all=2,controller-crash=10,window=10m").unwrap();
        assert_eq!(spec.rates.len(), FaultKind::ALL.len());
        assert_eq!(spec.rates[&FaultKind::ApiConflict], 2.0);
        assert_eq!(spec.rates[&FaultKind::ControllerCrash], 10.0);
        assert_eq!(spec.window, Duration::from_secs(600));
        let only = FaultSpec::parse("watch-expired").unwrap();
        assert_eq!(only.rates.len(), 1);
        assert_eq!(only.rates[&FaultKind::WatchExpired], 12.0);
        assert_eq!(FaultSpec::parse(&spec.to_arg()).unwrap(), spec);
        assert!(FaultSpec::parse("none").unwrap().is_empty());
    }

    #[test]
    fn bad_specs_name_the_item_and_the_rule() {
        let e = FaultSpec::parse("api-conflict=-1").unwrap_err().to_string();
        assert!(e.contains("api-conflict") && e.contains("0 or more"), "{e}");
        let e = FaultSpec::parse("cosmic-rays").unwrap_err().to_string();
        assert!(
            e.contains("cosmic-rays") && e.contains("controller-crash"),
            "{e}"
        );
        let e = FaultSpec::parse("window=soon").unwrap_err().to_string();
        assert!(e.contains("window") && e.contains("30m"), "{e}");
    }

    #[test]
    fn scenario_section() {
        let section: FaultsSection = serde_yaml::from_str(
            "rates: {all: 1, node-not-ready: 0}\nat:\n  - {after: 5m, fault: controller-crash}\nwindow: 20m\n",
        )
        .unwrap();
        let spec = FaultSpec::from_section(&section).unwrap();
        assert_eq!(spec.rates[&FaultKind::NodeNotReady], 0.0);
        assert_eq!(spec.rates[&FaultKind::WatchClosed], 1.0);
        assert_eq!(spec.at[0].after, Duration::from_secs(300));
        assert_eq!(spec.at[0].fault, FaultKind::ControllerCrash);
        assert_eq!(spec.window, Duration::from_secs(1200));
        let bad: Result<FaultsSection, _> = serde_yaml::from_str("rates: {all: 1}\nwindo: 2m\n");
        assert!(bad.is_err());
    }
}
